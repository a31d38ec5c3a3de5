"""What every sandbox backend shares: jobs in directories, result checking, cache, events.

A backend only knows how to run a command contained (`_launch_script`, `_launch_runner`);
this class turns a `Job` into `job.json`, runs `python -m lero.sandbox.runner` through the
backend, and reads back a `result.json` it never trusts: only after the runner exited 0 on
its own, size-capped, opened without following links, schema-checked, and for `evaluate`
sealed with the job's key (`sandbox.seal`); anything else is `crashed` (or `timeout` /
`oom`), never a host exception.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import stat
import tempfile
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lero.sandbox.cache import ResultCache, cache_key
from lero.sandbox.poller import Poller
from lero.sandbox.runner import (
    CHECKPOINT_PREFIX,
    JOB_FILE,
    POLICY_SUBDIR,
    PROGRESS_FILE,
    RESULT_FILE,
    group_policy_dir,
)
from lero.sandbox.seal import is_sealed, new_key
from lero.sandbox.types import (
    JOB_STATUSES,
    Job,
    JobResult,
    Limits,
    SandboxUnavailable,
    ScriptResult,
)
from lero.training.contract import static_check
from lero.training.defaults import MAX_EVAL_EPISODES
from lero.training.policy import POLICY_FILE
from lero.training.resume import LEARNER_FILE

MAX_RESULT_BYTES = 16 * 2**20
MAX_POLICY_BYTES = 64 * 2**20
MAX_PROGRESS_BYTES = 4096
PROGRESS_POLL_S = 0.5
SCRIPT_FILE = "script.py"  # what `run_script` runs, in a fresh job directory
INPUT_POLICY_SUBDIR = "input_policy"  # evaluate: the copy of the trained weights
INPUT_LEARNER_SUBDIR = "input_learner"  # a resumed train job: the copy of the learner state
Events = Callable[..., None]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_schema(data: Any, kind: str) -> JobResult:
    """result.json -> JobResult, or ValueError naming the first thing wrong."""
    if not isinstance(data, dict) or data.get("status") not in JOB_STATUSES:
        raise ValueError("no valid 'status'")
    error = data.get("error")
    if error is not None and not (
        isinstance(error, dict)
        and all(isinstance(error.get(k), str) for k in ("type", "message", "traceback"))
    ):
        raise ValueError("'error' must be {type, message, traceback} strings")
    metrics = data.get("metrics", {})
    if not isinstance(metrics, dict) or not all(
        isinstance(k, str) and _is_number(v) for k, v in metrics.items()
    ):
        raise ValueError("'metrics' must map names to finite numbers")
    curves = data.get("curves", {})
    if not isinstance(curves, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(_is_number(x) for x in v)
        for k, v in curves.items()
    ):
        raise ValueError("'curves' must map names to lists of finite numbers")
    episodes = data.get("episodes", {})
    if not isinstance(episodes, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and len(v) <= MAX_EVAL_EPISODES
        and all(_is_number(x) for x in v)
        for k, v in episodes.items()
    ):
        raise ValueError(f"'episodes' must map names to at most {MAX_EVAL_EPISODES} finite numbers")
    if not isinstance(data.get("reflection_stats", {}), dict):
        raise ValueError("'reflection_stats' must be a dict")
    if not isinstance(data.get("info", {}), dict):
        raise ValueError("'info' must be a dict")
    fitness = data.get("fitness")
    if fitness is not None and not _is_number(fitness):
        raise ValueError("'fitness' must be a finite number or null")
    run_s = data.get("elapsed_s", 0.0)  # the runner's own clock; only shown, never trusted
    if not _is_number(run_s) or run_s < 0:
        raise ValueError("'elapsed_s' must be a finite number >= 0")
    return JobResult(
        status=data["status"],
        error=error,
        metrics=metrics,
        curves=curves,
        reflection_stats=data.get("reflection_stats", {}),
        info=data.get("info", {}) if kind == "describe" else {},
        episodes=episodes if kind == "evaluate" else {},
        fitness=float(fitness) if fitness is not None and kind == "evaluate" else None,
        run_s=float(run_s),
    )


def _read_capped(path: Path, max_bytes: int) -> bytes | None:
    """PATH's bytes, opened without following links; None unless a regular file <= max_bytes.

    For files in directories candidate code could write to; OSError if it cannot be opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        data = handle.read(max_bytes + 1)
    return data if len(data) <= max_bytes else None  # grew after the fstat


