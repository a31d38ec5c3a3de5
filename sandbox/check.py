"""`check()`: is the Docker sandbox usable here? Daemon, image, and a contained smoke run."""

from __future__ import annotations

import tempfile

from lero.sandbox.types import Limits, SandboxUnavailable

SMOKE_SCRIPT = "import os, torch, numpy\nprint('uid', os.getuid(), 'torch', torch.__version__)\n"


def check() -> dict[str, tuple[bool, str]]:
    """{"daemon" | "image" | "smoke": (ok, detail)}; stops at the first failure."""
    from lero.sandbox.docker_backend import DockerSandbox
    from lero.sandbox.image import IMAGE, docker_client, image_exists

    report: dict[str, tuple[bool, str]] = {}
    try:
        client = docker_client()
    except SandboxUnavailable as error:
        report["daemon"] = (False, str(error))
        return report
    report["daemon"] = (True, f"Docker {client.version().get('Version', '?')}")
    if not image_exists(client):
        report["image"] = (False, f"{IMAGE} missing: run `lero sandbox build`")
        return report
    report["image"] = (True, IMAGE)
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
