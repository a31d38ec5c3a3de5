"""`get_sandbox`: Docker when it can be used, else the (weaker) process backend, loudly."""

from __future__ import annotations

import logging
import os
import sys

from lero.sandbox.base import Events, Sandbox
from lero.sandbox.types import SandboxUnavailable

log = logging.getLogger(__name__)
KINDS = ("auto", "docker", "process")


def get_sandbox(
    kind: str = "auto",
    cache_dir: str | os.PathLike | None = None,
    max_parallel: int = 2,
    events: Events | None = None,
    work_dir: str | os.PathLike | None = None,
    spares_per_limits: int = 1,
) -> Sandbox:
    """A sandbox backend; `docker` raises `SandboxUnavailable` when no daemon or image.

    `spares_per_limits`: warm Docker containers kept per `Limits` (ignored by `process`).
    """
    if kind not in KINDS:
        raise ValueError(f"sandbox kind must be one of {KINDS}, got {kind!r}")
    common = {  # absolute: job directories are mounted / used as a child's cwd
        "cache_dir": os.path.abspath(cache_dir) if cache_dir is not None else None,
        "max_parallel": max_parallel,
        "events": events,
        "work_dir": os.path.abspath(work_dir) if work_dir is not None else None,
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
