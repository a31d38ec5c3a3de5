"""`lero run` / `lero resume` / `lero runs` / `lero report` on a real tiny run: offline
designer, process sandbox, a spec approval answered through `--answer FILE`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.app.test_report import PNG_MAGIC, REPORT_KEYS
from tests.support.cli import lero

TINY_RUN = {"hparams": {"n_envs": 8, "rollout_len": 25}, "eval_episodes": 8}


@pytest.fixture(autouse=True)
def _few_threads() -> None:
    torch.set_num_threads(1)


def test_run_waits_for_approval_then_resumes_to_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY_RUN))
    runs = tmp_path / "runs"
    code, out, err = lero(
        ["run", "--config", str(config), "--generations", "1", "--population", "2",
         "--steps", "400", "--llm", "offline", "--sandbox", "process", "--approve", "spec",
         "--run-id", "tiny", "--runs-dir", str(runs)],
        capsys,
    )  # fmt: skip
    assert code == 3, err  # stdin is not a terminal: the run stops at the spec approval
    assert f"lero resume tiny --runs-dir {runs} --answer FILE" in out
    assert '{"action": "approve"} or {"action": "reject"}' in out

    answer = tmp_path / "answer.json"
    answer.write_text('{"action": "approve"}')
    code, out, err = lero(
        ["resume", "tiny", "--runs-dir", str(runs), "--answer", str(answer)], capsys
    )
    assert code == 0, err
    assert "run tiny: completed" in out

    run = runs / "tiny"
    report = json.loads((run / "report.json").read_text())
    assert set(report) == REPORT_KEYS
    assert report["status"] == "completed"
    assert report["generations"][0]["candidates"] == 2
    assert report["baseline"]["fitness"] is not None
    assert report["best"]["candidate_id"] in ("0-0", "0-1")
    assert (run / report["best"]["code_path"]).is_file()
    for png in ("fitness.png", "learning_curves.png"):
        assert (run / "plots" / png).read_bytes()[:8] == PNG_MAGIC

    code, out, _ = lero(["runs", "--runs-dir", str(runs)], capsys)
    assert code == 0 and "tiny" in out and "completed" in out
    code, out, _ = lero(["report", "tiny", "--runs-dir", str(runs)], capsys)
    assert code == 0 and str(run / "report.md") in out


def test_bad_answer_file_and_invalid_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    (runs / "r1").mkdir(parents=True)
    bad = tmp_path / "answer.json"
    bad.write_text("{approve")
    code, _, err = lero(["resume", "r1", "--runs-dir", str(runs), "--answer", str(bad)], capsys)
    assert code == 2 and err.startswith("lero: error: answer file") and err.count("\n") == 1
    code, _, err = lero(["run", "--llm", "gpt", "--runs-dir", str(runs)], capsys)
    assert code == 2 and err.count("\n") == 1 and "unknown --llm 'gpt'" in err
    code, _, err = lero(
        ["run", "--env-arg", "N=0", "--sandbox", "process", "--runs-dir", str(runs)], capsys
    )
    assert code == 2 and err.count("\n") == 1 and "N must be >= 1" in err
    assert sorted(p.name for p in runs.iterdir()) == ["r1"]  # nothing created


def test_readme_run_with_the_default_relative_runs_dir_and_a_torn_events_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lero run` as the README gives it: in a fresh directory, no --runs-dir, so `runs/`
    is relative; the sandbox must still train the baseline and the candidates. A process
    killed mid-write leaves a torn last line in events.jsonl: resume and report read past it."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "LERO_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    Path("tiny.json").write_text(json.dumps(TINY_RUN))
    code, out, err = lero(
        ["run", "--config", "tiny.json", "--generations", "1", "--population", "2",
         "--steps", "400", "--sandbox", "process", "--approve", "spec", "--run-id", "tiny"],
        capsys,
    )  # fmt: skip
    assert code == 3, err
    assert out.splitlines()[0] == "starting run tiny: llm offline, sandbox process"
    assert "lero resume tiny --answer FILE" in out  # the default runs/ needs no --runs-dir
    run = tmp_path / "runs" / "tiny"
    assert json.loads((run / "spec.json").read_text())["runs_dir"] == str(tmp_path / "runs")

    events = run / "events.jsonl"
    intact = events.read_text()
    with events.open("a") as stream:
        stream.write('{"ts": 1.0, "event": "job_fini')  # torn: no closing brace, no newline
    Path("answer.json").write_text('{"action": "approve"}')
    code, out, err = lero(["resume", "tiny", "--answer", "answer.json"], capsys)
    assert code == 0, err
    assert out.strip().splitlines()[-1] == "run tiny: completed"
    report = json.loads((run / "report.json").read_text())
    assert report["status"] == "completed"
    assert report["baseline"]["fitness"] is not None
    assert report["generations"][0]["valid"] > 0 and report["best"]["fitness"] is not None
    text = events.read_text()
    assert text.startswith(intact)  # nothing written before is lost
    from lero.graph.rundir import RunDir

    names = [e["event"] for e in RunDir(run).read_events()]
    assert "run_resumed" in names and "run_finished" in names  # appended after the torn line
    code, out, _ = lero(["report", "tiny"], capsys)
    assert code == 0 and str(run / "report.md") in out
    code, out, _ = lero(["runs"], capsys)
    assert code == 0 and "tiny" in out
