"""The candidate's hooks, called by the engine with every output checked.

LLM-written hooks fail in creative ways (wrong shape, ints, NaN, dropping the
raw observation); each is caught at the call site and reported as a
`HookError` naming the hook, so the debugger agent gets a precise message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch

from lero.training.contract import component_label
from lero.training.curves import ENGINE_CURVE_NAMES, GREEDY_PREFIX


class HookError(ValueError):
    """A hook returned something the engine cannot use."""

    def __init__(self, hook: str, problem: str) -> None:
        self.hook = hook
        self.problem = problem
        super().__init__(f"{hook}: {problem}")


@dataclass(frozen=True)
class Hooks:
    """The candidate's functions; `None` means the baseline (native reward, raw obs)."""

    hybrid_reward: Callable[[Any], Any] | None = None
    enhance_observation: Callable[[torch.Tensor], Any] | None = None
    potential: Callable[[Any, torch.Tensor], Any] | None = None  # Phi(state, obs) -> [B, N]


@dataclass(frozen=True)
class RewardContext:
    """What `hybrid_reward(ctx)` sees; every tensor is a private copy of engine state."""

    obs: torch.Tensor  # [B, N, D] raw local obs before the step
    next_obs: torch.Tensor  # [B, N, D] raw local obs after the step (final obs where done)
    actions: torch.Tensor  # [B, N] int64
    env_reward: torch.Tensor  # [B, N] native reward
    state: Mapping[str, torch.Tensor]  # world after the step, e.g. agent_pos [B, N, 2]
    step: torch.Tensor  # [B] step within episode
    progress: float  # fraction of the training budget used, in [0, 1]


def _check_float_tensor(hook: str, what: str, value: Any) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise HookError(hook, f"{what} must be a torch.Tensor, got {type(value).__name__}")
    if not value.is_floating_point():
        raise HookError(hook, f"{what} must have a float dtype, got {value.dtype}")
    if not bool(torch.isfinite(value).all()):
        raise HookError(hook, f"{what} contains NaN or inf")
    return value.detach().float()


class PotentialCheck:
    """Calls `potential(state, obs)` on one state and checks Phi: [B, N] float, finite."""

    hook = "potential"

    def __init__(self, fn: Callable[[Any, torch.Tensor], Any]) -> None:
        self.fn = fn

    def __call__(self, world: Mapping[str, torch.Tensor], obs: torch.Tensor) -> torch.Tensor:
        """world: the state's named tensors; obs [B, N, D] raw -> Phi [B, N]."""
        state = MappingProxyType({name: value.clone() for name, value in world.items()})
        phi = _check_float_tensor(self.hook, "Phi", self.fn(state, obs.clone()))
        batch, n_agents = obs.shape[:2]
        if phi.shape != (batch, n_agents):
            raise HookError(self.hook, f"Phi must have shape [B, N] = [{batch}, {n_agents}] (one value per "
                                       f"agent), got {list(phi.shape)}")
        return phi


