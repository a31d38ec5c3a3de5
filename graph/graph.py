"""Wiring: the LERO generation loop as a LangGraph state machine.

    setup -> approve_spec -> design -> critique (<-> revise) -> validate (<-> debug)
          -> approve_candidates -> train x (candidates x seeds, + baseline) -> select
          -> reflect -> approve_generation -> design (next generation) | finish

One router after every candidate-level node sends the generation to the earliest stage
any candidate is waiting in; each loop is bounded (critic_rounds, debug_attempts,
generations), and `recursion_limit` covers the worst case explicitly.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import RetryPolicy, Send
from lero.graph.configuration import RunSpec
from lero.graph.nodes import (
    approve_candidates,
    approve_generation,
    approve_spec,
    critique,
    debug,
    design,
    finish,
    reflect,
    revise,
    select,
    setup,
    train,
    training_sends,
    validate,
)
from lero.graph.state import RunState

# candidate stage -> node that handles it, in the order the router serves them
STAGE_NODES = (("review", "critique"), ("revise", "revise"), ("validate", "validate"),
               ("debug", "debug"), ("ready", "approve_candidates"))
CANDIDATE_NODES = ("design", "critique", "revise", "validate", "debug", "approve_candidates")


def route_candidates(state: RunState) -> str | list[Send]:
    """Serve the earliest waiting stage; when none waits, fan out training (or select)."""
    stages = {c["stage"] for c in state.get("candidates", [])}
    for stage, node in STAGE_NODES:
        if stage in stages:
            return node
    return training_sends(state) or "select"


def route_after_spec(state: RunState) -> str:
    return "finish" if state.get("stop_reason") else "design"


def route_next_generation(state: RunState) -> str:
    spec = RunSpec.parse(state["spec"])
    return "finish" if state.get("stop_reason") or state["generation"] >= spec.generations else "design"


def recursion_limit(spec: RunSpec) -> int:
    """Supersteps of the worst case: every critic round, every repair (each re-reviewed) twice."""
    per_generation = 16 + 2 * spec.critic_rounds + 2 * spec.debug_attempts * (3 + 2 * spec.critic_rounds)
    return 10 + spec.generations * per_generation


def build_graph() -> StateGraph:
    """The uncompiled graph (compile with a checkpointer for durable runs)."""
    builder = StateGraph(RunState)
    builder.add_node("setup", setup)
    builder.add_node("approve_spec", approve_spec)
    builder.add_node("design", design)
    builder.add_node("critique", critique)
    builder.add_node("revise", revise)
    builder.add_node("validate", validate)
    builder.add_node("debug", debug)
    builder.add_node("approve_candidates", approve_candidates)
    builder.add_node("train", train, retry_policy=RetryPolicy(max_attempts=2))
    builder.add_node("select", select)
    builder.add_node("reflect", reflect)
    builder.add_node("approve_generation", approve_generation)
    builder.add_node("finish", finish)

    builder.add_edge(START, "setup")
    builder.add_edge("setup", "approve_spec")
    builder.add_conditional_edges("approve_spec", route_after_spec, ["design", "finish"])
    targets = [node for _, node in STAGE_NODES] + ["train", "select"]
    for node in CANDIDATE_NODES:
        builder.add_conditional_edges(node, route_candidates, targets)
    builder.add_edge("train", "select")
    builder.add_edge("select", "reflect")
    builder.add_edge("reflect", "approve_generation")
    builder.add_conditional_edges("approve_generation", route_next_generation, ["design", "finish"])
    builder.add_edge("finish", END)
    return builder


graph: CompiledStateGraph = build_graph().compile()
