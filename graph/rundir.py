"""The run directory: every file a run leaves behind, written as things happen.

Layout (docs/internals.md, graph): `spec.json`, `state.json`, `events.jsonl`
(append-only, one JSON object per line), `checkpoints.sqlite`, `cache/` (sandbox result
cache), `tensorboard/<candidate_id>/seed-<n>/` (event files), `baseline/result.json`,
`candidates/<gen>-<idx>/{candidate.py, review.md, result.json, seed-<n>.json}`,
`confirm/{plan.json, <candidate_id>/seed-<n>.json}` (the confirmation at a longer budget),
`llm/<nnnnn>-<role>.json` (one per LLM request: prompt, replies, tokens, seconds, finish
reasons, the candidate it was about), `report.json`, `report.md`, `plots/*.{png,pdf,svg,csv}`,
`provenance.json` (the software of its first report), `evals/<candidate>.json` (`lero eval`) (a driver holds an flock on the run directory itself). The report builder and the web UI
read only these files, so they must be complete and consistent even after a crash: files
are replaced atomically, events are appended and flushed line by line.

`RunDir` is the one reader and writer of this layout. A run directory may be hostile
(planted symlinks, FIFOs, huge or torn files), so every access goes through
`safefs.Confined`: nothing outside the run is read or written, and a file that cannot
be read raises `UnsafeFile` (a `RunError`, one line) instead of blocking or escaping.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from lero.graph.configuration import RunError, RunSpec
from lero.graph.safefs import Confined, UnsafeFile, write_atomic
from lero.graph.trust import sign_spec, signed_here
from lero.sandbox.diskwatch import allocated_bytes
from lero.training.contract import CANDIDATE_FILE
from lero.training.validation import in_float_range

__all__ = ["BASELINE_ID", "EVENTS_FILE", "RunDir", "UnsafeFile", "read_events", "write_atomic"]

BASELINE_ID = "baseline"
SPEC_FILE, STATE_FILE, EVENTS_FILE = "spec.json", "state.json", "events.jsonl"
SPEC_SIGNATURE_FILE = "spec.sig"  # HMAC of spec.json with the installation key (graph.trust)
CHECKPOINT_FILE = "checkpoints.sqlite"
STUDIES_DIR = "studies"
EVALS_DIR = "evals"  # `lero eval`'s measurements, evals/<candidate>.json (app.reports.held_out)
PROVENANCE_FILE = "provenance.json"  # the software a run was reported with first (app.reports.provenance)
CACHE_DIR, JOBS_DIR = "cache", "jobs"  # the sandbox's result cache and its job folders (sandbox.base)
CONFIRM_DIR, CONFIRM_PLAN = "confirm", "confirm/plan.json"  # graph.nodes.confirm: plan, then seed-<n>.json per arm
SHARED_CACHE_DIR = ".shared-cache"  # in the runs dir: native jobs every run of a task and budget reuses
REPORT_JSON, REPORT_MD, PLOTS_DIR = "report.json", "report.md", "plots"
CODE_FILE = CANDIDATE_FILE  # a candidate's module keeps the name its tracebacks show
CANDIDATES_DIR, REVIEW_FILE, RESULT_FILE = "candidates", "review.md", "result.json"

LLM_DIR = "llm"
LLM_RECORD = re.compile(r"^(\d{5,})-([a-z]+)\.json$")  # `00007-designer.json`, numbered in request order
JSON_LIMIT = 32 << 20  # bytes; a result.json with long curves is well under 1 MiB
TEXT_LIMIT = 4 << 20  # candidate.py, review.md, report.md
EVENTS_LIMIT = 256 << 20
PLOT_LIMIT = 16 << 20
INT_DIGITS = 400  # an integer longer than this is beyond every float: read as +-inf unconverted


def read_int(text: str) -> int | float:
    """A JSON integer of the run dir as stored, or +-inf when no float holds it (`10**400`
    as a fitness): every reader then compares and shows it as it does an infinity, and a
    thousand-digit one is never converted at all."""
    if len(text) <= INT_DIGITS and in_float_range(value := int(text)):
        return value
    return -math.inf if text.startswith("-") else math.inf


def loads(data: bytes | str) -> Any:
    """`json.loads` for what a run dir holds (`read_int`; NaN and Infinity are read as
    Python writes them)."""
    return json.loads(data, parse_int=read_int)


def parse_events(data: bytes) -> list[dict[str, Any]]:
    """Every event of events.jsonl bytes. A line that is not a JSON object (a torn last line
    after a kill mid-write, bytes that are not UTF-8) is skipped."""
    events = []
    for line in data.splitlines():
        try:
            record = loads(line)
        except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            continue
        if isinstance(record, dict) and "event" in record:
            events.append(record)
    return events


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every event of the events.jsonl of the run directory `path.parent`."""
    return RunDir(path.parent).read_events()


