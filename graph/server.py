"""The graph as `langgraph dev` serves it (langgraph.json): a graph factory.

A LangGraph server drives the graph itself, so no runner opens the run's context. The
server calls `make_graph(config)` once per request and keeps the graph for that request;
the factory opens the `RunContext` when the first node runs (a request that only reads
state never opens one) and closes it when the request ends. The run is described by the
thread's stored spec, else by `configurable` (thread id = run id). Nobody confirmed
anything there, so a `package.module:factory` env is refused, and so is any runs dir but
the server's own (`LERO_RUNS_DIR`, default `runs` in its working directory).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from lero.graph.configuration import DEFAULT_RUNS_DIR, RunError, RunSpec, absolute_runs_dir
from lero.graph.context import RunContext, open_context
from lero.graph.graph import build_graph
from lero.graph.rundir import RunDir
from lero.graph.trust import job_env

SERVER_RUNS_DIR_VARIABLE = "LERO_RUNS_DIR"  # where a `langgraph dev` server keeps its runs


def server_runs_dir() -> str:
    """The one runs directory this host writes to."""
    return absolute_runs_dir(os.environ.get(SERVER_RUNS_DIR_VARIABLE) or DEFAULT_RUNS_DIR)


def server_spec(node_input: dict[str, Any], config: RunnableConfig) -> RunSpec:
    """The run a server request drives: the stored spec, else `configurable`; refused
    (RunError) when it names an unconfirmed env or another runs dir."""
    configurable = config.get("configurable", {})
    if node_input.get("spec"):
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
    job_env(spec)  # an env nobody confirmed: refused before any directory exists
    return spec


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


@contextmanager
def hosted_graph(checkpointer: BaseCheckpointSaver | None = None) -> Iterator[CompiledStateGraph]:
    """The compiled graph for one request, with its context opened on demand and closed after."""
    context = LazyContext()
    try:
        yield build_graph(context_for=context).compile(checkpointer=checkpointer)
    finally:
        context.close()


@contextmanager
def make_graph(config: RunnableConfig) -> Iterator[CompiledStateGraph]:
    """langgraph.json's graph factory (the server adds its own checkpointer)."""
    with hosted_graph() as graph:
        yield graph
