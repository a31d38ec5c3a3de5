"""The process backend's zygote: a trusted interpreter that has imported the engine once and
forks a confined child per job, so that a job starts in milliseconds where a new
interpreter took two seconds (torch and the engine imported again each time).

The zygote runs no candidate code and holds nothing secret: a sealed kind's key reaches a
job only through that job's stdin pipe. It must stay single-threaded (a fork copies one
thread), so it is started with the jobs' environment (`types.JOB_PROCESS_ENV`: one OpenMP
thread, whose pool is then never started) and refuses to serve otherwise.

Per job: zygote -> supervisor (waits for the job, sends how it ended) -> the job (a new
session, then it sends its pid; `enclosure.enter`: rlimits, namespaces, no capabilities;
with namespaces its PID 1 goes on), which runs the in-sandbox runner in-process (`harness.main`) or execs
a command (`Sandbox.run`). Wire: a SOCK_SEQPACKET socket pair, one JSON request carrying
four descriptors (the job's own channel, its stdin, stdout and stderr); the zygote exits
when the host's end closes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from typing import Any, BinaryIO

from lero.sandbox.enclosure import FAILED_SETUP_EXIT, Confinement, enter
from lero.sandbox.types import SandboxUnavailable

MESSAGE_BYTES = 1 << 20  # one request (its env and argv) or reply
REQUEST_FDS = 4  # the job's channel, stdin, stdout, stderr
# Deadlines on the trusted side's answers, so that a zygote which stays alive but stops
# answering fails a job instead of hanging it before the job's own wall clock starts:
READY_TIMEOUT_S = 300.0  # its start: importing torch and the engine (seconds; minutes on a loaded machine)
SPAWN_TIMEOUT_S = 60.0  # a job's pid: two forks and a setsid (milliseconds)


class Zygote:
    """The host's handle on one zygote: started at the first job, started again if it died."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env  # the jobs' environment, less what each job sets for itself
        self._lock = threading.Lock()
        self._control: socket.socket | None = None
        self._process: subprocess.Popen | None = None

    def _ready_control(self) -> socket.socket:
        """The control socket of a running zygote (under `_lock`)."""
        if self._process is not None and self._process.poll() is None:
            return self._control
        self._stop()
        host_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with tempfile.TemporaryFile() as errors:
            try:
                self._process = subprocess.Popen(
                    # -P and cwd "/": no job imports from whichever directory the host was in
                    [sys.executable, "-P", "-m", "lero.sandbox.zygote", str(zygote_end.fileno())],
                    pass_fds=[zygote_end.fileno()], env=self.env, cwd="/", stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True,
                )  # fmt: skip
            finally:
                zygote_end.close()
            ready = _recv_within(host_end, READY_TIMEOUT_S)
            threads = json.loads(ready)["threads"] if ready else None
            if threads != 1:
                host_end.close()
                self._process.kill()
                self._process.wait()
                errors.seek(0)
                said = errors.read().decode(errors="replace").strip().splitlines()
                if threads:
                    why = f"it runs {threads} threads, and a fork copies one"
                elif said:
                    why = said[-1]
                else:
                    why = "no output" if ready is not None else f"it was not ready within {READY_TIMEOUT_S:g} s"
                raise SandboxUnavailable(f"the process sandbox's zygote cannot serve jobs: {why}")
        self._control = host_end
        return host_end

    def spawn(self, request: dict[str, Any]) -> ZygoteChild:
        """Start one job: REQUEST has `env`, `confinement` (`Confinement.to_dict`) and either
        `runner` (harness arguments) or `exec` (an argv whose first item is a path)."""
        channel, job_channel = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        child = ZygoteChild(channel, os.fdopen(stdin_w, "wb"), os.fdopen(stdout_r, "rb"), os.fdopen(stderr_r, "rb"))
        try:
            with self._lock:
                control = self._ready_control()
                zygote = self._process
                socket.send_fds(control, [json.dumps(request).encode()], [job_channel.fileno(), stdin_r, stdout_w, stderr_w])
        except BaseException:
            child.close_streams()
            raise
        finally:
            job_channel.close()
            for fd in (stdin_r, stdout_w, stderr_w):
                os.close(fd)
        answer = _recv_within(channel, SPAWN_TIMEOUT_S)
        if answer is None:
            with self._lock:  # it answers nothing: the next job gets a new zygote (unless one already did)
                if self._process is zygote:
                    self._stop(kill=True)
            child.close_streams()
            raise SandboxUnavailable(f"the process sandbox's zygote did not start the job within {SPAWN_TIMEOUT_S:g} s")
        reply = json.loads(answer or b"{}")
        if "pid" not in reply:
            child.close_streams()
            raise SandboxUnavailable("the process sandbox's zygote did not start the job")
        child.pid = reply["pid"]
        return child

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self, kill: bool = False) -> None:
        """Close the control socket (the zygote reads EOF and exits; running jobs go on);
        KILL: a zygote that stopped answering is killed rather than waited for."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._process is not None:
            try:
                if kill:
                    self._process.kill()
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None


_SHARED: dict[frozenset[tuple[str, str]], Zygote] = {}
_SHARED_LOCK = threading.Lock()


def shared_zygote(env: dict[str, str]) -> Zygote:
    """The host process's zygote for jobs with ENV: every process sandbox it makes (the runs
    of a study, a benchmark or a test session) forks from one import of the engine instead of
    one each. It runs no job's code, so sharing it shares nothing between jobs; it exits
    when the host does (its end of the control socket closes)."""
    with _SHARED_LOCK:
        return _SHARED.setdefault(frozenset(env.items()), Zygote(env))


class ZygoteChild:
    """A job forked by the zygote, as much of `subprocess.Popen` as the process backend uses."""

    def __init__(self, channel: socket.socket, stdin: BinaryIO, stdout: BinaryIO, stderr: BinaryIO) -> None:
        self.pid = 0
        self.returncode: int | None = None
        self.channel, self.stdin, self.stdout, self.stderr = channel, stdin, stdout, stderr

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code (-N: killed by signal N), as its supervisor reports it."""
        if self.returncode is None:
            reply = _recv_within(self.channel, timeout)
            if reply is None:
                raise subprocess.TimeoutExpired(f"job {self.pid}", timeout)
            self.returncode = json.loads(reply)["returncode"] if reply else -signal.SIGKILL  # its supervisor died
            self.channel.close()
        return self.returncode

    def close_streams(self) -> None:
        self.channel.close()
        for stream in (self.stdin, self.stdout, self.stderr):
            with contextlib.suppress(OSError):
                stream.close()


