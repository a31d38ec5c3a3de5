"""The Docker backend (the default): one locked-down, short-lived container per run.

Every container: no network, read-only root, size-capped /tmp tmpfs, non-root user, all
capabilities dropped, no-new-privileges, pids / memory (= memory + swap) / CPU limits,
RLIMIT_FSIZE = the job-dir cap, an environment made of the image's fixed ENV only (no
host variable is ever passed), mounts: the job directory (rw), the lero packages and the
policy (ro), nothing else (never the Docker socket). A host-side deadline kills it; output
is streamed and capped (head + tail); a watchdog kills it when the job directory grows
past `Limits.disk_mb`; it is removed in a `finally`. Containers carry the owner's
host/pid label, and containers of dead owners are reaped when a backend starts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import docker
import requests
from docker.types import LogConfig, Mount, Ulimit

from sandbox.base import Sandbox
from sandbox.diskwatch import MAX_ENTRIES, DiskWatch
from sandbox.image import (
    CODE_MOUNT,
    CODE_PACKAGES,
    IMAGE,
    REPO_ROOT,
    SANDBOX_UID,
    docker_client,
    require_image,
)
from sandbox.output import CappedBuffer
from sandbox.types import Limits, SandboxUnavailable, ScriptResult

LABEL = "lero.sandbox"
OWNER_LABEL = "lero.sandbox.owner"  # "<hostname>:<pid>" of the process that made it
SCRIPT_FILE = "script.py"
DOCKER_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)


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

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.client = docker_client()
        require_image(self.client)
        self.reap()
        self.as_root = os.geteuid() == 0
        self.user = (
            f"{SANDBOX_UID}:{SANDBOX_UID}" if self.as_root else f"{os.getuid()}:{os.getgid()}"
        )

    def reap(self) -> int:
        """Remove sandbox containers whose owning process is gone; returns how many."""
        removed = 0
        for container in self.client.containers.list(all=True, filters={"label": LABEL}):
            if not _owner_alive(container.labels.get(OWNER_LABEL, "")):
                try:
                    container.remove(force=True)
                    removed += 1
                except docker.errors.APIError:
                    continue
        return removed

    def _prepare_dir(self, job_dir: Path) -> None:
        if self.as_root:
            os.chown(job_dir, SANDBOX_UID, SANDBOX_UID)

    def _policy_path_inside(self, policy_dir: Path) -> str:
        return "/policy"

    def run_script(self, source: str, limits: Limits | None = None) -> ScriptResult:
        limits = limits or Limits()
        job_dir = self._new_job_dir("script")
        try:
            (job_dir / SCRIPT_FILE).write_text(source)
            return self._run_container(["python", f"/job/{SCRIPT_FILE}"], job_dir, None, limits)
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)

    def _launch_runner(
        self, job_dir: Path, policy_dir: Path | None, limits: Limits
    ) -> ScriptResult:
        return self._run_container(
            ["python", "-m", "sandbox.runner", "/job"], job_dir, policy_dir, limits
        )

    def _run_container(
        self, command: list[str], job_dir: Path, policy_dir: Path | None, limits: Limits
    ) -> ScriptResult:
        self._prepare_dir(job_dir)
        mounts = [Mount("/job", str(job_dir), type="bind", read_only=False)]
        mounts += [
            Mount(f"{CODE_MOUNT}/{package}", str(REPO_ROOT / package), type="bind", read_only=True)
            for package in CODE_PACKAGES
        ]
        if policy_dir is not None:
            mounts.append(Mount("/policy", str(policy_dir), type="bind", read_only=True))
        disk_bytes = limits.disk_mb * 2**20
        try:
            container = self.client.containers.create(
                IMAGE,
                command,
                user=self.user,
                working_dir="/job",
                network_mode="none",
                read_only=True,
                tmpfs={"/tmp": f"size={limits.tmp_mb}m,mode=1777,nosuid,nodev"},
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
        stdout, stderr = CappedBuffer(limits.output_bytes), CappedBuffer(limits.output_bytes)
        timed_out = oom_killed = False
        exit_code: int | None = None
        try:
            stream = container.attach(stdout=True, stderr=True, stream=True, logs=True, demux=True)
            reader = threading.Thread(
                target=_drain_demuxed, args=(stream, stdout, stderr), daemon=True
            )
            with DiskWatch(job_dir, disk_bytes, lambda: _kill(container)) as disk:
                started = time.perf_counter()
                container.start()
                reader.start()
                exit_code = _wait(container, started + limits.wall_s)
                timed_out = exit_code is None
                elapsed = time.perf_counter() - started
            reader.join(timeout=2.0)
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
            stderr.feed(
                f"\n[sandbox] job directory exceeded {limits.disk_mb} MB or {MAX_ENTRIES} entries: killed\n".encode()
            )
        status = _status(exit_code, timed_out, oom_killed, disk.exceeded.is_set())
        return ScriptResult(status, exit_code, stdout.text(), stderr.text(), elapsed)


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
