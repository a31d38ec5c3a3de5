"""Small pure helpers on candidate records (see graph.state for their fields)."""

from __future__ import annotations

from typing import Any

from lero.agents import Elite, Review
from lero.graph.nodes.resources import Resources
from lero.graph.rundir import RunDir
from lero.graph.state import Candidate, Stage


def new_candidate(generation: int, index: int, code: str | None, origin: str, error: str | None) -> Candidate:
    """A fresh design; one without code is dropped at once as `invalid`."""
    candidate: Candidate = {
        "candidate_id": f"{generation}-{index}", "generation": generation, "code": code,
        "origin": origin, "stage": "review", "status": None, "review": None, "reviews": [],
        "review_rounds": 0, "debug_attempts": 0, "debug_history": [], "error": None,
        "human": None, "human_comment": None,
    }
    return drop(candidate, "invalid", error or "no code") if code is None else candidate


def drop(candidate: Candidate, status: str, error: str | None = None) -> Candidate:
    return {**candidate, "stage": "dropped", "status": status, "error": error or candidate.get("error")}


def at_stage(candidates: list[Candidate], stage: Stage) -> list[Candidate]:
    return [c for c in candidates if c["stage"] == stage]


def replace(candidates: list[Candidate], updated: list[Candidate]) -> list[Candidate]:
    """The list with records swapped in by candidate id (order kept)."""
    by_id = {c["candidate_id"]: c for c in updated}
    return [by_id.get(c["candidate_id"], c) for c in candidates]


def review_dict(review: Review) -> dict[str, Any]:
    return {"verdict": review.verdict, "points": list(review.points), "text": review.text}


def review_markdown(candidate: Candidate) -> str:
    """review.md: every critic round and human decision, oldest first."""
    lines = [f"# Reviews of candidate {candidate['candidate_id']}", ""]
    for number, review in enumerate(candidate.get("reviews", []), start=1):
        lines += [f"## Round {number} ({review.get('by', 'critic')}): {review['verdict']}", "",
                  review["text"].strip(), ""]
    return "\n".join(lines)


def save(rundir: RunDir, candidate: Candidate) -> None:
    rundir.write_candidate(candidate["candidate_id"], candidate.get("code"), review_markdown(candidate))


def record(res: Resources, candidate: Candidate) -> None:
    """Write the candidate's files and tell the UI where it stands."""
    save(res.rundir, candidate)
    res.emit("candidate", candidate_id=candidate["candidate_id"], generation=candidate["generation"],
             stage=candidate["stage"], status=candidate.get("status"), origin=candidate.get("origin"))


def as_elite(record: dict[str, Any]) -> Elite:
    """An elite dict kept in the state -> the agents' Elite record."""
    return Elite(
        candidate_id=record["candidate_id"], code=record["code"], fitness=float(record["fitness"]),
        metrics=dict(record.get("eval") or {}), reflection_stats=dict(record.get("reflection_stats") or {}),
        reflection=record.get("reflection", ""),
    )
