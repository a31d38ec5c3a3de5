"""Live training progress: the runner's progress.json reaches the host's `events` callback."""

from __future__ import annotations

import contextvars
import json
import os
import time
from pathlib import Path

import pytest

from lero.sandbox.jobs import PROGRESS_FILE
from lero.sandbox.poller import Poller
from lero.sandbox.results import MAX_PROGRESS_BYTES, ProgressRelay, read_progress
from lero.sandbox.types import Limits
from tests.sandbox.test_jobs import job


def test_train_job_relays_progress_events(sandbox, monkeypatch) -> None:
    events: list[tuple[str, dict]] = []
    monkeypatch.setattr(sandbox, "events", lambda event, **fields: events.append((event, fields)))
    train = job(
        "train", None, algo="mappo", steps=30_000, seed=0, n_envs=16, eval_episodes=16,
        candidate_id="0-1", limits=Limits(wall_s=300, mem_mb=2048),
    )  # fmt: skip
    result = sandbox.run_job(train)
    assert result.status == "ok", result.error
    progress = [fields for event, fields in events if event == "train_progress"]
    assert progress, [event for event, _ in events]
    for fields in progress:
        assert fields["job_id"] == train.job_id and fields["candidate_id"] == "0-1"
        assert fields["kind"] == "train" and fields["total"] == 30_000
        assert 0 < fields["done"] <= fields["total"]
        assert fields["return"] is None or isinstance(fields["return"], float)
    assert progress[-1]["done"] == 30_000
    names = [event for event, _ in events]
    assert names[0] == "job_started" and names[-1] == "job_finished"


def write(job_dir: Path, content: str | bytes) -> None:
    data = content.encode() if isinstance(content, str) else content
    (job_dir / PROGRESS_FILE).write_bytes(data)


@pytest.mark.parametrize(
    "content",
    [
        "",
        "{not json",
        b"\xff\xfe",
        "[1, 2]",
        '{"done": 1}',
        '{"done": "1", "total": 2}',
        '{"done": true, "total": 2}',
        '{"done": 1.5, "total": 2}',
        '{"done": -1, "total": 2}',
        "[" * 2000 + "]" * 2000,
        json.dumps({"done": 1, "total": 2, "pad": "x" * MAX_PROGRESS_BYTES}),
    ],
)
def test_malformed_progress_is_ignored(tmp_path, content) -> None:
    write(tmp_path, content)
    assert read_progress(tmp_path) is None


def test_progress_links_and_non_files_are_ignored(tmp_path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text('{"done": 1, "total": 2}')
    (tmp_path / PROGRESS_FILE).symlink_to(target)
    assert read_progress(tmp_path) is None
    (tmp_path / PROGRESS_FILE).unlink()
    (tmp_path / PROGRESS_FILE).mkdir()
    assert read_progress(tmp_path) is None
    (tmp_path / PROGRESS_FILE).rmdir()
    os.mkfifo(tmp_path / PROGRESS_FILE)  # O_NONBLOCK: opening it must not hang
    assert read_progress(tmp_path) is None
    (tmp_path / PROGRESS_FILE).unlink()
    assert read_progress(tmp_path) is None  # missing


def test_relay_reports_changes_only(tmp_path) -> None:
    reports: list[dict] = []
    relay = ProgressRelay(tmp_path, lambda **fields: reports.append(fields))
    relay()  # no file yet
    write(tmp_path, '{"done": 5, "total": 10, "return": -1.5}')
    relay()
    relay()
    write(tmp_path, "garbage")
    relay()
    write(tmp_path, '{"done": 10, "total": 10, "return": NaN}')
    relay()
    assert reports == [
        {"done": 5, "total": 10, "return": -1.5},
        {"done": 10, "total": 10, "return": None},
    ]


def test_poller_ticks_in_the_callers_context_until_told_to_stop() -> None:
    caller = contextvars.ContextVar("caller")
    caller.set("host")
    seen: list[str | None] = []

    def tick() -> bool:
        seen.append(caller.get(None))
        return True  # done: no further ticks

    with Poller(0.01, tick):
        time.sleep(0.2)
    assert seen == ["host"]
