"""The process backend, for machines without Docker: weaker, and loud about it.

Each job is a child forked from the host process's zygote (`sandbox.zygote`, the engine
already imported once for every process sandbox the host makes) and confined in place
(`sandbox.enclosure`): its own session with rlimits (RLIMIT_AS = memory, RLIMIT_CPU,
RLIMIT_NPROC = pids, RLIMIT_FSIZE = job-dir cap, no core files), an empty environment
(only HOME, TMPDIR and `types.JOB_PROCESS_ENV`; `lero.*` imports through the installed
package), a temporary working directory whose total size is watched (`DiskWatch`), and a
wall-clock kill of its whole process group.

Where the kernel lets us (root, or unprivileged user namespaces) it also runs in new
namespaces: network (no network at all), PID (it is PID 1 there, so a kill takes every
descendant, even ones that call setsid; fresh /proc) and mount (every mount remounted
read-only except the job directory), with all capabilities dropped and no-new-privs.
What it cannot do is listed in docs/sandbox.md (no memory/pids cgroup; as real root
RLIMIT_NPROC is not enforced, so a fork bomb runs until the wall-clock kill).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from lero.sandbox.base import PYTHON, Sandbox
from lero.sandbox.diskwatch import DiskWatch, exceeded_note
from lero.sandbox.enclosure import Confinement, namespaces_work
from lero.sandbox.harness import KINDS_FLAG
from lero.sandbox.output import CappedBuffer, drain_in_thread
from lero.sandbox.types import JOB_PROCESS_ENV, Limits, ScriptResult
from lero.sandbox.zygote import shared_zygote

# what every job's environment holds besides its own HOME and TMPDIR (the zygote's, too)
JOBS_ENV = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", **JOB_PROCESS_ENV}
log = logging.getLogger(__name__)
OOM_MARKERS = ("MemoryError", "std::bad_alloc", "Cannot allocate memory")


class ProcessSandbox(Sandbox):
    kind = "process"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.namespaces = namespaces_work()
        self._zygote = shared_zygote(JOBS_ENV)
        self._running: set[int] = set()  # process groups of the jobs running now
        self._running_lock = threading.Lock()
        if not self.namespaces:
            warning = "WARNING: no namespaces for the process sandbox: candidate code can use the network and write files"
            log.warning(warning)
            print(warning, file=sys.stderr)

    def close(self) -> None:
        """Nothing to release: the zygote is the host process's (`shared_zygote`), kept for the
        next sandbox; running jobs are not touched."""

    def _kill_running(self) -> None:
        with self._running_lock:
            groups = list(self._running)
        for pgid in groups:
            _kill_group(pgid)

    def _job_path_inside(self, job_dir: Path, name: str) -> str:
        return str(job_dir / name)

    def _run(self, start: dict[str, Any], cwd: Path, limits: Limits, key: bytes | None = None) -> ScriptResult:
        """Run a job forked by the zygote, contained; START is `{"runner": harness arguments}`
        or `{"exec": argv}`. KEY, when given, is written to its stdin (then closed)."""
        confinement = Confinement(
            job_dir=str(cwd), mem_bytes=limits.mem_mb * 2**20, cpu_s=int(limits.wall_s * limits.cpus) + 1,
            nproc=limits.pids, fsize_bytes=limits.disk_mb * 2**20, namespaces=self.namespaces,
        )  # fmt: skip
        env = {**JOBS_ENV, "HOME": str(cwd), "TMPDIR": str(cwd)}
        stdout, stderr = CappedBuffer(limits.output_bytes), CappedBuffer(limits.output_bytes)
        started = time.perf_counter()
        child = self._zygote.spawn({"env": env, "confinement": confinement.to_dict(), **start})
        with self._running_lock:
            self._running.add(child.pid)
        try:
            if key is not None:
                child.stdin.write(key + b"\n")
        finally:
            with contextlib.suppress(OSError):  # it died first: its exit status tells
                child.stdin.close()
        readers = [drain_in_thread(child.stdout, stdout), drain_in_thread(child.stderr, stderr)]
        timed_out = False
        with DiskWatch(cwd, limits.disk_mb * 2**20, lambda: _kill_group(child.pid)) as disk:
            try:
                exit_code = child.wait(timeout=limits.wall_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(child.pid)  # the whole group, done or not
                exit_code = child.wait()
                with self._running_lock:
                    self._running.discard(child.pid)
        elapsed = time.perf_counter() - started
        for reader in readers:
            reader.join(timeout=2.0)
        if disk.exceeded.is_set():
            stderr.feed(exceeded_note(limits.disk_mb))
        text = stderr.text()
        if timed_out:
            status = "timeout"
        elif exit_code == 0:
            status = "ok"
        elif any(marker in text for marker in OOM_MARKERS):
            status = "oom"
        elif disk.exceeded.is_set() or exit_code < 0 or exit_code == 137:
            status = "killed"
        else:
            status = "error"
        return ScriptResult(status, None if timed_out else exit_code, stdout.text(), text, elapsed)

    def _launch(self, command: list[str], job_dir: Path, limits: Limits) -> ScriptResult:
        first = sys.executable if command[0] == PYTHON else shutil.which(command[0]) or command[0]
        return self._run({"exec": [first, *command[1:]]}, job_dir, limits)

    def _launch_runner(self, job_dir: Path, limits: Limits, key: bytes | None = None) -> ScriptResult:
        kinds = [KINDS_FLAG, str(self.kinds_dir)] if self.kinds_dir is not None else []
        return self._run({"runner": [str(job_dir), *kinds]}, job_dir, limits, key)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
