"""Wiring: the LERO generation loop as a LangGraph state machine.

    setup -> approve_spec -> design -> critique (<-> revise) -> validate (<-> debug)
          -> approve_candidates -> train x (candidates x seeds, + baseline) -> promote
          (-> train x (the best half x seeds) -> promote)* -> select -> reflect -> approve_generation -> design (next generation) | confirm
          -> finish        (confirm: the winner and native again at a longer budget, graph.nodes.confirm)

One router after every candidate-level node sends the generation to the earliest stage
any candidate is waiting in (the stages and their nodes are declarations, `graph.stages`); each loop is bounded (critic_rounds, debug_attempts,
generations), and `recursion_limit` covers the worst case explicitly.

The nodes and routers read the spec and their live objects from LangGraph's runtime
context (`graph.context`); the state holds only what changes during the run. Pass
`context=RunContext` when driving the graph, or let `build_graph(context_for=...)` supply
one (the `langgraph dev` host, `graph.server`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy, Send

from lero.graph import stages
from lero.graph.configuration import RunSpec
from lero.graph.context import RunContext
from lero.graph.nodes import (
    approve_generation,
    approve_spec,
    confirm,
    design,
    finish,
    promote,
    reflect,
    route_rungs,
    select,
    setup,
    train,
    training_sends,
)
from lero.graph.schedule import last_rung
from lero.graph.state import RunInput, RunState


class SetupInput(RunState, RunInput, total=False):
    """`setup`'s input: the state and a request's spec (RunInput), which only a host's
    `context_for` reads."""



ContextFor = Callable[[dict[str, Any], RunnableConfig], RunContext]  # (node input, config) -> context


def route_candidates(state: RunState, runtime: Runtime[RunContext]) -> str | list[Send]:
    """Serve the earliest waiting stage; when none waits, fan out training (or select)."""
    waiting = {c["stage"] for c in state.get("candidates", [])}
    for stage in stages.ordered():
        if stage.name in waiting:
            return stage.node.__name__
    return training_sends(state, runtime.context.spec) or "select"


def route_after_spec(state: RunState) -> str:
    """Reads the state alone: a resumed stopped run goes on through it (`update_state`
    runs a router with no runtime context; graph.runner)."""
    return "finish" if state.get("stop_reason") else "design"


def route_next_generation(state: RunState, runtime: Runtime[RunContext]) -> str:
    """Only a run that went through all its generations is confirmed; one that confirms
    nothing (`--confirm-steps 0`) ends as it did before."""
    if state.get("stop_reason"):
        return "finish"
    spec = runtime.context.spec
    if state["generation"] >= spec.generations:
        return "confirm" if spec.confirm_budget() else "finish"
    return "design"


def recursion_limit(spec: RunSpec) -> int:
    """Supersteps of the worst case, twice over: every declared stage's rounds on every pass
    through the gate (the first, and one per repair)."""
    rungs = 2 * (last_rung(spec.schedule) + 1)  # train and promote, per rung
    passes = 1 + spec.debug_attempts
    per_generation = 16 + rungs + 2 * passes * sum(stage.rounds(spec) for stage in stages.ordered())
    return 12 + spec.generations * per_generation  # + confirm, finish


def _timed(node: Callable[..., Any]) -> Callable[..., Any]:
    """`node` that records its wall seconds (`node_finished`) when it returns: the report's
    loop time. A node that raises or is interrupted (an approval) records nothing; it runs
    again and is timed then."""

    @functools.wraps(node)  # LangGraph reads the node's input schema from its annotations
    def run(state: dict[str, Any], runtime: Runtime) -> Any:
        started = time.perf_counter()
        update = node(state, runtime)
        runtime.context.emit("node_finished", node=node.__name__,
                             seconds=round(time.perf_counter() - started, 3))  # fmt: skip
        return update

    return run


def _with_context(node: Callable[..., Any], context_for: ContextFor) -> Callable[..., Any]:
    """`node(state, runtime)` (a node or a router) run with the runtime context `context_for`
    supplies (hosts that pass none)."""

    def run(state: dict[str, Any], runtime: Runtime, config: RunnableConfig) -> Any:
        return node(state, runtime.override(context=context_for(state, config)))

    run.__name__ = node.__name__
    return run


def build_graph(context_for: ContextFor | None = None) -> StateGraph:
    """The uncompiled graph (compile with a checkpointer for durable runs). Nodes read
    `runtime.context`; `context_for` supplies it where the caller passes none."""

    def bound(node: Callable[..., Any]) -> Callable[..., Any]:
        timed = _timed(node)
        return timed if context_for is None else _with_context(timed, context_for)

    def routed(router: Callable[..., Any]) -> Callable[..., Any]:
        return router if context_for is None else _with_context(router, context_for)

    # a host's own context (a server passes `configurable` as one) is replaced, not parsed
    builder = StateGraph(RunState, context_schema=RunContext if context_for is None else None, input_schema=RunInput)
    options: dict[str, dict[str, Any]] = {
        "setup": {"input_schema": SetupInput},  # a host's context_for reads the request's input spec
        "train": {"retry_policy": RetryPolicy(max_attempts=2)},
    }
    served = [stage.node for stage in stages.ordered()]
    for node in (setup, approve_spec, design, *served, train, promote, select, reflect, approve_generation,
                 confirm, finish):
        builder.add_node(node.__name__, bound(node), **options.get(node.__name__, {}))

    builder.add_edge(START, "setup")
    builder.add_edge("setup", "approve_spec")
    builder.add_conditional_edges("approve_spec", route_after_spec, ["design", "finish"])
    targets = [node.__name__ for node in served] + ["train", "select"]
    for node in ("design", *targets[:-2]):  # every candidate-level node hands on through the router
        builder.add_conditional_edges(node, routed(route_candidates), targets)
    builder.add_edge("train", "promote")  # one promote per rung, once all its branches joined
    builder.add_conditional_edges("promote", routed(route_rungs), ["train", "select"])
    builder.add_edge("select", "reflect")
    builder.add_edge("reflect", "approve_generation")
    builder.add_conditional_edges("approve_generation", routed(route_next_generation), ["design", "confirm", "finish"])
    builder.add_edge("confirm", "finish")
    builder.add_edge("finish", END)
    return builder


graph: CompiledStateGraph = build_graph().compile()
