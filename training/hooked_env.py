"""The environment as a learner sees it: enhanced obs in, training reward out, stats logged.

Every algorithm steps this wrapper, so the OEF, the HRF, the potential-based shaping
(`training.shaping`, at the learner's own gamma) and the training statistics are applied
identically whatever the learner. The training reward is hybrid_reward(ctx) (or the
native reward) + F; with a potential, the log keeps F's episode sum (`potential_shaping`)
and how far the HRF moved from the native reward (`hrf_change`: 0 throughout = the
shaping is policy-invariant).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from lero.training.curves import HRF_CHANGE_CURVE, SHAPING_CURVE
from lero.training.envs.batched_env import BatchedEnv
from lero.training.episode_stats import TrainingLog
from lero.training.hooks import Hooks, ObservationEnhancer, PotentialCheck, RewardShaper
from lero.training.policy import Policy
from lero.training.shaping import PotentialShaping


class HookedEnv:
    """Wraps a `BatchedEnv` with the candidate hooks and a `TrainingLog`."""

    def __init__(
        self,
        env: BatchedEnv,
        hooks: Hooks,
        total_steps: int,
        seed: int,
        progress: Callable[[int, int, dict], None] | None = None,
        progress_interval_s: float = 0.5,
        checkpoint: Callable[[int, Policy], None] | None = None,
        checkpoint_every: int | None = None,
        start_steps: int = 0,
        stop_steps: int | None = None,
        gamma: float = 0.99,
        after_update: Callable[[int, Policy], None] | None = None,
    ) -> None:
        """`total_steps` is the plan the schedules follow; this piece of it trains from
        `start_steps` (a continuation) until `stop_steps` (None: the whole plan). `gamma`:
        the learner's discount, which the potential-based shaping must use. `after_update(done_steps,
        policy)`: called after every update (the greedy evaluation curve)."""
        self.env = env
        self.after_update = after_update
        self.checkpoint = checkpoint
        self.checkpoint_every = checkpoint_every
        self.next_checkpoint = checkpoint_every and (start_steps // checkpoint_every + 1) * checkpoint_every
        self.report_progress = progress
        self.progress_interval_s = progress_interval_s
        self.last_report = -math.inf  # the first iteration always reports: a UI shows the total at once
        self.total_steps = total_steps
        self.stop_steps = total_steps if stop_steps is None else stop_steps
        self.n_envs, self.n_agents, self.n_actions = env.n_envs, env.n_agents, env.n_actions
        self.state_dim = env.state_dim
        self.roles = env.roles  # per-agent role names (agents that differ)
        self.enhance = ObservationEnhancer(hooks.enhance_observation, env.obs_dim)
        metric_names = env.task.metric_names
        self.shape_reward = (
            None
            if hooks.hybrid_reward is None
            else RewardShaper(hooks.hybrid_reward, metric_names)
        )
        self.raw_obs = env.reset(seed=seed + start_steps)  # [B, N, D] a continuation's fresh episodes
        self.shaping = (None if hooks.potential is None
                        else PotentialShaping(PotentialCheck(hooks.potential), gamma, env.world(), self.raw_obs))
        self.obs_dim = self.enhance.probe(self.raw_obs)
        self.log = TrainingLog(self.n_envs, metric_names, total_steps)
        self.done_steps = start_steps
        self.max_steps = env.max_steps
        self.episode_step = torch.zeros(self.n_envs)  # [B] steps taken in the current episode

    def action_mask(self) -> torch.Tensor:
        """[N, A] bool: the actions each agent may take."""
        return self.env.action_mask()

    def random_actions(self) -> torch.Tensor:
        """Uniform valid actions [B, N] (exploration), drawn from torch's global generator."""
        return self.env.random_actions()

    def observe(self) -> torch.Tensor:
        """Current enhanced obs [B, N, D']."""
        return self.enhance(self.raw_obs)

    def global_state(self) -> torch.Tensor:
        """[B, state_dim] for centralised critics / mixers."""
        return self.env.global_state()

    def elapsed(self) -> torch.Tensor:
        """[B] fraction of the episode elapsed: lets critics see the time limit (training only)."""
        return self.episode_step / self.max_steps

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """actions [B, N] -> (next enhanced obs [B, N, D'], training reward [B, N], done [B])."""
        obs = self.raw_obs
        next_obs, env_reward, done, info = self.env.step(actions)
        if self.shape_reward is None:
            reward, components = env_reward, {}
        else:
            reward, components = self.shape_reward(
                obs,
                info["final_obs"],
                actions,
                env_reward,
                info["world"],
                info["step"],
                self.progress,
            )
        if self.shaping is not None:
            components = {**components, HRF_CHANGE_CURVE: (reward - env_reward).abs()}
            world = self.env.world() if bool(done.any()) else info["world"]  # the states after the step
            shaping = self.shaping(info, done, world, next_obs)  # [B, N]
            reward = reward + shaping
            components = {**components, SHAPING_CURVE: shaping}
        self.log.on_step(env_reward, reward, components, done, info["episode_metrics"])
        self.raw_obs = next_obs
        self.done_steps += self.n_envs
        self.episode_step = torch.where(done, 0.0, self.episode_step + 1.0)
        return self.enhance(next_obs), reward, done

    @property
    def finished(self) -> bool:
        """Whether this piece of the plan is trained: learners loop until it is."""
        return self.done_steps >= self.stop_steps

    @property
    def progress(self) -> float:
        return min(1.0, self.done_steps / self.total_steps)

    def end_iteration(self, policy: Policy) -> None:
        """Called by learners after each iteration: closes curve points, reports progress
        (throttled), hands POLICY to the checkpoint callback once every `checkpoint_every` steps."""
        self.log.maybe_record(self.done_steps)
        if self.checkpoint is not None and self.next_checkpoint and self.done_steps >= self.next_checkpoint:
            self.checkpoint(self.done_steps, policy)
            while self.next_checkpoint <= self.done_steps:
                self.next_checkpoint += self.checkpoint_every
        if self.after_update is not None:
            self.after_update(self.done_steps, policy)
        now = time.monotonic()
        if self.report_progress is not None and now - self.last_report >= self.progress_interval_s:
            self.last_report = now
            self._report()

    def finish(self) -> None:
        """Flush the last partial interval and send a final progress report."""
        self.log.maybe_record(self.done_steps, force=True)
        if self.report_progress is not None:
            self._report()

    def _report(self) -> None:
        self.report_progress(
            self.done_steps, self.stop_steps, {"return": self.log.latest("return")}
        )
