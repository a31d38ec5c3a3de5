"""`get_sandbox`: Docker (its image built or rebuilt first when needed), else the weaker
process backend, loudly. The one place every command that runs candidate code passes."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

from lero.sandbox.base import Events, Sandbox
from lero.sandbox.types import SandboxUnavailable

log = logging.getLogger(__name__)
KINDS = ("auto", "docker", "process")
EXECUTORS = ("local", "ray")


def get_sandbox(
    kind: str = "auto",
    cache_dir: str | os.PathLike | None = None,
    max_parallel: int = 2,
    events: Events | None = None,
    work_dir: str | os.PathLike | None = None,
    spares_per_limits: int = 1,
    progress: Callable[[str], None] | None = None,
    executor: str = "local",
    ray_address: str | None = None,
) -> Sandbox:
    """A sandbox backend. `auto` and `docker` build the image first when it is missing or
    stale (`image.ensure_image`, lines to `progress`, default stderr); `auto` falls back to
    the process backend only when no Docker daemon answers, saying so on stderr; `docker`
    raises `SandboxUnavailable` then.

    `spares_per_limits`: warm Docker containers kept per `Limits` (ignored by `process`).
    `executor="ray"`: train and evaluate jobs run as Ray tasks, each in the same backend on
    its node (`ray_address`: `auto`, `host:port`, or None for a new local Ray instance).
    """
    if kind not in KINDS:
        raise ValueError(f"sandbox kind must be one of {KINDS}, got {kind!r}")
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if executor == "ray":
        # imported here: Ray is an optional extra (`pip install lero[ray]`)
        try:
            from lero.sandbox.ray_executor import RaySandbox
        except ImportError as error:
            raise SandboxUnavailable(
                f"--executor ray needs Ray ({error}); install it with: pip install 'lero[ray]'"
            ) from error
        if work_dir is None and cache_dir is not None:
            work_dir = os.path.join(cache_dir, "jobs")
        local = get_sandbox(kind, None, max_parallel, None, work_dir, spares_per_limits, progress)
        return RaySandbox(local, address=ray_address, cache_dir=cache_dir,
                          max_parallel=max_parallel, events=events, work_dir=work_dir)
    common = {
        "cache_dir": cache_dir,
        "max_parallel": max_parallel,
        "events": events,
        "work_dir": work_dir,
    }
    if kind in ("auto", "docker"):
        try:
            # imported here: the docker SDK is not needed (nor in the image) otherwise
            from lero.sandbox.docker_backend import DockerSandbox
            from lero.sandbox.image import docker_client, ensure_image

            client = docker_client()
        except (SandboxUnavailable, ImportError) as error:
            if kind == "docker":
                raise SandboxUnavailable(str(error)) from error
            warning = f"WARNING: LLM-written code runs in the much weaker PROCESS sandbox: {error}"
            log.warning(warning)
            print(warning, file=sys.stderr)
        else:
            ensure_image(log=progress or _stderr, client=client)
            return DockerSandbox(spares_per_limits=spares_per_limits, **common)
    from lero.sandbox.process_backend import ProcessSandbox

    return ProcessSandbox(**common)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
