"""Reflection (training statistics -> designer text) and the end of the run (report)."""

from __future__ import annotations

from typing import Any

from lero.graph.nodes.candidates import at_stage
from lero.graph.nodes.resources import resources_for
from lero.graph.reflection import generation_reflection
from lero.graph.report import load_run, run_ending, write_report
from lero.graph.rundir import BASELINE_ID
from lero.graph.state import RunState


def reflect(state: RunState) -> dict[str, Any]:
    """Turn this generation's results into the text the designer reads next."""
    generation = state["generation"]
    evaluated = state.get("evaluated", [])
    baseline = next((r for r in evaluated if r["candidate_id"] == BASELINE_ID), None)
    records = [r for r in evaluated if r["generation"] == generation and r["candidate_id"] != BASELINE_ID]
    res = resources_for(state["spec"])
    text = generation_reflection(generation, records, state.get("elites", []), baseline,
                                 at_stage(state.get("candidates", []), "dropped"), res.task)
    res.emit("reflection", generation=generation, chars=len(text))
    return {"reflection": text}


def finish(state: RunState) -> dict[str, Any]:
    """Record how the run ended (completed, stopped, failed) and build its report."""
    res = resources_for(state["spec"])
    elites = state.get("elites", [])
    best = elites[0] if elites else None
    status, stop_reason = run_ending(load_run(res.rundir.path), state.get("stop_reason"))
    res.rundir.update_state(
        status=status, stop_reason=stop_reason, llm=res.llm_usage(),
        best={"candidate_id": best["candidate_id"], "fitness": best["fitness"]} if best else None,
    )
    res.emit("run_finished", status=status, stop_reason=stop_reason,
             best_candidate=best["candidate_id"] if best else None)
    write_report(res.rundir.path)
    return {}
