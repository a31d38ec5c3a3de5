"""The Docker backend (the default): one locked-down, short-lived container per run.

Every container: no network, read-only root, size-capped /tmp tmpfs, non-root user, all
capabilities dropped, no-new-privileges, pids / memory (= memory + swap) / CPU limits,
RLIMIT_FSIZE = the job-dir cap, an environment made of the image's fixed ENV only (no
host variable is ever passed), mounts: the job directory (rw), the lero packages (ro) and
the modules of job kinds declared outside lero (ro, `Sandbox.ship_kind`), nothing else
(never the Docker socket). A host-side deadline kills it; output
is streamed and capped (head + tail); a watchdog kills it when the job directory grows
past `Limits.disk_mb`; it is removed in a `finally`. Containers carry the owner's
host/pid label, and containers of dead owners are reaped when a backend starts.

Warm start: torch takes seconds to import, so validate / train jobs get a container that
was started earlier with `sandbox.harness --wait` (it imports the engine, then polls for
job.json). One spare per `Limits` is kept ready (`spares_per_limits`); each container
still serves exactly one job, and the job's deadline starts when its job.json is written.

Containers keep stdin open: a sealed kind's job key (`sandbox.seal`) is written there, over
an attach of its own, when the job is handed to the container (warm or cold).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import requests
from docker.types import LogConfig, Mount, Ulimit

from lero.sandbox.base import Sandbox
from lero.sandbox.diskwatch import DiskWatch, exceeded_note
from lero.sandbox.harness import KINDS_FLAG
from lero.sandbox.image import (
    CODE_MOUNT,
    CODE_PACKAGES,
    REPO_ROOT,
    SANDBOX_UID,
    docker_client,
    image_tag,
    require_image,
)
from lero.sandbox.output import CappedBuffer
from lero.sandbox.types import Job, Limits, SandboxUnavailable, ScriptResult, kind_of

LABEL = "lero.sandbox"
OWNER_LABEL = "lero.sandbox.owner"  # "<hostname>:<pid>" of the process that made it
SPARE_START_WAIT_S = 10.0  # how long close() waits for a spare still being started (it removes itself)
KINDS_MOUNT = "/opt/lero-kinds"  # the backend's kinds_dir (Sandbox.ship_kind), read-only
RUNNER_COMMAND = ["python", "-m", "lero.sandbox.harness", "/job", KINDS_FLAG, KINDS_MOUNT]
DOCKER_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)


@dataclass
class _Started:
    """A running container and what collects its output; `clock` starts its deadline."""

    container: Any
    job_dir: Path
    limits: Limits
    stdout: CappedBuffer
    stderr: CappedBuffer
    reader: threading.Thread | None = None
    clock: float = field(default_factory=time.perf_counter)


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _owner_alive(owner: str) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's container: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DockerSandbox(Sandbox):
    kind = "docker"

    def __init__(
        self, spares_per_limits: int = 1, image: str | None = None, import_root: str | None = None,
        **kwargs,
    ) -> None:
        """IMAGE: the base image (default `image_tag()`), or a custom env's layer
        (`sandbox.env_layer`), whose module
        imports from IMPORT_ROOT inside the container."""
        super().__init__(**kwargs)
        self.image, self.import_root = image or image_tag(), import_root
        self.spares_per_limits = spares_per_limits  # warm containers kept per Limits (0 = none)
        self._spares: dict[Limits, list[_Started]] = {}
        self._claimed: dict[Path, _Started] = {}
        self._spares_lock = threading.Lock()
        self._starting: dict[Limits, int] = {}  # spares being started now, per Limits
        self._spare_ready = threading.Condition(self._spares_lock)  # a start ended (or close)
        self._replenishers: list[threading.Thread] = []
        self._closed = False
        atexit.register(self.close)
        self.client = docker_client()
        self.image_id = require_image(self.client, self.image)  # every container's: a re-tag changes nothing
        self.reap()
        self.as_root = os.geteuid() == 0
        self.user = (
            f"{SANDBOX_UID}:{SANDBOX_UID}" if self.as_root else f"{os.getuid()}:{os.getgid()}"
        )

    def reap(self) -> int:
        """Remove sandbox containers whose owning process is gone; returns how many."""
        removed = 0
        # the low-level listing: a container another process removes meanwhile cannot fail it
        for entry in self.client.api.containers(all=True, filters={"label": LABEL}):
            if not _owner_alive((entry.get("Labels") or {}).get(OWNER_LABEL, "")):
                try:
                    self.client.api.remove_container(entry["Id"], force=True)
                    removed += 1
                except docker.errors.APIError:
                    continue
        return removed

    def _prepare_dir(self, job_dir: Path) -> None:
        if self.as_root:
            os.chown(job_dir, SANDBOX_UID, SANDBOX_UID)

    def _job_path_inside(self, job_dir: Path, name: str) -> str:
        return f"/job/{name}"

    def _env_inside(self, env: dict[str, Any]) -> dict[str, Any]:
        """A working-directory module imports from the layer's root, never a host path."""
        if "import_root" not in env:
            return env
        inside = {key: value for key, value in env.items() if key != "import_root"}
        return inside if self.import_root is None else {**inside, "import_root": self.import_root}

    def _launch(self, command: list[str], job_dir: Path, limits: Limits) -> ScriptResult:
        return self._run_container(command, job_dir, limits)  # the image's `python` is PYTHON

    def _launch_runner(self, job_dir: Path, limits: Limits, key: bytes | None = None) -> ScriptResult:
        with self._spares_lock:
            warm = self._claimed.pop(job_dir, None)
        if warm is None:
            started = self._start(RUNNER_COMMAND, job_dir, limits)
        else:
            started = warm
            started.clock = time.perf_counter()  # the job's deadline starts now, not at the warm-up
        if key is not None:
            self._send_line(started, key)
        return self._finish(started)

    def _send_line(self, started: _Started, line: bytes) -> None:
        """Write LINE to the container's stdin; if that fails, kill it (its job is `crashed`)."""
        try:
            sock = self.client.api.attach_socket(
                started.container.id, params={"stdin": 1, "stream": 1}
            )
            try:
                getattr(sock, "_sock", sock).sendall(line + b"\n")
            finally:
                sock.close()
        except (*DOCKER_ERRORS, OSError):
            _kill(started.container)

    def _job_dir_for(self, job: Job) -> Path:
        """Every job gets a container that already imported torch, when one is ready; a job
        of a kind declared outside lero a fresh one (a spare may predate its kinds folder)."""
        if self.spares_per_limits == 0 or kind_of(job.kind).source is not None:
            return super()._job_dir_for(job)
        try:
            warm = self._take_spare(job.limits) or self._start_spare(job.limits)
        except SandboxUnavailable:
            return super()._job_dir_for(job)  # the cold path reports the failure as `crashed`
        replenish = threading.Thread(target=self._replenish, args=(job.limits,), daemon=True)
        with self._spares_lock:
            self._replenishers = [t for t in self._replenishers if t.is_alive()] + [replenish]
        replenish.start()
        with self._spares_lock:
            self._claimed[warm.job_dir] = warm
        return warm.job_dir

    def prewarm(self, limits: Limits) -> None:
        """Start `spares_per_limits` warm containers for `limits`, one after another, in a
        thread: a run's first jobs (its validations) would otherwise all start cold."""

        def fill() -> None:
            for _ in range(self.spares_per_limits):
                self._replenish(limits)

        thread = threading.Thread(target=fill, daemon=True)
        with self._spares_lock:
            self._replenishers = [t for t in self._replenishers if t.is_alive()] + [thread]
        thread.start()

    def _start_spare(self, limits: Limits) -> _Started:
        job_dir = self._new_job_dir("warm")
        return self._start([*RUNNER_COMMAND, "--wait"], job_dir, limits)

    def _take_spare(self, limits: Limits) -> _Started | None:
        """A ready spare; while one is being started, wait for it: it is up sooner than a
        cold start begun now, and two starts at once only share the CPU."""
        while True:
            with self._spares_lock:
                while not self._spares.get(limits) and self._starting.get(limits) and not self._closed:
                    self._spare_ready.wait()
                spares = self._spares.get(limits, [])
                if not spares:
                    return None
                warm = spares.pop()
            with contextlib.suppress(*DOCKER_ERRORS):
                warm.container.reload()
                if warm.container.status == "running":
                    return warm
            self._discard(warm)

    def _replenish(self, limits: Limits) -> None:
        with self._spares_lock:
            pending = len(self._spares.get(limits, [])) + self._starting.get(limits, 0)
            if self._closed or pending >= self.spares_per_limits:
                return
            self._starting[limits] = self._starting.get(limits, 0) + 1
        warm = None
        try:
            warm = self._start_spare(limits)
        except SandboxUnavailable:
            pass
        finally:
            with self._spares_lock:
                self._starting[limits] -= 1
                if warm is not None and not self._closed:
                    self._spares.setdefault(limits, []).append(warm)
                    warm = None
                self._spare_ready.notify_all()
        if warm is not None:
            self._discard(warm)

    def _discard(self, started: _Started) -> None:
        with contextlib.suppress(*DOCKER_ERRORS):
            started.container.remove(force=True)
        shutil.rmtree(started.job_dir, ignore_errors=True)

    def idle_spares(self) -> dict[str, Path]:
        """Warm containers waiting for a job (container id -> job dir); not leftovers."""
        with self._spares_lock:
            return {w.container.id: w.job_dir for spares in self._spares.values() for w in spares}

    def close(self) -> None:
        """Remove the warm containers that never got a job (also at interpreter exit), and wait
        for the spares still being started, which remove themselves once up: after it, no
        container of this backend's spares is left (at most SPARE_START_WAIT_S of waiting)."""
        with self._spares_lock:
            self._closed = True
            self._spare_ready.notify_all()
            unused = [w for spares in self._spares.values() for w in spares]
            unused += self._claimed.values()
            self._spares.clear()
            self._claimed.clear()
            starting = list(self._replenishers)
        for warm in unused:
            self._discard(warm)
        for thread in starting:  # a spare being started now is discarded when it is up
            thread.join(timeout=SPARE_START_WAIT_S)

    def _kill_running(self) -> None:
        """Remove every container this process made (running jobs first, then warm spares).

        The low-level listing: it does not inspect each container, so one that vanishes
        meanwhile cannot fail it; removals run in parallel (each is a round trip).
        """
        self._remove_mine()
        self.close()
        self._remove_mine()

    def _remove_mine(self) -> None:
        with contextlib.suppress(*DOCKER_ERRORS):
            mine = self.client.api.containers(
                all=True, quiet=True, filters={"label": f"{OWNER_LABEL}={_owner()}"}
            )
            removals = [
                threading.Thread(target=self._remove_quietly, args=(entry["Id"],))
                for entry in mine
            ]
            for removal in removals:
                removal.start()
            for removal in removals:
                removal.join()

    def _remove_quietly(self, container_id: str) -> None:
        with contextlib.suppress(*DOCKER_ERRORS):
            self.client.api.remove_container(container_id, force=True)

    def _run_container(self, command: list[str], job_dir: Path, limits: Limits) -> ScriptResult:
        return self._finish(self._start(command, job_dir, limits))

    def _start(self, command: list[str], job_dir: Path, limits: Limits) -> _Started:
        """Create, attach to (output streaming from the first byte) and start a container."""
        self._prepare_dir(job_dir)
        mounts = [Mount("/job", str(job_dir), type="bind", read_only=False)]
        if self.kinds_dir is not None:
            mounts.append(Mount(KINDS_MOUNT, str(self.kinds_dir), type="bind", read_only=True))
        mounts += [
            Mount(f"{CODE_MOUNT}/lero/{package}", str(REPO_ROOT / package), type="bind", read_only=True)
            for package in CODE_PACKAGES
        ]
        disk_bytes = limits.disk_mb * 2**20
        try:
            container = self.client.containers.create(
                self.image_id,
                command,
                user=self.user,
                working_dir="/job",
                network_mode="none",
                read_only=True,
                tmpfs={"/tmp": f"size={limits.tmp_mb}m,mode=1777,nosuid,nodev"},
                stdin_open=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                pids_limit=limits.pids,
                mem_limit=f"{limits.mem_mb}m",
                memswap_limit=f"{limits.mem_mb}m",
                nano_cpus=int(limits.cpus * 1e9),
                ulimits=[
                    Ulimit(name="fsize", soft=disk_bytes, hard=disk_bytes),
                    Ulimit(name="core", soft=0, hard=0),
                    Ulimit(name="nofile", soft=1024, hard=1024),
                ],
                ipc_mode="private",
                shm_size="16m",
                mounts=mounts,
                labels={LABEL: "1", OWNER_LABEL: _owner()},
                log_config=LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}),
            )
        except DOCKER_ERRORS as error:
            raise SandboxUnavailable(
                f"Docker could not create a sandbox: {error}".splitlines()[0]
            ) from error
        started = _Started(
            container,
            job_dir,
            limits,
            CappedBuffer(limits.output_bytes),
            CappedBuffer(limits.output_bytes),
        )
        try:
            stream = container.attach(stdout=True, stderr=True, stream=True, logs=True, demux=True)
            started.reader = threading.Thread(
                target=_drain_demuxed, args=(stream, started.stdout, started.stderr), daemon=True
            )
            started.clock = time.perf_counter()
            container.start()
            started.reader.start()
        except DOCKER_ERRORS as error:
            self._discard(started)
            raise SandboxUnavailable(
                f"Docker could not start a sandbox: {error}".splitlines()[0]
            ) from error
        return started

    def _finish(self, started: _Started) -> ScriptResult:
        """Wait for a started container under its deadline, collect the outcome, remove it."""
        container, limits = started.container, started.limits
        disk_bytes = limits.disk_mb * 2**20
        timed_out = oom_killed = False
        exit_code: int | None = None
        try:
            with DiskWatch(started.job_dir, disk_bytes, lambda: _kill(container)) as disk:
                exit_code = _wait(container, started.clock + limits.wall_s)
                timed_out = exit_code is None
                elapsed = time.perf_counter() - started.clock
            started.reader.join(timeout=2.0)
            if not timed_out:
                container.reload()
                oom_killed = bool(container.attrs["State"].get("OOMKilled"))
        except DOCKER_ERRORS as error:
            raise SandboxUnavailable(
                f"Docker failed while running a sandbox: {error}".splitlines()[0]
            ) from error
        finally:
            with contextlib.suppress(*DOCKER_ERRORS):
                container.remove(force=True)
        if disk.exceeded.is_set():
            started.stderr.feed(exceeded_note(limits.disk_mb))
        status = _status(exit_code, timed_out, oom_killed, disk.exceeded.is_set())
        return ScriptResult(
            status, exit_code, started.stdout.text(), started.stderr.text(), elapsed
        )


def _wait(container, deadline: float) -> int | None:
    """Exit code, or None after killing it at the deadline.

    The SDK reports a read timeout sometimes as ReadTimeout, sometimes as ConnectionError,
    so either just means: wait again for what is left of the deadline.
    """
    while (remaining := deadline - time.perf_counter()) > 0:
        try:
            return container.wait(timeout=max(remaining, 0.01))["StatusCode"]
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            time.sleep(0.01)
    _kill(container)
    return None


def _kill(container) -> None:
    with contextlib.suppress(*DOCKER_ERRORS):
        container.kill()


def _status(exit_code: int | None, timed_out: bool, oom_killed: bool, over_disk: bool) -> str:
    if timed_out:
        return "timeout"
    if oom_killed:
        return "oom"
    if over_disk or exit_code == 137:
        return "killed"
    return "ok" if exit_code == 0 else "error"


def _drain_demuxed(stream, stdout: CappedBuffer, stderr: CappedBuffer) -> None:
    try:
        for out_chunk, err_chunk in stream:
            if out_chunk:
                stdout.feed(out_chunk)
            if err_chunk:
                stderr.feed(err_chunk)
    except (requests.exceptions.RequestException, OSError, docker.errors.APIError):
        return
