"""Durable runs: start, drive and resume a lero graph run with a SQLite checkpointer.

The engine half of the CLI. `start_run` validates everything that can fail (environment,
algorithm, sandbox, LLM server) *before* creating `runs/<id>/`, then drives the graph,
forwarding its custom stream events to a `RunUI` and answering interrupts through
`RunUI.ask`. Checkpoints go to `runs/<id>/checkpoints.sqlite` (thread id = run id) with
durability "sync", so `resume_run` continues after a stop, a crash or a SIGKILL.

    python -m lero.graph.runner start --spec spec.json      # JSON-lines events on stdout
    python -m lero.graph.runner resume RUN_ID --runs-dir runs [--answer answer.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command
from lero.graph.configuration import RunError, RunSpec
from lero.graph.graph import build_graph, recursion_limit
from lero.graph.nodes import normalize_answer
from lero.graph.nodes.resources import (
    llm_config,
    open_resources,
    open_sandbox,
    register,
    task_spec,
    unregister,
)
from lero.graph.rundir import RunDir
from lero.training import ALGOS, TrainConfig


class RunUI(Protocol):
    """Whoever watches a run: renders stream events and answers approval interrupts."""

    def on_event(self, event: dict[str, Any]) -> None:
        """A custom stream event: {"type": "generation" | "candidate" | "job" | ..., ...}."""

    def ask(self, payload: dict[str, Any]) -> object | None:
        """Answer an interrupt payload (schemas: graph.state); None = nobody can answer now."""


@dataclass
class RunOutcome:
    """How a call to start_run / resume_run ended."""

    status: str  # "completed" | "interrupted"
    run_id: str
    run_dir: Path
    interrupt: dict[str, Any] | None = None  # the pending approval payload when interrupted


def check_llm_reachable(spec: RunSpec, timeout_s: float = 5.0) -> None:
    """An OpenAI-compatible server must answer HTTP at its base URL (any status will do)."""
    cfg = llm_config(spec)
    if cfg.backend != "openai":
        return
    url = (cfg.base_url or "https://api.openai.com/v1").rstrip("/") + "/models"
    try:
        httpx.get(url, timeout=timeout_s)
    except httpx.HTTPError as error:
        raise RunError(f"cannot reach the LLM server at {url}: {type(error).__name__}: {error}") from None


def preflight(spec: RunSpec) -> RunSpec:
    """Fail with one clear line before anything is created or any compute is spent.

    Returns the spec with `sandbox="auto"` resolved to the backend found, so that a
    resumed run never switches backends silently.
    """
    if spec.algo not in ALGOS:
        raise RunError(f"unknown algorithm {spec.algo!r}: expected one of {', '.join(ALGOS)}")
    task_spec(spec)  # builds the environment: unknown env or bad env kwargs
    try:  # what every training job will check inside the sandbox: hparams above all
        TrainConfig(env=spec.env, env_kwargs=spec.env_kwargs or {}, algo=spec.algo, steps=spec.steps,
                    eval_episodes=spec.eval_episodes, hparams=spec.hparams)
    except ValueError as error:
        raise RunError(f"invalid training settings: {str(error).splitlines()[0]}") from None
    with tempfile.TemporaryDirectory(prefix="lero-preflight-") as scratch:
        backend = open_sandbox(spec, cache_dir=Path(scratch)).kind  # no Docker daemon / no image
    check_llm_reachable(spec)
    return spec.model_copy(update={"sandbox": backend})


def start_run(spec: RunSpec, ui: RunUI) -> RunOutcome:
    """Validate, create runs/<id>/ and drive a new run until it completes or waits for a human."""
    spec = spec.with_run_id()
    if (Path(spec.runs_dir) / str(spec.run_id)).exists():
        raise RunError(f"run {spec.run_id!r} already exists in {spec.runs_dir} (use lero resume)")
    spec = preflight(spec)
    rundir = RunDir.create(spec)
    rundir.append_event("run_started", run_id=spec.run_id)
    return _drive(rundir, spec, ui, {"spec": spec.model_dump(mode="json")})


def resume_run(run_id: str, runs_dir: str | Path, ui: RunUI, answer: object | None = None,
               executor: dict[str, Any] | None = None) -> RunOutcome:
    """Continue a stopped, interrupted or crashed run from its last checkpoint.

    `answer` answers the pending approval (else `ui.ask` is asked); a finished run just
    reports `completed`. `executor` ({"executor", "ray_address"}) moves the remaining
    jobs elsewhere, e.g. to another Ray cluster; it changes no result.
    """
    rundir = RunDir.open(runs_dir, run_id)
    spec = rundir.read_spec()
    if executor:
        spec = RunSpec.parse({**spec.model_dump(mode="json"), **executor})
    preflight(spec)
    with SqliteSaver.from_conn_string(str(rundir.checkpoint_path)) as saver:
        snapshot = build_graph().compile(checkpointer=saver).get_state(_config(spec))
    if not snapshot.values:
        raise RunError(f"run {run_id!r} has no checkpoint to resume from")
    if not snapshot.next:
        return RunOutcome("completed", run_id, rundir.path)
    rundir.append_event("run_resumed", run_id=run_id)
    command: Command | None = None
    if snapshot.interrupts:
        payload = snapshot.interrupts[0].value
        if answer is None:
            answer = ui.ask(payload)
        if answer is None:
            return RunOutcome("interrupted", run_id, rundir.path, interrupt=payload)
        command = _answer(rundir, payload, answer)
    return _drive(rundir, spec, ui, command)


def _config(spec: RunSpec) -> dict[str, Any]:
    # No `max_concurrency`: LangGraph's sync runner shares that pool with its own stream
    # thread (1 deadlocks). Parallel jobs are bounded by the sandbox's max_parallel slots.
    return {"configurable": {"thread_id": spec.run_id}, "recursion_limit": recursion_limit(spec)}


def _answer(rundir: RunDir, payload: dict[str, Any], answer: object) -> Command:
    checked = normalize_answer(payload["kind"], answer)
    rundir.append_event("interrupt_answered", kind=payload["kind"], answer=checked)
    rundir.update_state(status="running")
    return Command(resume=checked)


def _drive(rundir: RunDir, spec: RunSpec, ui: RunUI, graph_input: Any) -> RunOutcome:
    """Stream the graph, pass events to the UI, and loop over interrupts the UI answers."""
    run_id = str(spec.run_id)
    register(open_resources(spec, rundir))
    rundir.update_state(status="running")
    config = _config(spec)
    try:
        with SqliteSaver.from_conn_string(str(rundir.checkpoint_path)) as saver:
            compiled = build_graph().compile(checkpointer=saver)
            while True:
                for event in compiled.stream(graph_input, config, stream_mode="custom", durability="sync"):
                    ui.on_event(event)
                snapshot = compiled.get_state(config)
                if not snapshot.interrupts:
                    return RunOutcome("completed", run_id, rundir.path)
                payload = snapshot.interrupts[0].value
                rundir.append_event("interrupt", kind=payload["kind"], payload=payload)
                rundir.update_state(status="interrupted")
                ui.on_event({"type": "interrupt", "kind": payload["kind"], "payload": payload})
                answer = ui.ask(payload)
                if answer is None:
                    return RunOutcome("interrupted", run_id, rundir.path, interrupt=payload)
                graph_input = _answer(rundir, payload, answer)
    except RunError:  # a malformed answer: the run still waits for a valid one
        raise
    except KeyboardInterrupt:
        rundir.update_state(status="interrupted")
        rundir.append_event("run_stopped", reason="keyboard interrupt")
        raise
    except Exception as error:
        rundir.update_state(status="failed", error=f"{type(error).__name__}: {error}")
        rundir.append_event("run_failed", error=f"{type(error).__name__}: {error}")
        raise
    finally:
        unregister(run_id)


class JsonLinesUI:
    """A terminal-less UI: events as JSON lines on stdout, answers from a file or none."""

    def __init__(self, answer: object | None = None) -> None:
        self.answer = answer

    def on_event(self, event: dict[str, Any]) -> None:
        print(json.dumps(event, default=str), flush=True)

    def ask(self, payload: dict[str, Any]) -> object | None:
        answer, self.answer = self.answer, None
        return answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lero.graph.runner", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="start a run from a RunSpec JSON file")
    start.add_argument("--spec", required=True, type=Path)
    resume = commands.add_parser("resume", help="resume a run")
    resume.add_argument("run_id")
    resume.add_argument("--runs-dir", default="runs")
    resume.add_argument("--answer", type=Path, help="JSON answer to the pending approval")
    args = parser.parse_args(argv)
    try:
        if args.command == "start":
            outcome = start_run(RunSpec.parse(json.loads(args.spec.read_text())), JsonLinesUI())
        else:
            answer = json.loads(args.answer.read_text()) if args.answer else None
            outcome = resume_run(args.run_id, args.runs_dir, JsonLinesUI(), answer=answer)
    except RunError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(json.dumps({"outcome": outcome.status, "run_id": outcome.run_id, "run_dir": str(outcome.run_dir)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
