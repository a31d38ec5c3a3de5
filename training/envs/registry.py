"""``make_env``: build a batched environment by name, validating its arguments once.

A name is a native env (``ENV_NAMES``), a VMAS scenario ``vmas:<scenario>`` (batched in
this process, ``vmas_adapter``; the family wins over the spec syntax), a PettingZoo env
registered under the entry-point group ``lero.envs`` (its object: a callable returning a
``ParallelEnv``), or a ``package.module:factory`` spec. The last two run through ``PettingZooEnv``; their
keyword arguments go to the factory except the adapter's own ``ADAPTER_OPTIONS``.

Importing a spec's module runs its code. Installed envs (native, entry points) are
trusted; on the host, a spec is imported only once a person named it (``confirm_env``,
called by the graph's edges), and ``load_factory`` is the one place that imports it.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from lero.training.envs.batched_env import BatchedEnv
from lero.training.envs.simple_reference import SimpleReference, SimpleReferenceConfig
from lero.training.envs.simple_speaker_listener import (
    SimpleSpeakerListener,
    SimpleSpeakerListenerConfig,
)
from lero.training.envs.simple_spread import SimpleSpread, SimpleSpreadConfig
from lero.training.envs.task import TaskSpec
from lero.training.envs.vmas_adapter import PREFIX as VMAS_PREFIX
from lero.training.envs.vmas_adapter import is_vmas_name

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
    if is_vmas_name(name):
        return _make_vmas(name, n_envs, kwargs)
    if name not in _ENVS:
        return _make_pettingzoo(name, n_envs, kwargs)
    return _ENVS[name][0](_native_config(name, n_envs, kwargs))


ENTRY_POINT_GROUP = "lero.envs"
# make_env keywords a PettingZoo env's adapter takes itself (the rest go to the factory):
# worker processes, episode length, and the directory its module imports from
ADAPTER_OPTIONS = ("workers", "max_steps", "import_root", "device")
_SPEC = re.compile(r"^([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*):([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)$")


def registered_envs() -> tuple[str, ...]:
    """Native envs, then PettingZoo envs registered under the ``lero.envs`` entry points."""
    plugins = sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)} - set(_ENVS))
    return (*ENV_NAMES, *plugins)


def is_native(name: str) -> bool:
    """An env lero builds from its own code, batched in the training process (a built-in MPE
    task or a VMAS scenario): no worker pool, no image layer, nothing of the person's to import."""
    return name in _ENVS or is_vmas_name(name)


def is_installed(name: str) -> bool:
    """A native env or one an installed package registers: trusted (the person installed it).

    Anything else is a ``package.module:factory`` spec, whose import runs its code.
    """
    return is_vmas_name(name) or name in registered_envs()


def check_env_name(name: str) -> None:
    """One-line ValueError unless ``name`` is a registered env or a well-formed spec (nothing imported).

    A spec naming a standard-library module (``subprocess:run``) is refused: it is no env.
    ``vmas:<scenario>`` is VMAS's, never a spec: VMAS must have the scenario (and be installed).
    """
    if is_vmas_name(name):
        from lero.training.envs.vmas_adapter import check_name

        check_name(name)
        return
    match = _SPEC.match(name) if isinstance(name, str) else None
    if not isinstance(name, str) or not (name in registered_envs() or match):
        raise ValueError(
            f"unknown env {name!r}; available: {', '.join(registered_envs())}, "
            f"{VMAS_PREFIX}<scenario>, or a PettingZoo ParallelEnv as package.module:factory"
        )
    if match is not None and _top(match.group(1)) in _STDLIB:
        raise ValueError(f"env {name!r}: {_top(match.group(1))} is a standard-library module, not a PettingZoo env")


def default_kwargs(name: str) -> dict[str, Any]:
    """The kwargs LERO runs env ``name`` with by default: a native env's ``task.lero_kwargs``;
    none for a PettingZoo env (nothing is imported)."""
    return dict(_ENVS[name][0].task.lero_kwargs) if name in _ENVS else {}


def check_kwargs(name: str, kwargs: dict[str, Any]) -> None:
    """One-line ValueError for arguments env ``name`` refuses, without building it.

    A native env checks names, types and bounds in its config; a PettingZoo env's factory
    arguments are its own, so only the adapter's options are checked here, and
    ``import_root``, which lero derives from the confirmed import, is refused.
    """
    if name in _ENVS:
        _native_config(name, 1, kwargs)
        return
    if is_vmas_name(name):  # bounds only: a scenario's keyword names are known once its world is built
        from lero.training.envs.vmas_adapter import VmasConfig

        VmasConfig.of(name, 1, dict(kwargs))
        return
    if "import_root" in kwargs:
        raise ValueError(f"env {name!r}: import_root is not an env argument; lero imports a spec from "
                         "the directory it was confirmed in")


def declared_task(name: str, kwargs: dict[str, Any] | None = None) -> TaskSpec | None:
    """The task env ``name`` declares with ``kwargs`` (its arguments may change it:
    simple_spread's reward), its bounds checked first (ValueError otherwise): a built-in MPE
    task's, from one slot; a VMAS scenario's outcome metrics (`vmas_adapter.declared_task`,
    no world built); None for a PettingZoo env (known only from a built instance). Reports
    and pages read this: nothing costly is built to show a run."""
    if is_vmas_name(name):
        from lero.training.envs import vmas_adapter

        return vmas_adapter.declared_task(name, dict(kwargs or {}))
    if name not in _ENVS:
        return None
    return _ENVS[name][0](_native_config(name, 1, dict(kwargs or {}))).task


