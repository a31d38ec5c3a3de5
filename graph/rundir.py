"""The run directory: every file a run leaves behind, written as things happen.

Layout (DESIGN.md, docs/internals.md): `spec.json`, `state.json`, `events.jsonl`
(append-only, one JSON object per line), `checkpoints.sqlite`, `cache/` (sandbox result
cache), `tensorboard/<candidate_id>/seed-<n>/` (event files), `baseline/result.json`, `candidates/<gen>-<idx>/{candidate.py, review.md,
result.json, seed-<n>.json}`. The report builder reads only these files, so they must be complete and
consistent even after a crash: JSON files are replaced atomically, events are appended
and flushed line by line.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from lero.graph.configuration import RunError, RunSpec

BASELINE_ID = "baseline"
EVENTS_FILE = "events.jsonl"


def write_atomic(path: Path, text: str) -> None:
    """Write via a temp file + rename: readers never see a half-written file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event of an events.jsonl file: the one reader (resume, report, chat, UI).

    A line that is not a JSON object is skipped: a process killed mid-write leaves a torn
    last line, and appends after a resume start on a fresh line (`RunDir.append_event`).
    """
    if not path.is_file():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "event" in record:
            events.append(record)
    return events


def _write_json_atomic(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(payload, indent=2, default=str) + "\n")


class RunDir:
    """Writer for one `runs/<run_id>/` directory (thread-safe: train branches run in parallel)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._session_start = time.monotonic()
        state = self.read_state() if self.state_path.exists() else {}
        self._prior_wall_s = float(state.get("wall_s", 0.0))

    @classmethod
    def create(cls, spec: RunSpec) -> RunDir:
        """Make the directory for a new run; refuse to reuse an existing run id."""
        path = Path(spec.runs_dir) / str(spec.run_id)
        if path.exists():
            raise RunError(f"run {spec.run_id!r} already exists in {spec.runs_dir} (use lero resume)")
        path.mkdir(parents=True)
        rundir = cls(path)
        rundir.write_spec(spec)
        rundir.update_state(
            status="running", generation=0, started_ts=time.time(), env_steps=0,
            llm={"requests": 0, "prompt_tokens": 0, "completion_tokens": 0},
        )
        return rundir

    @classmethod
    def open(cls, runs_dir: str | Path, run_id: str) -> RunDir:
        """Open an existing run directory (resume, report), or raise RunError."""
        path = Path(runs_dir) / run_id
        if not (path / "spec.json").is_file():
            raise RunError(f"no run {run_id!r} in {runs_dir} (missing spec.json)")
        return cls(path)

    @property
    def state_path(self) -> Path:
        return self.path / "state.json"

    @property
    def events_path(self) -> Path:
        return self.path / EVENTS_FILE

    @property
    def checkpoint_path(self) -> Path:
        return self.path / "checkpoints.sqlite"

    @property
    def cache_dir(self) -> Path:
        return self.path / "cache"

    def write_spec(self, spec: RunSpec) -> None:
        """Replace spec.json (a resume with more budget or another server)."""
        _write_json_atomic(self.path / "spec.json", spec.model_dump(mode="json"))

    def read_spec(self) -> RunSpec:
        return RunSpec.parse(json.loads((self.path / "spec.json").read_text()))

    def read_state(self) -> dict[str, Any]:
        return json.loads(self.state_path.read_text())

    def wall_s(self) -> float:
        """Seconds this run has been active, summed over every process that drove it."""
        return self._prior_wall_s + time.monotonic() - self._session_start

    def update_state(self, **fields: Any) -> dict[str, Any]:
        """Merge fields into `state.json` (with the current `wall_s`) and return it."""
        with self._lock:
            state = self.read_state() if self.state_path.exists() else {}
            state.update(fields, wall_s=round(self.wall_s(), 3))
            _write_json_atomic(self.state_path, state)
            return state

    def append_event(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one `{"ts", "event", ...}` line to events.jsonl and return the record."""
        record = {"ts": time.time(), "event": event, **fields}
        line = json.dumps(record, default=str) + "\n"
        with self._lock, open(self.events_path, "a+b") as stream:
            if stream.tell() > 0:  # after a torn last line (a kill mid-write): start a new line
                stream.seek(-1, os.SEEK_END)
                if stream.read(1) != b"\n":
                    line = "\n" + line
            stream.write(line.encode())
            stream.flush()
            os.fsync(stream.fileno())
        return record

    def read_events(self) -> list[dict[str, Any]]:
        return read_events(self.events_path)

    def candidate_dir(self, candidate_id: str) -> Path:
        if candidate_id == BASELINE_ID:
            return self.path / BASELINE_ID
        return self.path / "candidates" / candidate_id

    def tensorboard_dir(self, candidate_id: str, seed: int) -> Path:
        """Where one training job's TensorBoard event file goes (`tensorboard --logdir runs/`)."""
        return self.path / "tensorboard" / candidate_id / f"seed-{seed}"

    def write_candidate(self, candidate_id: str, code: str | None, review_md: str | None) -> None:
        """Write (or overwrite, after a revision) a candidate's source and its review."""
        folder = self.candidate_dir(candidate_id)
        folder.mkdir(parents=True, exist_ok=True)
        if code is not None:
            (folder / "candidate.py").write_text(code)
        if review_md is not None:
            (folder / "review.md").write_text(review_md)

    def write_result(self, candidate_id: str, result: dict[str, Any]) -> None:
        """The candidate's aggregated result.json (all seeds), once its generation is done."""
        _write_json_atomic(self.candidate_dir(candidate_id) / "result.json", result)

    def write_seed_result(self, candidate_id: str, seed: int, result: dict[str, Any]) -> None:
        """One seed's JobResult as soon as its training branch finishes (`seed-<n>.json`)."""
        _write_json_atomic(self.candidate_dir(candidate_id) / f"seed-{seed}.json", result)

    def read_seed_result(self, candidate_id: str, seed: int) -> dict[str, Any] | None:
        """The seed's saved JobResult, or None before its training branch finished."""
        path = self.candidate_dir(candidate_id) / f"seed-{seed}.json"
        return json.loads(path.read_text()) if path.is_file() else None
