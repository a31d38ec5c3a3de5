"""Any PettingZoo ``ParallelEnv`` as a ``BatchedEnv``: B copies stepped in worker processes.

Slower than a native batched env (one Python ``step`` per copy), but it lets a researcher
bring their own cooperative task: ``lero run --env package.module:factory``.

- **Workers.** The B copies are split into ``workers`` contiguous groups (``Copies``), each
  in a forked process of a ``WorkerPool`` (``worker_pool.py``; ``workers=0``: in this
  process; the default for B = 1, else ``min(B, cpu_count, 4)``). All groups step at once;
  the results are concatenated in slot order.
- **Agents.** ``possible_agents`` fix the agent axis N. Observations (``Box`` flattened,
  ``Discrete`` one-hot) are zero-padded to the longest one (``obs_dims`` keeps the true
  lengths); discrete actions are padded to the largest space and ``action_mask()`` says
  which exist (an action outside it is a ``ValueError``, as for native envs). An agent
  that left ``env.agents`` gets zero obs and reward and its actions are ignored.
- **Episodes.** A copy is done when ``env.agents`` is empty or after ``max_steps`` steps
  (the env's ``max_cycles`` unless given), terminated (``info["terminated"]``) when it
  ended with every agent that acted terminated and none truncated; it is then reset inside ``step``
  (``training.envs.batched_env`` contract) without a seed, so each copy's own RNG continues.
  ``reset(seed)`` seeds copy ``i`` with ``seed + i``.
- **Reward context.** ``world()`` is ``state`` (``env.state()``, when the env has one),
  ``agent_obs`` (each agent's padded observation), ``active`` (1 while the agent is in
  ``env.agents``) and ``step``. ``global_state()`` is ``env.state()``, or all agents'
  observations concatenated when the env has no ``state()``.
- **Task.** ``task`` is a generic ``TaskSpec``: metrics ``return`` (the success measure)
  and ``episode_length``; the task text is the factory's or the env class's docstring
  (``lero run --task`` replaces it for the LLM).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from pettingzoo import ParallelEnv

from lero.training.envs import arg_checks
from lero.training.envs.batched_env import BatchedEnv
from lero.training.envs.task import RETURN, Metric, StateField, TaskSpec
from lero.training.envs.worker_pool import MAX_EXPLICIT_WORKERS, MAX_WORKERS, WorkerPool

EPISODE_LENGTH = "episode_length"


@dataclass(frozen=True)
class Layout:
    """What every copy shares: agents, their obs / action sizes, the state size."""

    agents: tuple[str, ...]
    obs_dims: tuple[int, ...]  # true (flattened / one-hot) obs length per agent
    obs_kinds: tuple[str, ...]  # "box" | "discrete" per agent
    n_actions: tuple[int, ...]  # Discrete(n) size per agent
    action_starts: tuple[int, ...]  # Discrete(n, start) offset per agent
    state_dim: int  # 0 when the env has no state()

    @property
    def obs_dim(self) -> int:
        return max(self.obs_dims)


def read_layout(env: Any, owner: str) -> Layout:
    """Agents and spaces of a freshly built ``ParallelEnv``; one-line ValueError on what lero cannot run."""
    from gymnasium import spaces

    agents = tuple(getattr(env, "possible_agents", ()) or ())
    if not agents:
        raise ValueError(f"{owner}: the env has no possible_agents")
    obs_dims, obs_kinds, n_actions, starts = [], [], [], []
    for agent in agents:
        obs_space = env.observation_space(agent)
        if isinstance(obs_space, spaces.Box):
            obs_dims.append(int(np.prod(obs_space.shape, dtype=np.int64)))
            obs_kinds.append("box")
        elif isinstance(obs_space, spaces.Discrete):
            obs_dims.append(int(obs_space.n))
            obs_kinds.append("discrete")
        else:
            raise ValueError(
                f"{owner}: observation space of {agent} is {type(obs_space).__name__}; "
                "lero takes Box or Discrete observations"
            )
        action_space = env.action_space(agent)
        if not isinstance(action_space, spaces.Discrete):
            raise ValueError(
                f"{owner}: action space of {agent} is {type(action_space).__name__}; "
                "lero takes Discrete actions"
            )
        n_actions.append(int(action_space.n))
        starts.append(int(action_space.start))
    env.reset(seed=0)
    state_dim = 0
    with contextlib.suppress(NotImplementedError):
        state_dim = int(np.asarray(env.state()).size)
    return Layout(
        agents, tuple(obs_dims), tuple(obs_kinds), tuple(n_actions), tuple(starts), state_dim
    )


class Copies:
    """A group of env copies stepped one after another (runs in a worker or in-process).

    All arrays are slot-major: obs [b, N, D], reward [b, N], done [b], state [b, S].
    """

    def __init__(self, make: Callable[[], Any], count: int, layout: Layout, max_steps: int) -> None:
        self.envs = [make() for _ in range(count)]
        self.layout, self.max_steps = layout, max_steps
        self.steps = np.zeros(count, dtype=np.int64)  # [b] steps taken in the current episode

    def _encode(self, env: Any, observations: dict) -> tuple[np.ndarray, np.ndarray]:
        """Padded obs [N, D] and active flags [N] of one copy from its obs dict."""
        lay = self.layout
        obs = np.zeros((len(lay.agents), lay.obs_dim), dtype=np.float32)
        for i, agent in enumerate(lay.agents):
            if agent not in observations:
                continue
            if lay.obs_kinds[i] == "discrete":
                obs[i, int(observations[agent])] = 1.0
            else:
                obs[i, : lay.obs_dims[i]] = np.asarray(
                    observations[agent], dtype=np.float32
                ).reshape(-1)
        live = set(env.agents)
        active = np.array([agent in live for agent in lay.agents], dtype=np.float32)
        return obs, active

    def _state(self, env: Any) -> np.ndarray:
        if self.layout.state_dim == 0:
            return np.zeros(0, dtype=np.float32)
        return np.asarray(env.state(), dtype=np.float32).reshape(-1)

    def reset(self, seeds: list[int | None]) -> dict[str, np.ndarray]:
        rows = [self._reset_one(env, seed) for env, seed in zip(self.envs, seeds, strict=True)]
        self.steps[:] = 0
        return _stack(rows, ("obs", "active", "state"))

    def _reset_one(self, env: Any, seed: int | None) -> dict[str, np.ndarray]:
        observations, _ = env.reset(seed=seed)
        obs, active = self._encode(env, observations)
        return {"obs": obs, "active": active, "state": self._state(env)}

    def step(self, actions: np.ndarray) -> dict[str, np.ndarray]:
        """actions [b, N] int64 -> the step's arrays, finished copies already reset."""
        lay = self.layout
        rows = []
        for slot, env in enumerate(self.envs):
            live = set(env.agents)
            joint = {
                agent: lay.action_starts[i] + int(actions[slot, i])
                for i, agent in enumerate(lay.agents)
                if agent in live
            }
            observations, rewards, terminations, truncations, _ = env.step(joint)
            self.steps[slot] += 1
            final_obs, final_active = self._encode(env, observations)
            reward = np.array(
                [float(rewards.get(agent, 0.0)) for agent in lay.agents], dtype=np.float32
            )
            done = not env.agents or self.steps[slot] >= self.max_steps
            # terminal: the episode ended with every agent that acted terminated (none truncated)
            terminated = not env.agents and bool(live) and all(terminations.get(a, False) and not truncations.get(a, False)
                                            for a in live)
            row = {
                "final_obs": final_obs,
                "final_active": final_active,
                "final_state": self._state(env),
                "reward": reward,
                "done": np.array(done),
                "terminated": np.array(terminated),
                "step": np.array(self.steps[slot] - 1),
                "length": np.array(self.steps[slot]),
            }
            if done:
                row.update(self._reset_one(env, None))
                self.steps[slot] = 0
            else:
                row.update(obs=final_obs, active=final_active, state=row["final_state"])
            rows.append(row)
        return _stack(rows, tuple(rows[0]))

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _stack(rows: list[dict[str, np.ndarray]], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    return {key: np.stack([row[key] for row in rows]) for key in keys}


class PettingZooEnv(BatchedEnv):
    """B copies of a PettingZoo ``ParallelEnv`` behind the batched API (module docstring)."""

    def __init__(
        self,
        name: str,
        factory: Callable[..., Any],
        n_envs: int,
        factory_kwargs: dict[str, Any] | None = None,
        workers: int | None = None,
        max_steps: int | None = None,
        device: str | torch.device = "cpu",
    ) -> None:
        self.name = name
        factory_kwargs = dict(factory_kwargs or {})
        _check_count(name, "n_envs", n_envs, minimum=1, maximum=arg_checks.MAX_BATCH)
        if workers is None:  # one copy (a probe, a description): no worker process
            workers = 0 if n_envs == 1 else min(n_envs, os.cpu_count() or 1, MAX_WORKERS)
        _check_count(name, "workers", workers, minimum=0, maximum=MAX_EXPLICIT_WORKERS)
        workers = min(workers, n_envs)
        self.device = torch.device(device)

        def make() -> Any:
            return factory(**factory_kwargs)

        try:
            probe = make()
        except TypeError as error:
            raise ValueError(f"{name}: cannot build the env: {error}") from None
        if not isinstance(probe, ParallelEnv):
            raise ValueError(f"{name}: the factory returned {type(probe).__name__}, not a PettingZoo ParallelEnv")
        layout = read_layout(probe, name)
        if max_steps is None:
            max_steps = _episode_limit(probe)
        if max_steps is None:
            raise ValueError(
                f"{name}: the env states no episode length (max_cycles); give max_steps=K"
            )
        _check_count(name, "max_steps", max_steps, minimum=1, maximum=arg_checks.MAX_EPISODE_STEPS)
        self.layout = layout
        self.n_envs, self.n_agents, self.max_steps = n_envs, len(layout.agents), max_steps
        self.obs_dim = layout.obs_dim
        self.n_actions = max(layout.n_actions)
        self._action_counts = torch.tensor(layout.n_actions)  # [N] each agent's own count
        self.state_dim = layout.state_dim or self.n_agents * self.obs_dim
        self.task = generic_task(name, layout, _docstring(factory, probe))
        self._metadata_name = str(getattr(probe, "metadata", {}).get("name", name))
        probe.close()
        self._pool = WorkerPool(lambda count: Copies(make, count, layout, max_steps), n_envs, workers, name)
        self._generator = np.random.default_rng()
        self.reset()

    # ------------------------------------------------------------------ batching
    def _tensor(self, values: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(values)).to(self.device, dtype)

    def _load(
        self, obs: np.ndarray, active: np.ndarray, state: np.ndarray, steps: np.ndarray
    ) -> torch.Tensor:
        self._obs = self._tensor(obs)  # [B, N, D]
        self._world = self._make_world(obs, active, state, steps)
        return self._obs

    def _make_world(
        self, obs: np.ndarray, active: np.ndarray, state: np.ndarray, steps: np.ndarray
    ) -> dict[str, torch.Tensor]:
        world = {
            "agent_obs": self._tensor(obs),  # [B, N, D]
            "active": self._tensor(active),  # [B, N]
            "step": self._tensor(steps, torch.long),  # [B]
        }
        if self.layout.state_dim:
            world = {"state": self._tensor(state), **world}  # [B, S]
        return world

    # ------------------------------------------------------------------ API
    def reset(self, seed: int | None = None) -> torch.Tensor:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"{self.name}: seed must be an int or None, got {seed!r}")
        if seed is None:
            seed = int(self._generator.integers(2**31 - self.n_envs))
        seeds = [seed + slot for slot in range(self.n_envs)]
        out = self._pool.call("reset", seeds)
        return self._load(out["obs"], out["active"], out["state"], np.zeros(self.n_envs, np.int64))

    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        actions = self._check_actions(actions).cpu().numpy()  # [B, N]
        out = self._pool.call("step", actions)
        done = self._tensor(out["done"], torch.bool)  # [B]
        steps_after = np.where(out["done"], 0, out["step"] + 1)
        final_obs = self._tensor(out["final_obs"])  # [B, N, D]
        info = {
            "final_obs": final_obs,
            "world": self._make_world(
                out["final_obs"], out["final_active"], out["final_state"], out["step"] + 1
            ),
            "terminated": self._tensor(out["terminated"], torch.bool),
            "step": self._tensor(out["step"], torch.long),
            "episode_metrics": {EPISODE_LENGTH: self._tensor(out["length"])},
        }
        obs = self._load(out["obs"], out["active"], out["state"], steps_after)
        return obs, self._tensor(out["reward"]), done, info

    def _check_actions(self, actions: torch.Tensor) -> torch.Tensor:
        actions = self.check_actions(actions)  # [B, N]
        if not bool((actions < self._action_counts).all()):
            raise ValueError(f"{self.name}.step: an agent took an action outside its action_mask()")
        return actions

    @property
    def obs_dims(self) -> tuple[int, ...]:
        return self.layout.obs_dims

    @property
    def roles(self) -> tuple[str, ...]:
        """``speaker_0`` -> ``speaker``: agents named alike share a role."""
        return tuple(re.sub(r"_\d+$", "", agent) or agent for agent in self.layout.agents)

    @property
    def agent_names(self) -> tuple[str, ...]:
        """The env's own ``possible_agents``."""
        return self.layout.agents

    def action_mask(self) -> torch.Tensor:
        """[N, A] bool: which of the padded actions each agent really has."""
        return torch.arange(self.n_actions)[None, :] < self._action_counts[:, None]

    def global_state(self) -> torch.Tensor:
        """[B, state_dim]: ``env.state()``, or every agent's padded obs when it has none."""
        if self.layout.state_dim:
            return self._world["state"]
        return self._obs.reshape(self.n_envs, -1)

    def world(self) -> dict[str, torch.Tensor]:
        return self._world

    def set_world(self, world: dict[str, torch.Tensor]) -> torch.Tensor:
        raise ValueError(f"{self.name}: a PettingZoo env cannot load a world state")

    def describe(self) -> str:
        lay = self.layout
        lines = [
            f"Environment: {self.name} (PettingZoo ParallelEnv {self._metadata_name!r}), "
            f"N={self.n_agents} agents, run through lero's generic adapter.",
            f"Task: {self.task.text}",
            "",
            f"Observation of one agent: float32 vector of D={self.obs_dim} (tensor obs[..., D]); "
            "agents with shorter observations are zero-padded at the end:",
        ]
        for i, agent in enumerate(lay.agents):
            kind = (
                "one-hot of a Discrete observation"
                if lay.obs_kinds[i] == "discrete"
                else "flattened Box"
            )
            lines.append(f"  {agent} (role {self.roles[i]}): [0:{lay.obs_dims[i]}] {kind}")
        lines += [
            "",
            "Actions (discrete): "
            + ", ".join(
                f"{agent} has {n}" for agent, n in zip(lay.agents, lay.n_actions, strict=True)
            )
            + f" (padded to {self.n_actions}; action_mask() marks each agent's own).",
            *self.task.world_lines("the environment's own per-agent reward (0 for an agent that has left the "
                                   "episode).", self.max_steps, "every agent has terminated"),
        ]
        return "\n".join(lines)

    def close(self) -> None:
        """Stop the worker processes (also done at interpreter exit: they are daemons)."""
        if hasattr(self, "_pool"):
            self._pool.close()

    def __del__(self) -> None:
        self.close()