class RunDir:
    """Reader and writer of one `runs/<run_id>/` directory (thread-safe: train branches run in parallel)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.files = Confined(self.path)
        self._lock = threading.Lock()
        self._session_start = time.monotonic()
        self._prior_wall_s: float | None = None
        self._drive_fd: int | None = None
        self._llm_records: int | None = None  # records in llm/, counted on the first write

    @classmethod
    def create(cls, spec: RunSpec) -> RunDir:
        """Make the directory for a new run; refuse to reuse an existing run id."""
        path = Path(spec.runs_dir) / str(spec.run_id)
        if os.path.lexists(path):
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
        rundir = cls(Path(runs_dir) / run_id)
        if rundir.files.kind(SPEC_FILE) != "file":
            raise RunError(f"no run {run_id!r} in {runs_dir} (missing spec.json)")
        return rundir

    @classmethod
    def open_or_create(cls, spec: RunSpec) -> RunDir:
        """The run's directory: opened when it holds a spec, else made (a server's first request)."""
        rundir = cls(Path(spec.runs_dir) / str(spec.run_id))
        return rundir if rundir.files.kind(SPEC_FILE) == "file" else cls.create(spec)

    # -- the drive lock: one process drives a run at a time

    def claim(self) -> None:
        """Hold the run's lock until `release` (or this process ends); a second driver
        (`lero resume` while the web UI drives the run) gets a one-line RunError. The lock is
        on the run directory itself, so claiming writes nothing into the run."""
        if self._drive_fd is not None:
            return
        fd = self._open_run_dir()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RunError(f"run {self.path.name!r} is being driven by another process "
                           "(lero resume, lero run or the web UI); wait for it to stop") from None
        self._drive_fd = fd

    def release(self) -> None:
        if self._drive_fd is not None:
            os.close(self._drive_fd)
            self._drive_fd = None

    def is_driven(self) -> bool:
        """Whether another process holds the run's lock now."""
        try:
            fd = self._open_run_dir()
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def _open_run_dir(self) -> int:
        return os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)

    def __del__(self) -> None:
        self.release()

    # -- paths handed to libraries that write themselves (checked, created inside the run)

    @property
    def state_path(self) -> Path:
        return self.path / STATE_FILE

    @property
    def events_path(self) -> Path:
        return self.path / EVENTS_FILE

    @property
    def checkpoint_path(self) -> Path:
        """The SQLite file; refused when something other than a regular file is planted there."""
        self.is_file(CHECKPOINT_FILE)
        return self.path / CHECKPOINT_FILE

    @property
    def cache_dir(self) -> Path:
        """The sandbox's result cache, with its `jobs/` folder made here too: the sandbox
        resolves that path and mounts job folders below it, so a planted link is refused now."""
        self.files.ensure_dir(f"{CACHE_DIR}/{JOBS_DIR}")
        return self.files.ensure_dir(CACHE_DIR)

    @property
    def shared_cache_dir(self) -> Path:
        """`<runs_dir>/.shared-cache/`: results of jobs that run no candidate code (native's
        confirmation), which every run in the same runs dir may reuse; no run id starts with
        a dot, so no run can be named like it."""
        path = self.path.parent / SHARED_CACHE_DIR
        if path.is_symlink():
            raise UnsafeFile(f"refusing {path}: the shared cache is a symlink")
        return path

    @property
    def studies_dir(self) -> Path:
        """`studies/<study_id>/`: `lero study`'s folders (their layout is the study's own, each
        folder made through `study.plan.Plan.folder`, confined to the run at every level). Not
        made here: a study that is refused (an env nobody confirmed) leaves the run as it was."""
        return self.path / STUDIES_DIR

    def tensorboard_dir(self, candidate_id: str, seed: int) -> Path:
        """Where one training job's TensorBoard event file goes (`tensorboard --logdir runs/`)."""
        return self.files.ensure_dir(f"tensorboard/{candidate_id}/seed-{seed}")

    # -- generic reads and writes

    def read_json(self, relative: str) -> dict[str, Any] | None:
        """A JSON object file of the run (None when absent); UnsafeFile when unreadable or corrupt."""
        data = self.files.read(relative, JSON_LIMIT)
        if data is None:
            return None
        try:
            payload = loads(data)
        except (ValueError, RecursionError) as exc:
            raise UnsafeFile(f"corrupt JSON in {self.path / relative}: {str(exc).splitlines()[0][:120]}") from None
        if not isinstance(payload, dict):
            raise UnsafeFile(f"corrupt JSON in {self.path / relative}: not a JSON object")
        return payload

    def write_json(self, relative: str, payload: Any) -> None:
        self.files.write(relative, (json.dumps(payload, indent=2, default=str) + "\n").encode())

    def read_text(self, relative: str) -> str | None:
        """A text file of the run (candidate.py, review.md, report.md), None when absent."""
        data = self.files.read(relative, TEXT_LIMIT)
        return None if data is None else data.decode(errors="replace")

    def write_text(self, relative: str, text: str) -> None:
        self.files.write(relative, text.encode())

    def is_file(self, relative: str) -> bool:
        """A regular file is there; False when nothing is; UnsafeFile for a symlink or a FIFO."""
        kind = self.files.kind(relative)
        if kind not in (None, "file"):
            raise UnsafeFile(f"refusing {self.path / relative}: not a regular file")
        return kind == "file"

    # -- spec, state, events

    def write_spec(self, spec: RunSpec) -> None:
        """Replace spec.json (a resume with more budget or another server), signed with this
        installation's key so that its own crash can resume unattended (`written_here`)."""
        data = (json.dumps(spec.model_dump(mode="json"), indent=2) + "\n").encode()
        self.files.write(SPEC_FILE, data)
        self.files.write(SPEC_SIGNATURE_FILE, (sign_spec(data) or "").encode())

    def written_here(self) -> bool:
        """Whether spec.json is exactly as this installation wrote it (graph.trust.signed_here):
        a run directory copied in from elsewhere, or edited, is not."""
        data = self.files.read(SPEC_FILE, JSON_LIMIT)
        signature = self.files.read(SPEC_SIGNATURE_FILE, 256)
        return data is not None and signature is not None and signed_here(data, signature.decode(errors="replace"))

    def read_spec(self) -> RunSpec:
        payload = self.read_json(SPEC_FILE)
        if payload is None:
            raise RunError(f"no run {self.path.name!r} in {self.path.parent} (missing spec.json)")
        return RunSpec.parse(payload)

    def read_state(self) -> dict[str, Any]:
        return self.read_json(STATE_FILE) or {}

    def jobs_mb(self) -> float:
        """MiB the run's sandbox job directories (`cache/jobs/`) take on disk now."""
        return allocated_bytes(self.cache_dir / JOBS_DIR) / 2**20

    def wall_s(self) -> float:
        """Seconds this run has been active, summed over every process that drove it."""
        if self._prior_wall_s is None:  # before this process's first state write
            prior = self.read_state().get("wall_s", 0.0)
            self._prior_wall_s = float(prior) if isinstance(prior, int | float) else 0.0
        return self._prior_wall_s + time.monotonic() - self._session_start

    def update_state(self, **fields: Any) -> dict[str, Any]:
        """Merge fields into `state.json` (with the current `wall_s`) and return it."""
        with self._lock:
            state = self.read_state()
            state.update(fields, wall_s=round(self.wall_s(), 3))
            self.write_json(STATE_FILE, state)
            return state

    def append_event(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append one `{"ts", "event", ...}` line to events.jsonl and return the record."""
        record = {"ts": time.time(), "event": event, **fields}
        line = (json.dumps(record, default=str) + "\n").encode()
        with self._lock:
            fd = self.files.open_fd(EVENTS_FILE, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":  # after a torn last line: a new line
                    line = b"\n" + line
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        return record

    def read_events(self, tail: int | None = None) -> list[dict[str, Any]]:
        """Every event, or with `tail` only those of the file's last `tail` bytes (whole
        lines: a page shows a long run without parsing up to EVENTS_LIMIT on each load)."""
        if tail is None:
            return parse_events(self.files.read(EVENTS_FILE, EVENTS_LIMIT) or b"")
        data = self.files.read(EVENTS_FILE, tail + 1, whole=False, last=True) or b""
        if len(data) > tail:  # cut: data[0] is the byte before the window; start at a line
            start = 1 if data[:1] == b"\n" else data.find(b"\n") + 1
            data = data[start:] if start else b""
        return parse_events(data)

    def read_events_from(self, offset: int, limit: int = 1 << 20) -> bytes:
        """Up to `limit` bytes of events.jsonl from `offset` (the live stream's next chunk)."""
        return self.files.read(EVENTS_FILE, limit, offset=offset, whole=False) or b""

    # -- LLM requests and replies

    def write_llm_record(self, record: dict[str, Any]) -> str:
        """Keep one LLM request (`record["role"]`, prompt, replies, ...) as the next numbered
        file under llm/; returns its name (events.jsonl's `llm_call` names it)."""
        role = re.sub(r"[^a-z]", "", str(record.get("role", "")).lower()) or "llm"
        with self._lock:
            if self._llm_records is None:
                self._llm_records = len(self.llm_record_names())
            self._llm_records += 1
            name = f"{self._llm_records:05d}-{role}.json"
        self.write_json(f"{LLM_DIR}/{name}", record)
        return name

    def llm_record_names(self) -> list[str]:
        """The record files under llm/, in request order."""
        return sorted(n for n in self.files.names(LLM_DIR, "file") if LLM_RECORD.match(n))

    def read_llm_records(self, candidate_id: str | None = None) -> list[dict[str, Any]]:
        """Every LLM record in request order (only those about `candidate_id` when given),
        each with its file name as `record`."""
        records = []
        for name in self.llm_record_names():
            record = self.read_json(f"{LLM_DIR}/{name}") or {}
            if candidate_id is None or record.get("candidate_id") == candidate_id:
                records.append({**record, "record": name})
        return records

    # -- candidates and the baseline

    def candidate_folder(self, candidate_id: str) -> str:
        """The folder of a candidate (or the baseline), relative to the run."""
        return BASELINE_ID if candidate_id == BASELINE_ID else f"{CANDIDATES_DIR}/{candidate_id}"

    def candidate_dir(self, candidate_id: str) -> Path:
        return self.path / self.candidate_folder(candidate_id)

    def candidate_names(self) -> list[str]:
        """The folders under candidates/ (real directories only)."""
        return self.files.names(CANDIDATES_DIR, "dir")

    def write_candidate(self, candidate_id: str, code: str | None, review_md: str | None) -> None:
        """Write (or overwrite, after a revision) a candidate's source and its review."""
        folder = self.candidate_folder(candidate_id)
        if code is not None:
            self.write_text(f"{folder}/{CODE_FILE}", code)
        if review_md is not None:
            self.write_text(f"{folder}/{REVIEW_FILE}", review_md)

    def read_code(self, candidate_id: str) -> str | None:
        return self.read_text(f"{self.candidate_folder(candidate_id)}/{CODE_FILE}")

    def has_code(self, candidate_id: str) -> bool:
        return self.is_file(f"{self.candidate_folder(candidate_id)}/{CODE_FILE}")

    def code_path(self, candidate_id: str) -> Path:
        return self.path / self.candidate_folder(candidate_id) / CODE_FILE

    def read_review(self, candidate_id: str) -> str | None:
        return self.read_text(f"{self.candidate_folder(candidate_id)}/{REVIEW_FILE}")

    def read_result(self, candidate_id: str) -> dict[str, Any] | None:
        return self.read_json(f"{self.candidate_folder(candidate_id)}/{RESULT_FILE}")

    def write_result(self, candidate_id: str, result: dict[str, Any]) -> None:
        """The candidate's aggregated result.json (all seeds), once its generation is done."""
        self.write_json(f"{self.candidate_folder(candidate_id)}/{RESULT_FILE}", result)

    def write_seed_result(self, candidate_id: str, seed: int, result: dict[str, Any]) -> None:
        """One seed's JobResult as soon as its training branch finishes (`seed-<n>.json`)."""
        self.write_json(f"{self.candidate_folder(candidate_id)}/seed-{seed}.json", result)

    def read_seed_result(self, candidate_id: str, seed: int) -> dict[str, Any] | None:
        """The seed's saved JobResult, or None before its training branch finished."""
        return self.read_json(f"{self.candidate_folder(candidate_id)}/seed-{seed}.json")

    # -- the confirmation (graph.nodes.confirm)

    def write_confirm_plan(self, plan: dict[str, Any]) -> None:
        self.write_json(CONFIRM_PLAN, plan)

    def read_confirm_plan(self) -> dict[str, Any] | None:
        """What the confirmation trains (None: it has not started, or the run has none)."""
        return self.read_json(CONFIRM_PLAN)

    def write_confirm_seed(self, candidate_id: str, seed: int, record: dict[str, Any]) -> None:
        """One confirmation seed's result as soon as its job ends: `confirm/<candidate_id>/seed-<n>.json`."""
        self.write_json(f"{CONFIRM_DIR}/{candidate_id}/seed-{seed}.json", record)

    def read_confirm_seed(self, candidate_id: str, seed: int) -> dict[str, Any] | None:
        return self.read_json(f"{CONFIRM_DIR}/{candidate_id}/seed-{seed}.json")

    # -- the report

    def write_summary(self, summary: dict[str, Any]) -> None:
        self.write_text(REPORT_JSON, json.dumps(summary, indent=2) + "\n")

    def read_summary(self) -> dict[str, Any] | None:
        return self.read_json(REPORT_JSON)

    def write_report_md(self, markdown: str) -> None:
        self.write_text(REPORT_MD, markdown)

    @property
    def report_md_path(self) -> Path:
        return self.path / REPORT_MD

    def read_report_md(self) -> str | None:
        return self.read_text(REPORT_MD)

    def plot_names(self) -> list[str]:
        return [name for name in self.files.names(PLOTS_DIR, "file") if name.endswith(".png")]

    def plot_path(self, name: str) -> Path:
        return self.path / PLOTS_DIR / name

    def write_plot(self, name: str, png: bytes) -> Path:
        self.files.write(f"{PLOTS_DIR}/{name}", png)
        return self.plot_path(name)

    def read_plot(self, name: str) -> bytes | None:
        return self.files.read(f"{PLOTS_DIR}/{name}", PLOT_LIMIT)
