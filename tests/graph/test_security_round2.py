"""Attack suite, round 2: a stored run, a server request or an LLM tool cannot reach past
its boundary.

A copied-in run directory plants a checkpoint blob naming `os.system`, or a spec naming
a loopback listener as its LLM server or Ray cluster; a LangGraph-server request or the
chat's LLM names the sandbox, the cluster or the URL. Nothing may run, connect or send
the key; each is refused in one line (exit 2) with the run as it was.
"""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import threading
from pathlib import Path

import ormsgpack
import pytest

from lero.graph.checkpoints import LERO_CHECKPOINT_TYPES, UnsafeCheckpoint, open_saver
from lero.graph.configuration import RunError, RunSpec
from lero.graph.rundir import RunDir
from tests.graph.test_security_env import desk_with
from tests.support.cli import lero, run_files

TINY = ["--llm", "offline", "--sandbox", "process", "--generations", "1", "--population", "1", "--steps", "100"]


class Listener:
    """A loopback TCP listener that records every byte any client sends (HTTP or Ray); it
    answers 401, so a run that reached it stops at its first check, in one line."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                data = b""
                try:
                    while b"\r\n\r\n" not in data and len(data) < 65536:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    conn.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    pass
                self.received.append(data)

    def close(self) -> None:
        self.socket.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


def run_cli(tmp_path: Path, run_id: str, capsys, *extra: str) -> Path:
    code, out, err = lero(["run", *TINY, "--run-id", run_id, *extra], capsys)
    assert code in (0, 3), out + err
    return tmp_path / "runs" / run_id


# ---------------------------------------------------------------- checkpoints


def plant_system_call(checkpoints: Path, command: str) -> None:
    """Put one msgpack extension object naming ("os", "system", command) into the
    `channel_values` of the run's latest checkpoint, every other byte kept."""
    keep = lambda code, data: ormsgpack.Ext(code, data)  # noqa: E731 - nested ext objects stay as stored
    with sqlite3.connect(checkpoints) as db:
        checkpoint_id, blob = db.execute(
            "SELECT checkpoint_id, checkpoint FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1").fetchone()
        checkpoint = ormsgpack.unpackb(blob, ext_hook=keep, option=ormsgpack.OPT_NON_STR_KEYS)
        checkpoint["channel_values"]["planted"] = ormsgpack.Ext(0, ormsgpack.packb(("os", "system", command)))
        db.execute("UPDATE checkpoints SET checkpoint = ? WHERE checkpoint_id = ?",
                   (ormsgpack.packb(checkpoint, option=ormsgpack.OPT_NON_STR_KEYS), checkpoint_id))
    db.close()


def test_a_planted_checkpoint_blob_is_refused_and_runs_nothing(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    run = run_cli(tmp_path, "c", capsys)  # a real run: LangGraph's SqliteSaver wrote its checkpoints
    marker = tmp_path / "MARKER"
    plant_system_call(run / "checkpoints.sqlite", f"touch {marker}")
    before = run_files(run)
    code, _, err = lero(["resume", "c"], capsys)
    assert code == 2 and "names os.system" in err and err.count("\n") == 1, err
    assert not marker.exists()
    assert run_files(run) == before  # no event, no state change, the database as it was
    with open_saver(run / "checkpoints.sqlite") as saver, pytest.raises(UnsafeCheckpoint, match=r"os\.system"):
        saver.get_tuple({"configurable": {"thread_id": "c"}})  # the saver the drive uses refuses it too
    assert not marker.exists()


def test_the_allow_list_covers_what_a_real_run_stores(tmp_path, monkeypatch, capsys) -> None:
    """A run waiting at each approval and its answers (Interrupt, Command, Send) still resume."""
    monkeypatch.chdir(tmp_path)
    run = run_cli(tmp_path, "w", capsys, "--approve", "all")
    answer = tmp_path / "approve.json"
    answer.write_text(json.dumps({"action": "approve"}))
    for _ in range(4):
        code, out, err = lero(["resume", "w", "--answer", str(answer)], capsys)
        if code == 0:
            break
        assert code == 3, out + err
    assert code == 0 and "run w: completed" in out, out + err
    named = set()
    with sqlite3.connect(run / "checkpoints.sqlite") as db:
        def note(code: int, data: bytes) -> None:
            named.add(tuple(ormsgpack.unpackb(data, ext_hook=note)[:2]))
        for (blob,) in db.execute("SELECT value FROM writes WHERE type = 'msgpack'"):
            ormsgpack.unpackb(blob, ext_hook=note, option=ormsgpack.OPT_NON_STR_KEYS)
    db.close()
    assert named and named <= LERO_CHECKPOINT_TYPES, named


# ---------------------------------------------------------------- a stored spec's URL and cluster


def edit_spec(run: Path, **fields) -> None:
    """What a copied-in (or hand-edited) run directory says: fields no installation signed."""
    spec = json.loads((run / "spec.json").read_text())
    (run / "spec.json").write_text(json.dumps({**spec, **fields}))


def test_a_stored_base_url_gets_no_key_until_confirmed(tmp_path, monkeypatch, capsys, listener) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "canary-key")
    run = run_cli(tmp_path, "w", capsys, "--approve", "spec")
    edit_spec(run, llm="openai:x", base_url=listener.url)
    answer = tmp_path / "a.json"
    answer.write_text(json.dumps({"action": "approve"}))
    before = run_files(run)
    code, _, err = lero(["resume", "w", "--answer", str(answer)], capsys)
    assert code == 2 and f"--base-url {listener.url}" in err and err.count("\n") == 1, err
    assert listener.received == [] and run_files(run) == before
    # the person gives it again: now it is theirs, and the server is asked (it answers 401)
    code, _, err = lero(["resume", "w", "--answer", str(answer), "--base-url", listener.url, "--sandbox", "process"],
                        capsys)
    assert code == 2 and "refused the key" in err and any(b"canary-key" in r for r in listener.received), err


