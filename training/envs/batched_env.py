"""The batched-environment interface every lero environment implements.

All B environments of a batch are stepped at once with torch ops; episodes reset
automatically inside ``step``.

Step / auto-reset contract
--------------------------
``step(actions [B, N] int64) -> (obs [B, N, D] float32, reward [B, N] float32,
done [B] bool, info)``.

- ``reward`` and ``done`` belong to the step just taken.
- A slot whose episode ended (``done``) is reset inside ``step``: the returned
  ``obs`` of that slot is the *new* episode's first observation.
- ``info["final_obs"]`` [B, N, D]: the observation reached by this step, before
  the auto-reset, for every slot (equals ``obs`` where not done; it may be the very
  same tensor when no slot finished). Use it to bootstrap truncated episodes.
- ``info["world"]``: the ``world()`` dict after the step, before the auto-reset
  (what a hybrid-reward context sees as the state after the step).
  ``env.world()`` called before ``step`` gives the state before the step, and
  after ``step`` the current state (new episodes where reset).
- ``info["terminated"]`` [B] bool: the episode ended in a terminal state of the task
  (the scenario's own ``done()``), not at the time limit; ``done & ~terminated`` is a
  truncation. Potential-based shaping takes Phi = 0 after a terminal step only.
- ``info["step"]`` [B] int64: index of the step just taken within its episode
  (0 for the first step).
- ``info["episode_metrics"]``: ``{name: [B] float}``, one entry per metric of
  ``env.task`` except ``return``, holding the value of the episode that ends at this
  step (meaningful where ``done``; the env accumulates per-episode sums itself, e.g.
  collisions). Training statistics and evaluation read task metrics only from here.
- Environments may add their own per-step statistics (simple_spread: ``collisions``,
  ``occupied``, ``coverage`` of the step).

Agents that differ (heterogeneous tasks) share one padded layout: ``obs_dim`` is the
largest observation, agent i's row holds its ``obs_dims[i]`` values then zeros;
``n_actions`` is the largest action count and ``action_mask()`` [N, A] says which
actions each agent may take (taking another is a ``ValueError``); ``roles`` names each
agent's role (all equal for homogeneous tasks).

Tensors returned by the env are never modified by it afterwards (state updates
are out of place), so callers may keep them without copying; callers must not
modify them in place either.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch

from lero.training.envs.task import TaskSpec


@dataclass(frozen=True)
class Arena:
    """Where a task's episodes play, for a drawing of them (`lero eval --render`): the box
    [-x, x] x [-y, y] around the origin, an axis None where nothing bounds it. WALLS: the
    physics keeps every entity inside (a VMAS world's semidims); otherwise the box is where
    episodes start and positions are unbounded (MPE)."""

    x: float | None
    y: float | None
    walls: bool


class BatchedEnv(ABC):
    """B copies of one multi-agent task stepped together (see module docstring)."""

    name: str
    task: TaskSpec  # names, metrics, state fields and LERO defaults of the task (envs/task.py)
    n_envs: int  # B
    n_agents: int  # N
    obs_dim: int  # D, per-agent observation length
    state_dim: int  # length of global_state() rows
    n_actions: int  # discrete actions per agent
    max_steps: int  # episode length (truncation)
    device: torch.device

    @abstractmethod
    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Start new episodes in every slot; returns obs [B, N, D].

        The same seed gives the same trajectory for the same actions.
        """

    @abstractmethod
    def step(
        self, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Advance every slot by one step, auto-resetting finished episodes."""

    @abstractmethod
    def global_state(self) -> torch.Tensor:
        """Centralised-critic input [B, state_dim] for the current state."""

    @abstractmethod
    def world(self) -> dict[str, torch.Tensor]:
        """Named physical state of the current step (what ``ctx.state`` shows)."""

    @abstractmethod
    def set_world(self, world: dict[str, torch.Tensor]) -> torch.Tensor:
        """Load a state given in ``world()``'s format; returns its obs [B, N, D]."""

    @abstractmethod
    def describe(self) -> str:
        """Plain-text description for the designer LLM: obs layout, reward, state."""

    def check_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """``actions`` as int64 on the env's device; one-line ValueError for a wrong type,
        shape or dtype, or a value outside ``[0, n_actions)``."""
        where, shape = f"{self.name}.step", (self.n_envs, self.n_agents)
        if not isinstance(actions, torch.Tensor):
            raise ValueError(
                f"{where}: actions must be a torch.Tensor of shape {shape}, got {type(actions).__name__}"
            )
        if tuple(actions.shape) != shape:
            raise ValueError(f"{where}: actions must have shape {shape}, got {tuple(actions.shape)}")
        if actions.is_floating_point() or actions.is_complex() or actions.dtype == torch.bool:
            raise ValueError(f"{where}: actions must be integers, got {actions.dtype}")
        low, high = torch.aminmax(actions)
        if int(low) < 0 or int(high) >= self.n_actions:
            raise ValueError(
                f"{where}: actions must lie in [0, {self.n_actions}), got [{int(low)}, {int(high)}]"
            )
        return actions.to(self.device, torch.long)

    def obs_layout(self) -> dict[str, tuple[int, int]]:
        """Named half-open column ranges of one agent's obs (a task grammar's OEF reads them);
        empty when the env names none."""
        return {}

    @property
    def obs_dims(self) -> tuple[int, ...]:
        """True observation length of each agent (rows are zero-padded to ``obs_dim``)."""
        return (self.obs_dim,) * self.n_agents

    @property
    def roles(self) -> tuple[str, ...]:
        """Role name of each agent; homogeneous tasks have one role."""
        return ("agent",) * self.n_agents

    @property
    def agent_names(self) -> tuple[str, ...]:
        """``<role>_<k>``, k counting within the role (mpe2's names: agent_0, speaker_0)."""
        seen: dict[str, int] = {}
        names = []
        for role in self.roles:
            names.append(f"{role}_{seen.get(role, 0)}")
            seen[role] = seen.get(role, 0) + 1
        return tuple(names)

    @property
    def arena(self) -> Arena | None:
        """Where the episodes play (`Arena`); None: the env declares nothing (a PettingZoo env)."""
        return None

    def action_mask(self) -> torch.Tensor:
        """[N, A] bool: the actions each agent may take (static); all True when agents are alike."""
        return torch.ones(self.n_agents, self.n_actions, dtype=torch.bool, device=self.device)

    def random_actions(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Uniform valid actions [B, N] int64 (respecting ``action_mask()``)."""
        mask = self.action_mask().to(torch.float32)  # [N, A]
        probs = mask.expand(self.n_envs, -1, -1).reshape(-1, self.n_actions)
        picks = torch.multinomial(probs, 1, generator=generator)
        return picks.view(self.n_envs, self.n_agents)