def read_result(job_dir: Path, kind: str, key: bytes | None = None) -> JobResult:
    """Read JOB_DIR/result.json defensively; every problem becomes a `crashed` result.

    With KEY (evaluate jobs) the result must carry the runner's seal made with it: a
    result.json the candidate wrote is `crashed` (ForgedResult), whatever it claims.
    """
    data = _read_sealed(job_dir, key)
    if isinstance(data, JobResult):
        return data
    try:
        return _check_schema(data, kind)
    except (ValueError, TypeError, RecursionError) as error:
        return _malformed(error)


def read_group_result(job_dir: Path, kind: str, seeds: list[int], key: bytes | None = None) -> list[JobResult]:
    """A group job's result.json (`runner.train`, `runner.evaluate`: sealed as a whole with
    KEY), read once like `read_result`: one result per seed, in SEEDS' order; a failure (or
    anything malformed) is every seed's."""
    data = _read_sealed(job_dir, key)
    try:
        whole = data if isinstance(data, JobResult) else _check_schema(data, kind)
        if whole.status != "ok":
            return [JobResult.from_dict(whole.to_dict()) for _ in seeds]
        entries = data.get("group")
        if not isinstance(entries, list) or [e.get("seed") if isinstance(e, dict) else None for e in entries] != seeds:
            raise ValueError(f"'group' must hold one entry per seed {seeds}")
        results = [_check_schema(entry, kind) for entry in entries]
    except (ValueError, TypeError, RecursionError) as error:
        return [_malformed(error) for _ in seeds]
    for result in results:
        result.run_s = whole.run_s / len(seeds)  # the runner's clock, shared
    return results


def _read_sealed(job_dir: Path, key: bytes | None) -> Any:
    """JOB_DIR/result.json parsed (capped, no links, sealed with KEY when given), or the
    `crashed` result saying why not."""
    try:
        raw = _read_capped(job_dir / RESULT_FILE, MAX_RESULT_BYTES)
    except OSError as error:
        return JobResult.failure(
            "crashed", "NoResult", f"the runner left no readable {RESULT_FILE} ({error.strerror})"
        )
    if raw is None:
        return JobResult.failure(
            "crashed",
            "BadResult",
            f"{RESULT_FILE} is not a regular file <= {MAX_RESULT_BYTES} bytes",
        )
    try:
        data = json.loads(raw)
        if key is not None and not is_sealed(data, key):
            return JobResult.failure(
                "crashed", "ForgedResult", f"{RESULT_FILE} does not carry this job's seal"
            )
    except (ValueError, TypeError, RecursionError) as error:
        return _malformed(error)
    return data


def _malformed(error: BaseException) -> JobResult:
    return JobResult.failure("crashed", "BadResult", f"malformed {RESULT_FILE}: {error}"[:500])


def _read_policy(policy_dir: Path, name: str = POLICY_FILE) -> bytes | JobResult:
    """The weights (or, NAME=LEARNER_FILE, the learner state) a train job left: its
    directory was writable by the candidate, so no links, capped. The host only moves
    these bytes into other sandboxed jobs; it never loads them."""
    try:
        if policy_dir.is_symlink():
            raise OSError("policy_dir is a symlink")
        policy = _read_capped(policy_dir / name, MAX_POLICY_BYTES)
    except OSError as error:
        return JobResult.failure("crashed", "NoPolicy", f"no {name} in {policy_dir}: {error}")
    if policy is None:
        return JobResult.failure(
            "crashed",
            "NoPolicy",
            f"{name} is not a regular file <= {MAX_POLICY_BYTES} bytes",
        )
    return policy


_CHECKPOINT_DIR = re.compile(rf"^{re.escape(CHECKPOINT_PREFIX)}([0-9]{{1,12}})$")


def checkpoint_dirs(policy_dir: str | Path) -> dict[int, Path]:
    """env steps -> folder of each interval checkpoint a train job left beside its final
    weights (`policy/step-<n>/`), in step order."""
    found = {}
    for entry in Path(policy_dir).iterdir():
        match = _CHECKPOINT_DIR.match(entry.name)
        if match:
            found[int(match.group(1))] = entry
    return dict(sorted(found.items()))


