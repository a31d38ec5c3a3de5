"""Setup, design, critique and revision: the LLM side of a generation, before any compute.

Every LLM call may raise `BudgetExceeded` (the run's request/token budget is spent) or
`LLMError` (the server failed after retries). Both end the run cleanly: the node sets
`stop_reason`, and candidates already written go on without further LLM help.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import RunnableConfig
from lero.agents import BudgetExceeded, LLMError, Review
from lero.graph.configuration import RunSpec
from lero.graph.nodes.candidates import (
    as_elite,
    at_stage,
    drop,
    new_candidate,
    record,
    replace,
    review_dict,
)
from lero.graph.nodes.resources import Resources, resources_for
from lero.graph.reflection import merge_feedback
from lero.graph.state import Candidate, RunState, Stage

LLM_STOPS = (BudgetExceeded, LLMError)


def stop_reason_for(error: Exception) -> str:
    kind = "llm_budget" if isinstance(error, BudgetExceeded) else "llm_error"
    return f"{kind}: {str(error).splitlines()[0] if str(error) else type(error).__name__}"


def setup(state: RunState, config: RunnableConfig) -> dict[str, Any]:
    """Validate the spec (from the input state, else from `configurable`) and start fresh."""
    configurable = config.get("configurable", {})
    if state.get("spec"):
        values = dict(state["spec"])
        if not values.get("run_id") and configurable.get("thread_id"):
            values["run_id"] = str(configurable["thread_id"])  # thread id = run id
        spec = RunSpec.parse(values)
    else:
        spec = RunSpec.from_configurable(configurable)
    spec_json = spec.with_run_id().model_dump(mode="json")
    resources_for(spec_json)  # creates the run directory when no runner did
    return {"spec": spec_json, "generation": 0, "candidates": [], "evaluated": [], "elites": [],
            "reflection": "", "feedback": [], "stop_reason": None}


def design(state: RunState) -> dict[str, Any]:
    """Ask the designer for a population of modules (from elites + reflection after gen 0)."""
    res = resources_for(state["spec"])
    generation = state["generation"]
    res.emit("generation_started", generation=generation)
    elites = [as_elite(elite) for elite in state.get("elites", [])]
    feedback = state.get("feedback", [])
    reflection = merge_feedback(state.get("reflection", ""), feedback)
    try:
        drafts = res.team.designer.design(
            res.task, res.spec.population, elites, reflection, feedback="\n".join(feedback) or None
        )
    except LLM_STOPS as error:
        res.emit("log", message=f"designer stopped: {error}")
        return {"candidates": [], "stop_reason": stop_reason_for(error)}
    candidates = [new_candidate(generation, i, d.code, d.origin, d.error) for i, d in enumerate(drafts)]
    if not candidates:
        res.emit("log", message=f"the designer returned no candidates for generation {generation}")
    for candidate in candidates:
        record(res, candidate)
    return {"candidates": candidates}


def llm_pass(
    state: RunState,
    stage: Stage,
    step: Callable[[Resources, Candidate], Candidate],
    fallback: Callable[[Candidate], Candidate],
) -> dict[str, Any]:
    """Apply `step` (one LLM call) to every candidate at `stage` and record the results.

    Once the run's LLM stops (before this node or during it), the remaining candidates
    go to `fallback` without further calls, and the stop reason goes into the state.
    """
    res = resources_for(state["spec"])
    stop = state.get("stop_reason")
    updated: list[Candidate] = []
    for candidate in at_stage(state["candidates"], stage):
        result = None
        if not stop:
            try:
                result = step(res, candidate)
            except LLM_STOPS as error:
                stop = stop_reason_for(error)
        updated.append(fallback(candidate) if result is None else result)
    for candidate in updated:
        record(res, candidate)
    return {"candidates": replace(state["candidates"], updated), "stop_reason": stop}


def _to_validation(candidate: Candidate) -> Candidate:
    return {**candidate, "stage": "validate"}


def critique(state: RunState) -> dict[str, Any]:
    """Review every candidate waiting for the critic; route it on by the verdict."""

    def review_one(res: Resources, candidate: Candidate) -> Candidate:
        review = res.team.critic.review(res.task, candidate["code"])
        return _after_review(candidate, review, res.spec.critic_rounds)

    return llm_pass(state, "review", review_one, _to_validation)


def _after_review(candidate: Candidate, review: Review, critic_rounds: int) -> Candidate:
    reviewed: Candidate = {**candidate, "review": review_dict(review),
                           "reviews": [*candidate.get("reviews", []), {**review_dict(review), "by": "critic"}]}
    if review.verdict == "reject":
        return drop(reviewed, "rejected_by_critic", review.text)
    if review.verdict == "revise" and candidate["review_rounds"] < critic_rounds:
        return {**reviewed, "stage": "revise"}
    return {**reviewed, "stage": "validate"}


def revise(state: RunState) -> dict[str, Any]:
    """The designer rewrites candidates the critic (or a human comment) sent back."""
    return llm_pass(state, "revise", _revise_one, _to_validation)


def _revise_one(res: Resources, candidate: Candidate) -> Candidate:
    last = candidate["review"] or {}
    review = Review(verdict="revise", points=list(last.get("points", [])), text=last.get("text", ""))
    draft = res.team.designer.revise(res.task, candidate["code"], review)
    if draft.code is None:  # a failed rewrite keeps the reviewed code
        return {**candidate, "stage": "validate", "review_rounds": candidate["review_rounds"] + 1}
    by_human = candidate.get("human") == "comment"
    return {
        **candidate, "code": draft.code, "origin": draft.origin, "stage": "review",
        "review_rounds": candidate["review_rounds"] + (0 if by_human else 1),
        "human": None if by_human else candidate.get("human"),
    }
