"""Reading a copied-in run directory is bounded (security round 3): numbers no float holds
(`fitness` 10**400, NaN, Infinity) are shown as such, never a traceback or HTTP 500; a
stored spec's env arguments are checked against the env's declared limits and nothing is
built to list, report or show a run (`vmas:navigation` with 2000 agents took minutes of
CPU); a spec.sig of non-ASCII bytes is an unsigned spec, not a TypeError; compare.csv
carries run text behind a quote, so no spreadsheet runs it as a formula."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lero.agents import LLMConfig
from lero.app.ui.app import create_app
from lero.graph.rundir import RunDir
from tests.support.cli import lero

TOKEN = "ui-token"
HUGE = "1" + "0" * 400


@pytest.fixture
def workdir(tiny_runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of this test's own, its runs/ holding a copy of the tiny run `alpha`."""
    shutil.copytree(tiny_runs / "runs" / "alpha", tmp_path / "runs" / "alpha")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def copy_run(workdir: Path, run_id: str, **spec_fields: object) -> Path:
    """`alpha` copied in as RUN_ID, its spec.json edited by hand (so no longer signed here)."""
    run = workdir / "runs" / run_id
    shutil.copytree(workdir / "runs" / "alpha", run)
    spec = json.loads((run / "spec.json").read_text())
    (run / "spec.json").write_text(json.dumps({**spec, "run_id": run_id, **spec_fields}))
    return run


def set_fitness(run: Path, literal: str) -> None:
    """Every fitness of the run's result files written as LITERAL (raw JSON text)."""
    for path in [*run.glob("candidates/*/*.json"), *run.glob("baseline/*.json"), run / "report.json"]:
        path.write_text(re.sub(r'"fitness": -?[0-9.e+-]+', f'"fitness": {literal}', path.read_text()))


NUMBER = re.compile(r"(?<=[:\[,\s])-?\d+(\.\d+)?([eE][-+]?\d+)?(?=[,\n\]}\s])")


def set_every_number(run: Path, literal: str) -> None:
    """Every number of every JSON file and event line of the run but spec.json's (whose
    fields RunSpec bounds) written as LITERAL."""
    for path in [*run.rglob("*.json"), run / "events.jsonl"]:
        if path.name != "spec.json":
            path.write_text(NUMBER.sub(literal, path.read_text()))


def pages(*urls: str) -> list[int]:
    app = create_app("runs", TOKEN, 8765, LLMConfig.from_spec("offline"), cwd=Path.cwd())
    with TestClient(app, base_url="http://127.0.0.1:8765", raise_server_exceptions=False) as client:
        return [client.get(f"{url}{'&' if '?' in url else '?'}token={TOKEN}").status_code for url in urls]


def test_numbers_no_float_holds_are_shown_as_such(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for run_id, literal, shown in (("huge", HUGE, "inf"), ("nan", "NaN", "nan")):
        set_fitness(copy_run(workdir, run_id), literal)
        code, _, err = lero(["report", run_id], capsys)
        assert code == 0, err
        assert f"| baseline (native reward, raw obs) | {shown} |" in (workdir / "runs" / run_id / "report.md").read_text()
    for run_id, literal in (("everywhere", HUGE), ("nowhere", "-Infinity")):  # counts, seconds, tokens, steps, ...
        set_every_number(copy_run(workdir, run_id), literal)
        code, _, err = lero(["report", run_id], capsys)
        assert code == 0, err
    code, _, err = lero(["compare", "huge", "nan", "everywhere", "nowhere", "--out", "cmp"], capsys)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO((workdir / "cmp" / "compare.csv").read_text())))
    assert [r["baseline_fitness"] for r in rows] == ["inf", "nan", "inf", "-inf"]
    code, out, err = lero(["runs"], capsys)
    assert code == 0 and "unreadable" not in out, out
    assert pages("/", "/runs/huge", "/runs/nan", "/runs/everywhere", "/runs/nowhere", "/runs/huge/report",
                 "/runs/everywhere/candidates/0-0", "/compare?run=huge&run=nan&run=everywhere&run=nowhere",
                 "/compare/compare.csv?run=huge&run=nowhere") == [200] * 9