def _recv_within(sock: socket.socket, timeout_s: float | None) -> bytes | None:
    """One message from SOCK (b"" once its other end is gone), or None when none came within
    TIMEOUT_S (None: however long it takes); SOCK blocks again afterwards."""
    sock.settimeout(timeout_s)
    try:
        return sock.recv(MESSAGE_BYTES)
    except TimeoutError:
        return None
    finally:
        sock.settimeout(None)


def serve(control: socket.socket) -> None:
    """The zygote's loop: import the engine, say how many threads that left, then fork a
    supervisor per request until the host's end closes."""
    from lero.sandbox.harness import make_non_dumpable, preload

    make_non_dumpable()
    preload()
    threads = len(os.listdir("/proc/self/task"))
    control.send(json.dumps({"threads": threads}).encode())
    if threads != 1:
        return
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the supervisors
    while True:
        message, fds, _, _ = socket.recv_fds(control, MESSAGE_BYTES, REQUEST_FDS)
        if not message:
            return
        if len(fds) == REQUEST_FDS and os.fork() == 0:
            control.close()
            _supervise(json.loads(message), fds)
        for fd in fds:
            os.close(fd)


def _supervise(request: dict[str, Any], fds: list[int]) -> None:
    """In the supervisor: fork the job (which reports its pid), wait, report how it ended; never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        channel = socket.socket(fileno=fds[0])
        job = os.fork()
        if job == 0:
            os.setsid()  # before the host learns the pid, so a kill of its group takes it from the start
            channel.send(json.dumps({"pid": os.getpid()}).encode())
            channel.close()
            _run_job(request, fds[1:])
        for fd in fds[1:]:
            os.close(fd)
        _, status = os.waitpid(job, 0)
        channel.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
        os._exit(0)
    except BaseException:
        os._exit(1)


def _run_job(request: dict[str, Any], stdio: list[int]) -> None:
    """In the job: its stdio, its environment, confined; then the runner or the command. Never returns."""
    try:
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # computed again from the job's TMPDIR
        enter(Confinement(**request["confinement"]))
    except BaseException as error:
        os.write(2, f"the process sandbox could not confine the job: {error}\n".encode())
        os._exit(FAILED_SETUP_EXIT)
    if "exec" in request:
        try:
            os.execve(request["exec"][0], request["exec"], request["env"])
        except OSError as error:
            os.write(2, f"cannot run {request['exec'][0]}: {error}\n".encode())
            os._exit(127)
    code = 1
    try:
        from lero.sandbox.harness import main

        code = main(request["runner"])
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
