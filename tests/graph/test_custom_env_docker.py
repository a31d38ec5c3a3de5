"""Bring your own env, the README way, behind the Docker boundary.

In a temporary working directory with the default `runs/`, `lero run --sandbox auto` on
(a) an env module in the working directory, (b) an env package pip-installed into a
virtualenv of its own with a `lero.envs` entry point (run by that virtualenv's Python),
(c) an env that imports pure-Python dependencies the base image lacks (one from a wheel, one
an editable install whose source lives outside site-packages, in one virtualenv). The proof comes
from inside the jobs: the env's own code (tests/support/proof_env.py) records its uid,
working directory and the container marker in each job directory, and whether a
variable planted in the host's environment reached it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.envs import (
    layered_venv,
    pip_install,
    proof_env_source,
    write_project,
    write_wheel,
)
from tests.support.proof_env import PROOF_FILE, SECRET_VARIABLE

pytestmark = [pytest.mark.slow, pytest.mark.docker]
TINY = {"hparams": {"n_envs": 8, "rollout_len": 8, "epochs": 1}, "eval_episodes": 4}
SANDBOX_UID = 10001


def run_lero(python: str, env: str, cwd: Path) -> subprocess.CompletedProcess:
    """`lero run` as a person types it, with a secret planted in the host's environment."""
    (cwd / "tiny.json").write_text(json.dumps(TINY))
    command = [python, "-m", "lero.app.cli.main", "run", "--env", env, "--config", "tiny.json",
               "--generations", "1", "--population", "1", "--steps", "128", "--llm", "offline",
               "--sandbox", "auto", "--run-id", "byo"]  # fmt: skip
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, SECRET_VARIABLE: "host-only-value"})  # fmt: skip


def inside_the_container(**extra: object) -> dict:
    """What the proof env must find wherever lero runs it (else its factory raises, the job
    fails and `assert_ran_inside` sees it): the sandbox user, /job, a container, no host secret."""
    uid = SANDBOX_UID if os.geteuid() == 0 else os.getuid()
    return {"uid": uid, "cwd": "/job", "dockerenv": True, "secret_seen": False, **extra}


def assert_ran_inside(cwd: Path) -> None:
    """The run completed in Docker with its baseline and candidate valid, so every job's
    factory call met `inside_the_container`; nothing of the env's ran in the host's cwd."""
    run = cwd / "runs" / "byo"
    report = json.loads((run / "report.json").read_text())
    assert report["status"] == "completed" and report["generations"][0]["valid"] == 1
    assert report["baseline"]["fitness"] is not None
    assert json.loads((run / "spec.json").read_text())["sandbox"] == "docker"
    assert not (cwd / PROOF_FILE).exists()  # never on the host: its task was read in a describe job


