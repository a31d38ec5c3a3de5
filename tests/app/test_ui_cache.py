"""The web UI's page cache (app.ui.page_cache): a kept page is reused only while its run's files
are unchanged, so a changed run always shows its new data. Clocks are forced (the racy
window is judged against them), never waited on; files are aged with os.utime."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lero.agents import LLMConfig
from lero.app.reports import run_report as report
from lero.app.ui import app as ui_app
from lero.app.ui.app import create_app
from lero.app.ui.page_cache import RACY_NS, RunCache, fingerprint
from lero.graph.configuration import RunSpec
from lero.graph.rundir import RunDir

TOKEN = "test-token-123"
OLD = 1_600_000_000 * 10**9  # 2020-09-13, in ns


def age(run_dir: Path, stamp: int = OLD) -> int:
    """Every entry's mtime set to one old STAMP (a run written long ago, or copied with its
    mtimes kept): the same after every change, so only what a change does to names, inodes
    and sizes can tell it."""
    for folder, dirs, files in os.walk(run_dir):
        for name in [*dirs, *files]:
            os.utime(Path(folder) / name, ns=(stamp, stamp), follow_symlinks=False)
    os.utime(run_dir, ns=(stamp, stamp))
    return stamp


def finished_run(runs_dir: Path, run_id: str = "r1") -> RunDir:
    rundir = RunDir.create(RunSpec(run_id=run_id, runs_dir=str(runs_dir), approve="none", sandbox="process"))
    rundir.write_result("baseline", {"candidate_id": "baseline", "fitness": -20.0})
    rundir.append_event("run_started")
    rundir.update_state(status="completed", generation=2)
    age(rundir.path)
    return rundir


class Counted:
    def __init__(self) -> None:
        self.builds = 0

    def __call__(self) -> int:
        self.builds += 1
        return self.builds


def test_a_value_is_kept_while_the_run_is_unchanged_and_rebuilt_after_any_change(tmp_path):
    rundir = finished_run(tmp_path)
    cache: RunCache[int] = RunCache(clock=lambda: time.time_ns())
    build = Counted()
    assert [cache.get(rundir.path, "row", build) for _ in range(3)] == [1, 1, 1]

    def changed(touch) -> int:
        touch()
        age(rundir.path)  # the change is old news: only what the file now is can tell it
        return cache.get(rundir.path, "row", build)

    assert changed(lambda: rundir.append_event("note")) == 2  # an appended event
    assert changed(lambda: rundir.update_state(status="completed", generation=2)) == 3  # a replaced file, same size
    assert changed(lambda: rundir.write_candidate("0-0", "x = 1\n", None)) == 4  # a new candidate
    assert changed(lambda: (rundir.path / "plots").mkdir()) == 5  # a new folder
    assert cache.get(rundir.path, "row", build) == 5
    assert cache.get(rundir.path, "another kind", build) == 6  # kinds are kept apart

    # a candidate's own files are not listed: a result written into its folder shows through
    # that folder's mtime, as the write left it (the clock past the racy window)
    cache.clock = lambda: time.time_ns() + RACY_NS
    rundir.write_result("0-0", {"fitness": 1.0})
    assert cache.get(rundir.path, "row", build) == 7
    assert cache.get(rundir.path, "row", build) == 7


def test_a_planted_symlink_changes_the_fingerprint(tmp_path):
    rundir = finished_run(tmp_path)
    before = fingerprint(rundir.path)
    (rundir.path / "state.json").unlink()
    (rundir.path / "state.json").symlink_to("/etc/passwd")
    age(rundir.path)
    assert fingerprint(rundir.path) not in (None, before)


def test_a_run_written_within_the_racy_window_is_never_kept(tmp_path):
    rundir = finished_run(tmp_path)
    newest = age(rundir.path)
    assert fingerprint(rundir.path, newest + RACY_NS - 1) is None
    assert fingerprint(rundir.path, newest + RACY_NS) is not None
    cache: RunCache[int] = RunCache(clock=lambda: newest + RACY_NS // 2)  # the run was just written
    build = Counted()
    assert [cache.get(rundir.path, "row", build) for _ in range(3)] == [1, 2, 3]


def test_a_value_built_while_the_run_changed_is_not_kept(tmp_path):
    rundir = finished_run(tmp_path)
    cache: RunCache[int] = RunCache()
    build = Counted()

    def build_while_written() -> int:
        rundir.append_event("note")
        age(rundir.path)
        return build()

    assert cache.get(rundir.path, "row", build_while_written) == 1
    assert cache.get(rundir.path, "row", build) == 2  # the first one read a run that moved under it


def test_an_exception_keeps_nothing_and_the_limit_drops_the_oldest(tmp_path):
    runs = [finished_run(tmp_path, f"r{index}") for index in range(3)]
    cache: RunCache[int] = RunCache(limit=2)

    def fail() -> int:
        raise ValueError("refused")

    with pytest.raises(ValueError):
        cache.get(runs[0].path, "row", fail)
    build = Counted()
    assert [cache.get(r.path, "row", build) for r in runs] == [1, 2, 3]
    assert cache.get(runs[2].path, "row", build) == 3  # kept
    assert cache.get(runs[0].path, "row", build) == 4  # the oldest was dropped


@pytest.fixture
def client(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = create_app("runs", TOKEN, 8765, LLMConfig.from_spec("offline"), cwd=tmp_path)
    with TestClient(app, base_url="http://127.0.0.1:8765") as test_client:
        test_client.get(f"/?token={TOKEN}")
        yield test_client
    app.state.workers.close()


def test_the_list_and_the_run_page_parse_a_run_once_and_show_its_change(client, tmp_path, monkeypatch):
    rundir = finished_run(tmp_path / "runs")
    loads: list[str] = []

    def counted(module) -> None:
        real = module.load_run
        monkeypatch.setattr(module, "load_run", lambda *args: loads.append(module.__name__) or real(*args))

    counted(report)  # the list's reader (app.reports.run_report.run_rows)
    counted(ui_app)  # the run page's
    for _ in range(3):
        assert "completed" in client.get("/").text and client.get("/runs/r1").status_code == 200
    assert loads == ["lero.app.reports.run_report", "lero.app.ui.app"]  # each parsed the run once

    rundir.update_state(status="failed", generation=2)  # just written, in the racy window
    assert "failed" in client.get("/").text and "failed" in client.get("/runs/r1").text
    rundir.update_state(status="stopped", generation=2)
    age(rundir.path, OLD + 1)  # written later than the kept one (a freed inode may be reused)
    assert "stopped" in client.get("/").text and "stopped" in client.get("/runs/r1").text
    assert "failed" not in client.get("/runs/r1").text


def test_concurrent_requests_share_the_next_computation_never_an_older_one() -> None:
    """Forced events: the computation blocks until the test lets it finish."""
    import asyncio
    import threading

    from lero.app.ui.page_cache import Batched

    gates = [threading.Event(), threading.Event()]
    started: list[int] = []

    def compute() -> int:
        number = len(started)
        started.append(number)
        gates[number].wait()
        return number

    async def until(condition) -> None:
        while not condition():
            await asyncio.sleep(0.01)  # a thread's start, awaited; no timing is asserted

    async def scenario() -> None:
        batched = Batched(compute)
        first = asyncio.ensure_future(batched())
        await until(lambda: len(started) == 1)
        later = [asyncio.ensure_future(batched()) for _ in range(3)]  # arrive while #0 runs
        leaving = asyncio.ensure_future(batched())
        await asyncio.sleep(0)
        leaving.cancel()  # a closed tab
        gates[0].set()
        assert await first == 0
        await until(lambda: len(started) == 2)
        gates[1].set()
        assert await asyncio.gather(*later) == [1, 1, 1]  # one computation, begun after they came
        assert len(started) == 2

    asyncio.run(scenario())


def test_a_batch_page_renders_once_per_batch_and_key() -> None:
    from lero.app.ui.page_cache import BatchPage

    renders = Counted()
    kept = BatchPage()
    batch = [{"run_id": "r1"}]
    body = lambda: str(renders()).encode()  # noqa: E731
    assert kept.get(batch, (), body) == kept.get(batch, (), body) == b"1"
    assert kept.get([{"run_id": "r1"}], (), body) == b"2"  # an equal batch is still a new one
    assert kept.get(batch, ("r1",), body) == b"3"  # what else the page shows changed


def test_the_runs_list_is_rendered_once_per_batch_and_again_when_a_run_starts_resuming(client, tmp_path, monkeypatch):
    from lero.app.ui import views

    finished_run(tmp_path / "runs").update_state(status="interrupted", generation=1)
    age(tmp_path / "runs" / "r1")
    batch = views.list_runs(Path("runs"))
    app = client.app

    async def one_batch() -> list[dict]:
        return batch  # every request answered by one batch

    renders: list[str] = []
    real_page = ui_app.page
    monkeypatch.setattr(ui_app, "page", lambda *args, **kw: renders.append(args[1]) or real_page(*args, **kw))
    monkeypatch.setattr(app.state, "runs_list", one_batch)
    first, second = client.get("/").text, client.get("/").text
    assert first == second and "status-interrupted" in first and renders == ["runs.html"]
    monkeypatch.setattr(app.state.workers, "busy", lambda run_id: run_id == "r1")
    assert "status-resuming" in client.get("/").text and renders == ["runs.html"] * 2
    assert batch[0]["status"] == "interrupted"  # the shared batch is never changed
