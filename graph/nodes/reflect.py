"""Reflection (training statistics -> designer text) and the end of the run (report)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from lero.graph.context import RunContext
from lero.graph.nodes.candidates import at_stage
from lero.graph.reflection import generation_reflection
from lero.graph.rundir import BASELINE_ID
from lero.graph.state import RunState
from lero.graph.summary import load_run, run_ending, write_summary


def reflect(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Turn this generation's results into the text the designer reads next."""
    generation = state["generation"]
    evaluated = state.get("evaluated", [])
    baseline = next((r for r in evaluated if r["candidate_id"] == BASELINE_ID), None)
    records = [r for r in evaluated if r["generation"] == generation and r["candidate_id"] != BASELINE_ID]
    res = runtime.context
    text = generation_reflection(generation, records, state.get("elites", []), baseline,
                                 at_stage(state.get("candidates", []), "dropped"), res.task.task_spec)
    res.emit("reflection", generation=generation, chars=len(text))
    return {"reflection": text}


def finish(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Record how the run ended (completed, stopped, failed), write report.json, then let the
    app add its report (`RunHooks.on_run_end`)."""
    res = runtime.context
    elites = state.get("elites", [])
    best = elites[0] if elites else None
    status, stop_reason = run_ending(load_run(res.rundir.path), state.get("stop_reason"))
    res.rundir.update_state(
        status=status, stop_reason=stop_reason, llm=res.llm_usage(),
        best={"candidate_id": best["candidate_id"], "fitness": best["fitness"]} if best else None,
    )
    res.emit("run_finished", status=status, stop_reason=stop_reason,
             best_candidate=best["candidate_id"] if best else None)
    write_summary(res.rundir.path)
    res.hooks.run_end(res.rundir)
    return {}
