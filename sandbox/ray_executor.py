"""Train and evaluate jobs on a Ray cluster, behind the sandbox's job interface.

`RaySandbox` is a `Sandbox`, so the graph calls `run_job` / `run_group` as before
and the result cache and job events stay on the host. Only where a checked job executes
changes: jobs of a kind not declared `on_cluster` (validate: quick, the debugger waits
for them) run on the local backend, while every other job becomes a Ray task (`num_cpus`
= `Limits.cpus`, `memory` = `Limits.mem_mb`, spread over the nodes) that runs the same
sandbox backend (Docker) on whatever node it lands on. The task carries the job's
`JobKind` (a kind declared outside lero needs its module file at the same path on every
node, as lero itself); the job's input files travel to the node, and the outputs its kind
keeps come back, as bytes through Ray's object store.

A task cannot reach the host, so it posts where it runs and its training progress to a
small actor on the driver's node (`JobBoard`); the host thread waiting for the task
drains it every 0.5 s into `job_placed` and `train_progress` events, and `job_finished`
carries the `node` the job ran on.

Faults: Ray retries a task whose node or worker dies (`max_retries`). A job lost anyway
raises `JobLost`: the job is `crashed`, never cached, and since the training branch did
not finish, `lero resume` trains it again. `cancel()` force-cancels the tasks in flight;
containers whose worker was killed (cancel, lost node) are reaped on every live machine.

Ray has no authentication: a cluster must sit on a trusted network (docs/ray.md).
Candidate code still runs only inside the sandbox on every node.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from lero.sandbox.backends import local_sandbox
from lero.sandbox.base import PROGRESS_POLL_S, JobCancelled, Payload, Sandbox
from lero.sandbox.results import read_outputs
from lero.sandbox.types import (
    Job,
    JobKind,
    JobResult,
    Limits,
    SandboxUnavailable,
    ScriptResult,
    kind_of,
    register_kind,
)

log = logging.getLogger(__name__)

DEFAULT_MAX_RETRIES = 3  # Ray retries of a task whose node or worker died
LOCAL_ADDRESS = "local"  # ray.init: start a new instance on this machine
NODE_WORK_DIR = Path(tempfile.gettempdir()) / "lero-ray-jobs"  # job directories on a node
REAP_WAIT_S = 10.0  # how long a node waits for killed workers to exit before reaping
BOARD_TIMEOUT_S = 10.0


class JobLost(RuntimeError):
    """Ray gave up on a job (its node died more often than it retries): the run stops and
    `lero resume` trains the job again."""


# ---------------------------------------------------------------- the connection


_connected_to: str | None = None  # the address this module connected to, None = not us


def connect(address: str | None) -> None:
    """Connect this process to Ray: ADDRESS (`auto` = the cluster `ray start` made on this
    machine, or `host:port`), or without one a new local instance on 127.0.0.1.

    A session this process already has is reused (the same address, or one the caller
    opened itself); the dashboard is never started.
    """
    global _connected_to
    wanted = address or LOCAL_ADDRESS
    if ray.is_initialized():
        if _connected_to in (None, wanted):
            return
        ray.shutdown()
    options: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": logging.WARNING,
    }
    if wanted == LOCAL_ADDRESS:
        _loopback_only()
    try:
        ray.init(address=wanted, **options)
    except (ConnectionError, ValueError, RuntimeError) as error:
        raise SandboxUnavailable(
            f"cannot connect to the Ray cluster at {wanted!r}: {_one_line(error)}"
        ) from None
    _connected_to = wanted


def _loopback_only() -> None:
    """Make the local instance bind and advertise 127.0.0.1 only.

    Ray otherwise advertises this machine's network address and listens on every
    interface; `_node_ip_address="127.0.0.1"` alone is resolved back to that address.
    `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` (read by Ray at import, hence also set on its
    module) is Ray's own single-machine mode; the started processes inherit it.
    """
    from ray._private import ray_constants

    os.environ[ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:500]


# ---------------------------------------------------------------- on the nodes


@ray.remote(num_cpus=0)
class JobBoard:
    """Placement and progress that tasks post, drained per job by the host."""

    def __init__(self) -> None:
        self.updates: dict[str, list[dict[str, Any]]] = {}

    def post(self, job_id: str, update: dict[str, Any]) -> None:
        self.updates.setdefault(job_id, []).append(update)

    def drain(self, job_id: str) -> list[dict[str, Any]]:
        return self.updates.pop(job_id, [])


def _this_node() -> dict[str, Any]:
    """Where the calling task runs: Ray node id and IP, host name and worker pid."""
    return {
        "node": ray.get_runtime_context().get_node_id(),
        "node_ip": ray.util.get_node_ip_address(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }


_node_sandboxes: dict[str, Sandbox] = {}  # one per backend kind and env in each worker process
_boards: dict[str, Any] = {}  # job id -> (board, node) of the jobs running in this worker


def _post_progress(event: str, **fields: Any) -> None:
    """The node sandbox's events callback: progress goes to the board of its job."""
    board, node = _boards.get(fields.get("job_id"), (None, None))
    if event == "train_progress" and board is not None:
        board.post.remote(fields["job_id"], {"event": "progress", **fields, "node": node})


