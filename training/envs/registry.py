"""``make_env``: build a batched environment by name, validating its arguments once."""

from __future__ import annotations

import dataclasses
from typing import Any

from lero.training.envs.base import BatchedEnv
from lero.training.envs.simple_reference import SimpleReference, SimpleReferenceConfig
from lero.training.envs.simple_speaker_listener import (
    SimpleSpeakerListener,
    SimpleSpeakerListenerConfig,
)
from lero.training.envs.simple_spread import SimpleSpread, SimpleSpreadConfig
from lero.training.envs.task import TaskSpec

_ENVS: dict[str, tuple[type[BatchedEnv], type]] = {
    "simple_spread": (SimpleSpread, SimpleSpreadConfig),
    "simple_reference": (SimpleReference, SimpleReferenceConfig),
    "simple_speaker_listener": (SimpleSpeakerListener, SimpleSpeakerListenerConfig),
}
ENV_NAMES: tuple[str, ...] = tuple(_ENVS)


def make_env(name: str, n_envs: int, **kwargs: Any) -> BatchedEnv:
    """``n_envs`` copies of env ``name`` taking the reference package's arguments.

    Unknown names, unknown keywords and bad values raise a one-line ValueError.
    """
    if name not in _ENVS:
        raise ValueError(f"unknown env {name!r}; available: {', '.join(ENV_NAMES)}")
    env_cls, cfg_cls = _ENVS[name]
    accepted = [f.name for f in dataclasses.fields(cfg_cls) if f.name != "n_envs"]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ValueError(
            f"{name}: unknown argument(s) {', '.join(unknown)}; accepted: {', '.join(accepted)}"
        )
    return env_cls(cfg_cls(n_envs=n_envs, **kwargs))


def task_spec(name: str) -> TaskSpec:
    """The ``TaskSpec`` of env ``name`` without building it; unknown names raise ValueError."""
    if name not in _ENVS:
        raise ValueError(f"unknown env {name!r}; available: {', '.join(ENV_NAMES)}")
    return _ENVS[name][0].task