def generic_task(name: str, layout: Layout, text: str) -> TaskSpec:
    """The TaskSpec of a PettingZoo env: ``return`` as the success measure, state from state()/obs."""
    N, D, S = len(layout.agents), layout.obs_dim, layout.state_dim
    fields = []
    if S:
        fields.append(StateField("state", f"[B, {S}]", "the env's global state(), flattened"))
    fields += [
        StateField(
            "agent_obs",
            f"[B, {N}, {D}]",
            "each agent's observation (zero-padded), agents in possible_agents order",
        ),
        StateField(
            "active", f"[B, {N}]", "1.0 while the agent takes part in the episode, else 0.0"
        ),
        StateField("step", "[B]", "step index within the episode (int64)"),
    ]
    return TaskSpec(
        name=name,
        text=text,
        lero_kwargs={},
        state_fields=tuple(fields),
        metrics=(
            Metric(RETURN, True, "mean per-agent native episode return (the success measure)"),
            Metric(
                EPISODE_LENGTH, False, "mean steps per episode (shorter = the episode ended early)"
            ),
        ),
        success_metric=RETURN,
        grammar=None,
        notes={"agents": layout.agents, "obs_dims": layout.obs_dims},
    )


def _episode_limit(env: Any) -> int | None:
    for holder in (env, getattr(env, "unwrapped", None)):
        for attribute in ("max_cycles", "max_steps", "max_episode_steps"):
            value = getattr(holder, attribute, None)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _docstring(factory: Callable[..., Any], env: Any) -> str:
    """The first paragraph of the factory's or the env class's own docstring (PettingZoo's wrappers skipped)."""
    candidates = [factory, type(env), type(getattr(env, "unwrapped", env))]
    for owner in candidates:
        module = getattr(owner, "__module__", "") or ""
        doc = inspect.getdoc(owner) if not module.startswith("pettingzoo.") else None
        if doc:
            return " ".join(doc.split("\n\n")[0].split())
    return f"Cooperative multi-agent task {getattr(env, 'metadata', {}).get('name', 'of a PettingZoo env')}: maximise the team's return."


def _check_count(owner: str, field: str, value: Any, minimum: int, maximum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{owner}: {field} must be an int >= {minimum}, got {value!r}")
    if value > maximum:
        raise ValueError(f"{owner}: {field} must be <= {maximum}, got {value}")
