"""Human approval steps: `interrupt()` with a JSON payload, resumed by `Command(resume=answer)`.

These nodes do nothing before `interrupt()` but read the state, because a resumed node
starts over from its first line: anything with side effects (containers, LLM calls)
lives in other nodes; after the answer only idempotent writes (a rejected candidate's
files and event) follow. Payload and answer schemas: see graph.state.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from lero.agents.records import code_digest
from lero.graph.configuration import RunError
from lero.graph.context import RunContext
from lero.graph.nodes.candidates import at_stage, drop, record, replace, with_code, with_review
from lero.graph.reflection import merge_feedback
from lero.graph.rundir import BASELINE_ID
from lero.graph.state import Candidate, RunState

CANDIDATE_ACTIONS = ("approve", "reject", "edit", "comment")


def normalize_answer(kind: str, answer: Any, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check a human answer for an interrupt of `kind`; RunError (one line) when malformed.

    For candidates, every decision must name a candidate of the question (`payload`): a
    mistyped id is an error, never a silent default. Only the schema's keys are kept.
    """
    if isinstance(answer, str):
        answer = {"action": answer}
    elif isinstance(answer, bool):
        answer = {"action": ("approve" if kind == "spec" else "continue") if answer else
                  ("reject" if kind == "spec" else "stop")}
    if not isinstance(answer, dict):
        raise RunError(f"answer to a {kind} approval must be a JSON object, got {type(answer).__name__}")
    if kind == "spec":
        _expect(answer.get("action"), ("approve", "reject"), "spec answer action")
        return {"action": answer["action"]}
    if kind == "generation":
        _expect(answer.get("action"), ("continue", "stop"), "generation answer action")
        if answer.get("feedback") is not None and not isinstance(answer["feedback"], str):
            raise RunError("generation answer feedback must be a string")
        return {"action": answer["action"], "feedback": answer.get("feedback")}
    if kind != "candidates":
        raise RunError(f"unknown approval kind {kind!r}")
    default = answer.get("action", answer.get("default", "approve"))  # `action`: one for every candidate
    _expect(default, ("approve", "reject"), "candidates answer default")
    decisions = answer.get("decisions", {})
    if not isinstance(decisions, dict):
        raise RunError("candidates answer decisions must map candidate ids to decisions")
    asked = [c["candidate_id"] for c in (payload or {}).get("candidates", [])]
    unknown = sorted(str(cid) for cid in decisions if cid not in asked)
    if unknown:
        raise RunError(f"unknown candidate id(s) {', '.join(unknown)}: this question asks about "
                       f"{', '.join(asked) or 'no candidate'}")
    return {"decisions": {cid: _decision(cid, d) for cid, d in decisions.items()}, "default": default}


