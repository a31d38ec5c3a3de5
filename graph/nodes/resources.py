"""What the nodes need besides the state: the run directory, the sandbox and the LLM team.

These objects are not JSON and must not enter checkpoints, so they live in a
process-wide registry keyed by run id. The runner registers them before driving the
graph; any other host (`langgraph dev`, a resumed process) gets them built lazily from
the spec stored in the state, so the module-level compiled graph works on its own.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph.config import get_stream_writer
from lero.agents import LLMConfig, TaskSpec, Team, make_team
from lero.graph.configuration import RunError, RunSpec, absolute_runs_dir
from lero.graph.rundir import RunDir
from lero.graph.trust import job_env
from lero.sandbox import Sandbox, SandboxUnavailable, get_sandbox
from lero.training import make_env
from lero.training.envs.registry import ENV_NAMES, ConfirmedEnv

log = logging.getLogger(__name__)
SERVER_RUNS_DIR_VARIABLE = "LERO_RUNS_DIR"  # where a `langgraph dev` server keeps its runs

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
}
TRANSIENT_EVENTS = frozenset({"train_progress"})  # display only: streamed, not recorded
LLM_RECORD_ONLY = frozenset({"prompt", "replies"})  # kept in llm/, too long for events.jsonl


def stream(payload: dict[str, Any]) -> None:
    """Send a custom stream event when called inside a graph node (no-op elsewhere)."""
    try:
        writer = get_stream_writer()
    except RuntimeError:
        return
    writer(payload)


def task_spec(spec: RunSpec, confirmed: ConfirmedEnv | None = None) -> TaskSpec:
    """Describe the task to the agents from a one-slot instance of the environment (its
    TaskSpec's names, state fields and metrics handed over as plain data). A spec env is
    imported only when `confirmed` names it (graph.trust)."""
    kwargs = job_env(spec, confirmed)
    kwargs.pop("name")
    try:
        env = make_env(spec.env, 1, **kwargs)
    except (ValueError, TypeError) as error:
        raise RunError(f"cannot build environment {spec.env!r}: {error}") from None
    task = env.task
    return TaskSpec(
        env_name=spec.env, env_description=env.describe(), task=spec.task or task.text, algo=spec.algo,
        n_agents=env.n_agents, obs_dim=env.obs_dim, obs_layout=env.obs_layout(), grammar=task.grammar,
        state_fields=tuple((f.name, f.shape) for f in task.state_fields), state_text=task.state_text(),
        metrics=tuple((m.name, m.higher_is_better) for m in task.metrics), success_metric=task.success_metric,
    )


def llm_config(spec: RunSpec) -> LLMConfig:
    """The agents' LLM settings, with the run's request and token budgets (and the request
    timeout and context window where the spec sets them)."""
    optional = {"timeout_s": spec.llm_timeout_s, "context_tokens": spec.context_tokens}
    try:
        return LLMConfig.from_spec(
            spec.llm, base_url=spec.base_url, max_requests=spec.max_llm_requests, max_tokens=spec.max_llm_tokens,
            offline_prior=spec.offline_prior, **{key: value for key, value in optional.items() if value is not None},
        )
    except ValueError as error:
        raise RunError(str(error).splitlines()[0]) from None


def sandbox_kind(spec: RunSpec) -> str:
    """The backend to ask for: an env lero does not ship (a PettingZoo env through the adapter)
    needs the host's packages, and the Docker image holds only lero and torch."""
    if spec.env in ENV_NAMES or spec.sandbox == "process":
        return spec.sandbox
    if spec.sandbox == "docker":
        raise RunError(f"env {spec.env!r} is not built into the Docker image; use --sandbox process")
    return "process"


def warn_weaker_sandbox(spec: RunSpec) -> None:
    """Say it loudly when `--sandbox auto` gives a custom env the process sandbox."""
    if spec.sandbox == "auto" and sandbox_kind(spec) == "process":
        warning = (f"WARNING: env {spec.env!r} is not in the Docker image: LLM-written code runs in "
                   "the much weaker PROCESS sandbox")
        log.warning(warning)
        print(warning, file=sys.stderr)


def open_sandbox(spec: RunSpec, cache_dir: Path | None, events: Any = None) -> Sandbox:
    try:
        return get_sandbox(sandbox_kind(spec), cache_dir=cache_dir, max_parallel=spec.max_parallel,
                           events=events, executor=spec.executor, ray_address=spec.ray_address)
    except SandboxUnavailable as error:
        raise RunError(str(error).splitlines()[0]) from None


def earlier_llm_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Successful LLM calls recorded in events.jsonl (they survive a crash; counters do not)."""
    return [e for e in events if e["event"] == "llm_call" and e.get("status") == "ok"]


@dataclass
class Resources:
    """The live objects one run's nodes use; `emit` is the single way events leave a node."""

    spec: RunSpec
    rundir: RunDir
    task: TaskSpec
    earlier_calls: list[dict[str, Any]]  # llm_call events of earlier processes of this run
    job_env: dict[str, Any]  # the env as sandbox jobs name it (graph.trust.job_env)
    sandbox: Sandbox = field(init=False)
    team: Team = field(init=False)

    def __post_init__(self) -> None:
        self.sandbox = open_sandbox(self.spec, self.rundir.cache_dir, events=self.emit)
        self.team = make_team(llm_config(self.spec), on_call=self._on_llm_call)
        for call in self.earlier_calls:  # a resumed run keeps spending the same budget
            self.team.ledger.record(call["role"], int(call.get("prompt_tokens", 0)),
                                    int(call.get("completion_tokens", 0)))

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


_registry: dict[str, Resources] = {}
_registry_lock = threading.Lock()


def register(resources: Resources) -> None:
    with _registry_lock:
        _registry[str(resources.spec.run_id)] = resources


def unregister(run_id: str) -> None:
    """Forget a run's live objects and stop its sandbox's warm containers."""
    with _registry_lock:
        found = _registry.pop(run_id, None)
    if found is not None:
        found.sandbox.close()


def cancel_jobs() -> None:
    """Kill the sandbox jobs of every run this process drives (the first Ctrl-C)."""
    with _registry_lock:
        running = list(_registry.values())
    for resources in running:
        resources.sandbox.cancel_all()


def open_resources(spec: RunSpec, rundir: RunDir, confirmed: ConfirmedEnv | None = None) -> Resources:
    """Build the live objects for a run whose directory exists (start, resume, server)."""
    return Resources(spec=spec, rundir=rundir, task=task_spec(spec, confirmed),
                     earlier_calls=earlier_llm_calls(rundir.read_events()), job_env=job_env(spec, confirmed))


def server_runs_dir() -> str:
    """The one runs directory a host without a runner (`langgraph dev`) writes to: the
    operator's `LERO_RUNS_DIR`, else `runs` in its working directory."""
    return absolute_runs_dir(os.environ.get(SERVER_RUNS_DIR_VARIABLE) or RunSpec.model_fields["runs_dir"].default)


def resources_for(spec_json: dict[str, Any]) -> Resources:
    """The registered resources of this run, built on first use in this process.

    Built here only for a host without a runner (`langgraph dev`), from its input: no person
    confirmed anything there, so a spec env is refused, and so is any runs_dir but the server's.
    """
    spec = RunSpec.parse(spec_json)
    run_id = str(spec.run_id)
    with _registry_lock:
        found = _registry.get(run_id)
        if found is None:
            if spec.runs_dir != server_runs_dir():
                raise RunError(f"runs_dir {spec.runs_dir} is not this server's ({server_runs_dir()}; "
                               f"set {SERVER_RUNS_DIR_VARIABLE} where the server starts)")
            job_env(spec)  # an env nobody confirmed: refused before any directory exists
            path = Path(spec.runs_dir) / run_id
            rundir = RunDir.open(spec.runs_dir, run_id) if (path / "spec.json").exists() else RunDir.create(spec)
            found = _registry[run_id] = open_resources(spec, rundir)
        return found
