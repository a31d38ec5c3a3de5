"""`check()`: which backend would a run use, and why? Daemon, image state, a contained smoke run."""

from __future__ import annotations

import tempfile
from typing import Any

from lero.sandbox.types import Limits, SandboxUnavailable

SMOKE_SCRIPT = "import os, torch, numpy\nprint('uid', os.getuid(), 'torch', torch.__version__)\n"


def check(env: dict[str, Any] | None = None) -> dict[str, tuple[bool, str]]:
    """{"daemon" | "backend" | "image" | "env" | "smoke": (ok, detail)}; stops at the first failure.

    `backend` is what `get_sandbox("auto")` (every `lero run`) would choose now; `env` (a job's
    env dict, for a custom env) whether Docker serves that env, on which layer, and why not.
    """
    from lero.sandbox.docker_backend import DockerSandbox
    from lero.sandbox.image import docker_client, image_state

    report: dict[str, tuple[bool, str]] = {}
    try:
        client = docker_client()
    except SandboxUnavailable as error:
        report["daemon"] = (False, str(error))
        report["backend"] = (False, "a run would use the much weaker PROCESS sandbox")
        return report
    report["daemon"] = (True, f"Docker {client.version().get('Version', '?')}")
    state = image_state(client)
    if state.status == "current":
        report["backend"] = (
            True,
            "a run would use Docker: the daemon answers, the image is current",
        )
    else:
        report["backend"] = (
            True,
            f"a run would use Docker after building the image ({state.status})",
        )
    if state.status != "current":
        report["image"] = (False, f"{state.detail}: `lero sandbox build` (or any run) builds it")
        return report
    report["image"] = (True, state.detail)
    if env is not None:
        report["env"] = _env_report(env, client)
        if not report["env"][0]:
            return report
    with tempfile.TemporaryDirectory(prefix="lero-check-") as work_dir:
        result = DockerSandbox(work_dir=work_dir).run_script(
            SMOKE_SCRIPT, Limits(wall_s=60, mem_mb=1024)
        )
    detail = result.stdout.strip() or result.stderr.strip()[-300:]
    report["smoke"] = (
        result.status == "ok",
        f"{result.status} in {result.elapsed_s:.2f} s: {detail}",
    )
    return report


def _env_report(env: dict[str, Any], client: Any) -> tuple[bool, str]:
    """Would a run on ENV use Docker, on which image layer (`sandbox.env_layer`), or why not?"""
    from lero.sandbox.env_layer import EnvNotServed, base_image_id, layer_exists, plan_layer
    from lero.sandbox.image import image_tag
    from lero.training.envs.registry import is_native

    if is_native(env["name"]):
        return True, f"{env['name']} is native: a run uses Docker on {image_tag()}"
    try:
        layer = plan_layer(env, base_image_id(client))
    except EnvNotServed as error:
        return False, str(error)
    when = "built" if layer_exists(client, layer) else "built by the first run"
    return True, (f"a run would use Docker on {layer.image} ({when}: {len(layer.files)} files, "
                  f"{layer.size_bytes() / 2**20:.1f} MiB on top of {image_tag()})")
