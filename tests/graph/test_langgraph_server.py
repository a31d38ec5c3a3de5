"""`langgraph dev` serves the module-level graph from langgraph.json; drive it with
langgraph_sdk through a spec-approval interrupt and a resume (local only, no network).

The server runs as its users run it: in-memory runtime, loopback, and without
`--allow-blocking`, so a blocking call on its event loop fails the run."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("langgraph_api", reason="`langgraph dev` needs langgraph-cli[inmem] (the dev extra)")
from langgraph_sdk import get_sync_client

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def server_url(request, tmp_path):
    """A `langgraph dev` server; its operator's sandbox is the test's indirect parameter
    (default the process backend)."""
    port = free_port()
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below, read on failure
    env = {**os.environ, "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false",
           "LANGCHAIN_TRACING_V2": "false", "PYTHONPATH": str(REPO),
           "LERO_RUNS_DIR": str(tmp_path / "runs"),  # the server's runs dir: its input may name no other
           "LERO_SANDBOX": getattr(request, "param", "process")}  # the operator's sandbox: a request may not choose one
    server = subprocess.Popen(
        [shutil.which("langgraph") or "langgraph", "dev", "--no-browser", "--no-reload",  # blocking calls fail
         "--port", str(port), "--config", "langgraph.json"],
        cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"langgraph dev did not start:\n{(tmp_path / 'server.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.mark.slow
def test_langgraph_dev_runs_the_graph_through_an_interrupt_and_a_resume(server_url, tmp_path):
    client = get_sync_client(url=server_url)
    thread_id = client.threads.create()["thread_id"]
    configurable = {"approve": "spec", "runs_dir": str(tmp_path / "runs"),
                    "generations": 1, "population": 1, "steps": 1600, "eval_episodes": 8,
                    "hparams": {"n_envs": 32, "epochs": 1}}

    client.runs.wait(thread_id, "lero", input={}, config={"configurable": configurable})
    state = client.threads.get_state(thread_id)
    interrupts = [i for task in state["tasks"] for i in task.get("interrupts", [])]
    assert state["next"] == ["approve_spec"] and len(interrupts) == 1
    payload = interrupts[0]["value"]
    assert payload["kind"] == "spec" and payload["spec"]["population"] == 1
    assert payload["spec"]["run_id"] == thread_id  # thread id = run id

    streamed = [part.data for part in client.runs.stream(
        thread_id, "lero", command={"resume": {"action": "approve"}}, stream_mode="custom")
        if part.event == "custom"]
    assert {"generation", "candidate", "job"} <= {event["type"] for event in streamed}
    final = client.threads.get_state(thread_id)
    assert final["next"] == [] and final["values"]["stop_reason"] is None
    run_dir = tmp_path / "runs" / thread_id
    assert json.loads((run_dir / "state.json").read_text())["status"] == "completed"
    assert json.loads((run_dir / "baseline" / "result.json").read_text())["status"] == "ok"
    assert (run_dir / "report.json").is_file()


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.parametrize("server_url", ["docker"], indirect=True)
def test_langgraph_dev_completes_a_docker_run_without_blocking_its_event_loop(sandbox_image, server_url, tmp_path):
    """The reported failure, reproduced: a small offline run on the Docker sandbox, streamed through
    `runs.stream` to its end. Closing its context removes containers through Docker's socket,
    which the server refuses on its event loop (`BlockingError`) unless done off it."""
    client = get_sync_client(url=server_url)
    thread_id = client.threads.create()["thread_id"]
    configurable = {"approve": "none", "runs_dir": str(tmp_path / "runs"),
                    "generations": 1, "population": 1, "steps": 1600, "eval_episodes": 8,
                    "hparams": {"n_envs": 32, "epochs": 1}}
    parts = list(client.runs.stream(thread_id, "lero", input={}, config={"configurable": configurable},
                                    stream_mode="values"))
    assert not [part.data for part in parts if part.event == "error"]
    runs = client.runs.list(thread_id)
    assert [run["status"] for run in runs] == ["success"]
    run_dir = tmp_path / "runs" / thread_id
    assert json.loads((run_dir / "state.json").read_text())["status"] == "completed"
