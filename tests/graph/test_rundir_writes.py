"""Run-directory writes under stress: concurrent writers, fsync, a full disk, two drivers.

Also the two exposure checks of `lero ui`: a warning when it binds beyond loopback, and
a token redirect that never leaves the site.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lero.agents import LLMConfig
from lero.app.cli.main import main
from lero.app.ui import serve
from lero.app.ui.app import create_app
from lero.graph.configuration import RunError, RunSpec
from lero.graph.rundir import RunDir
from lero.graph.safefs import write_atomic

TOKEN = "writes-token"


def test_two_writers_of_one_file_do_not_collide(tmp_path, monkeypatch):
    """Writer B runs while writer A sits between writing its temp file and renaming it."""
    target = tmp_path / "state.json"
    real_replace, nested = os.replace, []

    def replace(*args, **kwargs):
        if not nested:
            nested.append(True)
            write_atomic(target, "B")  # the other writer, right now
        return real_replace(*args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    write_atomic(target, "A")
    assert target.read_text() == "A" and sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_write_is_fsynced_file_and_folder(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.path.isdir(f"/proc/self/fd/{fd}")), real_fsync(fd)))
    RunDir.create(RunSpec(run_id="r1", runs_dir=str(tmp_path)))
    synced.clear()
    RunDir(tmp_path / "r1").update_state(status="failed")
    assert synced == [False, True]  # the temp file, then the folder after the rename


FULL_DISK = """
import json, resource, signal, sys
from langgraph.graph import END, START, StateGraph
from lero.app.cli.worker import JsonLinesUI
from lero.graph import runner
from lero.graph.configuration import RunSpec
from lero.graph.state import RunState

class NoContext:
    def __init__(self, spec):
        self.spec = spec

    def close(self):
        pass

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG

def node(state):  # the disk fills while a big result is written
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
    rundir.write_result("0-0", {"blob": "x" * 4 * FILE_LIMIT})
    return {}

def graph():
    g = StateGraph(RunState)
    g.add_node("design", node)
    g.add_edge(START, "design")
    g.add_edge("design", END)
    return g

rundir = None
real_create = runner.RunDir.create
def create(spec):
    global rundir
    rundir = real_create(spec)
    return rundir

runner.RunDir.create = create
runner.build_graph = graph
runner.open_context = lambda spec, rundir, confirmed=None, hooks=None, task=None: NoContext(spec)
runner.preflight = lambda spec, confirmed=None: (spec, None)
try:
    runner.start_run(RunSpec(run_id="full", runs_dir=sys.argv[1], llm="offline", sandbox="process"), JsonLinesUI())
except OSError as error:
    print(json.dumps({"errno": error.errno}))
"""


def test_a_full_disk_ends_the_run_failed_and_leaves_no_temp_file(tmp_path):
    """RLIMIT_FSIZE stands in for a full disk: every write past FILE_LIMIT bytes of a file fails."""
    script = tmp_path / "full_disk.py"
    script.write_text(textwrap.dedent(FULL_DISK).replace("FILE_LIMIT", str(256 << 10)))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "runs")], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"errno": 27}  # EFBIG: the run's own error, not a later one
    run = tmp_path / "runs" / "full"
    state = json.loads((run / "state.json").read_text())
    assert state["status"] == "failed" and "File too large" in state["stop_reason"]
    assert not [p for p in run.rglob("*") if p.name.endswith(".tmp")]
    assert not (run / "candidates" / "0-0" / "result.json").exists()


def waiting_run(runs: Path) -> RunDir:
    rundir = RunDir.create(RunSpec(run_id="r1", runs_dir=str(runs), approve="candidates", sandbox="process"))
    rundir.append_event("interrupt", kind="generation", payload={"kind": "generation", "question": "go on?"})
    rundir.update_state(status="interrupted")
    return rundir


def test_a_second_driver_of_one_run_is_refused_in_one_line(tmp_path, capsys):
    driver = waiting_run(tmp_path / "runs")
    driver.claim()  # the first driver (the UI's worker, a `lero resume`) holds the run
    with pytest.raises(RunError, match="being driven by another process"):
        RunDir(driver.path).claim()
    assert main(["resume", "r1", "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "being driven by another process" in err
    app = create_app(str(tmp_path / "runs"), TOKEN, 8765, LLMConfig.from_spec("offline"), cwd=tmp_path)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', client.get(f"/?token={TOKEN}").text).group(1)
        page = client.post("/runs/r1/resume", data={"csrf": csrf})
        assert page.status_code == 409 and "driving this run" in page.text
        assert app.state.workers.get("r1") is None  # no worker was started
    app.state.workers.close()
    driver.release()
    assert not RunDir(driver.path).is_driven()


@pytest.mark.parametrize(("host", "warned"), [("0.0.0.0", True), ("::", True), ("192.168.1.7", True),
                                              ("example.org", True), ("127.0.0.1", False), ("::1", False),
                                              ("localhost", False)])
def test_lero_ui_warns_when_it_binds_beyond_loopback(host, warned, monkeypatch):
    import socket

    import uvicorn

    from lero.app import ui

    # no address bound, no server run: only what serve says around them
    monkeypatch.setattr(ui, "bind", lambda host, port: socket.socket())
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)
    said = []
    serve("runs", host, 0, LLMConfig.from_spec("offline"), token="t", announce=said.append)
    assert [line for line in said if "warning" in line] == ([said[0]] if warned else [])
    assert said[-1] == "lero ui: stopped" and len(said) == int(warned) + 1 and (not warned or host in said[0])


@pytest.mark.parametrize("path", ["//evil.example/x", "///evil.example/x"])
def test_the_token_redirect_stays_on_the_site(tmp_path, path):
    app = create_app(str(tmp_path), TOKEN, 8765, LLMConfig.from_spec("offline"), cwd=tmp_path)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        first = client.get(f"http://127.0.0.1:8765{path}?token={TOKEN}&a=1", follow_redirects=False)
    app.state.workers.close()
    location = first.headers["location"]
    assert first.status_code == 303 and location == "/evil.example/x?a=1"
