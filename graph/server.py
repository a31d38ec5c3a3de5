"""The graph as `langgraph dev` serves it (langgraph.json): a graph factory.

A LangGraph server drives the graph itself, so no runner opens the run's context. The
server enters `make_graph(config)` (a `HostedGraph`, async) once per request and keeps
the graph for that request; the factory opens the `RunContext` when the first node runs
(a request that only reads state never opens one) and closes it, off the server's event
loop, when the request ends. The run is described by the thread's stored spec (its
spec.json in the server's runs dir), else by the request's input spec (`graph.state.RunInput`),
else by `configurable` (thread id = run id). Nobody confirmed anything there, so a
`package.module:factory` env is refused, and so is any runs dir but the server's own
(`LERO_RUNS_DIR`, default `runs` in its working directory). Where LLM code runs and where
the run connects (graph.trust.OPERATOR_FIELDS: sandbox, executor, Ray address, LLM base
URL) are the operator's, set in the server's environment (`LERO_SANDBOX`,
`LERO_EXECUTOR`, `LERO_RAY_ADDRESS`, `LERO_BASE_URL`); a request naming another value is
refused. A request's job timeout, parallel jobs and disk budget are capped (OPERATOR_CAPS:
`LERO_MAX_JOB_TIMEOUT_S`, default JOB_WALL_S; `LERO_MAX_PARALLEL`, default the host's
cores; `LERO_MAX_DISK_BUDGET_MB`, default DISK_BUDGET_MB).
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from lero.graph.configuration import (
    DEFAULT_RUNS_DIR,
    DISK_BUDGET_MB,
    RunError,
    RunSpec,
    absolute_runs_dir,
    check_run_id,
)
from lero.graph.context import RunContext, open_context
from lero.graph.graph import build_graph
from lero.graph.rundir import SPEC_FILE, RunDir
from lero.graph.trust import OPERATOR_CAPS, OPERATOR_FIELDS, job_env
from lero.sandbox.types import JOB_WALL_S

SERVER_RUNS_DIR_VARIABLE = "LERO_RUNS_DIR"  # where a `langgraph dev` server keeps its runs
SERVER_FIELD_VARIABLES = {field: f"LERO_{field.upper()}" for field in OPERATOR_FIELDS}


def operator_fields() -> dict[str, Any]:
    """The operator's sandbox, executor, Ray address and base URL (RunSpec's defaults when unset)."""
    values = {field: os.environ[variable] for field, variable in SERVER_FIELD_VARIABLES.items()
              if os.environ.get(variable)}
    chosen = RunSpec.parse({**values, "runs_dir": server_runs_dir()})
    return {field: getattr(chosen, field) for field in OPERATOR_FIELDS}


def operator_caps() -> dict[str, float]:
    """The most a request may ask of each OPERATOR_CAPS budget."""
    defaults = {"job_timeout_s": JOB_WALL_S, "max_parallel": os.cpu_count() or 1,
                "disk_budget_mb": DISK_BUDGET_MB}
    caps = {}
    for field, variable in OPERATOR_CAPS.items():
        try:
            caps[field] = float(os.environ.get(variable) or defaults[field])
        except ValueError:
            raise RunError(f"{variable} must be a number") from None
    return caps


def _operator_rules(spec: RunSpec) -> RunSpec:
    """The spec with the operator's fields; RunError when a request named others or asked
    for more than a cap."""
    operator = operator_fields()
    for field, value in operator.items():
        if field in spec.model_fields_set and getattr(spec, field) != value:
            raise RunError(f"a request may not choose {field} (the server's is {value!r}; its operator "
                           f"sets {SERVER_FIELD_VARIABLES[field]} where the server starts)")
    for field, cap in operator_caps().items():
        asked = getattr(spec, field)
        if asked is not None and asked > cap:
            raise RunError(f"{field} {asked:g} is over this server's cap of {cap:g} "
                           f"(its operator sets {OPERATOR_CAPS[field]})")
    return spec.model_copy(update=operator)


def server_runs_dir() -> str:
    """The one runs directory this host writes to."""
    return absolute_runs_dir(os.environ.get(SERVER_RUNS_DIR_VARIABLE) or DEFAULT_RUNS_DIR)


def server_spec(node_input: dict[str, Any], config: RunnableConfig) -> RunSpec:
    """The run a server request drives: the thread's stored spec (its run's spec.json), else
    the request's input spec (RunInput), else `configurable`; refused (RunError) when it
    names an unconfirmed env, another runs dir, a sandbox, executor, cluster or LLM URL
    other than the operator's, or a budget over the server's caps."""
    configurable = config.get("configurable", {})
    stored = _stored_spec(configurable.get("thread_id"))
    if stored is not None:
        spec = stored
    elif node_input.get("spec"):
        values = dict(node_input["spec"])
        if not values.get("run_id") and configurable.get("thread_id"):
            values["run_id"] = str(configurable["thread_id"])  # thread id = run id
        spec = RunSpec.parse(values)
    else:
        spec = RunSpec.from_configurable(configurable)
    spec = spec.with_run_id()
    if spec.runs_dir != server_runs_dir():
        raise RunError(f"runs_dir {spec.runs_dir} is not this server's ({server_runs_dir()}; "
                       f"set {SERVER_RUNS_DIR_VARIABLE} where the server starts)")
    spec = _operator_rules(spec)
    job_env(spec)  # an env nobody confirmed: refused before any directory exists
    return spec


def _stored_spec(thread_id: object) -> RunSpec | None:
    """The spec of the run this thread drives (thread id = run id) once its first request
    wrote it to the server's runs dir; None before."""
    if not thread_id:
        return None
    rundir = RunDir(Path(server_runs_dir()) / check_run_id(str(thread_id)))
    return rundir.read_spec() if rundir.files.kind(SPEC_FILE) == "file" else None


class LazyContext:
    """One request's RunContext, opened by the first node that needs it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._context: RunContext | None = None

    def __call__(self, node_input: dict[str, Any], config: RunnableConfig) -> RunContext:
        with self._lock:
            if self._context is None:
                spec = server_spec(node_input, config)
                self._context = open_context(spec, RunDir.open_or_create(spec))
            return self._context

    def close(self) -> None:
        with self._lock:
            if self._context is not None:
                self._context.close()
                self._context = None


class HostedGraph:
    """One request's compiled graph as a context manager, entered sync (embedding, tests) or
    async (the server). Leaving it closes the run's context; the async exit does that in a
    thread, so removing a run's containers through Docker's socket never blocks the
    server's event loop."""

    def __init__(self, checkpointer: BaseCheckpointSaver | None = None) -> None:
        self.checkpointer = checkpointer
        self.context = LazyContext()

    def __enter__(self) -> CompiledStateGraph:
        return build_graph(context_for=self.context).compile(checkpointer=self.checkpointer)

    def __exit__(self, *exc: object) -> None:
        self.context.close()

    async def __aenter__(self) -> CompiledStateGraph:
        return self.__enter__()  # compiling does no I/O; the context opens in the first node's thread

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.context.close)


def hosted_graph(checkpointer: BaseCheckpointSaver | None = None) -> HostedGraph:
    """The compiled graph for one request, with its context opened on demand and closed after."""
    return HostedGraph(checkpointer)


def make_graph(config: RunnableConfig) -> HostedGraph:
    """langgraph.json's graph factory (the server adds its own checkpointer and enters it async)."""
    return HostedGraph()
