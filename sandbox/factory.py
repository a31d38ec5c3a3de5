"""`get_sandbox`: the one place every command that runs candidate code passes. A backend on
this machine (`backends.local_sandbox`), or jobs spread over a Ray cluster."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from lero.sandbox.backends import KINDS, local_sandbox
from lero.sandbox.base import Events, Sandbox
from lero.sandbox.cache import PROCESS_SIGNER, CacheSigner
from lero.sandbox.types import SandboxUnavailable

EXECUTORS = ("local", "ray")


def get_sandbox(
    kind: str = "auto",
    cache_dir: str | os.PathLike | None = None,
    max_parallel: int = 2,
    events: Events | None = None,
    work_dir: str | os.PathLike | None = None,
    spares_per_limits: int | None = None,
    progress: Callable[[str], None] | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    env: dict[str, Any] | None = None,
    cache_signer: CacheSigner = PROCESS_SIGNER,
) -> Sandbox:
    """A sandbox backend of ``kind`` (`backends.local_sandbox` says how each is chosen).

    `executor="ray"`: train and evaluate jobs run as Ray tasks, each in the same backend on
    its node (`ray_address`: `auto`, `host:port`, or None for a new local Ray instance).
    `spares_per_limits` (Docker: containers kept warm, torch imported; None = `max_parallel`):
    fewer than the jobs that start together leaves the rest a cold start.
    `env` (a job's env dict): the env the jobs run, which picks a custom env's image layer.
    `cache_signer` (`sandbox.cache.CacheSigner`): what seals and checks the result cache's
    entries; the default's hold within this process only.
    """
    if spares_per_limits is None:
        spares_per_limits = max_parallel
    if kind not in KINDS:
        raise ValueError(f"sandbox kind must be one of {KINDS}, got {kind!r}")
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if executor == "local":
        return local_sandbox(kind, cache_dir, max_parallel, events, work_dir, spares_per_limits,
                             progress, env, cache_signer)
    # imported here: Ray is an optional extra (`pip install lero[ray]`)
    try:
        from lero.sandbox.ray_executor import RaySandbox
    except ImportError as error:
        raise SandboxUnavailable(
            f"--executor ray needs Ray ({error}); install it with: pip install 'lero[ray]'"
        ) from error
    if work_dir is None and cache_dir is not None:
        work_dir = os.path.join(cache_dir, "jobs")
    local = local_sandbox(kind, None, max_parallel, None, work_dir, spares_per_limits, progress, env)
    return RaySandbox(local, address=ray_address, cache_dir=cache_dir,
                      max_parallel=max_parallel, events=events, work_dir=work_dir, cache_signer=cache_signer)