class ObservationEnhancer:
    """Applies `enhance_observation` per agent row: [B, N, D] -> [B, N, D + k], checked."""

    hook = "enhance_observation"

    def __init__(self, fn: Callable[[torch.Tensor], Any] | None, raw_dim: int) -> None:
        self.fn = fn
        self.raw_dim = raw_dim
        self.out_dim = raw_dim if fn is None else None

    def probe(self, obs: torch.Tensor) -> int:
        """Run the hook once on real observations to learn (and fix) its output width."""
        self.out_dim = self(obs).shape[-1]
        return self.out_dim

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, N, D] raw -> [B, N, D'] enhanced."""
        if self.fn is None:
            return obs
        batch, n_agents, raw_dim = obs.shape
        rows = obs.reshape(batch * n_agents, raw_dim)  # [M, D]
        out = _check_float_tensor(self.hook, "output", self.fn(rows.clone()))
        if out.dim() != 2 or out.shape[0] != rows.shape[0] or out.shape[1] < raw_dim:
            raise HookError(
                self.hook,
                f"output must have shape [M, D + k] = [{rows.shape[0]}, >= {raw_dim}], got {list(out.shape)}",
            )
        if self.out_dim is not None and out.shape[1] != self.out_dim:
            raise HookError(
                self.hook, f"output width changed from {self.out_dim} to {out.shape[1]}"
            )
        if not torch.equal(out[:, :raw_dim], rows):
            raise HookError(
                self.hook, f"the first {raw_dim} output columns must equal the input obs"
            )
        return out.reshape(batch, n_agents, out.shape[1])


class RewardShaper:
    """Calls `hybrid_reward(ctx)` and checks (rewards [B, N], components {name: [B, N] | [B]})."""

    hook = "hybrid_reward"

    def __init__(self, fn: Callable[[Any], Any], metric_names: tuple[str, ...] = ()) -> None:
        """``metric_names``: the task's metrics (``env.task.metric_names``), reserved as curves."""
        self.fn = fn
        self.reserved = tuple(dict.fromkeys((*ENGINE_CURVE_NAMES, *metric_names)))
        self.component_names: tuple[str, ...] | None = None

    def __call__(
        self,
        obs: torch.Tensor,
        next_obs: torch.Tensor,
        actions: torch.Tensor,
        env_reward: torch.Tensor,
        world: Mapping[str, torch.Tensor],
        step: torch.Tensor,
        progress: float,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        ctx = RewardContext(
            obs=obs.clone(),
            next_obs=next_obs.clone(),
            actions=actions.clone(),
            env_reward=env_reward.clone(),
            state=MappingProxyType({name: value.clone() for name, value in world.items()}),
            step=step.clone(),
            progress=float(progress),
        )
        output = self.fn(ctx)
        if not isinstance(output, tuple | list) or len(output) != 2:
            raise HookError(self.hook, "must return a tuple (rewards [B, N], components dict)")
        rewards, components = output
        batch, n_agents = env_reward.shape
        # the terms first: a non-finite reward is then named by its first non-finite term
        # (`component 'x' contains NaN or inf`), which is the slot the debugger must see
        checked = self._check_components(components, batch, n_agents)
        rewards = _check_float_tensor(self.hook, "rewards", rewards)
        if rewards.shape != (batch, n_agents):
            raise HookError(
                self.hook,
                f"rewards must have shape [B, N] = [{batch}, {n_agents}], got {list(rewards.shape)}",
            )
        return rewards, checked

    def _check_components(
        self, components: Any, batch: int, n_agents: int
    ) -> dict[str, torch.Tensor]:
        if not isinstance(components, Mapping):
            raise HookError(
                self.hook, f"components must be a dict of tensors, got {type(components).__name__}"
            )
        checked: dict[str, torch.Tensor] = {}
        for name, value in components.items():
            if not isinstance(name, str) or not name:
                raise HookError(
                    self.hook, f"component names must be non-empty strings, got {name!r}"
                )
            if name in self.reserved or name.startswith(GREEDY_PREFIX):
                raise HookError(
                    self.hook,
                    f"component name {name!r} is reserved ({', '.join(self.reserved)}, {GREEDY_PREFIX}...)",
                )
            value = _check_float_tensor(self.hook, component_label(name), value)
            if value.shape not in ((batch, n_agents), (batch,)):
                raise HookError(
                    self.hook,
                    f"{component_label(name)} must have shape [B, N] or [B] = [{batch}, {n_agents}] or [{batch}], "
                    f"got {list(value.shape)}",
                )
            checked[name] = value
        names = tuple(checked)
        if self.component_names is None:
            self.component_names = names
        elif set(names) != set(self.component_names):
            raise HookError(
                self.hook,
                f"component names changed between calls: {sorted(self.component_names)} -> {sorted(names)}",
            )
        return checked
