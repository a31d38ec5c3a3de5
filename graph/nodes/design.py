"""Setup, design, critique and revision: the LLM side of a generation, before any compute.

Every LLM call may raise `BudgetExceeded` (the run's request/token budget is spent) or
`LLMError` (the server failed after retries). Both end the run cleanly: the node sets
`stop_reason`, and candidates already written go on without further LLM help.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime

from lero.agents import BudgetExceeded, LLMError, Review
from lero.agents.llm import about
from lero.graph.context import RunContext
from lero.graph.nodes.candidates import (
    as_elite,
    at_stage,
    drop,
    new_candidate,
    record,
    replace,
    review_dict,
    with_code,
    with_review,
)
from lero.graph.stages import onward
from lero.graph.state import Candidate, RunState, Stage

LLM_STOPS = (BudgetExceeded, LLMError)


def stop_reason_for(error: Exception) -> str:
    kind = "llm_budget" if isinstance(error, BudgetExceeded) else "llm_error"
    return f"{kind}: {str(error).splitlines()[0] if str(error) else type(error).__name__}"


def setup(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """A fresh run's state (the spec is the runtime context's, never the state's)."""
    return {"generation": 0, "candidates": [], "evaluated": [], "elites": [],
            "reflection": "", "feedback": [], "stop_reason": None}


