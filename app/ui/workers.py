"""Background workers: each drives one run in a child process, the CLI's own way.

A worker is `python -m lero.app.cli.worker start --spec FILE` or `... resume RUN_ID
--runs-dir DIR [--answer FILE]` — the terminal-less entry of the engine, the same
`start_run` / `resume_run` path `lero run` and `lero resume --answer` take. The server
never runs candidate code: the child drives the graph, which hands every candidate to
the sandbox. The child prints its stream events as JSON lines; the worker keeps the
live ones that are not recorded in events.jsonl (training progress) for the run page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections import deque
from pathlib import Path
from typing import Any

from lero.graph.configuration import RunError, RunSpec

STDERR_LINES = 40  # kept from a child's stderr: its last words when it fails


class Worker:
    """One child process driving one run, and what it reported so far."""

    def __init__(self, run_id: str, argv: list[str], cwd: Path) -> None:
        self.run_id = run_id
        self.progress: dict[str, dict[str, Any]] = {}  # job_id -> latest train_progress event
        self.stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self.outcome: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lero.app.cli.worker", *argv], cwd=cwd, text=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self._readers = [
            threading.Thread(target=self._read_events, daemon=True, name=f"lero-ui-out-{run_id}"),
            threading.Thread(target=self._read_stderr, daemon=True, name=f"lero-ui-err-{run_id}"),
        ]
        for reader in self._readers:
            reader.start()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def _read_events(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if not isinstance(event, dict):
                continue
            with self._lock:
                if "outcome" in event:
                    self.outcome = event
                elif event.get("event") == "train_progress":
                    self.progress[str(event.get("job_id"))] = event
                elif event.get("event") == "job_finished":
                    self.progress.pop(str(event.get("job_id")), None)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line.rstrip("\n"))

    def live_progress(self) -> list[dict[str, Any]]:
        """Training jobs in flight: candidate_id, done, total, return (latest report each)."""
        with self._lock:
            return [
                {key: event.get(key) for key in ("job_id", "candidate_id", "done", "total", "return")}
                for event in self.progress.values()
            ]

    def error(self) -> str | None:
        """The child's last error line when it exited with a failure, else None."""
        code = self.returncode
        if code in (None, 0):
            return None
        lines = [line for line in self.stderr if line.strip()]
        return lines[-1] if lines else f"the run's worker exited with status {code}"

    def stop(self) -> None:
        if self.alive:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for reader in self._readers:
            reader.join(timeout=5)


class Workers:
    """The server's workers by run id: at most one live child per run."""

    def __init__(self, runs_dir: str, cwd: Path | None = None) -> None:
        self.runs_dir = runs_dir
        self.cwd = cwd or Path.cwd()
        self._by_run: dict[str, Worker] = {}
        self._confirmed: dict[str, str] = {}  # run id -> the spec env a person typed for it here
        self._lock = threading.Lock()
        self._scratch = tempfile.TemporaryDirectory(prefix="lero-ui-")

    def get(self, run_id: str) -> Worker | None:
        return self._by_run.get(run_id)

    def busy(self, run_id: str) -> bool:
        worker = self._by_run.get(run_id)
        return worker is not None and worker.alive

    def _spawn(self, run_id: str, argv: list[str]) -> Worker:
        with self._lock:
            if self.busy(run_id):
                raise RunError(f"run {run_id!r} is already being driven by this server")
            worker = Worker(run_id, argv, self.cwd)
            self._by_run[run_id] = worker
            return worker

    def _scratch_file(self, name: str, payload: Any) -> str:
        path = Path(self._scratch.name) / name
        path.write_text(json.dumps(payload))
        return str(path)

    def start(self, spec: RunSpec, confirm: str | None = None) -> Worker:
        """Start a new run (the spec already has its run id and runs_dir). `confirm`: the
        `package.module:factory` env a person typed (graph.trust); this server passes it on
        to the run's later resumes too, while it lives."""
        run_id = str(spec.run_id)
        spec_file = self._scratch_file(f"spec-{run_id}.json", spec.model_dump(mode="json"))
        if confirm is not None:
            self._confirmed[run_id] = confirm
        return self._spawn(run_id, ["start", "--spec", spec_file, *self._confirm_args(run_id)])

    def _confirm_args(self, run_id: str) -> list[str]:
        confirm = self._confirmed.get(run_id)
        return [] if confirm is None else ["--env", confirm]

    def resume(self, run_id: str, answer: object | None = None) -> Worker:
        """Resume a run, answering its pending approval when `answer` is given. A stored spec
        env is confirmed only when a person typed it to this server (else the child refuses)."""
        argv = ["resume", run_id, "--runs-dir", self.runs_dir, *self._confirm_args(run_id)]
        if answer is not None:
            argv += ["--answer", self._scratch_file(f"answer-{run_id}-{os.urandom(4).hex()}.json", answer)]
        return self._spawn(run_id, argv)

    def close(self) -> None:
        """Stop every child (the runs stay resumable from their checkpoints)."""
        for worker in list(self._by_run.values()):
            worker.stop()
        self._scratch.cleanup()