def test_a_stored_env_is_checked_against_its_limits_and_never_built_to_show_a_run(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy_run(workdir, "crowd", env="vmas:navigation", env_kwargs={"n_agents": 2000})
    code, _, err = lero(["report", "crowd"], capsys)
    assert code == 2 and "vmas:navigation: n_agents must be in [0, 64], got 2000" in err and err.count("\n") == 1, err
    code, out, err = lero(["runs"], capsys)
    assert code == 0 and "crowd" in out and "vmas:navigation" in out, err
    assert pages("/", "/runs/crowd", "/runs/crowd/report") == [200, 200, 200]
    # within the limits, a report still builds nothing: VMAS alone knows its scenario's
    # keywords, and an unknown one would refuse the spec if the scenario were built
    copy_run(workdir, "quiet", env="vmas:navigation", env_kwargs={"n_agents": 2, "not_an_argument": 1})
    code, _, err = lero(["report", "quiet"], capsys)
    assert code == 0, err


def test_a_spec_sig_of_non_ascii_bytes_is_an_unsigned_spec(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = workdir / "runs" / "alpha"
    rundir = RunDir(run)
    url = "http://127.0.0.1:9/v1"  # never asked: the stored URL needs confirming first
    rundir.write_spec(rundir.read_spec().model_copy(update={"llm": "openai:x", "base_url": url}))
    rundir.update_state(status="stopped", stop_reason="llm_error: the server went away")  # resumable
    assert rundir.written_here()
    (run / "spec.sig").write_bytes(b"\xff\xfe\xe9" + (run / "spec.sig").read_bytes()[3:])
    assert not rundir.written_here()
    code, _, err = lero(["resume", "alpha"], capsys)
    assert code == 2 and f"--base-url {url}" in err and err.count("\n") == 1, err
    app = create_app("runs", TOKEN, 8765, LLMConfig.from_spec("offline"), cwd=workdir)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:  # the UI's resume: its worker reads it
        home = client.get(f"/?token={TOKEN}")
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', home.text).group(1)
        assert client.post("/runs/alpha/resume", data={"csrf": csrf}, follow_redirects=False).status_code == 303
        worker = app.state.workers.get("alpha")
        assert worker.process.wait(timeout=300) == 2
        assert f"--base-url {url}" in worker.error() and "TypeError" not in worker.error()
    app.state.workers.close()


def test_compare_csv_escapes_run_text_that_a_spreadsheet_reads_as_a_formula(
        workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = copy_run(workdir, "formula")
    for path in run.glob("candidates/*/result.json"):
        result = json.loads(path.read_text())
        path.write_text(json.dumps({**result, "candidate_id": "=HYPERLINK(\"http://x\")"}))
    spec = json.loads((run / "spec.json").read_text())
    (run / "spec.json").write_text(json.dumps({**spec, "run_id": "@SUM(1)"}))
    code, _, err = lero(["compare", "formula", "alpha", "--out", "cmp"], capsys)
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO((workdir / "cmp" / "compare.csv").read_text())))
    assert rows[0]["run"] == "'@SUM(1)" and rows[0]["best_candidate"] == "'=HYPERLINK(\"http://x\")"
    assert float(rows[0]["baseline_fitness"]) < 0 and rows[1]["run"] == "alpha"  # numbers (negative ones too) stay numbers


def test_a_study_cell_planted_as_a_symlink_is_refused(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run's study reads its cells through the run's RunDir: a copied run's cell linked to a
    forged record elsewhere is refused in one line, not reused as a finished seed."""
    from lero.app.study.spec import FIRST_TRAIN_SEED

    forged = workdir / "forged.json"
    forged.write_text(json.dumps({"status": "ok", "metrics": {"return": 1000.0}}))
    cells = workdir / "runs" / "alpha" / "studies" / "s1" / "cells" / "mappo" / "native"
    cells.mkdir(parents=True)
    (cells / f"seed-{FIRST_TRAIN_SEED}.json").symlink_to(forged)
    code, _, err = lero(["study", "alpha", "--study-id", "s1", "--seeds", "1", "--variants", "native",
                         "--algos", "mappo", "--steps", "100", "--sandbox", "process"], capsys)
    assert code == 2 and "a symlink" in err and err.count("\n") == 1, err