def keep_outputs(job_dir: Path, policy_dirs: list[Path]) -> None:
    """After a train job, leave in JOB_DIR only what lero reads back from it: each ok seed's
    weights, learner state and interval checkpoints' weights (regular files). Anything else
    the candidate wrote there (a `junk.bin` of hundreds of MB, links, folders) is deleted, so
    a kept job directory costs the disk its policy and no more."""
    keep = set()
    for policy in policy_dirs:
        keep |= {policy / POLICY_FILE, policy / LEARNER_FILE}
        keep |= {folder / POLICY_FILE for folder in checkpoint_dirs(policy).values()}
    needed = {parent for path in keep for parent in path.parents if parent.is_relative_to(job_dir)}
    for root, dirs, files in os.walk(job_dir, topdown=False):
        here = Path(root)
        for name in files + [d for d in dirs if (here / d).is_symlink()]:
            path = here / name
            if path not in keep or not stat.S_ISREG(path.lstat().st_mode):
                path.unlink(missing_ok=True)
        for name in dirs:
            path = here / name
            if path not in needed and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)


def read_checkpoints(job: Job, policy_dir: Path) -> dict[int, bytes] | JobResult:
    """The weights of every interval checkpoint JOB's train job left, read like its final
    weights (`_read_policy`); at most one per `checkpoint_every` steps (the candidate could
    write into the folder too)."""
    if not job.checkpoint_every:
        return {}
    found = checkpoint_dirs(policy_dir)
    most = job.steps // job.checkpoint_every + 1
    if len(found) > most:
        return JobResult.failure("crashed", "NoPolicy", f"{len(found)} checkpoints, more than the {most} asked for")
    weights = {}
    for step, folder in found.items():
        read = _read_policy(folder)
        if isinstance(read, JobResult):
            return read
        weights[step] = read
    return weights


Progress = tuple[int, int, float | None]  # done steps, total steps, latest training return


def read_progress(job_dir: Path) -> Progress | None:
    """JOB_DIR/progress.json as (done, total, return); None for anything unexpected.

    The runner writes it in a directory candidate code can write to, so it is read like
    result.json: without following links, regular files only, size-capped,
    schema-checked, and never raising: a bad file only means no progress to show.
    """
    try:
        raw = _read_capped(job_dir / PROGRESS_FILE, MAX_PROGRESS_BYTES)
        data = json.loads(raw) if raw is not None else None
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    done, total, latest = data.get("done"), data.get("total"), data.get("return")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (done, total)):
        return None
    return done, total, float(latest) if _is_number(latest) else None


class ProgressRelay:
    """Poller tick: calls `report(done=, total=, return=)` whenever JOB_DIR/progress.json changed."""

    def __init__(self, job_dir: Path, report: Callable[..., None]) -> None:
        self.job_dir = job_dir
        self.report = report
        self.last: Progress | None = None

    def __call__(self) -> None:
        progress = read_progress(self.job_dir)
        if progress is None or progress == self.last:
            return
        self.last = progress
        done, total, latest = progress
        self.report(done=done, total=total, **{"return": latest})


class JobCancelled(RuntimeError):
    """The sandbox was cancelled (Ctrl-C) before or while the job ran; nothing is cached."""