def _expect(value: Any, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise RunError(f"{what} must be one of {', '.join(allowed)}, got {value!r}")


def _decision(candidate_id: str, decision: Any) -> dict[str, Any]:
    if isinstance(decision, str):
        decision = {"action": decision}
    if not isinstance(decision, dict):
        raise RunError(f"decision for {candidate_id} must be an object or an action string")
    _expect(decision.get("action"), CANDIDATE_ACTIONS, f"decision action for {candidate_id}")
    if decision["action"] == "edit" and not (isinstance(decision.get("code"), str) and decision["code"].strip()):
        raise RunError(f"edit decision for {candidate_id} needs the new module in 'code'")
    if decision["action"] == "comment" and not (isinstance(decision.get("comment"), str) and decision["comment"].strip()):
        raise RunError(f"comment decision for {candidate_id} needs text in 'comment'")
    kept = {"edit": "code", "comment": "comment"}.get(decision["action"])
    return {"action": decision["action"], **({kept: decision[kept]} if kept else {})}


def approve_spec(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Confirm the experiment before any compute is spent (`--approve spec|all`)."""
    spec = runtime.context.spec
    if "spec" not in spec.approvals:
        return {}
    train_jobs, env_steps = spec.budget()
    payload = {
        "kind": "spec", "run_id": spec.run_id, "spec": spec.model_dump(mode="json"),
        "env_description": runtime.context.task.env_description,
        "budget": {"train_jobs": train_jobs, "env_steps": env_steps,
                   "max_llm_requests": spec.max_llm_requests, "wall_clock_s": spec.wall_clock_s},
        "question": "Start this experiment?", "answers": ["approve", "reject"],
    }
    answer = normalize_answer("spec", interrupt(payload), payload)
    return {"stop_reason": "rejected_by_human"} if answer["action"] == "reject" else {}


def approve_candidates(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Let a human approve, reject, edit or comment on validated candidates (`candidates|all`)."""
    spec = runtime.context.spec
    ready = at_stage(state["candidates"], "ready")
    if "candidates" not in spec.approvals or not ready:
        return {"candidates": replace(state["candidates"], [{**c, "stage": "approved"} for c in ready])}
    elite_code = {e["candidate_id"]: e.get("code") for e in state.get("elites") or []}
    payload = {
        "kind": "candidates", "generation": state["generation"],
        "question": "Train these candidates? Answer per candidate: approve, reject, edit (new code) or comment.",
        "answers": list(CANDIDATE_ACTIONS),
        "candidates": [{"candidate_id": c["candidate_id"], "code": c["code"], "code_sha": code_digest(c["code"]),
                        "origin": c.get("origin"), "kind": c.get("kind", "explore"),
                        "parents": c.get("parents") or [], "review": c.get("review"),
                        "parent_code": elite_code.get((c.get("parents") or [None])[0]),
                        "note": c.get("error"), "refused_edit": c.get("refused_edit")} for c in ready],
    }
    answer = normalize_answer("candidates", interrupt(payload), payload)
    decided = [_apply(c, answer["decisions"].get(c["candidate_id"], {"action": answer["default"]})) for c in ready]
    for candidate in decided:
        if candidate["stage"] == "dropped":  # rejected: every front end shows it dropped, not ready
            record(runtime.context, candidate)
    return {"candidates": replace(state["candidates"], decided)}


def _apply(candidate: Candidate, decision: dict[str, Any]) -> Candidate:
    action = decision["action"]
    candidate = {**candidate, "refused_edit": None}  # answered: fixed (a new edit) or dropped
    if action == "approve":
        return {**candidate, "stage": "approved", "human": "approve"}
    if action == "reject":
        return drop({**candidate, "human": "reject"}, "rejected_by_human", "rejected by the researcher")
    if action == "edit":  # through the gate like every other code change
        previous = {"code": candidate["code"], "review": candidate.get("review"), "origin": candidate.get("origin")}
        return {**with_code(candidate, decision["code"], "human"), "human": "edit", "previous": previous,
                "debug_attempts": 0, "debug_history": [], "error": None}
    human_review = {"verdict": "revise", "points": [decision["comment"]], "text": decision["comment"], "by": "human"}
    return {**with_review(candidate, human_review), "stage": "revise", "human": "comment",
            "human_comment": decision["comment"]}


def approve_generation(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Decide whether another generation follows; a human may stop or add feedback."""
    spec = runtime.context.spec
    generation = state["generation"]
    if state.get("stop_reason") or generation + 1 >= spec.generations:
        return {"generation": generation + 1}
    if spec.wall_clock_s is not None and runtime.context.rundir.wall_s() >= spec.wall_clock_s:
        return {"generation": generation + 1, "stop_reason": "wall_clock"}
    if (used_mb := runtime.context.rundir.jobs_mb()) > spec.disk_budget_mb:
        return {"generation": generation + 1, "stop_reason": (
            f"disk_budget: its job directories take {used_mb:.1f} MiB, over the run's "
            f"disk_budget_mb of {spec.disk_budget_mb:g}")}
    if "generations" not in spec.approvals:
        return {"generation": generation + 1}
    evaluated = [r for r in state.get("evaluated", []) if r["generation"] == generation]
    baseline = next((r for r in state.get("evaluated", []) if r["candidate_id"] == BASELINE_ID), None)
    best = (state.get("elites") or [None])[0]
    payload = {
        "kind": "generation", "generation": generation,
        "best": {"candidate_id": best["candidate_id"], "fitness": best["fitness"]} if best else None,
        "baseline_fitness": baseline.get("fitness") if baseline else None,
        "candidates": [{"candidate_id": r["candidate_id"], "status": r["status"], "fitness": r["fitness"]}
                       for r in evaluated if r["candidate_id"] != BASELINE_ID],
        "reflection": merge_feedback(state.get("reflection", ""), state.get("feedback", [])),
        "question": f"Run generation {generation + 1}? Optional feedback is added to the reflection.",
        "answers": ["continue", "stop"],
    }
    answer = normalize_answer("generation", interrupt(payload), payload)
    update: dict[str, Any] = {"generation": generation + 1}
    if answer["action"] == "stop":
        update["stop_reason"] = "stopped_by_human"
    if answer.get("feedback") and answer["feedback"].strip():
        update["feedback"] = [*state.get("feedback", []), answer["feedback"].strip()]
    return update

