"""The sandbox's data types: limits, jobs, results. Pure Python: the in-sandbox runner uses them too."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from lero.training.defaults import DEFAULT_ALGO, DEFAULT_ENV, EVAL_EPISODES
from lero.training.mkl import STRICT
from lero.training.validation import require

SCRIPT_STATUSES = ("ok", "error", "timeout", "oom", "killed")
DEFAULT_TMP_MB = 256
TMP_MEM_FRACTION = 0.25  # the /tmp tmpfs may take at most this share of mem_mb
JOB_STATUSES = ("ok", "rejected", "code_error", "invalid_output", "timeout", "oom", "crashed")


class SandboxUnavailable(RuntimeError):
    """No Docker daemon, or no sandbox image; the message says how to fix it."""


# What every job process's environment sets, whatever the backend: one torch / OpenMP thread
# that sleeps when idle, and glibc malloc keeping what it frees (a training step frees and
# re-allocates the same few MB; handed back to the kernel, they return as 300-450k page
# faults per 300k-step job: 2-7% of MAPPO's steps/s, 9% of VDN's, measured).
JOB_PROCESS_ENV = {
    "OMP_NUM_THREADS": "1",
    "OMP_WAIT_POLICY": "PASSIVE",
    "MKL_NUM_THREADS": "1",
    "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),  # glibc's largest; fixing it keeps trimming off
    "MALLOC_TRIM_THRESHOLD_": str(2**30),
    **STRICT,  # MKL: the same bits at any alignment (training/mkl.py)
}

MAX_RECORD_EPISODES = 16  # evaluate: episodes kept step by step for a drawing
JOB_WALL_S = 3600.0  # a job's default wall-clock limit (a run's jobs: RunSpec.job_timeout_s)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed run (all enforced outside the sandboxed code)."""

    wall_s: float = JOB_WALL_S  # host-side wall-clock deadline; the run is killed after it
    mem_mb: int = 4096  # memory (= memory + swap) of the container / RLIMIT_AS of the process
    cpus: float = 1.0  # CPU quota in cores
    pids: int = 256  # processes + threads
    output_bytes: int = 64_000  # stdout and stderr are each capped to this (head + tail kept)
    tmp_mb: int | None = None  # /tmp tmpfs size; default min(256, mem_mb * TMP_MEM_FRACTION)
    disk_mb: int = 512  # the job directory (per file exactly; in total by a watchdog)

    def __post_init__(self) -> None:
        require(self.wall_s > 0, f"Limits.wall_s must be > 0, got {self.wall_s}")
        require(self.mem_mb >= 64, f"Limits.mem_mb must be >= 64, got {self.mem_mb}")
        require(self.cpus > 0, f"Limits.cpus must be > 0, got {self.cpus}")
        require(self.pids >= 8, f"Limits.pids must be >= 8, got {self.pids}")
        require(
            self.output_bytes >= 1024,
            f"Limits.output_bytes must be >= 1024, got {self.output_bytes}",
        )
        # tmpfs pages count against the memory limit: a full /tmp must leave room for the
        # process, so filling it ends in ENOSPC (an `error`), never in the OOM killer.
        max_tmp_mb = int(self.mem_mb * TMP_MEM_FRACTION)
        if self.tmp_mb is None:
            object.__setattr__(self, "tmp_mb", min(DEFAULT_TMP_MB, max_tmp_mb))
        require(
            1 <= self.tmp_mb <= max_tmp_mb,
            f"Limits.tmp_mb must be between 1 and mem_mb * {TMP_MEM_FRACTION} = {max_tmp_mb}, "
            f"got {self.tmp_mb}",
        )
        require(self.disk_mb >= 1, f"Limits.disk_mb must be >= 1, got {self.disk_mb}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ScriptResult:
    """Outcome of `Sandbox.run_script`: the raw containment primitive."""

    status: str  # one of SCRIPT_STATUSES
    exit_code: int | None
    stdout: str
    stderr: str
    elapsed_s: float


@dataclass(frozen=True)
class GroupMember:
    """One seed of a group job (train or evaluate), as the runner receives it: its paths
    are the sandbox's view of the inputs the host copied into the job directory."""

    seed: int
    eval_seed: int | None = None  # evaluate: this seed's episodes (None: the selection episodes)
    resume_dir: str | None = None  # train: the learner state this seed continues
    policy_dir: str | None = None  # evaluate: the weights measured

    def __post_init__(self) -> None:
        require(isinstance(self.seed, int) and not isinstance(self.seed, bool),
                f"GroupMember.seed must be an int, got {self.seed!r}")  # fmt: skip
        require(self.eval_seed is None or (isinstance(self.eval_seed, int) and self.eval_seed >= 0),
                f"GroupMember.eval_seed must be None or an int >= 0, got {self.eval_seed!r}")  # fmt: skip
        for name in ("resume_dir", "policy_dir"):
            value = getattr(self, name)
            require(value is None or isinstance(value, str), f"GroupMember.{name} must be a str or None")


# The Job fields a kind takes only by declaring them (`JobKind.fields`); a Job of a kind
# that does not leaves them at their defaults. Every other field is every kind's.
OPTIONAL_FIELDS = ("policy_dir", "eval_seed", "checkpoint_every", "stop_at", "resume_dir", "record_episodes", "group")
MEMBER_FIELDS = ("eval_seed", "resume_dir", "policy_dir")  # set per seed in a group (GroupMember)
# The JobResult fields beyond every result's: a kind declares which it gives (`JobKind.result_fields`)
RESULT_FIELDS = ("info", "episodes", "trajectories", "fitness", "evidence")
CACHE_FIELDS = ("env", "algo", "steps", "hparams", "n_envs", "eval_episodes")  # a kind's default cache key
_KIND_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")  # also the file name of a shipped kind module


@dataclass(frozen=True)
class Input:
    """A file the host copies into the job directory before the run (per seed in a group):
    FILE from the folder the Job's FIELD names, which must be a job directory of the same
    sandbox; the runner sees FIELD pointing at SUBDIR (a group's: SUBDIR-<seed>)."""

    field: str  # one of MEMBER_FIELDS
    subdir: str
    file: str
    required: bool = False  # a Job of the kind must name it

    def __post_init__(self) -> None:
        require(self.field in MEMBER_FIELDS, f"Input.field must be one of {MEMBER_FIELDS}, got {self.field!r}")


@dataclass(frozen=True)
class ResultField:
    """A field of RESULT_FIELDS a kind's result carries, with the host's check of what the
    sandbox wrote there (candidate code may have): CHECK(raw) returns the value the host
    keeps, or raises ValueError/TypeError in one line (the job is then `crashed`, BadResult).
    A result without the field keeps JobResult's default."""

    name: str
    check: Callable[[Any], Any]

    def __post_init__(self) -> None:
        require(self.name in RESULT_FIELDS, f"ResultField.name must be one of {RESULT_FIELDS}, got {self.name!r}")


@dataclass(frozen=True)
class Outputs:
    """What a job leaves in FOLDER of its job directory (a group: FOLDER/seed-<seed>) that
    the host keeps: the FILES it must have written, and the optional files matching ALSO
    (fnmatch patterns, relative to FOLDER). Everything else in the job directory is deleted;
    `JobResult.policy_dir` names the folder."""

    folder: str
    files: tuple[str, ...]
    also: tuple[str, ...] = ()


@dataclass(frozen=True)
class JobKind:
    """One job kind, declared: what runs in the sandbox, what goes in and comes out, what
    the host trusts of its result and what its cache key holds. The host side and the
    runner read only this; `register_kind` puts it in the kinds table (`KINDS`)."""

    name: str
    # "module:function", resolved only by the runner, inside the sandbox, from this table
    handler: str
    # the file of the handler's module when it lives outside lero: the host copies it into
    # a read-only folder of every sandbox, where the runner imports it for this kind alone
    source: str | None = None
    fields: frozenset[str] = frozenset()  # the OPTIONAL_FIELDS it takes ("group": seeds run together)
    required: tuple[str, ...] = ()  # fields a Job of the kind must set (non-zero)
    inputs: tuple[Input, ...] = ()
    outputs: Outputs | None = None
    # the runner seals its result with the host's per-job key, after killing every other
    # process: no candidate code may run before its trusted part
    sealed: bool = False
    result_fields: tuple[ResultField, ...] = ()  # the fields the host takes from its result, each checked
    cache_fields: tuple[str, ...] = CACHE_FIELDS  # Job fields its cache key always holds
    cache_if_set: tuple[str, ...] = ()  # ... and these, where not at their default
    limits: Limits = field(default_factory=Limits)  # a Job's limits unless it names its own
    progress: bool = False  # the runner writes progress.json; the host relays it
    on_cluster: bool = True  # a distributed executor runs it on a node (else on the host)
    label: str = ""  # what reports call its work ("training"); empty: its name

    def __post_init__(self) -> None:
        require(bool(_KIND_NAME.match(self.name)), f"JobKind.name must match {_KIND_NAME.pattern}, got {self.name!r}")
        module, _, function = self.handler.partition(":")
        require(bool(module and function), f"JobKind.handler must be 'module:function', got {self.handler!r}")
        require(set(self.fields) <= set(OPTIONAL_FIELDS), f"JobKind {self.name}: "
                f"{sorted(set(self.fields) - set(OPTIONAL_FIELDS))} are not among {OPTIONAL_FIELDS}")  # fmt: skip
        given = [f.name for f in self.result_fields]
        require(len(set(given)) == len(given), f"JobKind {self.name}: a result field is declared twice")
        require({i.field for i in self.inputs} <= set(self.fields), f"JobKind {self.name}: an input's field is not taken")
        require(self.sealed or "fitness" not in given, f"JobKind {self.name}: only a sealed kind gives a fitness")

    def groups(self) -> bool:
        """Whether several seeds of it run together in one sandbox."""
        return "group" in self.fields


KINDS: dict[str, JobKind] = {}  # the kinds table: sandbox.jobkinds registers lero's own


def register_kind(kind: JobKind) -> JobKind:
    """Add KIND to the table (again: only the same declaration); returns it."""
    known = KINDS.setdefault(kind.name, kind)
    require(known == kind, f"another job kind is registered as {kind.name!r}")
    return kind


def work_label(name: str) -> str:
    """What reports call the work of kind NAME: its declared label, else the name (a kind
    this installation does not declare, read from another's run directory, included)."""
    kind = KINDS.get(name)
    return (kind.label or kind.name) if kind is not None else name


def kind_of(name: str) -> JobKind:
    """The registered kind NAME; ValueError for any other."""
    require(name in KINDS, f"Job.kind must be one of {sorted(KINDS)}, got {name!r}")
    return KINDS[name]


def _default(name: str) -> Any:
    """The default of Job field NAME."""
    spec = {f.name: f for f in fields(Job)}[name]
    return spec.default_factory() if spec.default is MISSING else spec.default


@dataclass(frozen=True)
class Job:
    """One unit of sandboxed work on a candidate module (`code=None` is the baseline).

    The same type goes on the wire: the host writes `to_dict()` as job.json (its env and
    paths as the sandbox sees them, and `group`, the seeds a group job runs together), and
    the runner rebuilds it with `from_dict`, which validates it before anything runs.
    """

    kind: str
    code: str | None
    env: dict = field(default_factory=lambda: {"name": DEFAULT_ENV})
    algo: str = DEFAULT_ALGO
    steps: int = 0
    seed: int = 0
    limits: Limits | None = None  # None: the kind's (JobKind.limits)
    hparams: dict = field(default_factory=dict)
    n_envs: int | None = None
    eval_episodes: int = EVAL_EPISODES
    policy_dir: str | None = None
    # evaluate: the seed of the episodes measured; None = the selection episodes
    # (training.defaults.EVAL_SEED). Studies set their own, disjoint, held-out range.
    eval_seed: int | None = None
    # train: also save the learning policy every this many env steps, as
    # `policy/step-<n>/` beside the final weights (scored only by evaluate jobs)
    checkpoint_every: int | None = None
    # train: stop at this many env steps of the `steps` plan (None: train it all), and
    # continue the learner state a finished train job left in its policy dir `resume_dir`
    # (successive halving's next rung; `training.resume`)
    stop_at: int | None = None
    resume_dir: str | None = None
    job_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    candidate_id: str | None = None
    # Only tests of the sandbox boundary turn this off, to run code the check would reject.
    static_check: bool = True
    # evaluate: also keep the first this many episodes step by step (positions and return so
    # far, `JobResult.trajectories`) for a drawing of them (`lero eval --render`)
    record_episodes: int = 0
    # train / evaluate on the wire: the seeds run together in one sandbox (empty: this job's
    # own seed alone); the host's `Sandbox.run_group` builds it, never a caller
    group: tuple[GroupMember, ...] = ()

    def __post_init__(self) -> None:
        require(isinstance(self.kind, str), f"Job.kind must be a str, got {self.kind!r}")
        kind = kind_of(self.kind)
        if self.limits is None:
            object.__setattr__(self, "limits", kind.limits)
        require(self.code is None or isinstance(self.code, str), "Job.code must be str or None")
        require(isinstance(self.seed, int) and not isinstance(self.seed, bool), f"Job.seed must be an int, got {self.seed!r}")
        require(
            isinstance(self.env, dict) and isinstance(self.env.get("name"), str),
            f"Job.env must be a dict with a 'name', got {self.env!r}",
        )
        require(
            isinstance(self.steps, int) and self.steps >= 0,
            f"Job.steps must be an int >= 0, got {self.steps!r}",
        )
        require(self.eval_episodes > 0, f"Job.eval_episodes must be > 0, got {self.eval_episodes}")
        require(isinstance(self.limits, Limits), "Job.limits must be a Limits")
        require(
            self.eval_seed is None or (isinstance(self.eval_seed, int) and self.eval_seed >= 0),
            f"Job.eval_seed must be None or an int >= 0, got {self.eval_seed!r}",
        )
        require(
            self.checkpoint_every is None or (isinstance(self.checkpoint_every, int) and self.checkpoint_every > 0),
            f"Job.checkpoint_every must be None or an int > 0, got {self.checkpoint_every!r}",
        )
        require(
            self.stop_at is None or (isinstance(self.stop_at, int) and 0 < self.stop_at <= self.steps),
            f"Job.stop_at must be None or an int in (0, steps], got {self.stop_at!r}",
        )
        require(isinstance(self.record_episodes, int) and 0 <= self.record_episodes <= MAX_RECORD_EPISODES,
                f"Job.record_episodes must be an int in 0..{MAX_RECORD_EPISODES}, got {self.record_episodes!r}")  # fmt: skip
        require(isinstance(self.group, tuple) and all(isinstance(m, GroupMember) for m in self.group),
                "Job.group must be a tuple of GroupMember")  # fmt: skip
        require(len({m.seed for m in self.group}) == len(self.group), "the members of a group need distinct seeds")
        for name in OPTIONAL_FIELDS:
            require(name in kind.fields or getattr(self, name) == _default(name), f"the {self.kind} Job takes no {name}")
        for name in (*kind.required, *(i.field for i in kind.inputs if i.required)):
            set_ = all(getattr(m, name) for m in self.members()) if name in MEMBER_FIELDS else getattr(self, name)
            require(bool(set_), f"the {self.kind} Job needs {name}" + (" for every seed" if self.group else ""))

    def members(self) -> tuple[GroupMember, ...]:
        """The seeds this job runs: its group, or itself alone."""
        return self.group or (GroupMember(self.seed, self.eval_seed, self.resume_dir, self.policy_dir),)

    def config(self) -> dict[str, Any]:
        """What the job computes (the cache key): no ids, no limits, no paths; the fields
        its kind declares (`JobKind.cache_fields`, and `cache_if_set` only where set, so
        e.g. jobs on the selection episodes keep their keys)."""
        kind = kind_of(self.kind)
        when_set = {n: getattr(self, n) for n in kind.cache_if_set if getattr(self, n) != _default(n)}
        return {"kind": self.kind, **{n: getattr(self, n) for n in kind.cache_fields}, **when_set}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        require(not unknown, f"unknown Job fields: {sorted(unknown)}")
        values = dict(data)
        if isinstance(values.get("limits"), dict):
            values["limits"] = Limits(**values["limits"])
        if isinstance(values.get("group"), list | tuple):
            members = values["group"]
            require(all(isinstance(m, dict) for m in members), "Job.group must hold objects")
            member_fields = {f.name for f in fields(GroupMember)}
            unknown_member = set().union(*(set(m) for m in members)) - member_fields
            require(not unknown_member, f"unknown GroupMember fields: {sorted(unknown_member)}")
            values["group"] = tuple(GroupMember(**m) for m in members)
        return cls(**values)


@dataclass
class JobResult:
    """Outcome of `Sandbox.run_job`; `fitness` is set only by trusted evaluation."""

    status: str  # one of JOB_STATUSES
    error: dict | None = None  # {"type", "message", "traceback"}
    metrics: dict = field(default_factory=dict)
    curves: dict = field(default_factory=dict)
    reflection_stats: dict = field(default_factory=dict)
    fitness: float | None = None
    elapsed_s: float = 0.0  # on the host, from the static check to the result read
    wait_s: float = 0.0  # of elapsed_s: waiting for a free slot (max_parallel)
    run_s: float = 0.0  # of elapsed_s: the runner's own work (training, evaluation, validation)
    cached: bool = False
    policy_dir: str | None = None
    info: dict = field(default_factory=dict)  # describe: the env's facts (registry.describe_env)
    episodes: dict = field(default_factory=dict)  # evaluate: metric -> its value in each episode
    trajectories: dict = field(default_factory=dict)  # evaluate with record_episodes: training.EpisodeTrace's
    evidence: dict = field(default_factory=dict)  # validate: the rollout's measurements (training.rollout_evidence)

    def __post_init__(self) -> None:
        require(
            self.status in JOB_STATUSES,
            f"JobResult.status must be one of {JOB_STATUSES}, got {self.status!r}",
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def timing(self) -> dict[str, float]:
        """Where the job's seconds went; `start_s` is the rest: the sandbox's start, imports
        (unless a warm container had done them) and moving files in and out."""
        start_s = max(0.0, self.elapsed_s - self.wait_s - self.run_s)
        return {"elapsed_s": self.elapsed_s, "wait_s": self.wait_s, "start_s": start_s,
                "run_s": self.run_s}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobResult:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def failure(cls, status: str, error_type: str, message: str, traceback: str = "") -> JobResult:
        return cls(
            status=status, error={"type": error_type, "message": message, "traceback": traceback}
        )
