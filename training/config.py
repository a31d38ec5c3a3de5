"""Typed, validated training configuration: the one place bad settings are caught."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any

from lero.training.algos import ALGORITHMS, ALGOS, Hparams
from lero.training.defaults import DEFAULT_ALGO, DEFAULT_ENV, EVAL_EPISODES, EVAL_EVERY
from lero.training.envs.registry import check_env_name
from lero.training.validation import is_int, require


@dataclass(frozen=True)
class TrainConfig:
    """One training run. `steps` counts joint env steps (batch slots x timesteps)."""

    env: str = DEFAULT_ENV
    env_kwargs: dict = field(default_factory=dict)
    algo: str = DEFAULT_ALGO
    steps: int = 1_000_000
    seed: int = 0
    n_envs: int | None = None
    eval_episodes: int = EVAL_EPISODES
    hparams: dict = field(default_factory=dict)
    threads: int | None = None
    checkpoint_every: int | None = None  # env steps between interval checkpoints (None = none)
    # Successive halving trains a plan of `steps` in pieces: a job stops at `stop_at` env
    # steps (None: at `steps`), and the next one continues from its learner state
    # (`resume`, a file `save_learner` wrote). The schedules (learning rate, exploration,
    # the HRF's progress) always follow `steps`, so the pieces make one plan.
    stop_at: int | None = None
    resume: str | None = None
    # updates between the greedy evaluation curve's points (training.greedy); None: no curve
    eval_every: int | None = EVAL_EVERY

    def __post_init__(self) -> None:
        check_env_name(self.env)
        require(
            isinstance(self.env_kwargs, dict),
            f"env_kwargs must be a dict, got {type(self.env_kwargs).__name__}",
        )
        require(all(isinstance(k, str) for k in self.env_kwargs), "env_kwargs keys must be strings")
        require(self.algo in ALGOS, f"unknown algo {self.algo!r}; choose one of {', '.join(ALGOS)}")
        require(
            is_int(self.steps) and self.steps > 0,
            f"steps must be a positive int, got {self.steps!r}",
        )
        require(
            is_int(self.seed) and self.seed >= 0,
            f"seed must be a non-negative int, got {self.seed!r}",
        )
        require(
            self.n_envs is None or (is_int(self.n_envs) and self.n_envs > 0),
            f"n_envs must be a positive int or None, got {self.n_envs!r}",
        )
        require(
            is_int(self.eval_episodes) and self.eval_episodes > 0,
            f"eval_episodes must be a positive int, got {self.eval_episodes!r}",
        )
        require(
            self.threads is None or (is_int(self.threads) and self.threads > 0),
            f"threads must be a positive int or None, got {self.threads!r}",
        )
        require(
            self.checkpoint_every is None or (is_int(self.checkpoint_every) and self.checkpoint_every > 0),
            f"checkpoint_every must be a positive int or None, got {self.checkpoint_every!r}",
        )
        require(
            self.eval_every is None or (is_int(self.eval_every) and self.eval_every > 0),
            f"eval_every must be a positive int or None, got {self.eval_every!r}",
        )
        require(
            self.stop_at is None or (is_int(self.stop_at) and 0 < self.stop_at <= self.steps),
            f"stop_at must be None or an int in (0, steps], got {self.stop_at!r}",
        )
        require(
            self.resume is None or isinstance(self.resume, str),
            f"resume must be a path or None, got {self.resume!r}",
        )
        require(
            isinstance(self.hparams, dict),
            f"hparams must be a dict, got {type(self.hparams).__name__}",
        )
        self.algo_hparams()  # validates the overrides now, not mid-run

    def algo_hparams(self) -> Hparams:
        """The algorithm's typed hyper-parameters with overrides (and n_envs) applied."""
        hparams_type = ALGORITHMS[self.algo].hparams
        known = {f.name for f in fields(hparams_type)}
        unknown = sorted(set(self.hparams) - known)
        require(
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
        require(not unknown, f"unknown TrainConfig fields: {', '.join(unknown)}")
        return cls(**data)
