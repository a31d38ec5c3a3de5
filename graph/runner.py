"""Durable runs: start, drive and resume a lero graph run with a SQLite checkpointer.

The engine half of the CLI. `start_run` validates everything that can fail (environment,
algorithm, sandbox, LLM server) *before* creating `runs/<id>/`, then drives the graph,
forwarding its custom stream events to a `RunUI` and answering interrupts through
`RunUI.ask`. Checkpoints go to `runs/<id>/checkpoints.sqlite` (thread id = run id) with
durability "sync", so `resume_run` continues after a stop, a crash or a SIGKILL.

Each drive opens the run's `RunContext` (graph.context) once and passes it to the graph
as its runtime context; the front-end's `RunHooks` and `CancelScope` travel with it.
"""

from __future__ import annotations

import logging
import sqlite3
import tempfile
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from langgraph.types import Command

from lero.agents import Problem
from lero.agents.llm_config import LLMServerBusy, LLMSetupError, server_models
from lero.graph.checkpoints import check_checkpoints, open_saver
from lero.graph.configuration import LLM_SETTINGS, RunError, RunSpec
from lero.graph.confirmation import loop_arm_plan
from lero.graph.context import (
    CancelScope,
    RunHooks,
    earlier_llm_calls,
    llm_config,
    open_context,
    open_sandbox,
    problem,
)
from lero.graph.graph import build_graph, recursion_limit
from lero.graph.nodes import normalize_answer
from lero.graph.rundir import CODE_FILE, RunDir
from lero.graph.summary import write_summary
from lero.graph.trust import confirm_endpoints, confirm_env, job_env
from lero.sandbox.base import JobCancelled
from lero.training import ALGOS, TrainConfig
from lero.training.envs.registry import ConfirmedEnv

log = logging.getLogger(__name__)


class RunUI(Protocol):
    """Whoever watches a run: renders stream events and answers approval interrupts."""

    def on_event(self, event: dict[str, Any]) -> None:
        """A custom stream event: {"type": "generation" | "candidate" | "job" | ..., ...}."""

    def ask(self, payload: dict[str, Any]) -> object | None:
        """Answer an interrupt payload (schemas: graph.state); None = nobody can answer now."""


@dataclass
class RunOutcome:
    """How a call to start_run / resume_run ended."""

    status: str  # "completed" | "stopped" | "failed" | "interrupted" (report.RUN_STATUSES)
    run_id: str
    run_dir: Path
    interrupt: dict[str, Any] | None = None  # the pending approval payload when interrupted
    stop_reason: str | None = None  # why a run stopped or failed (one line)


def check_llm_reachable(spec: RunSpec) -> None:
    """The server must answer and accept the key (401/403 fail here, before anything exists).
    A busy one is there: the run goes on, and a refused key shows in its first request."""
    cfg = llm_config(spec)
    if cfg.backend != "openai":
        return
    try:
        server_models(cfg.base_url)
    except LLMServerBusy as busy:
        log.warning("%s; going on: each request waits up to %g s", busy, cfg.timeout_s)
    except LLMSetupError as error:
        raise RunError(str(error)) from None


def preflight(spec: RunSpec, confirmed: ConfirmedEnv | None = None) -> tuple[RunSpec, Problem]:
    """Fail with one clear line before anything is created or any compute is spent.

    Returns the spec with `sandbox="auto"` resolved to the backend found, so that a
    resumed run never switches backends silently, and the problem read from the env (a
    custom env in Docker: one describe job), which the run's context takes as it is. A
    spec env must be `confirmed`.
    """
    if spec.algo not in ALGOS:
        raise RunError(f"unknown algorithm {spec.algo!r}: expected one of {', '.join(ALGOS)}")
    with tempfile.TemporaryDirectory(prefix="lero-preflight-") as scratch:
        # no Docker daemon / no image / a custom env Docker cannot serve
        sandbox = open_sandbox(spec, cache_dir=Path(scratch), env=job_env(spec, confirmed))
        try:  # builds the environment (in a sandbox job for a custom env): bad env or kwargs
            task = problem(spec, confirmed, sandbox)
        finally:
            sandbox.close()
        backend = sandbox.kind
    try:  # what every training job will check inside the sandbox: hparams above all
        TrainConfig(env=spec.env, env_kwargs=spec.env_kwargs or {}, algo=spec.algo, steps=spec.steps,
                    eval_episodes=spec.eval_episodes, hparams=spec.hparams)
    except ValueError as error:
        raise RunError(f"invalid training settings: {str(error).splitlines()[0]}") from None
    check_llm_reachable(spec)
    return spec.model_copy(update={"sandbox": backend}), task


