"""A run's status and generation count as every front end shows them (`lero runs`, the web
UI's list and run page, report.md), from one place so that they cannot disagree.

The engine's state.json says `interrupted` both after Ctrl-C and while a question waits; a
person needs to tell the two apart, so a run whose last `interrupt` event is unanswered
reads WAITING. Generations are counted as done (the distinct generations of the
`generation_finished` events), shown "done/planned"; a generation itself is named by its
number from 0, as its candidates' ids are ("1-0").
"""

from __future__ import annotations

from typing import Any

from lero.graph.summary import RunFiles

WAITING = "waiting for your answer"


def unanswered_question(run: RunFiles) -> dict[str, Any] | None:
    """The approval the run waits for: the payload of the last `interrupt` event not yet
    answered, as events.jsonl keeps it, with its `ts` (a form echoes it, so that a stale
    answer is refused)."""
    if run.state.get("status") != "interrupted":
        return None
    asked = answered = -1
    for index, event in enumerate(run.events):
        if event.get("event") == "interrupt":
            asked = index
        elif event.get("event") == "interrupt_answered":
            answered = index
    if asked < 0 or answered > asked:
        return None
    event = run.events[asked]
    return {"ts": str(event.get("ts")), **(event.get("payload") or {})}


def run_status(run: RunFiles, status: str) -> dict[str, Any]:
    """STATUS (graph.summary's) as shown: `shown` (WAITING when a question is pending),
    `needs_answer`, `question` (its kind), `generations_done`, `generations` and
    `progress` ("done/planned")."""
    pending = unanswered_question(run)
    planned = run.spec.get("generations")
    done = len({e.get("generation") for e in run.events if e.get("event") == "generation_finished"})
    return {
        "status": status,
        "shown": WAITING if pending else status,
        "needs_answer": pending is not None,
        "question": pending.get("kind") if pending else None,
        "generations_done": done,
        "generations": planned,
        "progress": f"{done}/{planned if planned is not None else '?'}",
    }


def run_label(spec: dict[str, Any]) -> str:
    """A run's name and tags as lists, compare and legends show them ("baseline-lr #ablation"),
    "" when it has neither; what a stored spec.json holds, taken only when of the right types."""
    name = spec.get("name") if isinstance(spec.get("name"), str) else ""
    tags = [t for t in spec.get("tags") or [] if isinstance(t, str)] if isinstance(spec.get("tags"), list) else []
    return " ".join([name, *(f"#{t}" for t in tags)]).strip()
