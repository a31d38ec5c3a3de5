"""What the nodes need besides the state: LangGraph's runtime context of one run invocation.

The run directory, the sandbox, the LLM team and the app's callbacks are not JSON and
must not enter checkpoints. Whoever drives the graph opens a `RunContext` once per
invocation (the runner for `lero run` / `resume`, `graph.server` for `langgraph dev`),
passes it as `context=` and closes it afterwards; each node reads it from
`runtime.context`. The spec is parsed once, here.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Any

from langgraph.config import get_stream_writer

from lero.agents import LLMConfig, Problem, Team, make_team
from lero.graph.configuration import RunError, RunSpec, llm_settings, parallel_jobs
from lero.graph.rundir import RunDir
from lero.graph.trust import cache_signer, job_env
from lero.sandbox import DESCRIBE, Job, JobResult, Limits, Sandbox, SandboxUnavailable, get_sandbox
from lero.training import make_env
from lero.training.envs.registry import ConfirmedEnv, is_native
from lero.training.envs.task import TaskSpec

log = logging.getLogger(__name__)

_EVENT_TYPES = {  # events.jsonl name -> stream event type the CLI renders
    "llm_call": "llm",
    "job_started": "job",
    "job_finished": "job",
    "train_started": "job",
    "train_finished": "job",
    "train_progress": "train_progress",
    "generation_started": "generation",
    "generation_finished": "generation",
    "candidate": "candidate",
    "node_finished": "timing",  # the report's loop time; no front-end shows it live
}
DESCRIBE_LIMITS = Limits(wall_s=120, mem_mb=2048)  # one env instance: its import and construction
TRANSIENT_EVENTS = frozenset({"train_progress"})  # display only: streamed, not recorded
LLM_RECORD_ONLY = frozenset({"prompt", "replies"})  # kept in llm/, too long for events.jsonl


def stream(payload: dict[str, Any]) -> None:
    """Send a custom stream event when called inside a graph node (no-op elsewhere)."""
    try:
        writer = get_stream_writer()
    except RuntimeError:
        return
    writer(payload)


def problem(spec: RunSpec, confirmed: ConfirmedEnv | None = None, sandbox: Sandbox | None = None) -> Problem:
    """What the agents are asked to solve, from a one-slot instance of the environment: its
    own TaskSpec plus this instance's shape. A spec env is imported only when `confirmed`
    names it (graph.trust). When Docker serves the run (SANDBOX), a custom env is built in a
    `describe` job, so its code never runs on this host."""
    task, facts = env_facts(job_env(spec, confirmed), sandbox)
    return Problem(
        task_spec=task, env_name=spec.env, env_description=facts["description"],
        task=spec.task or task.text, algo=spec.algo, n_agents=facts["n_agents"], obs_dim=facts["obs_dim"],
        obs_layout={slot: (int(start), int(end)) for slot, (start, end) in facts["obs_layout"].items()},
    )


def env_facts(env: dict[str, Any], sandbox: Sandbox | None = None) -> tuple[TaskSpec, dict[str, Any]]:
    """ENV's (a job env dict) TaskSpec and one instance's facts (`registry.describe_env`):
    built here, or in a `describe` job when SANDBOX is Docker and the env is custom, so its
    code never runs on this host. RunError (one line) when it cannot be built."""
    if sandbox is not None and sandbox.kind == "docker" and not is_native(env["name"]):
        facts = _described(sandbox, env)
        return TaskSpec.from_dict(facts["task"]), facts
    kwargs = {key: value for key, value in env.items() if key != "name"}
    try:
        built = make_env(env["name"], 1, **kwargs)
    except (ValueError, TypeError) as error:
        raise RunError(f"cannot build environment {env['name']!r}: {error}") from None
    return built.task, {"description": built.describe(), "n_agents": built.n_agents, "obs_dim": built.obs_dim,
                        "obs_layout": built.obs_layout()}


@contextmanager
def env_sandbox(spec: RunSpec, confirmed: ConfirmedEnv | None = None
                ) -> Iterator[tuple[dict[str, Any], Sandbox | None]]:
    """SPEC's job env and, for a custom env, the sandbox a run of SPEC would get (on this
    machine, one job at a time, a scratch directory, closed afterwards): reading or measuring
    an env before any run (the chat) puts its code where the run's would go. None for a
    native env: its code is lero's own."""
    env = job_env(spec, confirmed)
    if is_native(env["name"]):
        yield env, None
        return
    with tempfile.TemporaryDirectory(prefix="lero-env-", ignore_cleanup_errors=True) as scratch:
        local = spec.model_copy(update={"executor": "local", "max_parallel": 1})
        sandbox = open_sandbox(local, Path(scratch), env=env)
        try:
            yield env, sandbox
        finally:
            sandbox.close()