def test_a_run_this_installation_wrote_keeps_its_url_a_copied_one_does_not(
        tmp_path, monkeypatch, capsys, listener) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "canary-key")
    run = run_cli(tmp_path, "w", capsys, "--approve", "spec")
    rundir = RunDir(run)
    rundir.write_spec(rundir.read_spec().model_copy(update={"llm": "openai:x", "base_url": listener.url}))
    assert rundir.written_here()
    copied = tmp_path / "elsewhere" / "runs" / "w"
    shutil.copytree(run, copied)
    code, _, err = lero(["resume", "w"], capsys)  # its own run after a crash: no flag needed
    assert code == 2 and "refused the key" in err and listener.received, err  # it asked its own server
    asked = len(listener.received)
    monkeypatch.setenv("LERO_KEY_FILE", str(tmp_path / "other-installation.key"))
    monkeypatch.chdir(copied.parent.parent)
    code, _, err = lero(["resume", "w"], capsys)  # the same bytes on another installation
    assert code == 2 and "--base-url" in err and len(listener.received) == asked, err


@pytest.mark.parametrize("command", ["resume", "study"])
def test_a_stored_ray_cluster_is_not_contacted_until_confirmed(tmp_path, monkeypatch, capsys, listener,
                                                               command) -> None:
    monkeypatch.chdir(tmp_path)
    run = run_cli(tmp_path, "r", capsys)
    edit_spec(run, executor="ray", ray_address=f"127.0.0.1:{listener.port}")
    before = run_files(run)
    argv = ["resume", "r"] if command == "resume" else ["study", "r", "--seeds", "1", "--variants", "native"]
    code, _, err = lero(argv, capsys)
    assert code == 2 and "--executor ray" in err and err.count("\n") == 1, err
    assert listener.received == [] and run_files(run) == before
    assert not (run / "studies").exists()


# ---------------------------------------------------------------- the server's request, the chat's LLM


@pytest.mark.parametrize(("fields", "needle"), [
    ({"sandbox": "process"}, "may not choose sandbox"),
    ({"executor": "ray"}, "may not choose executor"),
    ({"executor": "ray", "ray_address": "10.0.0.1:6379"}, "may not choose executor"),
    ({"base_url": "http://127.0.0.1:9/v1"}, "may not choose base_url"),
    ({"job_timeout_s": 86400}, "over this server's cap of 3600"),
    ({"max_parallel": 64}, "over this server's cap of 2"),
    ({"disk_budget_mb": 1e9}, "over this server's cap of 10240"),
])
def test_a_server_request_chooses_no_sandbox_cluster_url_or_big_budget(tmp_path, monkeypatch, fields, needle):
    from lero.graph.server import server_spec

    monkeypatch.chdir(tmp_path)  # the server's runs dir: `runs` in its working directory
    monkeypatch.setenv("LERO_MAX_PARALLEL", "2")
    for request in ({"spec": {**fields, "run_id": "s1"}}, {}):
        config = {"configurable": {"thread_id": "s1", **(fields if not request else {})}}
        with pytest.raises(RunError, match=needle):
            server_spec(request, config)
    assert not (tmp_path / "runs").exists()


