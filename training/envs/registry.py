"""``make_env``: build a batched environment by name, validating its arguments once.

A name is a native env (``ENV_NAMES``), a PettingZoo env registered under the entry-point
group ``lero.envs`` (its object: a callable returning a ``ParallelEnv``), or a
``package.module:factory`` spec. The last two run through ``PettingZooEnv``; their
keyword arguments go to the factory except the adapter's own ``ADAPTER_OPTIONS``.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
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
        return _make_pettingzoo(name, n_envs, kwargs)
    env_cls, cfg_cls = _ENVS[name]
    accepted = [f.name for f in dataclasses.fields(cfg_cls) if f.name != "n_envs"]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ValueError(
            f"{name}: unknown argument(s) {', '.join(unknown)}; accepted: {', '.join(accepted)}"
        )
    return env_cls(cfg_cls(n_envs=n_envs, **kwargs))


DEFAULT_ENV = "simple_spread"  # the experiment LERO targets (DESIGN.md)
ENTRY_POINT_GROUP = "lero.envs"
# make_env keywords a PettingZoo env's adapter takes itself (the rest go to the factory):
# worker processes, episode length, and the directory its module imports from
ADAPTER_OPTIONS = ("workers", "max_steps", "import_root", "device")
_SPEC = re.compile(r"^([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*):([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)$")


def registered_envs() -> tuple[str, ...]:
    """Native envs, then PettingZoo envs registered under the ``lero.envs`` entry points."""
    plugins = sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)} - set(_ENVS))
    return (*ENV_NAMES, *plugins)


def check_env_name(name: str) -> None:
    """One-line ValueError unless ``name`` is a registered env or a well-formed spec (nothing imported)."""
    if not isinstance(name, str) or not (name in registered_envs() or _SPEC.match(name)):
        raise ValueError(
            f"unknown env {name!r}; available: {', '.join(registered_envs())}, "
            "or a PettingZoo ParallelEnv as package.module:factory"
        )


def default_kwargs(name: str) -> dict[str, Any]:
    """The kwargs LERO runs env ``name`` with by default: a native env's ``task.lero_kwargs``;
    none for a PettingZoo env (nothing is imported)."""
    return dict(_ENVS[name][0].task.lero_kwargs) if name in _ENVS else {}


def task_spec(name: str, **kwargs: Any) -> TaskSpec:
    """The task of env ``name``; a PettingZoo env is built once, in-process, to read it."""
    if name in _ENVS:
        return _ENVS[name][0].task
    env = make_env(name, 1, **{**kwargs, "workers": 0})
    try:
        return env.task
    finally:
        env.close()


def import_root(name: str) -> str | None:
    """Where a ``package.module:factory`` spec's top package lives, so a fresh process can import it.

    None for native and entry-point envs (installed, so importable anywhere).
    """
    match = None if name in _ENVS else _SPEC.match(name)
    if match is None:
        return None
    _import(name, match.group(1), None)
    top = sys.modules[match.group(1).split(".")[0]]
    package_dirs = list(getattr(top, "__path__", []))  # a package: its directory's parent
    if package_dirs:
        return str(Path(package_dirs[0]).resolve().parent)
    return str(Path(top.__file__).resolve().parent)


def resolve_factory(name: str, root: str | None = None) -> Callable[..., Any]:
    """The callable behind a spec or an entry-point name; ``root`` (default: the cwd) goes on sys.path."""
    match = _SPEC.match(name)
    if match is not None:
        target: Any = _import(name, match.group(1), root)
        for part in match.group(2).split("."):
            if not hasattr(target, part):
                raise ValueError(f"env {name!r}: {match.group(1)} has no attribute {match.group(2)!r}")
            target = getattr(target, part)
    else:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not found:
            check_env_name(name)
        try:
            target = found[0].load()
        except Exception as error:
            raise ValueError(f"env {name!r}: cannot load entry point {found[0].value!r}: {error}") from None
    if not callable(target):
        raise ValueError(f"env {name!r}: {type(target).__name__} is not callable; expected a ParallelEnv factory")
    return target


def _import(name: str, module: str, root: str | None) -> Any:
    directory = str(Path(root or os.getcwd()).resolve())
    if directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        return importlib.import_module(module)
    except Exception as error:
        message = " ".join(str(error).split())
        raise ValueError(f"env {name!r}: cannot import {module}: {type(error).__name__}: {message}") from None


def _make_pettingzoo(name: str, n_envs: int, kwargs: dict[str, Any]) -> BatchedEnv:
    from lero.training.envs.pettingzoo_adapter import PettingZooEnv

    check_env_name(name)
    options = {key: kwargs.pop(key) for key in ADAPTER_OPTIONS if key in kwargs}
    factory = resolve_factory(name, options.pop("import_root", None))
    return PettingZooEnv(name, factory, n_envs, factory_kwargs=kwargs, **options)
