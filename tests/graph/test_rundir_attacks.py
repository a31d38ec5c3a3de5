"""Attack suite, run directory: planted symlinks never reach outside the run.

A hostile run directory (a shared disk, a downloaded run) links its files to a secret
outside it. Neither the web UI nor `lero report` (the same code ends every run and
answers chat's `show_report`) may read the secret or write over the victim file; the
run's own writer refuses to write through such a link.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console
from starlette.testclient import TestClient

from lero.agents import LLMConfig
from lero.app.cli.main import main
from lero.app.reports.run_report import write_report
from lero.app.ui.app import create_app
from lero.graph.configuration import RunSpec
from lero.graph.rundir import RunDir, UnsafeFile

TOKEN = "attack-token"
SECRET = "TOP-SECRET-outside-the-run"
CODE = "import torch\n\ndef hybrid_reward(ctx):\n    return ctx.env_reward, {}\n\ndef enhance_observation(obs):\n    return obs\n"
PLANTED = {  # what a hostile run links to the secret: the file, and the page that would show it
    "plots/fitness.png": "/runs/r1/plots/fitness.png",
    "candidates/0-0/candidate.py": "/runs/r1/candidates/0-0",
    "candidates/0-0/review.md": "/runs/r1/candidates/0-0",
    "report.md": "/runs/r1/report",
}


def finished_run(runs: Path, run_id: str = "r1") -> RunDir:
    """A completed run with a scored candidate, a baseline and its report."""
    rundir = RunDir.create(RunSpec(run_id=run_id, runs_dir=str(runs), sandbox="process"))
    rundir.write_candidate("0-0", CODE, "# Reviews of candidate 0-0\n")
    rundir.write_result("0-0", {"candidate_id": "0-0", "generation": 0, "status": "ok", "fitness": -20.0,
                                "eval": {"return": -20.0}, "curves": {"steps": [0, 10], "return": [-30.0, -20.0]}})
    rundir.write_result("baseline", {"candidate_id": "baseline", "status": "ok", "fitness": -25.0})
    rundir.update_state(status="completed")
    write_report(rundir.path)
    return rundir


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


def plant(rundir: RunDir, relative: str, target: Path) -> None:
    link = rundir.path / relative
    link.unlink()
    link.symlink_to(target)


def ui(runs: Path, cwd: Path) -> TestClient:
    client = TestClient(create_app(str(runs), TOKEN, 8765, LLMConfig.from_spec("offline"), cwd=cwd),
                        base_url="http://127.0.0.1:8765")
    client.get(f"/?token={TOKEN}")
    return client


def lero_report(runs: Path, run_id: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["report", run_id, "--runs-dir", str(runs)], console=Console(file=out, width=200))
    return code, out.getvalue()


@pytest.mark.parametrize("relative", sorted(PLANTED))
def test_ui_never_serves_a_planted_symlink(tmp_path, secret, relative):
    rundir = finished_run(tmp_path / "runs")
    plant(rundir, relative, secret)
    with ui(tmp_path / "runs", tmp_path) as client:
        page = client.get(PLANTED[relative])
        assert SECRET not in page.text
        assert page.status_code == 404 and "refusing" in page.text
        assert SECRET not in client.get("/runs/r1").text and client.get("/").status_code == 200


@pytest.mark.parametrize("relative", sorted(PLANTED))
def test_lero_report_never_reads_or_writes_through_a_planted_symlink(tmp_path, secret, relative):
    rundir = finished_run(tmp_path / "runs")
    plant(rundir, relative, secret)
    code, out = lero_report(tmp_path / "runs", "r1")
    assert secret.read_text() == SECRET  # the victim outside the run is untouched
    assert SECRET not in out and SECRET not in (rundir.path / "report.json").read_text()
    if relative.endswith("review.md"):  # the report does not read reviews: it just succeeds
        assert code == 0
    else:
        assert code == 2


def test_the_run_directory_itself_may_not_be_a_symlink(tmp_path, secret, capsys):
    outside = finished_run(tmp_path / "elsewhere", "r2").path
    (outside / "report.md").write_text(SECRET)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "r2").symlink_to(outside)
    before = {p.name: p.read_bytes() for p in outside.iterdir() if p.is_file()}
    code, _ = lero_report(runs, "r2")
    assert code == 2 and "symlink" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in outside.iterdir() if p.is_file()} == before  # nothing written there
    with ui(runs, tmp_path) as client:
        for path in ("/runs/r2", "/runs/r2/report", "/runs/r2/plots/fitness.png", "/runs/r2/candidates/0-0"):
            page = client.get(path)
            assert page.status_code == 404 and SECRET not in page.text, path
        listing = client.get("/")
        assert listing.status_code == 200 and "r2" in listing.text and "symlink" in listing.text
    out = io.StringIO()
    assert main(["runs", "--runs-dir", str(runs)], console=Console(file=out, width=200)) == 0
    assert "r2" in out.getvalue() and "unreadable" in out.getvalue()


def test_the_runs_root_itself_may_be_a_symlink(tmp_path):
    finished_run(tmp_path / "real")
    (tmp_path / "runs").symlink_to(tmp_path / "real")
    assert lero_report(tmp_path / "runs", "r1")[0] == 0
    with ui(tmp_path / "runs", tmp_path) as client:
        for path in ("/runs/r1", "/runs/r1/report", "/runs/r1/plots/fitness.png", "/runs/r1/candidates/0-0"):
            assert client.get(path).status_code == 200, path


@pytest.mark.parametrize("name", ["candidate.py", "review.md", "result.json"])
def test_the_writer_refuses_to_write_through_a_planted_symlink(tmp_path, secret, name):
    rundir = finished_run(tmp_path / "runs")
    plant(rundir, f"candidates/0-0/{name}", secret)
    with pytest.raises(UnsafeFile, match="refusing"):
        if name == "result.json":
            rundir.write_result("0-0", {"fitness": 1e9})
        else:
            rundir.write_candidate("0-0", CODE if name == "candidate.py" else None,
                                   "# review\n" if name == "review.md" else None)
    assert secret.read_text() == SECRET


def test_a_symlinked_folder_inside_the_run_is_refused_too(tmp_path, secret):
    rundir = finished_run(tmp_path / "runs")
    os.rename(rundir.path / "plots", tmp_path / "old-plots")
    (rundir.path / "plots").symlink_to(secret.parent)
    assert lero_report(tmp_path / "runs", "r1")[0] == 2
    assert sorted(p.name for p in secret.parent.iterdir()) == ["secret.txt"]
    with ui(tmp_path / "runs", tmp_path) as client:
        assert client.get("/runs/r1/plots/secret.txt").status_code == 404
        assert "secret.txt" not in client.get("/runs/r1").text


def test_writes_are_atomic_renames_for_plots_and_candidate_files(tmp_path):
    """Every file of the run is replaced by a rename: a reader holding the old one keeps it whole."""
    rundir = finished_run(tmp_path / "runs")
    inodes = {p: os.stat(rundir.path / p).st_ino for p in ("plots/fitness.png", "candidates/0-0/candidate.py")}
    write_report(rundir.path)
    rundir.write_candidate("0-0", CODE + "# v2\n", "# review v2\n")
    assert all(os.stat(rundir.path / p).st_ino != inode for p, inode in inodes.items())
    assert json.loads((rundir.path / "report.json").read_text())["best"]["candidate_id"] == "0-0"
    assert not [p for p in rundir.path.rglob("*.tmp")]