def _announce(ui: RunUI, spec: RunSpec, verb: str) -> None:
    """The first thing a run says: which LLM and which sandbox it uses, and on a sparse task
    what its native@loop arm will train and may take (`loop_arm_plan`)."""
    where = f" at {spec.base_url}" if spec.base_url else ""
    plan = loop_arm_plan(spec)
    ui.on_event({"type": "log", "event": f"run_{verb}",
                 "message": f"{verb} run {spec.run_id}: llm {spec.llm}{where}, sandbox {spec.sandbox}"
                            + (f"; {plan}" if plan else "")})  # fmt: skip


@dataclass(frozen=True)
class Front:
    """What a front-end hands every run it drives: the app's callbacks, and the scope its
    Ctrl-C cancels (None: nobody cancels from outside)."""

    hooks: RunHooks = field(default_factory=RunHooks)
    cancels: CancelScope | None = None


def start_run(spec: RunSpec, ui: RunUI, confirm: str | None = None,
              front: Front | None = None) -> RunOutcome:
    """Validate, create runs/<id>/ and drive a new run until it ends or waits for a human.

    `confirm`: the `package.module:factory` env a person typed (graph.trust), which a spec
    env must equal before its module is imported.
    """
    spec = spec.with_run_id()
    if (Path(spec.runs_dir) / str(spec.run_id)).exists():
        raise RunError(f"run {spec.run_id!r} already exists in {spec.runs_dir} (use lero resume)")
    confirmed = confirm_env(spec.env, confirm)
    spec, task = preflight(spec, confirmed)
    _announce(ui, spec, "starting")
    rundir = RunDir.create(spec)
    rundir.claim()
    rundir.append_event("run_started", run_id=spec.run_id, llm=spec.llm, sandbox=spec.sandbox)
    return _drive(rundir, spec, task, ui, {}, confirmed, front or Front())


# what `lero resume` may change: more LLM budget or wall clock, another server, a longer LLM
# timeout or another context window, another executor or sandbox (moving the remaining jobs
# changes no result)
RESUME_OVERRIDES = ("llm", "base_url", "max_llm_requests", "max_llm_tokens", "wall_clock_s",
                    *LLM_SETTINGS, "executor", "ray_address", "sandbox")


