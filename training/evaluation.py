"""Trusted evaluation: native reward, greedy actions, one episode in each of many parallel envs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from lero.training.defaults import EVAL_EPISODES, EVAL_SEED
from lero.training.envs import make_env
from lero.training.envs.batched_env import Arena
from lero.training.envs.task import RETURN
from lero.training.hooks import ObservationEnhancer
from lero.training.policy import Policy


@torch.inference_mode()
def evaluate_episodes(
    policy: Policy,
    env: str,
    env_kwargs: dict,
    enhance_observation: Callable[[torch.Tensor], torch.Tensor] | None = None,
    episodes: int = EVAL_EPISODES,
    seed: int = EVAL_SEED,
    trace: EpisodeTrace | None = None,
) -> dict[str, torch.Tensor]:
    """The task's metrics (``env.task.metric_names``) of each of `episodes` episodes: [E] each.

    `return` is each episode's per-agent mean native return; every other metric is the
    env's own `info["episode_metrics"]` at episode end. Whatever reward the policy was
    trained on, this measures the environment's own reward; the OEF (the only candidate
    code involved) is output-checked. Per episode, because the MARL protocol shares
    results as episode values (marl-eval), not only their mean. TRACE, when given, keeps
    the first episodes' positions step by step (`lero eval --render`).
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"episodes must be a positive int, got {episodes!r}")
    batch_env = make_env(env, episodes, **env_kwargs)
    enhance = ObservationEnhancer(enhance_observation, batch_env.obs_dim)
    raw_obs = batch_env.reset(seed=seed)  # [E, N, D]
    names = [name for name in batch_env.task.metric_names if name != RETURN]
    episode_return = torch.zeros(episodes)  # [E] per-agent mean native return
    at_end = {name: torch.zeros(episodes) for name in names}  # [E] each
    running = torch.ones(episodes, dtype=torch.bool)  # [E] slot still in its first episode
    if trace is not None:
        trace.arena = batch_env.arena
        trace.add(batch_env.world(), episode_return, running)
    for _ in range(batch_env.max_steps):
        actions = policy.act(enhance(raw_obs), greedy=True)  # [E, N]
        raw_obs, reward, done, info = batch_env.step(actions)
        episode_return += reward.mean(dim=1) * running
        if trace is not None:
            trace.add(info["world"], episode_return, running)
        finished = done & running
        for name in names:
            at_end[name][finished] = info["episode_metrics"][name][finished].float()
        running &= ~done
        if not bool(running.any()):
            break
    return {RETURN: episode_return} | at_end


class EpisodeTrace:
    """The first EPISODES episodes of an evaluation, step by step: every position field of
    the env's world (`*_pos`, [B, X, 2]: agents, landmarks) and the return so far. Only
    trusted code writes it (the evaluate job), so a drawing of it shows what the policy did."""

    def __init__(self, episodes: int) -> None:
        self.episodes = episodes
        self.frames: dict[str, list[Any]] = {}  # name -> [T + 1] of [K, X, 2] (or [K] for the return)
        self.lengths = [0] * episodes  # [K] steps each episode took
        self.arena: Arena | None = None  # the env's (`evaluate_episodes` sets it)

    def add(self, world: dict[str, torch.Tensor], returns: torch.Tensor, running: torch.Tensor) -> None:
        """One step's state (the reset's first): WORLD after the step, RETURNS [E], RUNNING [E]."""
        k = self.episodes
        for name, value in world.items():
            if name.endswith("_pos") and value.dim() == 3 and value.shape[-1] == 2:
                self.frames.setdefault(name, []).append(value[:k].tolist())
        self.frames.setdefault("return", []).append(returns[:k].tolist())
        self.lengths = [n + int(bool(r)) for n, r in zip(self.lengths, running[:k].tolist(), strict=True)]

    def to_json(self) -> dict[str, Any]:
        """{name: [K][T + 1][...]} per episode (`return`: [K][T + 1]) plus `length` [K] (the
        steps of each episode; its frames 0..length are its own) and, when the env declares
        one, `arena` [x, y, walls] (`Arena`; an unbounded axis 0, walls 1 or 0: numbers only)."""
        per_episode = {name: [[step[i] for step in steps] for i in range(self.episodes)]
                       for name, steps in self.frames.items()}  # fmt: skip
        arena = self.arena
        box = {} if arena is None else {"arena": [arena.x or 0.0, arena.y or 0.0, float(arena.walls)]}
        return {**per_episode, "length": [max(0, n - 1) for n in self.lengths], **box}


def evaluate(
    policy: Policy,
    env: str,
    env_kwargs: dict,
    enhance_observation: Callable[[torch.Tensor], torch.Tensor] | None = None,
    episodes: int = EVAL_EPISODES,
    seed: int = EVAL_SEED,
) -> dict[str, float]:
    """The task's metrics averaged over `episodes` episodes (`evaluate_episodes`' means)."""
    values = evaluate_episodes(policy, env, env_kwargs, enhance_observation, episodes, seed)
    return {name: float(episode.mean()) for name, episode in values.items()}
