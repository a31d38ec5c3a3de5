"""`check()`: which backend would a run use, and why? Daemon, image state, a contained smoke run."""

from __future__ import annotations

import tempfile

from lero.sandbox.types import Limits, SandboxUnavailable

SMOKE_SCRIPT = "import os, torch, numpy\nprint('uid', os.getuid(), 'torch', torch.__version__)\n"


def check() -> dict[str, tuple[bool, str]]:
    """{"daemon" | "backend" | "image" | "smoke": (ok, detail)}; stops at the first failure.

    `backend` is what `get_sandbox("auto")` (every `lero run`) would choose now.
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