def test_the_servers_operator_chooses_them(tmp_path, monkeypatch) -> None:
    from lero.graph.server import server_spec

    monkeypatch.chdir(tmp_path)  # the server's runs dir: `runs` in its working directory
    monkeypatch.setenv("LERO_SANDBOX", "process")
    spec = server_spec({}, {"configurable": {"thread_id": "s2", "max_parallel": 1}})
    assert (spec.sandbox, spec.executor, spec.base_url, spec.max_parallel) == ("process", "local", None, 1)
    assert server_spec({"spec": spec.model_dump(mode="json")}, {}).sandbox == "process"  # its stored spec


def test_the_chat_llm_cannot_choose_the_sandbox_cluster_or_url(tmp_path) -> None:
    desk = desk_with("", tmp_path / "runs")
    for updates in ({"sandbox": "docker"}, {"executor": "ray"}, {"ray_address": "10.0.0.1:6379"},
                    {"base_url": "http://127.0.0.1:9/v1"}, {"job_timeout_s": 86400}, {"max_parallel": 64}):
        answer = desk.call("set_fields", {"updates": updates})
        assert answer.startswith("not changed:") and "cannot be changed from the chat" in answer, answer
    assert desk.spec == RunSpec.parse(desk.fields) and desk.spec.sandbox == "process"
    assert desk.typed_fields({"max_parallel": 2}).startswith("updated")  # what the person types


# ---------------------------------------------------------------- symlinks inside a stored run


def backend(request, name: str) -> str:
    if name == "docker":
        request.getfixturevalue("sandbox_image")
    return name


@pytest.mark.parametrize("sandbox", ["process", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_linked_jobs_folder_gets_no_job_directories(tmp_path, monkeypatch, capsys, request, sandbox) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = lero(["run", *TINY, "--sandbox", backend(request, sandbox), "--run-id", "j",
                           "--approve", "spec"], capsys)
    assert code == 3, out + err
    run, elsewhere = tmp_path / "runs" / "j", tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(run / "cache" / "jobs", ignore_errors=True)
    (run / "cache").mkdir(exist_ok=True)
    (run / "cache" / "jobs").symlink_to(elsewhere)
    answer = tmp_path / "a.json"
    answer.write_text(json.dumps({"action": "approve"}))
    code, _, err = lero(["resume", "j", "--answer", str(answer)], capsys)
    assert code == 2 and "a symlink" in err and err.count("\n") == 1, err
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("planted", ["studies", "studies/s1", "studies/s1/cells"])
def test_a_linked_studies_folder_gets_no_study(tmp_path, monkeypatch, capsys, planted) -> None:
    monkeypatch.chdir(tmp_path)
    run = run_cli(tmp_path, "s", capsys)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / planted).parent.mkdir(parents=True, exist_ok=True)
    (run / planted).symlink_to(elsewhere)
    code, _, err = lero(["study", "s", "--study-id", "s1", "--seeds", "1", "--variants", "native",
                         "--steps", "100"], capsys)
    assert code == 2 and "a symlink" in err and err.count("\n") == 1, err
    assert list(elsewhere.iterdir()) == []


# ---------------------------------------------------------------- the events stream


def test_a_line_over_a_mib_does_not_stop_the_live_stream(tmp_path) -> None:
    import httpx

    from lero.agents import LLMConfig
    from lero.app.ui.app import create_app
    from lero.app.ui.auth import cookie_name
    from tests.app.test_ui_robustness import CLIENT_TIMEOUT_S, TOKEN, LoopbackServer, good_run

    rundir = good_run(tmp_path / "runs", "big")
    for index in range(47):
        rundir.append_event("note", index=index, blob="x" * (3 << 19) if index == 2 else "")  # 1.5 MiB
    app = create_app(str(tmp_path / "runs"), TOKEN, 0, LLMConfig.from_spec("offline"), cwd=tmp_path)
    server = LoopbackServer(app)
    try:
        with httpx.Client(base_url=server.base, cookies={cookie_name(0): TOKEN}, timeout=CLIENT_TIMEOUT_S) as client, \
                client.stream("GET", "/runs/big/stream") as stream:
            seen = []
            for line in stream.iter_lines():
                if line.startswith("data: ") and '"event": "note"' in line:
                    seen.append(json.loads(line[6:])["index"])
                    if seen[-1] == 46:
                        break
    finally:
        server.close()
        app.state.workers.close()
    assert seen == [i for i in range(47) if i != 2]  # every event but the oversized line, in order


def test_an_approval_event_carries_code_by_reference(tmp_path, monkeypatch, capsys) -> None:
    from lero.app.ui.views import pending_question
    from lero.graph.summary import load_run

    monkeypatch.chdir(tmp_path)
    run = run_cli(tmp_path, "a", capsys, "--approve", "candidates")
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    asked = [e for e in events if e["event"] == "interrupt"][-1]["payload"]["candidates"]
    assert asked and all("code" not in c and c["code_file"] == f"candidates/{c['candidate_id']}/candidate.py"
                         for c in asked)
    shown = pending_question(load_run(run))["candidates"]  # the UI's form reads the code back
    assert [c["code"] for c in shown] == [(run / c["code_file"]).read_text() for c in asked]


def test_the_ui_resume_of_a_copied_run_sends_no_key(tmp_path, monkeypatch, capsys, listener) -> None:
    import re

    from starlette.testclient import TestClient

    from lero.agents import LLMConfig
    from lero.app.ui.app import create_app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "canary-key")
    run = run_cli(tmp_path, "u", capsys, "--approve", "spec")
    edit_spec(run, llm="openai:x", base_url=listener.url)
    app = create_app("runs", "ui-token", 8765, LLMConfig.from_spec("offline"), cwd=tmp_path)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        home = client.get("/?token=ui-token")
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', home.text).group(1)
        assert client.post("/runs/u/resume", data={"csrf": csrf}, follow_redirects=False).status_code == 303
        worker = app.state.workers.get("u")
        assert worker.process.wait(timeout=300) == 2
        assert f"--base-url {listener.url}" in worker.error()
    app.state.workers.close()
    assert listener.received == []