def read_env(spec: RunSpec, confirmed: ConfirmedEnv | None = None) -> tuple[TaskSpec, dict[str, Any]]:
    """`env_facts` of SPEC's env outside a run, read where a run of SPEC would read it
    (`env_sandbox`): in a describe job when Docker serves a custom env. RunError (one line)."""
    with env_sandbox(spec, confirmed) as (env, sandbox):
        return env_facts(env, sandbox)


def _described(sandbox: Sandbox, env: dict[str, Any]) -> dict[str, Any]:
    """The env's facts from a sandbox `describe` job; RunError with its one line otherwise."""
    result = sandbox.run_job(Job(kind=DESCRIBE.name, code=None, env=env, limits=DESCRIBE_LIMITS))
    if result.status != "ok":
        raise RunError(f"cannot build environment {env['name']!r}: {failure_line(result)}")
    return result.info


def failure_line(result: JobResult) -> str:
    """A failed job in one line for the person: its error's first line, else its status."""
    lines = (result.error or {}).get("message", "").splitlines()
    return lines[0] if lines else result.status


def llm_config(spec: RunSpec) -> LLMConfig:
    """The agents' LLM settings, with the run's request and token budgets (and the request
    timeout and context window where the spec sets them)."""
    try:
        return LLMConfig.from_spec(
            spec.llm, base_url=spec.base_url, max_requests=spec.max_llm_requests, max_tokens=spec.max_llm_tokens,
            offline_prior=spec.offline_prior, seed=spec.designer_seed, **llm_settings(spec.model_dump()),
        )
    except ValueError as error:
        raise RunError(str(error).splitlines()[0]) from None


def open_sandbox(spec: RunSpec, cache_dir: Path | None, events: Any = None,
                 env: dict[str, Any] | None = None) -> Sandbox:
    """The run's sandbox for ENV (its job env dict): a custom env gets its own Docker image
    layer like any env gets Docker; where Docker answers but cannot serve it, one RunError
    line says why (never a silent downgrade to the process backend). Its result caches are
    sealed with this installation's key (`graph.trust.cache_signer`)."""
    try:
        max_parallel = parallel_jobs(spec.max_parallel, Limits().cpus)  # a run's jobs take the default cpus
        return get_sandbox(spec.sandbox, cache_dir=cache_dir, max_parallel=max_parallel,
                           events=events, executor=spec.executor, ray_address=spec.ray_address, env=env,
                           cache_signer=cache_signer())
    except SandboxUnavailable as error:
        raise RunError(str(error).splitlines()[0]) from None