def _node_sandbox(backend: str, env: dict[str, Any] | None = None) -> Sandbox:
    """This worker's sandbox backend for ENV; `local_sandbox` builds a missing or stale Docker
    image, and a custom env's layer, on this node first (offline from its Python, one build
    per machine at a time)."""
    key = json.dumps([backend, env], sort_keys=True)
    if key not in _node_sandboxes:
        NODE_WORK_DIR.mkdir(parents=True, exist_ok=True)
        _node_sandboxes[key] = local_sandbox(
            backend, events=_post_progress, work_dir=NODE_WORK_DIR, spares_per_limits=0,
            progress=log.warning, env=env,
        )
    return _node_sandboxes[key]


def _run_here(job: Job, kind: JobKind, payload: Payload, backend: str, board: Any) -> dict[str, Any]:
    """One checked job of KIND (registered here too: the driver may have declared it) in
    this node's sandbox; the result with the outputs its kind keeps, as bytes."""
    register_kind(kind)
    node = _this_node()
    ray.get(board.post.remote(job.job_id, {"event": "placed", **node}))
    _boards[job.job_id] = (board, node["node"])
    try:
        result = _node_sandbox(backend, job.env)._execute(job, payload)
    finally:
        _boards.pop(job.job_id, None)
    outputs = None
    if result.policy_dir is not None and kind.outputs is not None:
        folder = Path(result.policy_dir)
        outputs = read_outputs(folder, kind.outputs)
        shutil.rmtree(folder.parents[len(Path(kind.outputs.folder).parts) - 1], ignore_errors=True)  # its job dir
        if isinstance(outputs, JobResult):
            result, outputs = outputs, None
        result.policy_dir = None
    return {"result": result.to_dict(), "outputs": outputs, **node}


def _reap_here(pids: list[int], backend: str) -> int:
    """Remove sandbox containers of dead workers on this machine, after PIDS have exited."""
    deadline = time.monotonic() + REAP_WAIT_S
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    if backend != "docker":
        return 0
    sandbox = _node_sandbox(backend)
    return sandbox.reap()


# Tasks wrap plain module functions: Ray ships them by reference, so they share this
# module's globals (`_boards`, `_node_sandboxes`) with the sandbox's events callback.
_run_on_node = ray.remote(_run_here)
_reap_node = ray.remote(num_cpus=0)(_reap_here)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---------------------------------------------------------------- on the host


def _fits_some_node(limits: Limits) -> bool:
    """Whether any live node's total resources could ever run a task with LIMITS."""
    return any(
        node.get("Alive")
        and node["Resources"].get("CPU", 0) >= limits.cpus
        and node["Resources"].get("memory", 0) >= limits.mem_mb * 2**20
        for node in ray.nodes()
    )



