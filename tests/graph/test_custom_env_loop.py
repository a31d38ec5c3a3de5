"""Bring your own env: the whole offline LERO loop on a PettingZoo ParallelEnv of the tests'
own (`Gather` of tests/support/proof_env.py, behind a factory of this module).

`lero run --env tests.graph.test_custom_env_loop:make_rendezvous` in a temporary working
directory: the offline designer writes generic-grammar candidates, the process sandbox
validates, trains (through the PettingZoo adapter's worker processes) and evaluates them,
and the report names the task's own metrics.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.support.proof_env import Gather

SPEC = "tests.graph.test_custom_env_loop:make_rendezvous"


def make_rendezvous(**kwargs) -> Gather:
    """Rendezvous: the agents must gather at one point as fast as they can (team reward)."""
    return Gather(**{"n_agents": 3, "max_cycles": 10, **kwargs})


TINY = {"hparams": {"n_envs": 16, "rollout_len": 10, "epochs": 1}, "eval_episodes": 8}


@pytest.mark.slow
def test_offline_loop_on_a_custom_pettingzoo_env(tmp_path: Path, monkeypatch, capsys) -> None:
    import torch
    from rich.console import Console

    from lero.app.cli.main import main

    torch.set_num_threads(1)
    monkeypatch.chdir(tmp_path)
    Path("tiny.json").write_text(json.dumps(TINY))
    out = io.StringIO()
    code = main(
        ["run", "--env", SPEC, "--env-arg", "n_agents=3", "--config", "tiny.json",
         "--generations", "2", "--population", "2", "--steps", "320", "--llm", "offline",
         "--sandbox", "process", "--run-id", "byo"],
        console=Console(file=out, width=200),
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err + out.getvalue()
    run = tmp_path / "runs" / "byo"
    report = json.loads((run / "report.json").read_text())
    assert report["status"] == "completed"
    assert set(report["baseline"]["eval"]) == {"return", "episode_length"}
    assert report["baseline"]["eval"]["episode_length"] == 10.0
    assert [g["generation"] for g in report["generations"]] == [0, 1]
    assert all(g["valid"] >= 1 for g in report["generations"])
    best = (run / report["best"]["code_path"]).read_text()
    assert "# lero-generic-genome: " in best
    first = json.loads((run / "candidates" / "0-0" / "result.json").read_text())
    assert first["status"] == "ok" and set(first["eval"]) == {"return", "episode_length"}
    assert {"env", "team_mean"} & set(first["reflection_stats"])  # HRF components came back
    spec = json.loads((run / "spec.json").read_text())
    assert spec["env"] == SPEC and spec["sandbox"] == "process"
    assert (
        "Rendezvous" in (run / "report.md").read_text() or SPEC in (run / "report.md").read_text()
    )


def test_the_task_text_comes_from_the_factory_or_task(monkeypatch, tmp_path: Path) -> None:
    from lero.app.cli.args import build_parser, spec_fields
    from lero.graph.configuration import RunSpec
    from lero.graph.context import problem
    from lero.graph.trust import confirm_env

    confirmed = confirm_env(SPEC, SPEC)  # what `--env SPEC` confirms
    assert problem(RunSpec(env=SPEC), confirmed).task == make_rendezvous.__doc__
    args = build_parser().parse_args(["run", "--env", SPEC, "--task", "Meet at the origin."])
    spec = RunSpec.parse(spec_fields(args))
    described = problem(spec, confirmed)
    assert described.task == "Meet at the origin." and described.task_spec.grammar is None
    assert [(m.name, m.higher_is_better) for m in described.task_spec.metrics] == [
        ("return", True), ("episode_length", False)]
    assert ("state", "[B, 6]") in [(f.name, f.shape) for f in described.task_spec.state_fields]


@pytest.mark.docker
def test_auto_gives_a_custom_env_docker_while_a_daemon_answers(sandbox_image, tmp_path: Path,
                                                               monkeypatch) -> None:
    from lero.graph.configuration import RunSpec
    from lero.graph.context import open_sandbox
    from lero.graph.trust import confirm_env, job_env
    from tests.support.envs import proof_env_source

    monkeypatch.chdir(tmp_path)
    Path("auto_gather_env.py").write_text(proof_env_source())
    name = "auto_gather_env:make_env"
    spec = RunSpec(env=name)
    for kind in ("auto", "docker"):
        sandbox = open_sandbox(spec.model_copy(update={"sandbox": kind}), tmp_path,
                               env=job_env(spec, confirm_env(name, name)))
        try:
            assert sandbox.kind == "docker" and sandbox.image.startswith("lero-sandbox-env:")
        finally:
            sandbox.close()


@pytest.mark.docker
def test_a_custom_envs_problem_is_read_in_a_describe_job(sandbox_image, tmp_path: Path, monkeypatch) -> None:
    """The task text, spaces and state fields come from the container: the factory never runs here."""
    from lero.graph.configuration import RunSpec
    from lero.graph.context import open_sandbox, problem
    from lero.graph.trust import confirm_env, job_env
    from tests.support.envs import proof_env_source
    from tests.support.proof_env import PROOF_FILE, where

    monkeypatch.chdir(tmp_path)
    Path("described_env.py").write_text(proof_env_source())
    name = "described_env:make_env"
    spec, confirmed = RunSpec(env=name, env_kwargs={"n_agents": 3}), confirm_env(name, name)
    sandbox = open_sandbox(spec, tmp_path / "cache", env=job_env(spec, confirmed))
    try:
        described = problem(spec, confirmed, sandbox)
    finally:
        sandbox.close()
    assert not Path(PROOF_FILE).exists()  # the env's code ran in the container only
    assert described.n_agents == 3 and described.obs_dim == 6 and described.task.startswith("Gather:")
    assert ("state", "[B, 6]") in [(f.name, f.shape) for f in described.task_spec.state_fields]
    inside = f"uid={10001 if os.geteuid() == 0 else os.getuid()} dockerenv=True secret_seen=False"
    assert inside in described.env_description  # the factory said where it ran
    on_host = problem(spec, confirmed)  # the host's own reading (the process backend's); JSON has no tuples
    as_here = {**asdict(described), "env_description": described.env_description.replace(inside, where())}
    assert json.dumps(as_here, sort_keys=True) == json.dumps(asdict(on_host), sort_keys=True)
    assert Path(PROOF_FILE).exists()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ("nosuch_pkg.envs:make", "cannot import nosuch_pkg.envs"),
        (f"{SPEC.split(':')[0]}:missing", "has no attribute 'missing'"),
        ("not a spec", "unknown env 'not a spec'"),
    ],
)
def test_bad_env_specs_are_one_line_cli_errors(
    env: str, message: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    from lero.app.cli.main import main

    monkeypatch.chdir(tmp_path)
    code = main(["run", "--env", env, "--llm", "offline", "--sandbox", "process"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("lero: error: ") and message in err and "\n" not in err
    assert not (tmp_path / "runs").exists()
