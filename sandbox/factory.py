"""`get_sandbox`: Docker when it can be used, else the (weaker) process backend, loudly."""

from __future__ import annotations

import logging
import os
import sys

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
    executor: str = "local",
    ray_address: str | None = None,
) -> Sandbox:
    """A sandbox backend; `docker` raises `SandboxUnavailable` when no daemon or image.

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
        local = get_sandbox(kind, None, max_parallel, None, work_dir, spares_per_limits)
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

            return DockerSandbox(spares_per_limits=spares_per_limits, **common)
        except (SandboxUnavailable, ImportError) as error:
            if kind == "docker":
                raise SandboxUnavailable(str(error)) from error
            warning = (
                f"WARNING: Docker sandbox unavailable ({error}); running LLM-written code in the "
                "much weaker PROCESS sandbox (see docs/sandbox.md)"
            )
            log.warning(warning)
            print(warning, file=sys.stderr)
    from lero.sandbox.process_backend import ProcessSandbox

    return ProcessSandbox(**common)
