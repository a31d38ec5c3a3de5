"""The offline loop end to end on a VMAS scenario in Docker, the README way: a temporary
working directory, the default `runs/`, `lero run --env vmas:navigation` with the README's
defaults cut down. The jobs' results carry the scenario's own info() metrics, which only a
container whose image holds `vmas` can have produced (native envs use the base image).

The image carries `vmas` when this venv has it (`sandbox/image.py`'s RUNTIME_DISTRIBUTIONS;
its tag is the digest of its inputs, so a venv with vmas and one without each keep their
own image); an image without it fails inside the jobs with the extra's one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vmas")
pytestmark = [pytest.mark.slow, pytest.mark.docker]
TINY = {"hparams": {"n_envs": 8, "rollout_len": 10, "epochs": 1}, "eval_episodes": 4}


def test_lero_run_on_vmas_navigation_in_docker(sandbox_image, tmp_path: Path) -> None:
    from lero.sandbox.image import image_inputs

    if not any(entry.startswith("vmas==") for entry in image_inputs()["distributions"]):
        pytest.fail("vmas is installed but the sandbox image's inputs lack it (RUNTIME_DISTRIBUTIONS)")
    (tmp_path / "tiny.json").write_text(json.dumps(TINY))
    command = [sys.executable, "-m", "lero.app.cli.main", "run", "--env", "vmas:navigation", "--env-arg", "n_agents=2",
               "--env-arg", "max_steps=20", "--config", "tiny.json", "--generations", "1", "--population", "2",
               "--steps", "400", "--llm", "offline", "--sandbox", "docker", "--run-id", "vmas"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    run = tmp_path / "runs" / "vmas"
    spec = json.loads((run / "spec.json").read_text())
    assert spec["sandbox"] == "docker" and spec["env"] == "vmas:navigation"
    report = json.loads((run / "report.json").read_text())
    assert report["status"] == "completed" and report["generations"][0]["valid"] >= 1
    # the train jobs' curves, as the run records them (a kept job directory holds only policies)
    records = [run / "baseline" / "result.json", *run.glob("candidates/*/result.json")]
    curves = [set(json.loads(path.read_text()).get("curves") or {}) for path in records]
    assert any({"pos_rew", "agent_collisions"} <= names for names in curves), curves