def test_an_env_module_in_the_working_directory(sandbox_image, tmp_path: Path) -> None:
    (tmp_path / "gather_env.py").write_text(proof_env_source(expect=inside_the_container()))
    (tmp_path / "notes.txt").write_text("not the env's: stays on the host")
    done = run_lero(sys.executable, "gather_env:make_env", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_ran_inside(tmp_path)


def test_an_env_package_installed_into_a_virtualenv(sandbox_image, tmp_path: Path) -> None:
    wheel = write_wheel(tmp_path, "lero-gather-pkg", {"lero_gather_pkg/__init__.py": proof_env_source(expect=inside_the_container())},
                        requires=("pettingzoo",), entry_points="[lero.envs]\ngather_pkg = lero_gather_pkg:make_env\n")
    python = layered_venv(tmp_path / "venv")
    pip_install(python, wheel)
    work = tmp_path / "work"
    work.mkdir()
    done = run_lero(str(python), "gather_pkg", work)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_ran_inside(work)


def test_an_env_that_needs_dependencies_the_base_image_lacks(sandbox_image, tmp_path: Path) -> None:
    """Two dependencies in one virtualenv and one run: one from a wheel, one by `pip install
    -e` (setuptools' finder hook: its source lives outside site-packages, and the layer must
    bring it). Every job's factory imports both and checks their marks inside."""
    python = layered_venv(tmp_path / "venv")
    pip_install(python, write_wheel(tmp_path, "tiny-gather-wheel", {"tiny_gather_wheel/__init__.py": 'MARK = "wheel-inside"\n'}))
    editable = write_project(tmp_path, "tiny-gather-editable", {"tiny_gather_editable/__init__.py": 'MARK = "editable-inside"\n'})
    pip_install(python, editable, editable=True)
    assert list((tmp_path / "venv").glob("lib/*/site-packages/__editable___*_finder.py"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "gather_dep.py").write_text(proof_env_source(
        "tiny_gather_wheel", "tiny_gather_editable",
        expect=inside_the_container(dependencies=["wheel-inside", "editable-inside"])))
    done = run_lero(str(python), "gather_dep:make_env", work)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_ran_inside(work)


def test_the_chat_reads_checks_and_measures_a_custom_env_in_the_sandbox(sandbox_image, tmp_path: Path,
                                                                          monkeypatch) -> None:
    """`lero chat`'s desk (the web UI's too) builds a custom env where its run would: the
    argument check, the cost estimate and the description never call its factory here."""
    import io

    from rich.console import Console

    from lero.app.chat.desk import ExperimentDesk
    from lero.app.chat.dialogues import guided_dialogue
    from lero.app.console.approvals import Asker

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(SECRET_VARIABLE, "host-only-value")
    (tmp_path / "chat_gather_env.py").write_text(proof_env_source())
    name = "chat_gather_env:make_env"
    # env, its arguments (a bad one first: asked again, the refused one not offered as the
    # default), algo, generations, population, steps, seeds, approvals
    answers = f"other\n{name}\nn_agents=x\nother\n{name}\nn_agents=3\n\n1\n1\n128\n1\n\n"
    out = io.StringIO()
    desk = ExperimentDesk(Asker(Console(file=out, width=200), io.StringIO(answers)),
                          base={"runs_dir": str(tmp_path / "runs"), **TINY})
    assert guided_dialogue(desk), out.getvalue()
    assert (desk.spec.env, desk.spec.env_kwargs, desk.spec.sandbox) == (name, {"n_agents": 3}, "auto")
    text = out.getvalue()
    assert "cannot build environment" in text and "steps/s measured here" in text
    description = desk.describe_environment()
    assert not (tmp_path / PROOF_FILE).exists(), "the env's factory ran on the host"
    expected_uid = SANDBOX_UID if os.geteuid() == 0 else os.getuid()
    assert f"uid={expected_uid} dockerenv=True secret_seen=False" in description  # written inside the job
    assert "N=3 agents" in description


def test_a_start_reads_a_custom_env_in_one_describe_job(sandbox_image, tmp_path: Path, monkeypatch) -> None:
    """The preflight reads the env (a describe job in Docker) and the run's context takes
    what it read: one describe job per start (two before: the context read it again)."""
    from lero.graph.configuration import RunSpec
    from lero.graph.runner import start_run
    from lero.sandbox.base import Sandbox

    monkeypatch.chdir(tmp_path)
    (tmp_path / "once_gather_env.py").write_text(proof_env_source(expect=inside_the_container()))
    name = "once_gather_env:make_env"
    kinds: list[str] = []
    run_job = Sandbox.run_job

    def counted(sandbox: Sandbox, job):  # the real job, counted on its way in
        kinds.append(job.kind)
        return run_job(sandbox, job)

    monkeypatch.setattr(Sandbox, "run_job", counted)
    spec = RunSpec.parse({**TINY, "env": name, "sandbox": "docker", "llm": "offline", "approve": "spec",
                          "generations": 1, "population": 1, "steps": 128, "run_id": "once", "runs_dir": "runs"})

    class Waiting:  # answers nothing: the run waits at its spec approval, before any compute
        def on_event(self, event: dict) -> None:
            """Not needed here."""

        def ask(self, payload: dict) -> None:
            return None

    outcome = start_run(spec, Waiting(), confirm=name)
    assert (outcome.status, outcome.interrupt["kind"]) == ("interrupted", "spec")
    assert "dockerenv=True" in outcome.interrupt["env_description"]  # read inside the one describe job
    assert kinds == ["describe"]