def resume_run(
    run_id: str,
    runs_dir: str | Path,
    ui: RunUI,
    answer: object | None = None,
    overrides: dict[str, Any] | None = None,
    confirm: str | None = None,
    front: Front | None = None,
) -> RunOutcome:
    """Continue a stopped, interrupted or crashed run from its last checkpoint.

    `answer` answers the pending approval (else `ui.ask` is asked). `overrides` (fields of
    RESUME_OVERRIDES: more LLM budget, more wall clock, another server) replace the stored
    spec's. `confirm`: the env a person typed to confirm a stored `package.module:factory`
    env (graph.trust). A stored base URL, executor, Ray address or process sandbox is used
    only when the spec is one this installation wrote (`RunDir.written_here`) or `overrides` gives it
    again. A `stopped` run goes on with the next generation; another finished run just
    reports how it ended. Everything is checked before anything is written.
    """
    rundir = RunDir.open(runs_dir, run_id)
    rundir.claim()  # before anything is read or written: a second driver stops here
    stored = rundir.read_spec()
    if stored.run_id != run_id:
        raise RunError(f"run {run_id!r}: its spec.json names run {stored.run_id!r}")
    unknown = set(overrides or {}) - set(RESUME_OVERRIDES)
    if unknown:
        raise RunError(f"resume cannot change {', '.join(sorted(unknown))}")
    confirm_endpoints(stored, overrides or {}, rundir.written_here())
    confirmed = confirm_env(stored.env, confirm)
    spec = RunSpec.parse({**stored.model_dump(mode="json"), **(overrides or {}),
                          "runs_dir": str(rundir.path.parent)})
    state = rundir.read_state()
    try:  # a planted blob naming other code: refused before anything runs or is written
        check_checkpoints(rundir.checkpoint_path)
    except sqlite3.DatabaseError as error:
        raise RunError(f"run {run_id!r}: cannot read {rundir.checkpoint_path.name}: {error}") from None
    _, task = preflight(spec, confirmed)
    try:
        with open_saver(rundir.checkpoint_path) as saver:
            compiled = build_graph().compile(checkpointer=saver)
            snapshot = compiled.get_state(_config(spec))
            if not snapshot.values:
                raise RunError(f"run {run_id!r} has no checkpoint to resume from")
            if not snapshot.next and state.get("status") != "stopped":
                return RunOutcome(state.get("status", "completed"), run_id, rundir.path,
                                  stop_reason=state.get("stop_reason"))
            payload = snapshot.interrupts[0].value if snapshot.interrupts else None
            checked = normalize_answer(payload["kind"], answer, payload) if payload and answer is not None else None
            if not snapshot.next:
                _check_budget_left(rundir, spec, state.get("stop_reason") or "")
                compiled.update_state(_config(spec), _continue_stopped(snapshot.values), as_node="approve_spec")
    except sqlite3.DatabaseError as error:
        raise RunError(f"run {run_id!r}: cannot read {rundir.checkpoint_path.name}: {error}") from None
    if spec != stored:
        rundir.write_spec(spec)
    _announce(ui, spec, "resuming")
    rundir.append_event("run_resumed", run_id=run_id, **(overrides or {}))
    command: Command | None = None
    if payload is not None:
        if checked is None:
            checked = ui.ask(payload)
        if checked is None:
            return RunOutcome("interrupted", run_id, rundir.path, interrupt=payload)
        command = _answer(rundir, payload, checked)
    return _drive(rundir, spec, task, ui, command, confirmed, front or Front())


def _continue_stopped(values: dict[str, Any]) -> dict[str, Any]:
    """State that sends a stopped run back to `design`. Written as `approve_spec`'s update:
    its router reads the state alone (update_state runs routers with no runtime context)
    and sends a run with no stop reason to `design`.

    When the designer wrote nothing in the last generation, that generation is designed
    again (its records, the baseline's too when it was generation 0, are dropped from
    `evaluated`: the sandbox's result cache answers their jobs again without training).
    """
    generation = values["generation"]
    if not values.get("candidates"):
        generation -= 1
    evaluated = [r for r in values.get("evaluated", []) if r["generation"] < generation]
    return {"stop_reason": None, "generation": max(generation, 0), "evaluated": evaluated}


def _check_budget_left(rundir: RunDir, spec: RunSpec, stop_reason: str) -> None:
    """Resuming a run stopped by a budget needs more of it (else it would stop at once)."""
    kind = stop_reason.split(":", 1)[0]
    if kind == "wall_clock" and spec.wall_clock_s is not None and rundir.wall_s() >= spec.wall_clock_s:
        raise RunError(f"the wall-clock budget is spent ({rundir.wall_s():.0f} s of "
                       f"{spec.wall_clock_s:g} s): resume with a larger --wall-clock-s")
    if kind == "llm_budget":
        used = earlier_llm_calls(rundir.read_events())
        tokens = sum(int(c.get("prompt_tokens", 0)) + int(c.get("completion_tokens", 0)) for c in used)
        if (spec.max_llm_requests is not None and len(used) >= spec.max_llm_requests) or (
            spec.max_llm_tokens is not None and tokens >= spec.max_llm_tokens
        ):
            raise RunError(f"the LLM budget is spent ({len(used)} requests, {tokens} tokens): "
                           "resume with a larger --max-llm-requests / --max-llm-tokens")