def design(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Ask the designer for a population: exploit slots refine elites, explore slots are new."""
    res = runtime.context
    generation = state["generation"]
    res.emit("generation_started", generation=generation)
    elites = [as_elite(elite) for elite in state.get("elites", [])]
    feedback = "\n".join(state.get("feedback", [])) or None
    exploit = res.spec.exploit_slots(bool(elites))
    try:
        drafts = res.team.designer.design(
            res.task, res.spec.population, elites, state.get("reflection", ""), feedback=feedback, exploit=exploit
        )
    except LLM_STOPS as error:
        res.emit("log", message=f"designer stopped: {error}")
        return {"candidates": [], "stop_reason": stop_reason_for(error)}
    candidates = [new_candidate(generation, i, draft) for i, draft in enumerate(drafts)]
    if not candidates:
        res.emit("log", message=f"the designer returned no candidates for generation {generation}")
    stop = None
    for index, candidate in enumerate(candidates):
        if candidate["stage"] == "dropped" and not stop:  # no code to debug: straight to a structured draft
            try:
                with about(candidate["candidate_id"]):
                    candidates[index] = structured_instead(res, candidate) or candidate
            except LLM_STOPS as error:
                stop = stop_reason_for(error)
        record(res, candidates[index])
    return {"candidates": candidates, **({"stop_reason": stop} if stop else {})}


def structured_instead(res: RunContext, candidate: Candidate) -> Candidate | None:
    """`--design auto`: a slot whose code stayed invalid gets an expression draft where the
    server takes a grammar, else (or when that one fails) a structured draft; it goes through
    the gate and validation like any code (None: no such designer in this run, or the slot
    already had its rendered draft)."""
    structured = res.team.structured
    if structured is None or any(mode in (candidate.get("origin") or "") for mode in ("structured", "expression")):
        return None
    note = f"{candidate.get('origin')} code stayed invalid ({candidate.get('status')}): a rendered draft instead"
    res.emit("log", message=f"candidate {candidate['candidate_id']}: {note}")
    expression = res.team.expression
    designers = [expression] if expression is not None and expression.model.grammar_form() != "none" else []
    fresh = {**candidate, "kind": "explore", "parents": [], "debug_attempts": 0, "debug_history": [],
             "review_rounds": 0, "status": None, "error": None}
    error = "the designer returned nothing"
    for designer in [*designers, structured]:
        drafts = designer.design(res.task, 1, [], "")
        if drafts and drafts[0].code is not None:
            return with_code(fresh, drafts[0].code, drafts[0].origin)
        error = drafts[0].error if drafts else error
    return drop({**fresh, "origin": "designer:structured"}, "invalid", error)


def llm_pass(
    state: RunState,
    res: RunContext,
    stage: Stage,
    step: Callable[[RunContext, Candidate], Candidate],
    fallback: Callable[[RunContext, Candidate], Candidate],
) -> dict[str, Any]:
    """Apply `step` (at most one LLM call) to every candidate at `stage` and record the results.

    Once the run's LLM stops (before this node or during it), the remaining candidates
    go to `fallback`, which makes no LLM call, and the stop reason goes into the state.
    """
    stop = state.get("stop_reason")
    updated: list[Candidate] = []
    for candidate in at_stage(state["candidates"], stage):
        result = None
        if not stop:
            try:
                with about(candidate["candidate_id"]):  # its LLM records name the candidate
                    result = step(res, candidate)
            except LLM_STOPS as error:
                stop = stop_reason_for(error)
        updated.append(fallback(res, candidate) if result is None else result)
    for candidate in updated:
        record(res, candidate)
    return {"candidates": replace(state["candidates"], updated), "stop_reason": stop}


def critique(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """The gate on every changed module: static rules, then the LLM critic within critic_rounds.

    A human edit gets the gate alone (the researcher is its reviewer); once the LLM has
    stopped, every module still gets the gate.
    """

    def review_one(res: RunContext, candidate: Candidate) -> Candidate:
        use_llm = candidate.get("human") != "edit" and candidate.get("llm_reviews", 0) <= res.spec.critic_rounds
        review = res.team.critic.review(res.task, candidate["code"], use_llm=use_llm)
        if review.by == "critic":  # the design funnel counts each model's verdicts (report.json `verdicts`)
            res.emit("review", candidate_id=candidate["candidate_id"], verdict=review.verdict, model=res.spec.llm,
                     evidence=len(review.evidence))
        return instead_if_rejected(res, _after_review(candidate, review, res.spec.critic_rounds))

    def gate_only(res: RunContext, candidate: Candidate) -> Candidate:
        review = res.team.critic.review(res.task, candidate["code"], use_llm=False)
        return _after_review(candidate, review, res.spec.critic_rounds)

    return llm_pass(state, runtime.context, "review", review_one, gate_only)


def _after_review(candidate: Candidate, review: Review, critic_rounds: int) -> Candidate:
    verdict = review_dict(review)
    reviewed: Candidate = {**with_review(candidate, verdict),
                           "llm_reviews": candidate.get("llm_reviews", 0) + (review.by == "critic")}
    if candidate.get("human") == "edit" and review.verdict != "accept":
        return _edit_stopped(reviewed)
    rounds_left = candidate["review_rounds"] < critic_rounds
    if review.verdict == "reject" and not (review.evidence and rounds_left):  # evidence earns a revision
        return drop(reviewed, "rejected_by_critic", review.text)
    if review.verdict in ("revise", "reject") and rounds_left:
        return {**reviewed, "stage": "revise"}
    if review.rules:  # the static rules still fail and no revision is left
        return drop(reviewed, "rejected", review.text)
    return {**reviewed, "stage": onward("review")}


def instead_if_rejected(res: RunContext, candidate: Candidate) -> Candidate:
    """`--design auto`: code the static rules still reject once its revisions are spent, or
    code the LLM critic rejected, is no candidate either, and its slot gets a structured
    draft: lero renders that one, so a weak model's rejected code does not cost the slot
    (SmolLM2's critic rejected 2 of 12 slots' code in a default run, which then trained none)."""
    if (candidate["stage"] == "dropped" and candidate["status"] in ("rejected", "rejected_by_critic")
            and not candidate.get("human")):
        return structured_instead(res, candidate) or candidate
    return candidate


def _edit_stopped(reviewed: Candidate) -> Candidate:
    """A human edit the gate stopped: the module before the edit comes back for approval, with
    the edit and the gate's reason beside it (`refused_edit`) for the person to fix or drop."""
    previous = reviewed.get("previous") or {}
    reason = reviewed["review"]["text"]
    return {**reviewed, "code": previous.get("code"), "review": previous.get("review"), "stage": "ready",
            "human": None, "previous": None, "origin": previous.get("origin", reviewed.get("origin")),
            "error": f"the edit was stopped by the gate:\n{reason}",
            "refused_edit": {"code": reviewed["code"], "reason": reason}}


def revise(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """The designer rewrites candidates the critic (or a human comment) sent back."""
    return llm_pass(state, runtime.context, "revise", _revise_one, _unrevised)


def _unrevised(res: RunContext, candidate: Candidate) -> Candidate:
    """No rewrite: code that passed the static rules goes on, code that failed them stops."""
    rules = (candidate.get("review") or {}).get("rules")
    if rules:
        return drop(candidate, "rejected", (candidate.get("review") or {}).get("text"))
    return {**candidate, "stage": onward("review"), "review_rounds": candidate["review_rounds"] + 1}


def _revise_one(res: RunContext, candidate: Candidate) -> Candidate:
    last = candidate["review"] or {}
    review = Review(verdict="revise", points=list(last.get("points", [])), text=last.get("text", ""))
    draft = res.team.designer.revise(res.task, candidate["code"], review)
    if draft.code is None:  # a failed rewrite keeps the reviewed code; review.md says why
        failed = {"verdict": "revision failed", "text": draft.error or "", "by": "designer", "code_sha": ""}
        return instead_if_rejected(res, _unrevised(res, {**candidate, "reviews": [*candidate.get("reviews", []), failed]}))
    by_human = candidate.get("human") == "comment"
    note = {"verdict": "revised", "text": prose(draft.reply), "by": "designer", "code_sha": ""}
    return {
        **with_code(candidate, draft.code, draft.origin),
        "reviews": [*candidate.get("reviews", []), note],
        "review_rounds": candidate["review_rounds"] + (0 if by_human else 1),
        "human": None if by_human else candidate.get("human"),
    }


def prose(reply: str, limit: int = 1500) -> str:
    """What a designer said around its code (fenced blocks left out), for review.md."""
    text = re.sub(r"```.*?(```|$)", "", reply, flags=re.DOTALL).strip()
    return (text[:limit] + " ...") if len(text) > limit else (text or "(code only)")