def earlier_llm_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Successful LLM calls recorded in events.jsonl (they survive a crash; counters do not)."""
    return [e for e in events if e["event"] == "llm_call" and e.get("status") == "ok"]


@dataclass(frozen=True)
class RunHooks:
    """App code the engine calls at fixed points; the engine itself never imports the app.

    `on_job_result(rundir, candidate_id, seed, result)` after each train job (for example
    a TensorBoard export); `on_generation_end(rundir, generation)` once a generation's results
    are written (for example an experiment tracker's live loop numbers); `on_run_end(rundir)`
    after report.json is written (for example report.md and plots). A hook's failure is
    logged, never the run's.
    """

    on_job_result: Callable[[RunDir, str, int, JobResult], None] | None = None
    on_run_end: Callable[[RunDir], None] | None = None
    on_generation_end: Callable[[RunDir, int], None] | None = None

    def job_result(self, rundir: RunDir, candidate_id: str, seed: int, result: JobResult) -> None:
        self._call(self.on_job_result, rundir, candidate_id, seed, result)

    def generation_end(self, rundir: RunDir, generation: int) -> None:
        self._call(self.on_generation_end, rundir, generation)

    def run_end(self, rundir: RunDir) -> None:
        self._call(self.on_run_end, rundir)

    @staticmethod
    def _call(hook: Callable[..., None] | None, *args: Any) -> None:
        if hook is None:
            return
        try:
            hook(*args)
        except Exception:
            log.exception("hook %s failed", getattr(hook, "__name__", hook))


@dataclass
class RunContext:
    """The live objects of one run invocation; `emit` is the single way events leave a node."""

    spec: RunSpec
    rundir: RunDir
    earlier_calls: list[dict[str, Any]]  # llm_call events of earlier processes of this run
    confirmed: ConfirmedEnv | None = None  # the spec env a person named (graph.trust)
    hooks: RunHooks = field(default_factory=RunHooks)
    described: InitVar[Problem | None] = None  # the problem a preflight read already (else read here)
    job_env: dict[str, Any] = field(init=False)  # the env as sandbox jobs name it (graph.trust.job_env)
    sandbox: Sandbox = field(init=False)
    task: Problem = field(init=False)  # read through the sandbox: see `problem`
    team: Team = field(init=False)

    def __post_init__(self, described: Problem | None) -> None:
        self.job_env = job_env(self.spec, self.confirmed)
        self.sandbox = open_sandbox(self.spec, self.rundir.cache_dir, events=self.emit, env=self.job_env)
        try:  # the env is read once per start: by the preflight, else here (a server's request)
            self.task = described or problem(self.spec, self.confirmed, self.sandbox)
        except BaseException:
            self.sandbox.close()
            raise
        self.sandbox.prewarm(self.job_limits)  # ready while the designer works
        self.team = make_team(llm_config(self.spec), on_call=self._on_llm_call)
        for call in self.earlier_calls:  # a resumed run keeps spending the same budget
            self.team.ledger.record(call["role"], int(call.get("prompt_tokens", 0)),
                                    int(call.get("completion_tokens", 0)))

    @property
    def job_limits(self) -> Limits:
        """The limits every job of the graph runs with (warm spares are kept for these)."""
        return Limits(wall_s=self.spec.job_timeout_s)

    def emit(self, event: str, **fields: Any) -> None:
        """Record an event in events.jsonl and stream it to whoever drives the graph."""
        if event in TRANSIENT_EVENTS:
            record = {"ts": time.time(), "event": event, **fields}
        else:
            record = self.rundir.append_event(event, **fields)
        stream({"type": _EVENT_TYPES.get(event, "log"), **record})

    def _on_llm_call(self, role: str, info: dict[str, Any]) -> None:
        """The whole request goes to `llm/` (RunDir); events.jsonl gets its counts and name."""
        record = {**info, "role": role}
        name = self.rundir.write_llm_record(record)
        compact = {key: value for key, value in record.items() if key not in LLM_RECORD_ONLY}
        self.emit("llm_call", **compact, record=name)

    def llm_usage(self) -> dict[str, int]:
        """Requests and tokens of the whole run so far (earlier processes included)."""
        usage = self.team.usage()
        return {key: int(usage[key]) for key in ("requests", "prompt_tokens", "completion_tokens")}

    def close(self) -> None:
        """Stop the sandbox's warm containers."""
        self.sandbox.close()


def open_context(spec: RunSpec, rundir: RunDir, confirmed: ConfirmedEnv | None = None,
                 hooks: RunHooks | None = None, task: Problem | None = None) -> RunContext:
    """Build the live objects for a run whose directory exists (start, resume, server);
    TASK: the problem already read from its env (`runner.preflight`), else it is read here."""
    return RunContext(spec=spec, rundir=rundir, earlier_calls=earlier_llm_calls(rundir.read_events()),
                      confirmed=confirmed, hooks=hooks or RunHooks(), described=task)


class CancelScope:
    """The runs one front-end drives: its first Ctrl-C kills all their sandbox jobs.

    The runner adds each context it opens and removes it when the invocation ends; a
    front-end passes one scope to every run it starts, so nothing is global.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._contexts: list[RunContext] = []

    def add(self, context: RunContext) -> None:
        with self._lock:
            self._contexts.append(context)

    def discard(self, context: RunContext) -> None:
        with self._lock:
            if context in self._contexts:
                self._contexts.remove(context)

    def cancel_all(self) -> None:
        with self._lock:
            running = list(self._contexts)
        for context in running:
            context.sandbox.cancel_all()
