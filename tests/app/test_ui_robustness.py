"""One bad run directory takes down neither the web UI nor `lero runs`.

A FIFO where state.json should be, JSON that is not an object, torn JSON, events that
are not UTF-8, an absurd plot name: each run that cannot be read is one row with its
reason, every other run is listed as usual, and the server keeps answering. The FIFO
case runs a real server on loopback: while the live stream of the FIFO run is open,
another page must still load (a client timeout is the failure detector, not a bound).
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from rich.console import Console
from starlette.testclient import TestClient

from lero.agents import LLMConfig
from lero.app.cli.main import main
from lero.app.ui.app import create_app
from lero.app.ui.auth import cookie_name
from lero.graph.configuration import RunSpec
from lero.graph.rundir import RunDir

TOKEN = "robust-token"
CLIENT_TIMEOUT_S = 20.0  # detects a frozen server; a working one answers at once


def good_run(runs: Path, run_id: str) -> RunDir:
    rundir = RunDir.create(RunSpec(run_id=run_id, runs_dir=str(runs), sandbox="process"))
    rundir.append_event("run_started", run_id=run_id)
    rundir.write_result("baseline", {"candidate_id": "baseline", "status": "ok", "fitness": -25.0})
    rundir.update_state(status="completed")
    return rundir


BAD_RUNS = {  # run id -> (what is planted, a word of the reason shown)
    "bad-list": ("state.json", b"[1, 2]", "not a JSON object"),
    "bad-torn-state": ("state.json", b'{"status": "runn', "corrupt JSON"),
    "bad-torn-result": ("candidates/0-0/result.json", b'{"fitness": 1', "corrupt JSON"),
}
# a count that is no number is shown as missing (graph.summary.whole), the run readable
ODD_RUNS = {"odd-types": ("state.json", b'{"llm": {"requests": "many"}}', "")}


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    good_run(root, "good")
    for run_id, (relative, content, _) in {**BAD_RUNS, **ODD_RUNS}.items():
        path = good_run(root, run_id).path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return root


@pytest.fixture
def client(runs: Path, tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(str(runs), TOKEN, 8765, LLMConfig.from_spec("offline"), cwd=tmp_path)
    with TestClient(app, base_url="http://127.0.0.1:8765") as test_client:
        test_client.get(f"/?token={TOKEN}")
        yield test_client
    app.state.workers.close()


def test_each_unreadable_run_is_one_error_row_in_the_ui(client):
    listing = client.get("/")
    assert listing.status_code == 200
    for run_id, (_, _, reason) in BAD_RUNS.items():
        assert f'href="/runs/{run_id}"' in listing.text and reason in listing.text, run_id
        page = client.get(f"/runs/{run_id}")
        assert page.status_code == 404 and reason in page.text, run_id
    assert 'href="/runs/good"' in listing.text and client.get("/runs/good").status_code == 200
    for run_id in ODD_RUNS:
        assert f'href="/runs/{run_id}"' in listing.text and client.get(f"/runs/{run_id}").status_code == 200


def test_form_error_pages_render_beside_an_unreadable_run(client):
    csrf = client.get("/").text.split('name="csrf" value="')[1].split('"')[0]
    page = client.post("/runs", data={"csrf": csrf, "algo": "nope"})
    assert page.status_code == 400 and "lero: error:" in page.text and "bad-list" in page.text


def test_events_that_are_not_utf8_do_not_hide_the_run(runs, client):
    with open(runs / "good" / "events.jsonl", "ab") as stream:
        stream.write(b'{"event": "x\xff\xfe"}\n\xff\xfe\xfd garbage\n')
    RunDir(runs / "good").append_event("after_garbage")
    assert 'href="/runs/good"' in client.get("/").text
    page = client.get("/runs/good")
    assert page.status_code == 200 and "unreadable" not in page.text


def test_a_plot_name_of_300_characters_is_404(client):
    assert client.get(f"/runs/good/plots/{'a' * 300}.png").status_code == 404


def test_lero_runs_lists_every_run_and_each_bad_one_with_its_reason(runs):
    out = io.StringIO()
    assert main(["runs", "--runs-dir", str(runs)], console=Console(file=out, width=400)) == 0
    text = out.getvalue()
    assert "good" in text and "completed" in text
    lines = text.splitlines()
    for run_id, (_, _, reason) in BAD_RUNS.items():
        row = next(line for line in lines if line.startswith(f"{run_id} "))  # the table's row
        assert "unreadable" in row, row
        note = next(line for line in lines if line.startswith(f"{run_id}: unreadable: "))  # under the table
        assert reason in note, note
    for run_id in ODD_RUNS:
        row = next(line for line in lines if line.startswith(f"{run_id} "))
        assert "unreadable" not in row and "simple_spread" in row, row


class LoopbackServer:
    """The app under uvicorn on 127.0.0.1 (port picked by the OS), in a thread."""

    def __init__(self, app) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise AssertionError("uvicorn did not start")
            self.thread.join(0.05)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.base = f"http://127.0.0.1:{port}"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def release_fifo_readers(fifo: Path) -> None:
    """Open and close the FIFO's write end: a reader stuck opening it (old code) goes on."""
    for _ in range(100):
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            return


def test_a_fifo_state_json_freezes_neither_the_stream_nor_other_pages(runs, tmp_path):
    fifo = runs / "good" / "state.json"
    fifo.unlink()
    os.mkfifo(fifo)
    app = create_app(str(runs), TOKEN, 0, LLMConfig.from_spec("offline"), cwd=tmp_path)
    server = LoopbackServer(app)
    cookies = {cookie_name(0): TOKEN}
    try:
        with httpx.Client(base_url=server.base, cookies=cookies, timeout=CLIENT_TIMEOUT_S) as stream_client, \
                stream_client.stream("GET", "/runs/good/stream") as stream:
            lines = stream.iter_lines()
            assert next(line for line in lines if line.startswith("event: state"))
            state = next(lines)
            assert '"status": "starting"' in state and "not a regular file" in state
            with httpx.Client(base_url=server.base, cookies=cookies, timeout=CLIENT_TIMEOUT_S) as other:
                listing = other.get("/")  # while the stream on the FIFO run is still open
                assert listing.status_code == 200
                assert "not a regular file" in listing.text and 'href="/runs/bad-list"' in listing.text
    finally:
        release_fifo_readers(fifo)
        server.close()
        app.state.workers.close()