def test_read_events_tail_keeps_whole_lines_only(tmp_path) -> None:
    from lero.graph.rundir import RunDir

    rundir = RunDir(tmp_path / "r")
    rundir.path.mkdir()
    lines = [json.dumps({"event": "note", "index": i}).encode() + b"\n" for i in range(5)]
    (rundir.path / "events.jsonl").write_bytes(b"".join(lines))
    whole = b"".join(lines)
    for tail in range(1, len(whole) + 3):
        shown = [e["index"] for e in rundir.read_events(tail)]
        kept = whole[-tail:] if tail < len(whole) else whole
        expected = [i for i, line in enumerate(lines) if whole.index(line) >= len(whole) - len(kept)]
        assert shown == expected, tail  # exactly the lines that lie wholly inside the tail
    assert rundir.read_events() == rundir.read_events(len(whole))


def test_a_page_load_parses_only_the_tail_of_a_long_events_file(tmp_path, monkeypatch) -> None:
    from starlette.testclient import TestClient

    from lero.agents import LLMConfig
    from lero.app.ui import views
    from lero.app.ui.app import create_app
    from lero.app.ui.auth import cookie_name
    from lero.graph import rundir as rundir_module
    from tests.app.test_ui_robustness import TOKEN, good_run

    rundir = good_run(tmp_path / "runs", "long")
    with (rundir.path / "events.jsonl").open("ab") as events:  # 24 MiB of old events, then one new
        old = json.dumps({"ts": 0, "event": "note", "blob": "x" * 4000}).encode() + b"\n"
        events.write(old * ((24 << 20) // len(old)))
    rundir.append_event("note", index="newest")
    parsed: list[int] = []
    real_parse = rundir_module.parse_events
    monkeypatch.setattr(rundir_module, "parse_events", lambda data: parsed.append(len(data)) or real_parse(data))
    app = create_app(str(tmp_path / "runs"), TOKEN, 0, LLMConfig.from_spec("offline"), cwd=tmp_path)
    try:
        with TestClient(app, cookies={cookie_name(0): TOKEN}) as client:
            assert client.get("/").status_code == 200
            assert client.get("/runs/long").status_code == 200
    finally:
        app.state.workers.close()
    assert parsed and max(parsed) <= views.EVENTS_PAGE_TAIL  # never the whole 24 MiB
    assert any(e.get("index") == "newest" for e in rundir.read_events(views.EVENTS_PAGE_TAIL))
