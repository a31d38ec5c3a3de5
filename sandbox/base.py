"""What every sandbox backend shares: run a typed job under its limits, give back its result.

The sandbox runs jobs; it does not know LERO (the train-then-evaluate protocol is
`graph.protocol`) nor any job kind by name: what a job needs copied in, keeps, seals and
reports is its kind's declaration (`sandbox.types.JobKind`, from the kinds table). A
backend only knows how to run a command contained (`_launch`, `_launch_runner`);
this class writes a `Job` as `job.json` in a job directory of its own, runs
`python -m lero.sandbox.harness` through the backend, and reads back a `result.json` it
never trusts (`sandbox.results`): only after the runner exited 0 on its own; anything
else is `crashed` (or `timeout` / `oom`), never a host exception. Around that: the slots
(`max_parallel`), the result cache (`sandbox.cache`), groups of seeds in one sandbox,
cancellation and the progress relay.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
import threading
import time
import uuid
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from lero.sandbox.cache import PROCESS_SIGNER, CacheSigner, ResultCache, job_cache_key
from lero.sandbox.harness import JOB_FILE
from lero.sandbox.poller import Poller
from lero.sandbox.results import (
    ProgressRelay,
    kept_files,
    output_folder,
    read_group_result,
    read_policy,
    read_result,
)
from lero.sandbox.seal import new_key
from lero.sandbox.types import (
    GroupMember,
    Job,
    JobKind,
    JobResult,
    Limits,
    Outputs,
    SandboxUnavailable,
    ScriptResult,
    kind_of,
)
from lero.training.contract import static_check

PROGRESS_POLL_S = 0.5
SCRIPT_FILE = "script.py"  # what `run_script` runs, in a fresh job directory
PYTHON = "python"  # a command's first word for the sandbox's own interpreter (`Sandbox.run`)
Events = Callable[..., None]
Payload = dict[str, bytes]  # a job's input files (JobKind.inputs), by the Job field naming each


def keep_outputs(job_dir: Path, outputs: Outputs, folders: list[Path]) -> None:
    """After a job with outputs, leave in JOB_DIR only what lero reads back from it: each ok
    seed's declared files (regular files). Anything else the candidate wrote there (a
    `junk.bin` of hundreds of MB, links, folders) is deleted, so a kept job directory
    costs the disk its outputs and no more."""
    keep = {path for folder in folders for path in kept_files(folder, outputs)}
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


class JobCancelled(RuntimeError):
    """The sandbox was cancelled (Ctrl-C) before or while the job ran; nothing is cached."""


class Sandbox(ABC):
    """Runs untrusted code contained (statuses: `sandbox.types.JOB_STATUSES`, defaults: `Limits`)."""

    kind = "abstract"

    def __init__(
        self,
        cache_dir: str | os.PathLike | None = None,
        max_parallel: int = 2,
        events: Events | None = None,
        work_dir: str | os.PathLike | None = None,
        cache_signer: CacheSigner = PROCESS_SIGNER,
    ) -> None:
        if max_parallel < 1:
            raise ValueError(f"max_parallel must be >= 1, got {max_parallel}")
        # Resolved once, here: bind mounts (Docker, the process backend's `mount --bind`)
        # need absolute paths, and the default run directory `runs/` is relative.
        cache_dir = Path(cache_dir).resolve() if cache_dir is not None else None
        self.events = events
        self.cache_signer = cache_signer  # what proves an entry is this installation's (sandbox.cache)
        self.cache = self.result_cache(cache_dir) if cache_dir is not None else None
        self.max_parallel = max_parallel  # jobs at once; callers size their thread pools by it
        self.slots = threading.BoundedSemaphore(max_parallel)
        if work_dir is None:
            work_dir = (
                cache_dir / "jobs"
                if cache_dir is not None
                else tempfile.mkdtemp(prefix="lero-jobs-")
            )
        self.work_dir = Path(work_dir).resolve()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        # the modules of kinds declared outside lero (`ship_kind`), read-only in every sandbox
        # started after the first; apart from the job directories, removed with the sandbox
        self.kinds_dir: Path | None = None
        self._kinds_lock = threading.Lock()  # jobs in several slots ship at once
        self.cancelled = threading.Event()

    def run(self, command: list[str], files: dict[str, bytes], limits: Limits | None = None) -> ScriptResult:
        """Run COMMAND contained under LIMITS, in a fresh job directory (its working
        directory) holding FILES (names relative to it); the raw primitive. A first word
        `PYTHON` is the sandbox's own interpreter. The directory is removed afterwards."""
        if not command or any(Path(name).is_absolute() or ".." in Path(name).parts for name in files):
            raise ValueError("Sandbox.run needs a command and files named inside the job directory")
        limits = limits or Limits()
        job_dir = self._new_job_dir("run")
        try:
            for name, data in files.items():
                (job_dir / name).parent.mkdir(parents=True, exist_ok=True)
                (job_dir / name).write_bytes(data)
            return self._launch(command, job_dir, limits)
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)

    def run_script(self, source: str, limits: Limits | None = None) -> ScriptResult:
        """Run one Python script contained (`run` of SCRIPT_FILE)."""
        return self.run([PYTHON, SCRIPT_FILE], {SCRIPT_FILE: source.encode()}, limits)

    @abstractmethod
    def _launch(self, command: list[str], job_dir: Path, limits: Limits) -> ScriptResult:
        """Run COMMAND contained, in JOB_DIR."""

    @abstractmethod
    def _launch_runner(self, job_dir: Path, limits: Limits, key: bytes | None = None) -> ScriptResult:
        """Run `python -m lero.sandbox.harness` on JOB_DIR, contained, with `--kinds` naming where
        it sees `kinds_dir` (once there is one); KEY (a line) goes to its stdin."""

    def ship_kind(self, kind: JobKind) -> None:
        """Copy the module of a kind outside lero (`JobKind.source`) into `kinds_dir`, where the
        runner finds it by the kind's name; lero's own kinds are in the mounted package."""
        if kind.source is None:
            return
        text = Path(kind.source).read_bytes()
        with self._kinds_lock:
            if self.kinds_dir is None:
                self.kinds_dir = Path(tempfile.mkdtemp(prefix="lero-kinds-"))
                self.kinds_dir.chmod(0o755)  # the container's user reads it
                weakref.finalize(self, shutil.rmtree, self.kinds_dir, True)
            target = self.kinds_dir / f"{kind.name}.py"
            if target.is_file() and target.read_bytes() == text:
                return
            fd, temp = tempfile.mkstemp(dir=self.kinds_dir, prefix=f".{kind.name}-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(text)
            os.chmod(temp, 0o644)
            os.replace(temp, target)

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

    def result_cache(self, directory: str | os.PathLike) -> ResultCache:
        """A result cache in DIRECTORY sealed and checked as this sandbox's own (a caller's
        shared cache, `graph.protocol`); a refused entry is said once (`cache_untrusted`)."""

        def untrusted(path: Path) -> None:
            self._emit("cache_untrusted", directory=str(path.parent), entry=path.name,
                       message=f"result cache {path.parent}: ignored entries this installation did not "
                               "seal (copied, edited or not a regular file); their jobs run again")  # fmt: skip

        return ResultCache(directory, self.cache_signer, untrusted)

    def report_cache_hit(self, job: Job, result: JobResult) -> None:
        """Tell the events callback that JOB was answered from a cache a caller keeps
        (`graph.protocol`'s combined results), as `run_job` does for its own hits."""
        fields = self._event_fields(job)
        self._emit("job_started", **fields)
        self._emit("job_finished", **fields, status=result.status, cached=True)

    def run_job(self, job: Job) -> JobResult:
        """One job of any registered kind through the cache; never raises for bad code."""
        if not isinstance(job, Job):
            raise TypeError(f"run_job expects a Job, got {type(job).__name__}")
        return self._run_jobs([job])[0]

    def run_group(self, jobs: list[Job]) -> list[JobResult]:
        """Jobs of a kind that runs seeds together (`JobKind.groups`: train, evaluate), of one
        candidate and plan, that differ only in their seed and the files they continue
        (resume_dir) or measure (policy_dir), in one sandbox, so S seeds pay one start. The runner trains them together (`training.train_seeds`,
        every seed bitwise what it gives alone), or measures each policy with its own OEF
        worker on its episodes (`eval_seed`'s, the same for all where they share it). Results,
        cache entries and events stay per job; a job's seconds are its share (1/S) of the
        group's; a failure is every job's."""
        if not jobs or any(not isinstance(job, Job) or not kind_of(job.kind).groups() for job in jobs):
            raise TypeError("run_group expects a non-empty list of Jobs of a kind that runs seeds together")
        apart = {"seed": None, "resume_dir": None, "policy_dir": None, "eval_seed": None, "job_id": None}
        if any({**job.to_dict(), **apart} != {**jobs[0].to_dict(), **apart} for job in jobs):
            raise ValueError("the jobs of a group must differ only in seed, eval_seed, resume_dir and policy_dir")
        if len({job.seed for job in jobs}) != len(jobs):
            raise ValueError("the jobs of a group need distinct seeds")
        return self._run_jobs(jobs)

    def _run_jobs(self, jobs: list[Job]) -> list[JobResult]:
        """One job, or a group, through the cache; the ones it misses run together."""
        keys = [job_cache_key(job) for job in jobs]
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
        (the input files their kind declares, e.g. evaluate's weights), then one run for all."""
        started = time.perf_counter()
        job = jobs[0]
        violations = static_check(job.code) if job.code is not None and job.static_check else []
        if violations:
            message = "; ".join(str(v) for v in violations[:20])
            return [JobResult.failure("rejected", "StaticCheck", message[:4000]) for _ in jobs]
        payloads = [self._read_inputs(member) for member in jobs]
        results = {i: payload for i, payload in enumerate(payloads) if isinstance(payload, JobResult)}
        ready = [i for i in range(len(jobs)) if i not in results]
        if ready:
            ran = ([self._execute(jobs[ready[0]], payloads[ready[0]])] if len(ready) == 1 else
                   self._execute_group([jobs[i] for i in ready], [payloads[i] for i in ready]))  # fmt: skip
            for i, result in zip(ready, ran, strict=True):
                result.elapsed_s = (time.perf_counter() - started) / len(ready)
                results[i] = result
        return [results[i] for i in range(len(jobs))]

    def _read_inputs(self, job: Job) -> Payload | JobResult:
        """JOB's input files (`JobKind.inputs`) where its fields name them."""
        payload = {}
        for spec in kind_of(job.kind).inputs:
            if getattr(job, spec.field) is not None:
                read = self._read_own(Path(getattr(job, spec.field)), spec.file)
                if isinstance(read, JobResult):
                    return read
                payload[spec.field] = read
        return payload

    def _read_own(self, policy_dir: Path, name: str) -> bytes | JobResult:
        """The weights (NAME=POLICY_FILE) or learner state an earlier train job of this sandbox
        left. Both paths come from the run's state or its result cache (files in a run
        directory), so the host reads only inside its own job directories: a path elsewhere,
        or one that links out of them, is refused."""
        if not policy_dir.resolve().is_relative_to(self.work_dir):
            return JobResult.failure("crashed", "NoPolicy", f"{policy_dir} is not a job directory of this sandbox")
        return read_policy(policy_dir, name)

    def _execute(self, job: Job, payload: Payload) -> JobResult:
        """Run a checked job on this machine (PAYLOAD: its input files); an executor overrides it."""
        return self._execute_group([job], [payload])[0]

    def _execute_group(self, jobs: list[Job], payloads: list[Payload]) -> list[JobResult]:
        """Run checked jobs (one, or a group) in one sandbox on this machine, in one slot."""
        queued = time.perf_counter()
        with self.slots:
            wait_s = time.perf_counter() - queued
            self._check_cancelled(jobs[0])
            self.ship_kind(kind_of(jobs[0].kind))  # before the sandbox is chosen: it must see the module
            job_dir = self._job_dir_for(jobs[0])
            try:
                results = self._run_in(jobs, job_dir, payloads)
            except BaseException:
                shutil.rmtree(job_dir, ignore_errors=True)
                raise
            outputs = kind_of(jobs[0].kind).outputs
            if outputs is None or all(result.status != "ok" for result in results):
                shutil.rmtree(job_dir, ignore_errors=True)
            else:
                keep_outputs(job_dir, outputs, [Path(r.policy_dir) for r in results if r.status == "ok" and r.policy_dir])
        for result in results:
            result.wait_s = wait_s / len(jobs)
        return results

    def _run_in(self, jobs: list[Job], job_dir: Path, payloads: list[Payload]) -> list[JobResult]:
        job, group, kind = jobs[0], len(jobs) > 1, kind_of(jobs[0].kind)
        # a copy of each input file (evaluate's weights: the runner loads them before any
        # candidate code; a resumed train job's learner state) in the job dir
        members = []
        for member, payload in zip(jobs, payloads, strict=True):
            inside = {}
            for spec in kind.inputs:
                if spec.field in payload:
                    subdir = f"{spec.subdir}-{member.seed}" if group else spec.subdir
                    (job_dir / subdir).mkdir(mode=0o755)
                    (job_dir / subdir / spec.file).write_bytes(payload[spec.field])
                    inside[spec.field] = self._job_path_inside(job_dir, subdir)
            members.append({**{spec.field: None for spec in kind.inputs}, **inside})
        # the job as the runner sees it: its env and inputs at their paths inside; a group's
        # seeds (run together, sandbox.jobs) in `group`
        seen_inside = ({"group": tuple(GroupMember(m.seed, m.eval_seed, **fields) for m, fields in zip(jobs, members, strict=True)),
                        **{spec.field: None for spec in kind.inputs}} if group else members[0])  # fmt: skip
        wire = replace(job, env=self._env_inside(job.env), **seen_inside)
        temp_path = job_dir / f".{JOB_FILE}.tmp"
        temp_path.write_text(json.dumps(wire.to_dict()))
        temp_path.replace(job_dir / JOB_FILE)  # atomic: a warm runner may be polling for it
        key = new_key() if kind.sealed else None  # never in job.json: see sandbox.seal
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
        else:
            results = read_group_result(job_dir, job.kind, [member.seed for member in jobs], key)
        for i, (result, member) in enumerate(zip(results, jobs, strict=True)):
            if result.status != "ok" or kind.outputs is None:
                continue
            folder = output_folder(job_dir, kind.outputs, member.seed if group else None)
            if folder.is_symlink() or folder.parent.is_symlink() or not folder.is_dir():
                results[i] = JobResult.failure("crashed", "NoPolicy",
                                               f"the {job.kind} job finished without saving its outputs")  # fmt: skip
            else:
                result.policy_dir = str(folder)
        return results

    def _launch_with_progress(self, jobs: list[Job], job_dir: Path, key: bytes | None) -> ScriptResult:
        """Run the job; for a kind that reports progress (`JobKind.progress`: train) with an
        events callback, relay `train_progress` meanwhile.

        The runner cannot reach the host while it runs, so a polling thread turns its
        progress.json into events (the CLI's progress bars); one last read after the
        job sends the final count before `job_finished`. A group's progress (its seeds'
        steps summed) goes to every job of it, with `group` (its first job's id) and
        `group_of` (how many), so that a display counts it once.
        """
        job = jobs[0]
        if not kind_of(job.kind).progress or self.events is None:
            return self._launch_runner(job_dir, job.limits, key)

        def report(**progress: Any) -> None:
            for member in jobs:
                self._emit("train_progress", **self._event_fields(member), group=job.job_id, group_of=len(jobs),
                           **progress)  # fmt: skip

        relay = ProgressRelay(job_dir, report)
        with Poller(PROGRESS_POLL_S, relay):
            script = self._launch_runner(job_dir, job.limits, key)
        relay()
        return script