class Sandbox(ABC):
    """Runs untrusted code contained; see DESIGN.md for statuses and defaults."""

    kind = "abstract"

    def __init__(
        self,
        cache_dir: str | os.PathLike | None = None,
        max_parallel: int = 2,
        events: Events | None = None,
        work_dir: str | os.PathLike | None = None,
    ) -> None:
        if max_parallel < 1:
            raise ValueError(f"max_parallel must be >= 1, got {max_parallel}")
        # Resolved once, here: bind mounts (Docker, the process backend's `mount --bind`)
        # need absolute paths, and the default run directory `runs/` is relative.
        cache_dir = Path(cache_dir).resolve() if cache_dir is not None else None
        self.cache = ResultCache(cache_dir) if cache_dir is not None else None
        self.max_parallel = max_parallel  # jobs at once; callers size their thread pools by it
        self.slots = threading.BoundedSemaphore(max_parallel)
        self.events = events
        if work_dir is None:
            work_dir = (
                cache_dir / "jobs"
                if cache_dir is not None
                else tempfile.mkdtemp(prefix="lero-jobs-")
            )
        self.work_dir = Path(work_dir).resolve()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.cancelled = threading.Event()

    def run_script(self, source: str, limits: Limits | None = None) -> ScriptResult:
        """Run one Python script contained; the raw primitive the jobs are built on."""
        limits = limits or Limits()
        job_dir = self._new_job_dir("script")
        try:
            (job_dir / SCRIPT_FILE).write_text(source)
            return self._launch_script(job_dir, limits)
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)

    @abstractmethod
    def _launch_script(self, job_dir: Path, limits: Limits) -> ScriptResult:
        """Run JOB_DIR/SCRIPT_FILE with Python, contained."""

    @abstractmethod
    def _launch_runner(self, job_dir: Path, limits: Limits, key: bytes | None = None) -> ScriptResult:
        """Run `python -m lero.sandbox.runner` on JOB_DIR, contained; KEY (a line) goes to its stdin."""

    @abstractmethod
    def _job_path_inside(self, job_dir: Path, name: str) -> str:
        """Where the runner sees JOB_DIR/name."""

    def prewarm(self, limits: Limits) -> None:
        """Get sandboxes for jobs with `limits` ready in the background (a backend that keeps
        warm ones overrides this); the first jobs then skip the cold start."""
        return None  # this backend starts each sandbox with its job

    def _env_inside(self, env: dict[str, Any]) -> dict[str, Any]:
        """The job's env as the runner names it where it runs (the host's paths here)."""
        return env

    @abstractmethod
    def close(self) -> None:
        """Release what the backend holds between jobs (e.g. warm containers)."""

    def cancel_all(self) -> None:
        """Kill every running job now and refuse new ones (the first Ctrl-C of a run).

        Jobs that were running or waiting raise `JobCancelled` instead of returning a
        result, so no cancelled job reaches the result cache: a resume runs them again.
        """
        self.cancelled.set()
        self._kill_running()

    @abstractmethod
    def _kill_running(self) -> None:
        """Kill every job this sandbox runs right now."""

    def _check_cancelled(self, job: Job) -> None:
        if self.cancelled.is_set():
            raise JobCancelled(f"{job.kind} job {job.job_id} cancelled")

    def _new_job_dir(self, job_id: str) -> Path:
        job_dir = self.work_dir / f"{job_id}-{uuid.uuid4().hex[:6]}"
        job_dir.mkdir(mode=0o700)
        return job_dir

    def _job_dir_for(self, job: Job) -> Path:
        """The directory the job runs in; a backend may hand out one with a warm sandbox on it."""
        return self._new_job_dir(job.job_id)

    @staticmethod
    def _event_fields(job: Job) -> dict[str, Any]:
        """What every event about JOB carries."""
        return {"job_id": job.job_id, "kind": job.kind, "candidate_id": job.candidate_id}

    def _emit(self, event: str, **fields: Any) -> None:
        if self.events is not None:
            self.events(event, **fields)

    def run_job(self, job: Job) -> JobResult:
        """validate / train / evaluate one candidate (statuses in DESIGN.md); never raises for bad code."""
        if not isinstance(job, Job):
            raise TypeError(f"run_job expects a Job, got {type(job).__name__}")
        return self._run_jobs([job])[0]

    def run_group(self, jobs: list[Job]) -> list[JobResult]:
        """Train (or evaluate) jobs of one candidate and plan that differ only in their seed
        and the files they continue (resume_dir) or measure (policy_dir), in one sandbox, so
        S seeds pay one start. The runner trains them together (`training.train_seeds`,
        every seed bitwise what it gives alone), or measures each policy with its own OEF
        worker on its episodes (`eval_seed`'s, the same for all where they share it). Results,
        cache entries and events stay per job; a job's seconds are its share (1/S) of the
        group's; a failure is every job's."""
        if not jobs or any(not isinstance(job, Job) or job.kind not in ("train", "evaluate") for job in jobs):
            raise TypeError("run_group expects a non-empty list of train or evaluate Jobs")
        apart = {"seed": None, "resume_dir": None, "policy_dir": None, "eval_seed": None, "job_id": None}
        if any({**job.to_dict(), **apart} != {**jobs[0].to_dict(), **apart} for job in jobs):
            raise ValueError("the jobs of a group must differ only in seed, eval_seed, resume_dir and policy_dir")
        if len({job.seed for job in jobs}) != len(jobs):
            raise ValueError("the jobs of a group need distinct seeds")
        return self._run_jobs(jobs)

    @staticmethod
    def _job_cache_key(job: Job) -> str:
        return cache_key(
            job.code,
            {**job.config(), "policy_dir": job.policy_dir, "static_check": job.static_check,
             **({"resume_dir": job.resume_dir} if job.resume_dir else {})},
            job.seed,
        )  # fmt: skip

    def _run_jobs(self, jobs: list[Job]) -> list[JobResult]:
        """One job, or a group, through the cache; the ones it misses run together."""
        keys = [self._job_cache_key(job) for job in jobs]
        cached = [self.cache.get(key) if self.cache is not None else None for key in keys]
        self._check_cancelled(jobs[0])
        for job in jobs:
            self._emit("job_started", **self._event_fields(job))
        missed = [job for job, hit in zip(jobs, cached, strict=True) if hit is None]
        fresh = iter(self._run_uncached(missed) if missed else [])
        results = [hit or next(fresh) for hit in cached]
        self._check_cancelled(jobs[0])
        for job, key, hit, result in zip(jobs, keys, cached, results, strict=True):
            if self.cache is not None and hit is None:
                self.cache.put(key, result)
            # a cache hit cost nothing; `group_of`: the jobs that shared this job's sandbox
            timing = {} if hit else {**result.timing(), "group_of": len(missed)}
            self._emit("job_finished", **self._event_fields(job), status=result.status, cached=result.cached,
                       **timing)  # fmt: skip
        return results

    def _run_uncached(self, jobs: list[Job]) -> list[JobResult]:
        """Jobs (one, or a group) that missed the cache: the static check, the payloads
        (evaluate's weights, a resumed train job's learner state), then one run for all."""
        started = time.perf_counter()
        job = jobs[0]
        violations = static_check(job.code) if job.code is not None and job.static_check else []
        if violations:
            message = "; ".join(str(v) for v in violations[:20])
            return [JobResult.failure("rejected", "StaticCheck", message[:4000]) for _ in jobs]
        payloads: list[bytes | JobResult | None] = []
        for member in jobs:
            if member.kind == "evaluate":
                payloads.append(self._read_own(Path(member.policy_dir), POLICY_FILE))
            else:
                payloads.append(None if member.resume_dir is None else self._read_own(Path(member.resume_dir), LEARNER_FILE))
        results = {i: payload for i, payload in enumerate(payloads) if isinstance(payload, JobResult)}
        ready = [i for i in range(len(jobs)) if i not in results]
        if ready:
            ran = ([self._execute(jobs[ready[0]], payloads[ready[0]])] if len(ready) == 1 else
                   self._execute_group([jobs[i] for i in ready], [payloads[i] for i in ready]))  # fmt: skip
            for i, result in zip(ready, ran, strict=True):
                result.elapsed_s = (time.perf_counter() - started) / len(ready)
                results[i] = result
        return [results[i] for i in range(len(jobs))]

    def _read_own(self, policy_dir: Path, name: str) -> bytes | JobResult:
        """The weights (NAME=POLICY_FILE) or learner state an earlier train job of this sandbox
        left. Both paths come from the run's state or its result cache (files in a run
        directory), so the host reads only inside its own job directories: a path elsewhere,
        or one that links out of them, is refused."""
        if not policy_dir.resolve().is_relative_to(self.work_dir):
            return JobResult.failure("crashed", "NoPolicy", f"{policy_dir} is not a job directory of this sandbox")
        return _read_policy(policy_dir, name)

    def _execute(self, job: Job, payload: bytes | None) -> JobResult:
        """Run a checked job on this machine (PAYLOAD: evaluate's weights or a resumed train
        job's learner state); an executor overrides it."""
        return self._execute_group([job], [payload])[0]

    def _execute_group(self, jobs: list[Job], payloads: list[bytes | None]) -> list[JobResult]:
        """Run checked jobs (one, or a group) in one sandbox on this machine, in one slot."""
        queued = time.perf_counter()
        with self.slots:
            wait_s = time.perf_counter() - queued
            self._check_cancelled(jobs[0])
            job_dir = self._job_dir_for(jobs[0])
            try:
                results = self._run_in(jobs, job_dir, payloads)
            except BaseException:
                shutil.rmtree(job_dir, ignore_errors=True)
                raise
            if jobs[0].kind != "train" or all(result.status != "ok" for result in results):
                shutil.rmtree(job_dir, ignore_errors=True)
            else:
                keep_outputs(job_dir, [Path(r.policy_dir) for r in results if r.status == "ok" and r.policy_dir])
        for result in results:
            result.wait_s = wait_s / len(jobs)
        return results

    def _run_in(self, jobs: list[Job], job_dir: Path, payloads: list[bytes | None]) -> list[JobResult]:
        job, group = jobs[0], len(jobs) > 1
        spec = job.to_dict()
        spec["env"] = self._env_inside(job.env)
        # a copy of the weights (evaluate: the runner loads them before any candidate code)
        # or of the learner state (a resumed train job) in the job dir
        field, input_subdir, name = (("policy_dir", INPUT_POLICY_SUBDIR, POLICY_FILE) if job.kind == "evaluate"
                                     else ("resume_dir", INPUT_LEARNER_SUBDIR, LEARNER_FILE))  # fmt: skip
        members = []
        for member, payload in zip(jobs, payloads, strict=True):
            inside = None
            if payload is not None:
                subdir = f"{input_subdir}-{member.seed}" if group else input_subdir
                (job_dir / subdir).mkdir(mode=0o755)
                (job_dir / subdir / name).write_bytes(payload)
                inside = spec[field] = self._job_path_inside(job_dir, subdir)
            members.append({"seed": member.seed, field: inside, "eval_seed": member.eval_seed})
        if group:  # the runner trains (runner.train) or measures (runner.evaluate) these seeds together
            spec |= {"group": members, "resume_dir": None, "policy_dir": None}
        temp_path = job_dir / f".{JOB_FILE}.tmp"
        temp_path.write_text(json.dumps(spec))
        temp_path.replace(job_dir / JOB_FILE)  # atomic: a warm runner may be polling for it
        key = new_key() if job.kind == "evaluate" else None  # never in job.json: see sandbox.seal
        try:
            script = self._launch_with_progress(jobs, job_dir, key)
        except SandboxUnavailable as error:
            return [JobResult.failure("crashed", "SandboxUnavailable", str(error)) for _ in jobs]
        if script.status in ("timeout", "oom"):
            return [JobResult.failure(script.status, script.status.capitalize(),
                                      f"the {job.kind} job hit its {script.status} limit") for _ in jobs]  # fmt: skip
        if script.status != "ok":  # killed or failed: whatever it left is not a result
            tail = script.stderr.strip().splitlines()[-1:] or [f"exit code {script.exit_code}"]
            return [JobResult.failure("crashed", "RunnerFailed", f"{script.status}: {tail[0]}"[:500],
                                      script.stderr[-4000:]) for _ in jobs]  # fmt: skip
        if not group:
            results = [read_result(job_dir, job.kind, key)]
            policy_dirs = [job_dir / POLICY_SUBDIR]
        else:
            results = read_group_result(job_dir, job.kind, [member.seed for member in jobs], key)
            policy_dirs = [group_policy_dir(job_dir, member.seed) for member in jobs]
        for i, (result, policy) in enumerate(zip(results, policy_dirs, strict=True)):
            if result.status != "ok" or job.kind != "train":
                continue
            if policy.is_symlink() or policy.parent.is_symlink() or not policy.is_dir():
                results[i] = JobResult.failure("crashed", "NoPolicy", "training finished without saving the policy")
            else:
                result.policy_dir = str(policy)
        return results

    def _launch_with_progress(self, jobs: list[Job], job_dir: Path, key: bytes | None) -> ScriptResult:
        """Run the job; for `train` with an events callback, relay `train_progress` meanwhile.

        The runner cannot reach the host while it runs, so a polling thread turns its
        progress.json into events (the CLI's progress bars); one last read after the
        job sends the final count before `job_finished`. A group's progress (its seeds'
        steps summed) goes to every job of it.
        """
        job = jobs[0]
        if job.kind != "train" or self.events is None:
            return self._launch_runner(job_dir, job.limits, key)

        def report(**progress: Any) -> None:
            for member in jobs:
                self._emit("train_progress", **self._event_fields(member), **progress)

        relay = ProgressRelay(job_dir, report)
        with Poller(PROGRESS_POLL_S, relay):
            script = self._launch_runner(job_dir, job.limits, key)
        relay()
        return script

    def train_and_evaluate(
        self, code: str | None, env: dict, algo: str, steps: int, seed: int, **job_fields: Any
    ) -> JobResult:
        """Train, then evaluate the weights in a fresh sandbox with the OEF only; cached as a whole."""
        resume_dir, eval_seed = job_fields.pop("resume_dir", None), job_fields.pop("eval_seed", None)
        return self.train_and_evaluate_seeds(code, env, algo, steps, [seed], [resume_dir], [eval_seed],
                                             **job_fields)[0]  # fmt: skip

    def train_and_evaluate_seeds(
        self,
        code: str | None,
        env: dict,
        algo: str,
        steps: int,
        seeds: list[int],
        resume_dirs: list[str | None] | None = None,
        eval_seeds: list[int | None] | None = None,
        cache: ResultCache | None = None,
        **job_fields: Any,
    ) -> list[JobResult]:
        """`train_and_evaluate` for several seeds of one candidate: the seeds the cache
        misses train in one sandbox, and their policies are measured in one fresh sandbox
        (`run_group`), each on its own EVAL_SEEDS' episodes (None: the selection episodes; a
        study gives each seed its held-out one). Every seed's result and cache entry are what
        it gets alone. CACHE: where the whole results are also looked up and kept (native
        jobs that several runs share); the sandbox's own cache holds them regardless."""
        resume_dirs = [None] * len(seeds) if resume_dirs is None else resume_dirs
        eval_seeds = [None] * len(seeds) if eval_seeds is None else eval_seeds
        if len(resume_dirs) != len(seeds) or len(eval_seeds) != len(seeds) \
                or ("job_id" in job_fields and len(seeds) > 1):
            raise ValueError("train_and_evaluate_seeds: one resume_dir and eval seed per seed, and no shared job_id")
        train_jobs = [Job(kind="train", code=code, env=env, algo=algo, steps=steps, seed=seed,
                          resume_dir=resume_dir, eval_seed=eval_seed, **job_fields)
                      for seed, resume_dir, eval_seed in zip(seeds, resume_dirs, eval_seeds, strict=True)]  # fmt: skip
        keys = [self._combined_cache_key(job) for job in train_jobs]
        caches = [c for c in (self.cache, cache) if c is not None]
        results: list[JobResult | None] = [next(filter(None, (c.get(key) for c in caches)), None) for key in keys]
        for job, hit in zip(train_jobs, results, strict=True):
            if hit is not None:
                fields = self._event_fields(job)
                self._emit("job_started", **fields)
                self._emit("job_finished", **fields, status=hit.status, cached=True)
        missed = [i for i, hit in enumerate(results) if hit is None]
        trained = dict(zip(missed, self.run_group([train_jobs[i] for i in missed]), strict=True)) if missed else {}
        ok = [i for i in missed if trained[i].status == "ok"]
        eval_fields = {k: v for k, v in job_fields.items() if k not in ("job_id", "stop_at")}
        eval_jobs = [Job(kind="evaluate", code=code, env=env, algo=algo, steps=steps, seed=seeds[i],
                         policy_dir=trained[i].policy_dir, eval_seed=eval_seeds[i], **eval_fields)
                     for i in ok]  # fmt: skip
        evaluated = dict(zip(ok, self.run_group(eval_jobs), strict=True)) if ok else {}
        for i in missed:
            results[i] = trained[i] if i not in evaluated else combined(trained[i], evaluated[i])
            for kept in caches if i in evaluated else ():
                kept.put(keys[i], results[i])
        return results  # type: ignore[return-value]

    @staticmethod
    def _combined_cache_key(train_job: Job) -> str:
        held_out = {} if train_job.eval_seed is None else {"eval_seed": train_job.eval_seed}
        if train_job.resume_dir is not None:
            held_out["resume_dir"] = train_job.resume_dir
        return cache_key(
            train_job.code, {**train_job.config(), "kind": "train_and_evaluate", **held_out}, train_job.seed
        )


def combined(trained: JobResult, evaluated: JobResult) -> JobResult:
    """A seed's train and evaluate results as one: the curves of the one, the score of the other."""
    return JobResult(
        status=evaluated.status,
        error=evaluated.error,
        metrics=evaluated.metrics,
        curves=trained.curves,
        reflection_stats=trained.reflection_stats,
        fitness=evaluated.fitness,
        elapsed_s=trained.elapsed_s + evaluated.elapsed_s,
        wait_s=trained.wait_s + evaluated.wait_s,
        run_s=trained.run_s + evaluated.run_s,
        policy_dir=trained.policy_dir,
        episodes=evaluated.episodes,
    )
