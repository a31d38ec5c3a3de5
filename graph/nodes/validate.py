"""Validation in the sandbox and repair by the debugger, before any training is paid for.

A repaired module goes back through the gate (`critique`) before it is validated again. A
valid module whose measured rollout breaks the critic's rubric (`agents.evidence_rules`)
goes to the critic's bounded revision with those points as its reasons, as a structured
critic's reject with points does.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any

from langgraph.runtime import Runtime

from lero.agents import Review
from lero.agents.evidence_rules import evidence_points
from lero.agents.records import Point, code_digest
from lero.graph.context import RunContext
from lero.graph.nodes.candidates import (
    at_stage,
    drop,
    record,
    replace,
    review_dict,
    with_code,
    with_review,
)
from lero.graph.nodes.design import llm_pass, structured_instead
from lero.graph.stages import onward
from lero.graph.state import Candidate, RunState
from lero.sandbox import VALIDATE, Job, JobResult


def error_text(result: JobResult) -> str:
    """The sandbox's failure as the debugger reads it: type, message, trimmed traceback."""
    error = result.error or {}
    head = f"{result.status}: {error.get('type', '')}: {error.get('message', '')}".strip()
    traceback = (error.get("traceback") or "").strip()
    return f"{head}\n{traceback}" if traceback else head


def _validation_job(res: RunContext, candidate: Candidate) -> Job:
    spec = res.spec
    return Job(kind=VALIDATE.name, code=candidate["code"], env=res.job_env,
               algo=spec.algo, seed=0, hparams=spec.hparams, candidate_id=candidate["candidate_id"],
               limits=res.job_limits)


def validate(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Run a validation job per waiting candidate (in parallel, bounded by max_parallel)."""
    res = runtime.context
    waiting = at_stage(state["candidates"], "validate")
    with ThreadPoolExecutor(max_workers=res.sandbox.max_parallel) as pool:
        # each job gets its own copy of this node's context, so its events still stream
        futures = [pool.submit(contextvars.copy_context().run, res.sandbox.run_job,
                               _validation_job(res, candidate)) for candidate in waiting]
        results = [future.result() for future in futures]
    fallback = res.team.structured is not None
    updated = [_after_validation(_measured(res, c, r), r, res.spec.debug_attempts, fallback)
               for c, r in zip(waiting, results, strict=True)]
    for candidate in updated:
        record(res, candidate)
    return {"candidates": replace(state["candidates"], updated)}


def _measured(res: RunContext, candidate: Candidate, result: JobResult) -> Candidate:
    """A valid candidate with the rubric points its rollout shows (`measured`, and a `measured`
    event); sent to revision with them while the critic's rounds last, unless a person
    decided on it (they are its reviewer)."""
    if result.status != "ok":
        return candidate
    points = evidence_points(res.task, candidate["code"], result.evidence)
    revise = bool(points) and not candidate.get("human") and candidate["review_rounds"] < res.spec.critic_rounds
    measured: Candidate = {**candidate, "measured": [asdict(point) for point in points]}
    if points:
        res.emit("measured", candidate_id=candidate["candidate_id"], points=measured["measured"], revised=revise)
    return measured_revision(measured, points) if revise else measured


def measured_revision(candidate: Candidate, points: list[Point]) -> Candidate:
    """The candidate sent to revision with its measured points as the review's reasons."""
    lines = [point.line() for point in points]
    text = "Measured on the validation rollout:\n" + "\n".join(f"- {line}" for line in lines)
    review = review_dict(Review(verdict="revise", points=lines, text=text, code_sha=code_digest(candidate["code"]),
                                by="evidence", evidence=tuple(points)))
    return {**with_review(candidate, review), "stage": "revise", "status": "ok", "error": None}


def _after_validation(candidate: Candidate, result: JobResult, debug_attempts: int, fallback: bool) -> Candidate:
    """`fallback`: a run with a structured designer (`--design auto`) sends code past the
    debugger's bound to the debug node too, which drafts the slot anew in structured mode."""
    if candidate["stage"] == "revise":  # its measured points earned a revision
        return candidate
    if result.status == "ok":
        stage = "approved" if candidate.get("human") == "edit" else onward("validate")
        return {**candidate, "stage": stage, "status": "ok", "error": None}
    failed: Candidate = {**candidate, "status": result.status, "error": error_text(result)}
    structured = "structured" in (candidate.get("origin") or "")
    if candidate["debug_attempts"] < debug_attempts or (fallback and not structured and not candidate.get("human")):
        return {**failed, "stage": "debug"}
    return drop(failed, result.status)


def debug(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """The debugger repairs each failed candidate from its error and earlier attempts."""
    return llm_pass(state, runtime.context, "debug", _repair_one, _give_up)


def _give_up(res: RunContext, candidate: Candidate) -> Candidate:
    return drop(candidate, candidate["status"] or "invalid")


def _repair_one(res: RunContext, candidate: Candidate) -> Candidate:
    if candidate["debug_attempts"] >= res.spec.debug_attempts:  # only with --design auto's fallback
        return structured_instead(res, candidate) or _give_up(res, candidate)
    history = [(code, error) for code, error in candidate["debug_history"]]
    draft = res.team.debugger.repair(res.task, candidate["code"], candidate["error"] or "", history)
    attempts = candidate["debug_attempts"] + 1
    if draft.code is None:
        failed = drop({**candidate, "debug_attempts": attempts}, candidate["status"] or "invalid", draft.error)
        return structured_instead(res, failed) or failed
    tried = [*candidate["debug_history"], [candidate["code"], candidate["error"] or ""]]
    return {**with_code(candidate, draft.code, draft.origin), "debug_attempts": attempts, "debug_history": tried}
