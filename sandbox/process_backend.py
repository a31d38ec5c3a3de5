"""The process backend, for machines without Docker: weaker, and loud about it.

A child process in its own session with rlimits (`prlimit`: RLIMIT_AS = memory,
RLIMIT_CPU, RLIMIT_NPROC = pids, RLIMIT_FSIZE = job-dir cap, no core files), an empty
environment (only TMPDIR and `types.JOB_PROCESS_ENV`; `lero.*` imports through the installed package), a
temporary working directory whose total size is watched (`DiskWatch`), and a
wall-clock kill of its whole process group.

Where the kernel lets us (root, or unprivileged user namespaces) it also runs in new
namespaces: network (no network at all), PID (it is PID 1 there, so a kill takes every
descendant, even ones that call setsid; fresh /proc) and mount (every mount remounted
read-only except the job directory), then drops all capabilities with no-new-privs.
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

from lero.sandbox.base import PYTHON, Sandbox
from lero.sandbox.diskwatch import DiskWatch, exceeded_note
from lero.sandbox.harness import KINDS_FLAG
from lero.sandbox.output import CappedBuffer, drain_in_thread
from lero.sandbox.types import JOB_PROCESS_ENV, Limits, SandboxUnavailable, ScriptResult

# Runs inside the new namespaces as their root: make every mount read-only except the
# job directory ($1; cd again to get onto the rw mount), then drop all capabilities and exec.
NAMESPACE_SETUP = r"""set -e
mount --bind "$1" "$1"
while read -r _ target _; do
  [ "$target" = "$1" ] || mount -o remount,bind,ro "$target" 2>/dev/null || true
done < /proc/self/mounts
cd "$1"
shift
exec setpriv --no-new-privs --bounding-set=-all --inh-caps=-all -- "$@"
"""
log = logging.getLogger(__name__)
OOM_MARKERS = ("MemoryError", "std::bad_alloc", "Cannot allocate memory")


class ProcessSandbox(Sandbox):
    kind = "process"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        if shutil.which("prlimit") is None:
            raise SandboxUnavailable("the process sandbox needs `prlimit` (util-linux)")
        self.unshare = self._namespace_command()
        self._running: set[int] = set()  # process groups of the jobs running now
        self._running_lock = threading.Lock()
        if not self.unshare:
            warning = "WARNING: no namespaces for the process sandbox: candidate code can use the network and write files"
            log.warning(warning)
            print(warning, file=sys.stderr)

    @staticmethod
    def _namespace_command() -> list[str]:
        """`unshare` arguments that work here (as root, or via a user namespace), else []."""
        if not (shutil.which("unshare") and shutil.which("setpriv")):
            return []
        command = ["unshare", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
        if os.geteuid() != 0:
            command[1:1] = ["--user", "--map-root-user"]
        probe = subprocess.run([*command, "true"], capture_output=True)
        return command if probe.returncode == 0 else []

    def close(self) -> None:
        """Nothing is held between jobs: every job starts a fresh process."""

    def _kill_running(self) -> None:
        with self._running_lock:
            groups = list(self._running)
        for pgid in groups:
            _kill_group(pgid)

    def _job_path_inside(self, job_dir: Path, name: str) -> str:
        return str(job_dir / name)

    def _command(self, argv: list[str], cwd: Path, limits: Limits) -> list[str]:
        disk_bytes = limits.disk_mb * 2**20
        command = [
            "prlimit",
            f"--as={limits.mem_mb * 2**20}",
            f"--cpu={int(limits.wall_s * limits.cpus) + 1}",
            f"--nproc={limits.pids}",
            f"--fsize={disk_bytes}",
            "--core=0",
            "--",
        ]
        if self.unshare:
            command += [*self.unshare, "sh", "-c", NAMESPACE_SETUP, "sh", str(cwd)]
        return command + argv

    def _run(
        self, argv: list[str], cwd: Path, limits: Limits, key: bytes | None = None
    ) -> ScriptResult:
        """Run ARGV contained; KEY, when given, is written to its stdin (then closed)."""
        env = {
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "HOME": str(cwd),
            "TMPDIR": str(cwd),
            **JOB_PROCESS_ENV,
        }
        stdout, stderr = CappedBuffer(limits.output_bytes), CappedBuffer(limits.output_bytes)
        started = time.perf_counter()
        child = subprocess.Popen(
            self._command(argv, cwd, limits),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL if key is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        with self._running_lock:
            self._running.add(child.pid)
        if key is not None:
            try:
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
        first = sys.executable if command[0] == PYTHON else command[0]
        return self._run([first, *command[1:]], job_dir, limits)

    def _launch_runner(self, job_dir: Path, limits: Limits, key: bytes | None = None) -> ScriptResult:
        kinds = [KINDS_FLAG, str(self.kinds_dir)] if self.kinds_dir is not None else []
        argv = [sys.executable, "-m", "lero.sandbox.harness", str(job_dir), *kinds]
        return self._run(argv, job_dir, limits, key)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
