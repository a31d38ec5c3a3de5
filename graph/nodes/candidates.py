"""Small pure helpers on candidate records (see graph.state for their fields)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from lero.agents import Draft, Elite, Review
from lero.agents.records import code_digest
from lero.graph.context import RunContext
from lero.graph.rundir import RunDir
from lero.graph.state import Candidate, Stage

HEADER = "# lero: candidate "  # first line of every module: its id, kind and parents


def lineage_line(candidate: Candidate) -> str:
    parents = candidate.get("parents") or []
    source = f"{candidate.get('kind', 'explore')} of {', '.join(parents)}" if parents else candidate.get("kind", "explore")
    return f"{HEADER}{candidate['candidate_id']} ({source})"


def with_code(candidate: Candidate, code: str, origin: str) -> Candidate:
    """The candidate with new code, headed by its lineage line, sent to the gate (`review`).

    Every code change (design, revision, repair, human edit) goes through here, so no
    code reaches validation without the gate's verdict on exactly that code.
    """
    body = "\n".join(line for line in code.strip("\n").splitlines() if not line.startswith(HEADER))
    return {**candidate, "code": f"{lineage_line(candidate)}\n{body.strip(chr(10))}\n", "origin": origin,
            "stage": "review"}


def new_candidate(generation: int, index: int, draft: Draft) -> Candidate:
    """A fresh design; one without code is dropped at once as `invalid`."""
    candidate: Candidate = {
        "candidate_id": f"{generation}-{index}", "generation": generation, "code": None,
        "origin": draft.origin, "kind": draft.kind, "parents": list(draft.parents), "stage": "review",
        "status": None, "review": None, "reviews": [], "review_rounds": 0, "llm_reviews": 0,
        "debug_attempts": 0, "debug_history": [], "error": None, "human": None, "human_comment": None,
        "previous": None,
    }
    if draft.code is None:
        return drop(candidate, "invalid", draft.error or "no code")
    return with_code(candidate, draft.code, draft.origin)


def drop(candidate: Candidate, status: str, error: str | None = None) -> Candidate:
    return {**candidate, "stage": "dropped", "status": status, "error": error or candidate.get("error")}


def at_stage(candidates: list[Candidate], stage: Stage) -> list[Candidate]:
    return [c for c in candidates if c["stage"] == stage]


def replace(candidates: list[Candidate], updated: list[Candidate]) -> list[Candidate]:
    """The list with records swapped in by candidate id (order kept)."""
    by_id = {c["candidate_id"]: c for c in updated}
    return [by_id.get(c["candidate_id"], c) for c in candidates]


def review_dict(review: Review) -> dict[str, Any]:
    return {"verdict": review.verdict, "points": list(review.points), "text": review.text,
            "code_sha": review.code_sha, "rules": list(review.rules), "by": review.by,
            "evidence": [asdict(point) for point in review.evidence]}


def with_review(candidate: Candidate, review: dict[str, Any]) -> Candidate:
    """The candidate with REVIEW (critic, measured evidence or human) as its latest, appended
    to its reviews: every review reaches review.md the same way, whoever wrote it."""
    return {**candidate, "review": review, "reviews": [*candidate.get("reviews", []), review]}


def review_markdown(candidate: Candidate) -> str:
    """review.md: every critic round and human decision, oldest first."""
    lines = [f"# Reviews of candidate {candidate['candidate_id']}", ""]
    for number, review in enumerate(candidate.get("reviews", []), start=1):
        sha = f", code {review['code_sha']}" if review.get("code_sha") else ""
        lines += [f"## Round {number} ({review.get('by', 'critic')}{sha}): {review['verdict']}", "",
                  review["text"].strip(), ""]
    return "\n".join(lines)


def save(rundir: RunDir, candidate: Candidate) -> None:
    rundir.write_candidate(candidate["candidate_id"], candidate.get("code"), review_markdown(candidate))


def record(res: RunContext, candidate: Candidate) -> None:
    """Write the candidate's files and tell the UI where it stands."""
    save(res.rundir, candidate)
    code = candidate.get("code")
    res.emit("candidate", candidate_id=candidate["candidate_id"], generation=candidate["generation"],
             stage=candidate["stage"], status=candidate.get("status"), origin=candidate.get("origin"),
             kind=candidate.get("kind", "explore"), parents=list(candidate.get("parents") or []),
             code_sha=code_digest(code) if code else None)


def as_elite(record: dict[str, Any]) -> Elite:
    """An elite dict kept in the state -> the agents' Elite record."""
    return Elite(
        candidate_id=record["candidate_id"], code=record["code"], fitness=float(record["fitness"]),
        metrics=dict(record.get("eval") or {}), reflection_stats=dict(record.get("reflection_stats") or {}),
        reflection=record.get("reflection", ""),
    )