class RaySandbox(Sandbox):
    """A sandbox whose jobs (those of kinds declared `on_cluster`) run as Ray tasks; `kind` is the backend's."""

    def __init__(
        self,
        local: Sandbox,
        address: str | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.local = local
        self.kind = local.kind  # what runs the code on every node
        self.max_retries = max_retries
        connect(address)
        self._lock = threading.Lock()
        self._board: Any = None
        self._in_flight: dict[str, tuple[Job, Any]] = {}  # job id -> (job, ObjectRef)
        self._cancelled: set[str] = set()
        self._attempts: dict[str, list[dict[str, Any]]] = {}  # job id -> node of each attempt
        self._finished_on: dict[str, dict[str, Any]] = {}  # job id -> node, until job_finished
        self._orphans: list[dict[str, Any]] = []  # attempts whose worker died with a container
        self._reaped: list[dict[str, Any]] = []  # orphans reaped once: `close` reaps them again
        self._closed = False

    # the local backend does what is not a train / evaluate job
    def _launch(self, command: list[str], job_dir: Path, limits: Limits) -> ScriptResult:
        return self.local._launch(command, job_dir, limits)

    def _launch_runner(self, job_dir: Path, limits: Limits, key: bytes | None = None) -> ScriptResult:
        return self.local._launch_runner(job_dir, limits, key)

    def _job_path_inside(self, job_dir: Path, name: str) -> str:
        return self.local._job_path_inside(job_dir, name)

    def _emit(self, event: str, **fields: Any) -> None:
        if event == "job_finished":
            with self._lock:
                fields.update(self._finished_on.pop(fields["job_id"], {}))
        super()._emit(event, **fields)

    def _execute_group(self, jobs: list[Job], payloads: list[Payload]) -> list[JobResult]:
        """A group runs as its jobs, side by side on the cluster: a task ships one
        policy back, and spreading the seeds over nodes beats one process there."""
        with ThreadPoolExecutor(len(jobs), thread_name_prefix="lero-ray-group") as pool:
            return list(pool.map(self._execute, jobs, payloads))

    def _execute(self, job: Job, payload: Payload) -> JobResult:
        kind = kind_of(job.kind)
        if not kind.on_cluster:
            return self.local._execute(job, payload)
        if not _fits_some_node(job.limits):  # Ray would queue it forever
            return JobResult.failure(
                "crashed", "NoRayNode", f"no live Ray node offers {job.limits.cpus} CPU and "
                f"{job.limits.mem_mb} MB of memory for a {job.kind} job (Limits); add bigger nodes",
            )
        ref = _run_on_node.options(
            num_cpus=job.limits.cpus,
            memory=job.limits.mem_mb * 2**20,
            max_retries=self.max_retries,
            retry_exceptions=False,
            scheduling_strategy="SPREAD",
        ).remote(job, kind, payload, self.local.kind, self._job_board())
        with self._lock:
            self._in_flight[job.job_id] = (job, ref)
        try:
            reply = self._await(job, ref)
        except ray.exceptions.RayTaskError as error:  # our task raised on the node
            return JobResult.failure(
                "crashed", "NodeFailed", f"the {job.kind} job failed on its Ray node: "
                f"{_one_line(error.cause or error)}"
            )
        except ray.exceptions.RayError as error:
            self._lose(job, error)
        finally:
            with self._lock:
                self._in_flight.pop(job.job_id, None)
        return self._receive(job, reply)

    def _job_board(self) -> Any:
        """The actor tasks post to, pinned to this (the driver's) node; made on first use."""
        with self._lock:
            if self._board is None:
                here = ray.get_runtime_context().get_node_id()
                self._board = JobBoard.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)
                ).remote()
            return self._board

    def _await(self, job: Job, ref: Any) -> dict[str, Any]:
        """Wait for the task, relaying its board posts every PROGRESS_POLL_S (on this thread,
        so events reach the graph node that asked for the job)."""
        while True:
            ready, _ = ray.wait([ref], timeout=PROGRESS_POLL_S)
            self._relay(job)
            if ready:
                return ray.get(ref)

    def _relay(self, job: Job) -> None:
        """Turn what JOB's tasks posted into `job_placed` / `train_progress` events."""
        try:
            updates = ray.get(self._job_board().drain.remote(job.job_id), timeout=BOARD_TIMEOUT_S)
        except ray.exceptions.RayError:
            return  # progress is cosmetic; the placement also comes back with the result
        fields = self._event_fields(job)
        for update in updates:
            kind = update.pop("event")
            if kind == "placed":
                with self._lock:
                    attempts = self._attempts.setdefault(job.job_id, [])
                    attempts.append(update)
                self._emit(
                    "job_placed", **fields, node=update["node"], node_ip=update["node_ip"],
                    worker=f"{update['host']}:{update['pid']}", attempt=len(attempts),
                )
            elif kind == "progress":
                update.update(fields)
                self._emit("train_progress", **update)

    def _receive(self, job: Job, reply: dict[str, Any]) -> JobResult:
        """The task's reply as a host-side result: weights written to a host job directory."""
        result = JobResult.from_dict(reply["result"])
        node = {"node": reply["node"], "node_ip": reply["node_ip"]}
        with self._lock:
            self._finished_on[job.job_id] = node
            attempts = self._attempts.pop(job.job_id, [])
            self._orphans += [a for a in attempts if a["pid"] != reply["pid"] or a["host"] != reply["host"]]
        outputs = kind_of(job.kind).outputs
        if reply["outputs"] is not None and outputs is not None:
            folder = self._new_job_dir(job.job_id) / outputs.folder
            for name, data in reply["outputs"].items():  # the kept files, as the runner left them
                path = folder / name
                if Path(name).is_absolute() or ".." in Path(name).parts:
                    return JobResult.failure("crashed", "NoPolicy", f"the node shipped an output outside its folder: {name}")
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            result.policy_dir = str(folder)
        return result

    def _lose(self, job: Job, error: BaseException) -> None:
        """Ray gave up on JOB (or it was cancelled): record it as crashed and stop the run."""
        self._relay(job)
        with self._lock:
            self._orphans += self._attempts.pop(job.job_id, [])
            cancelled = job.job_id in self._cancelled
        reason = "cancelled" if cancelled else f"lost by Ray after {self.max_retries} retries"
        message = f"the {job.kind} job {job.job_id} was {reason}: {_one_line(error)}"
        self._emit(
            "job_finished", **self._event_fields(job), status="crashed", cached=False,
            error=message,
        )
        raise (JobCancelled if cancelled else JobLost)(message)

    def _kill_running(self) -> None:
        """Ctrl-C: the local backend's jobs (validate) and every Ray task in flight."""
        self.local.cancel_all()
        self.cancel()

    def cancel(self) -> None:
        """Stop every job in flight: force-cancel its Ray task (the worker is killed) and
        remove the containers such workers leave behind, on every live machine."""
        with self._lock:
            in_flight = list(self._in_flight.values())
            self._cancelled.update(job.job_id for job, _ in in_flight)
        for _, ref in in_flight:
            with contextlib.suppress(ray.exceptions.RayError, ValueError):
                ray.cancel(ref, force=True)
        for job, ref in in_flight:
            with contextlib.suppress(ray.exceptions.RayError):
                ray.wait([ref], timeout=REAP_WAIT_S)
            self._relay(job)  # their placements: where the containers are
            with self._lock:
                self._orphans += self._attempts.pop(job.job_id, [])
        self.reap_orphans()

    def reap_orphans(self, again: bool = False) -> int:
        """Remove the containers of workers that died in a job (cancelled, node lost);
        returns how many. One task per live machine waits for those workers to exit. AGAIN:
        the orphans reaped before, once more (`close`): a container a dying worker asked for
        can reach its daemon after the first pass."""
        with self._lock:
            if again:
                orphans = list(self._reaped)
            else:
                orphans, self._orphans = self._orphans, []
                self._reaped += orphans
        if not orphans or not ray.is_initialized():
            return 0
        by_host: dict[str, list[int]] = {}
        for attempt in orphans:
            by_host.setdefault(attempt["host"], []).append(attempt["pid"])
        machines = {}  # host name -> one live node on it
        for node in ray.nodes():
            if node.get("Alive"):
                machines.setdefault(node.get("NodeManagerHostname"), node["NodeID"])
        refs = [
            _reap_node.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
            ).remote(by_host.get(host, []), self.local.kind)
            for host, node_id in machines.items()
        ]
        try:
            return sum(ray.get(refs, timeout=REAP_WAIT_S + 30))
        except ray.exceptions.RayError as error:
            log.warning("could not reap sandbox containers on every Ray node: %s", _one_line(error))
            return 0

    def close(self) -> None:
        """Cancel what still runs, reap what killed workers left, stop the board and the
        local backend (the Ray connection stays for the process: another run may use it)."""
        if self._closed:
            return
        self._closed = True
        if ray.is_initialized():
            self.cancel()
            self.reap_orphans(again=True)
            with self._lock:
                board, self._board = self._board, None
            if board is not None:
                with contextlib.suppress(ray.exceptions.RayError):
                    ray.kill(board)
        self.local.close()
