"""`local_sandbox`: the backend on this machine, Docker (its image built or rebuilt first
when needed), else the weaker process backend, loudly.

`factory.get_sandbox` uses it directly, and through `RaySandbox` on every Ray node
(`ray_executor` builds each node's backend with it), so neither of the two imports the other
for it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from lero.sandbox.base import Events, Sandbox
from lero.sandbox.cache import PROCESS_SIGNER, CacheSigner
from lero.sandbox.types import SandboxUnavailable

log = logging.getLogger(__name__)
KINDS = ("auto", "docker", "process")
# kinds that run LLM code on this host without a container: a person's choice, never a stored spec's
UNCONTAINED_KINDS = ("process",)


def local_sandbox(
    kind: str = "auto",
    cache_dir: str | os.PathLike | None = None,
    max_parallel: int = 2,
    events: Events | None = None,
    work_dir: str | os.PathLike | None = None,
    spares_per_limits: int = 1,
    progress: Callable[[str], None] | None = None,
    env: dict[str, Any] | None = None,
    cache_signer: CacheSigner = PROCESS_SIGNER,
) -> Sandbox:
    """A backend of ``kind`` on this machine. `auto` and `docker` build the image first when
    it is missing or stale (`image.ensure_image`, lines to `progress`, default stderr); `auto`
    falls back to the process backend only when no Docker daemon answers, saying so on
    stderr; `docker` raises `SandboxUnavailable` then.

    ENV (a job's env dict): a custom env runs on its own layer (`env_layer.ensure_env_layer`);
    when Docker answers but cannot serve it, `auto` raises `EnvNotServed` like `docker`: it
    never downgrades to the process backend silently.

    `spares_per_limits`: warm Docker containers kept per `Limits` (ignored by `process`).
    """
    if kind not in KINDS:
        raise ValueError(f"sandbox kind must be one of {KINDS}, got {kind!r}")
    common = {
        "cache_dir": cache_dir,
        "max_parallel": max_parallel,
        "events": events,
        "work_dir": work_dir,
        "cache_signer": cache_signer,
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
            return DockerSandbox(spares_per_limits=spares_per_limits,
                                 **_env_image(env, client, progress or _stderr), **common)
    from lero.sandbox.process_backend import ProcessSandbox

    return ProcessSandbox(**common)


def _env_image(env: dict[str, Any] | None, client: Any, log: Callable[[str], None]) -> dict[str, Any]:
    """DockerSandbox's `image` and `import_root` for ENV: the base image for a native env."""
    from lero.training.envs.registry import is_native

    if env is None or is_native(env["name"]):
        return {}
    from lero.sandbox.env_layer import ensure_env_layer

    layer = ensure_env_layer(env, client, log)
    return {"image": layer.image, "import_root": layer.import_root}


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
