"""Typed, validated training configuration: the one place bad settings are caught."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class PPOHparams:
    """MAPPO / IPPO hyper-parameters (defaults tuned for simple_spread, 64-unit MLPs)."""

    n_envs: int = 512
    rollout_len: int = 25
    lr: float = 2e-3
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    value_clip_eps: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 1.0
    epochs: int = 3
    minibatches: int = 4
    max_grad_norm: float = 10.0
    hidden: int = 64

    def __post_init__(self) -> None:
        _validate_fields(self)
        _check(0.0 < self.gamma <= 1.0, f"hparam gamma must be in (0, 1], got {self.gamma}")
        _check(
            0.0 <= self.gae_lambda <= 1.0,
            f"hparam gae_lambda must be in [0, 1], got {self.gae_lambda}",
        )


@dataclass(frozen=True)
class ValueDecompositionHparams:
    """VDN / QMIX hyper-parameters: PQN-style parallel Q(lambda), no replay (value_decomposition.py)."""

    n_envs: int = 256
    rollout_len: int = 16  # steps per env between updates
    lr: float = 1e-3
    gamma: float = 0.9
    td_lambda: float = 0.3  # Q(lambda) targets: 0 = one-step TD, 1 = Monte Carlo within a rollout
    epochs: int = 2  # passes over each rollout
    minibatches: int = 16
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_anneal_frac: float = 0.1  # share of the budget over which epsilon decays linearly
    max_grad_norm: float = 1.0
    hidden: int = 128
    mixer_embed: int = 32

    def __post_init__(self) -> None:
        _validate_fields(self)
        _check(0.0 < self.gamma <= 1.0, f"hparam gamma must be in (0, 1], got {self.gamma}")
        for name in ("eps_start", "eps_end", "eps_anneal_frac", "td_lambda"):
            value = getattr(self, name)
            _check(0.0 <= value <= 1.0, f"hparam {name} must be in [0, 1], got {value}")


Hparams = PPOHparams | ValueDecompositionHparams

# Fields that may legitimately be zero; every other numeric hparam must be positive.
_MAY_BE_ZERO = {"ent_coef", "eps_end", "eps_anneal_frac", "gae_lambda", "td_lambda"}


def _validate_fields(hparams: Hparams) -> None:
    """Type and sign check every field against its declared default's type."""
    for f in fields(hparams):
        value = getattr(hparams, f.name)
        if isinstance(f.default, bool):
            _check(isinstance(value, bool), f"hparam {f.name} must be a bool, got {value!r}")
        elif isinstance(f.default, int):
            _check(_is_int(value), f"hparam {f.name} must be an int, got {value!r}")
        else:
            _check(_is_number(value), f"hparam {f.name} must be a number, got {value!r}")
        if not isinstance(value, bool):
            minimum_ok = value >= 0 if f.name in _MAY_BE_ZERO else value > 0
            _check(
                minimum_ok,
                f"hparam {f.name} must be {'>= 0' if f.name in _MAY_BE_ZERO else '> 0'}, got {value}",
            )


@dataclass(frozen=True)
class TrainConfig:
    """One training run. `steps` counts joint env steps (batch slots x timesteps)."""

    env: str = "simple_spread"
    env_kwargs: dict = field(default_factory=dict)
    algo: str = "mappo"
    steps: int = 1_000_000
    seed: int = 0
    n_envs: int | None = None
    eval_episodes: int = 512
    hparams: dict = field(default_factory=dict)
    threads: int | None = None

    def __post_init__(self) -> None:
        # late import: the table imports the learners, which import this module
        from lero.training.algos import ALGOS
        from lero.training.envs.registry import check_env_name

        check_env_name(self.env)
        _check(
            isinstance(self.env_kwargs, dict),
            f"env_kwargs must be a dict, got {type(self.env_kwargs).__name__}",
        )
        _check(all(isinstance(k, str) for k in self.env_kwargs), "env_kwargs keys must be strings")
        _check(self.algo in ALGOS, f"unknown algo {self.algo!r}; choose one of {', '.join(ALGOS)}")
        _check(
            _is_int(self.steps) and self.steps > 0,
            f"steps must be a positive int, got {self.steps!r}",
        )
        _check(
            _is_int(self.seed) and self.seed >= 0,
            f"seed must be a non-negative int, got {self.seed!r}",
        )
        _check(
            self.n_envs is None or (_is_int(self.n_envs) and self.n_envs > 0),
            f"n_envs must be a positive int or None, got {self.n_envs!r}",
        )
        _check(
            _is_int(self.eval_episodes) and self.eval_episodes > 0,
            f"eval_episodes must be a positive int, got {self.eval_episodes!r}",
        )
        _check(
            self.threads is None or (_is_int(self.threads) and self.threads > 0),
            f"threads must be a positive int or None, got {self.threads!r}",
        )
        _check(
            isinstance(self.hparams, dict),
            f"hparams must be a dict, got {type(self.hparams).__name__}",
        )
        self.algo_hparams()  # validates the overrides now, not mid-run

    def algo_hparams(self) -> Hparams:
        """The algorithm's typed hyper-parameters with overrides (and n_envs) applied."""
        from lero.training.algos import ALGORITHMS

        hparams_type = ALGORITHMS[self.algo].hparams
        known = {f.name for f in fields(hparams_type)}
        unknown = sorted(set(self.hparams) - known)
        _check(
            not unknown,
            f"unknown hparams for {self.algo}: {', '.join(unknown)}; known: {', '.join(sorted(known))}",
        )
        overrides = dict(self.hparams)
        if self.n_envs is not None:
            overrides["n_envs"] = self.n_envs
        return hparams_type(**overrides)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        _check(not unknown, f"unknown TrainConfig fields: {', '.join(unknown)}")
        return cls(**data)