def declares_sparse(name: str, kwargs: dict[str, Any]) -> bool:
    """Whether env ``name`` with ``kwargs`` marks its native reward sparse, read without
    building a scenario (a spec is parsed and a run planned on the host): a built-in task's
    TaskSpec, a VMAS scenario's shaping arguments; False for an env lero does not own."""
    task = declared_task(name, kwargs)
    return task is not None and task.sparse


def task_spec(name: str, **kwargs: Any) -> TaskSpec:
    """The task of env ``name``; a VMAS or PettingZoo env is built once, in-process, to read it."""
    if name in _ENVS:
        return declared_task(name, kwargs)
    if is_vmas_name(name):
        return make_env(name, 1, **kwargs).task
    env = make_env(name, 1, **{**kwargs, "workers": 0})
    try:
        return env.task
    finally:
        env.close()


def describe_env(name: str, **kwargs: Any) -> dict[str, Any]:
    """What lero reads of env ``name`` before a run, as JSON: its TaskSpec, its description and
    one instance's shape. A sandbox `describe` job calls it for a custom env, so the env's code
    runs there and not next to the host's keys (the job's end ends an adapter's workers)."""
    env = make_env(name, 1, **kwargs)
    return {"task": dataclasses.asdict(env.task), "description": env.describe(), "n_agents": env.n_agents,
            "obs_dim": env.obs_dim, "obs_layout": {k: list(v) for k, v in env.obs_layout().items()}}


@dataclass(frozen=True)
class ConfirmedEnv:
    """A ``package.module:factory`` env a person named, its module imported on this host and its
    factory checked (only ``confirm_env`` makes one). ``root`` is the directory its top package
    lives in, derived from that import: what a fresh process (the process sandbox) imports from.
    """

    name: str
    root: str


def confirm_env(name: str, cwd: str | None = None) -> ConfirmedEnv:
    """Import the module of a spec a person named, from ``cwd`` (default: the working directory,
    where the person asked), and check its factory; one-line ValueError otherwise."""
    match = _SPEC.match(name) if isinstance(name, str) else None
    if match is None or is_installed(name):
        raise ValueError(f"env {name!r} is not a package.module:factory spec to confirm")
    load_factory(name, cwd)
    top = sys.modules[_top(match.group(1))]
    package_dirs = list(getattr(top, "__path__", []))  # a package: its directory's parent
    if package_dirs:
        return ConfirmedEnv(name, str(Path(package_dirs[0]).resolve().parent))
    return ConfirmedEnv(name, str(Path(str(top.__file__)).resolve().parent))


def load_factory(name: str, root: str | None = None) -> Callable[..., Any]:
    """The callable behind a spec or an entry-point name: the one place an env's module is imported.

    A spec's module is imported with ``root`` (default: the cwd) on sys.path; its callable must
    be defined in that module's own package (no standard-library function, no re-export such as
    ``functools.partial``). Nothing is called here.
    """
    check_env_name(name)
    match = _SPEC.match(name)
    if match is None:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        try:
            target = found[0].load()
        except Exception as error:
            raise ValueError(f"env {name!r}: cannot load entry point {found[0].value!r}: {error}") from None
    else:
        module, attribute = match.groups()
        target = _import(name, module, root)
        for part in attribute.split("."):
            if not hasattr(target, part):
                raise ValueError(f"env {name!r}: {module} has no attribute {attribute!r}")
            target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"env {name!r}: {type(target).__name__} is not callable; expected a ParallelEnv factory")
    defined_in = getattr(target, "__module__", None)
    if match is not None and (not isinstance(defined_in, str) or _top(defined_in) != _top(match.group(1))):
        raise ValueError(f"env {name!r}: {match.group(2)} is defined in {defined_in}, not in the package "
                         f"{_top(match.group(1))}; name a factory defined there")
    return target


_STDLIB = frozenset(sys.stdlib_module_names) | {"builtins"}


def _top(module: str) -> str:
    return module.split(".")[0]


def _native_config(name: str, n_envs: int, kwargs: dict[str, Any]) -> Any:
    """The config of native env ``name`` (its checks run in its constructor)."""
    cfg_cls = _ENVS[name][1]
    accepted = [f.name for f in dataclasses.fields(cfg_cls) if f.name != "n_envs"]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ValueError(
            f"{name}: unknown argument(s) {', '.join(unknown)}; accepted: {', '.join(accepted)}"
        )
    try:
        return cfg_cls(n_envs=n_envs, **kwargs)
    except TypeError as error:
        raise ValueError(f"{name}: {error}") from None


def _import(name: str, module: str, root: str | None) -> Any:
    directory = str(Path(root or os.getcwd()).resolve())
    if directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        return importlib.import_module(module)
    except Exception as error:
        message = " ".join(str(error).split())
        raise ValueError(f"env {name!r}: cannot import {module}: {type(error).__name__}: {message}") from None


def _make_vmas(name: str, n_envs: int, kwargs: dict[str, Any]) -> BatchedEnv:
    from lero.training.envs.vmas_adapter import VmasConfig, VmasEnv

    return VmasEnv(VmasConfig.of(name, n_envs, kwargs))


def _make_pettingzoo(name: str, n_envs: int, kwargs: dict[str, Any]) -> BatchedEnv:
    from lero.training.envs.pettingzoo_adapter import PettingZooEnv

    options = {key: kwargs.pop(key) for key in ADAPTER_OPTIONS if key in kwargs}
    factory = load_factory(name, options.pop("import_root", None))
    return PettingZooEnv(name, factory, n_envs, factory_kwargs=kwargs, **options)