def _config(spec: RunSpec) -> dict[str, Any]:
    # No `max_concurrency`: LangGraph's sync runner shares that pool with its own stream
    # thread (1 deadlocks). Parallel jobs are bounded by the sandbox's max_parallel slots.
    return {"configurable": {"thread_id": spec.run_id}, "recursion_limit": recursion_limit(spec)}


def _by_reference(rundir: RunDir, payload: dict[str, Any]) -> dict[str, Any]:
    """An interrupt as events.jsonl keeps it: each candidate's code by reference (`code_file`,
    its candidate.py, with its `code_sha`), not inline, so an approval of 64 candidates is not
    one multi-MiB line that every reader of the stream must parse."""
    if not isinstance(payload.get("candidates"), list):
        return payload
    return {**payload, "candidates": [
        {**{k: v for k, v in candidate.items() if k not in ("code", "parent_code")},  # the parent's: its own file
         "code_file": f"{rundir.candidate_folder(candidate['candidate_id'])}/{CODE_FILE}"}
        for candidate in payload["candidates"]]}


def _answer(rundir: RunDir, payload: dict[str, Any], answer: object) -> Command:
    checked = normalize_answer(payload["kind"], answer, payload)
    rundir.append_event("interrupt_answered", kind=payload["kind"], answer=checked)
    rundir.update_state(status="running")
    return Command(resume=checked)


def _drive(rundir: RunDir, spec: RunSpec, task: Problem, ui: RunUI, graph_input: Any,
           confirmed: ConfirmedEnv | None, front: Front) -> RunOutcome:
    """Stream the graph, pass events to the UI, and loop over interrupts the UI answers.
    TASK: the problem preflight read (the context does not read the env again)."""
    run_id = str(spec.run_id)
    context = open_context(spec, rundir, confirmed, front.hooks, task=task)
    if front.cancels is not None:
        front.cancels.add(context)
    rundir.update_state(status="running", stop_reason=None, error=None)
    config = _config(spec)
    try:
        with open_saver(rundir.checkpoint_path) as saver:
            compiled = build_graph().compile(checkpointer=saver)
            while True:
                for event in compiled.stream(graph_input, config, context=context, stream_mode="custom",
                                             durability="sync"):
                    ui.on_event(event)
                snapshot = compiled.get_state(config)
                if not snapshot.interrupts:
                    state = rundir.read_state()
                    return RunOutcome(state.get("status", "completed"), run_id, rundir.path,
                                      stop_reason=state.get("stop_reason"))
                payload = snapshot.interrupts[0].value
                rundir.append_event("interrupt", kind=payload["kind"], payload=_by_reference(rundir, payload))
                rundir.update_state(status="interrupted")
                ui.on_event({"type": "interrupt", "kind": payload["kind"], "payload": payload})
                answer = ui.ask(payload)
                if answer is None:
                    return RunOutcome("interrupted", run_id, rundir.path, interrupt=payload)
                graph_input = _answer(rundir, payload, answer)
    except RunError:  # a malformed answer: the run still waits for a valid one
        raise
    except (KeyboardInterrupt, JobCancelled):
        rundir.update_state(status="interrupted", stop_reason="interrupted (Ctrl-C)")
        rundir.append_event("run_stopped", reason="keyboard interrupt")
        raise KeyboardInterrupt from None
    except Exception as error:
        _record_failure(rundir, " ".join(f"{type(error).__name__}: {error}".split())[:500], front.hooks)
        raise
    finally:
        if front.cancels is not None:
            front.cancels.discard(context)
        context.close()
        rundir.release()


def _record_failure(rundir: RunDir, reason: str, hooks: RunHooks) -> None:
    """End the run `failed` as far as the disk allows (a full one may refuse some of it):
    state first, then the event, then the report; none of them hides the run's own error."""
    steps = (lambda: rundir.update_state(status="failed", stop_reason=reason, error=reason),
             lambda: rundir.append_event("run_failed", error=reason),
             lambda: write_summary(rundir.path),
             lambda: hooks.run_end(rundir))
    for step in steps:
        with suppress(OSError, ValueError):
            step()
