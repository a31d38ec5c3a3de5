"""Attack suite, round 3: what lero reuses is data from outside until proven.

A run directory copied in from another installation names the process sandbox, or carries
forged results for native's confirmation seeds in its own cache; a runs dir's shared cache
is edited by hand. Nothing of it may decide where code runs or what a run reports: the
sandbox is refused in one line until the person types it again, and a cache entry this
installation did not seal is trained again, said in one line.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from lero.agents import LLMConfig
from tests.graph.test_security_round2 import run_cli
from tests.support.cli import lero, run_files


def copy_elsewhere(runs: Path, tmp_path: Path, monkeypatch) -> Path:
    """RUNS as another installation sees it: the same bytes under another folder and key."""
    copied = tmp_path / "elsewhere" / "runs"
    shutil.copytree(runs, copied, symlinks=True)
    monkeypatch.setenv("LERO_KEY_FILE", str(tmp_path / "other-installation.key"))
    monkeypatch.chdir(copied.parent)
    return copied


def test_a_copied_runs_process_sandbox_runs_only_when_the_person_types_it(tmp_path, monkeypatch, capsys) -> None:
    from starlette.testclient import TestClient

    from lero.app.ui.app import create_app

    monkeypatch.chdir(tmp_path)
    run_cli(tmp_path, "p", capsys)  # a completed run in the process sandbox, written here
    run_cli(tmp_path, "w", capsys, "--approve", "spec")  # one waiting for its first answer
    assert lero(["resume", "p"], capsys)[0] == 0  # its own installation resumes it as it is
    copied = copy_elsewhere(tmp_path / "runs", tmp_path, monkeypatch) / "p"
    before = run_files(copied)
    for argv, command in ((["resume", "p"], "lero resume"), (["eval", "p", "--episodes", "2"], "lero eval"),
                          (["study", "p", "--seeds", "1", "--variants", "native"], "lero study")):
        code, _, err = lero(argv, capsys)
        assert code == 2 and err.count("\n") == 1, err
        assert "the stored spec names sandbox 'process'" in err and f"{command} ... --sandbox process" in err, err
    assert run_files(copied) == before and not (copied / "studies").exists() and not (copied / "evals").exists()
    waiting = run_files(copied.parent / "w")
    app = create_app("runs", "ui-token", 8765, LLMConfig.from_spec("offline"), cwd=copied.parent.parent)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:  # the UI's Resume button
        home = client.get("/?token=ui-token")
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', home.text).group(1)
        assert client.post("/runs/w/resume", data={"csrf": csrf}, follow_redirects=False).status_code == 303
        worker = app.state.workers.get("w")
        assert worker.process.wait(timeout=300) == 2
        assert "--sandbox process" in worker.error()
    app.state.workers.close()
    assert run_files(copied.parent / "w") == waiting
    # typed again, it is the person's: resume reports how the run ended, eval measures in it
    code, out, err = lero(["resume", "p", "--sandbox", "process"], capsys)
    assert code == 0 and "completed" in out, out + err
    code, out, err = lero(["eval", "p", "--episodes", "2", "--sandbox", "process"], capsys)
    assert code == 0 and "saved:" in out, out + err
