"""Where each elite came from: its chain of parents, read off the `candidate` events.

Every `candidate` event carries the candidate's `kind` (exploit or explore) and
`parents`; following the first parent back from an elite gives its lineage, which the
report shows for the best candidates.
"""

from __future__ import annotations

from typing import Any


def lineage(events: list[dict[str, Any]], fitness: dict[str, float | None], top: int) -> list[dict[str, Any]]:
    """For the `top` fittest candidates: kind, parents and the chain back to an explore draft."""
    origin: dict[str, tuple[str, list[str]]] = {}
    for event in events:
        if event.get("event") == "candidate" and event.get("candidate_id"):
            origin[event["candidate_id"]] = (event.get("kind") or "explore", list(event.get("parents") or []))
    scored = sorted((cid for cid, value in fitness.items() if value is not None), key=fitness.__getitem__, reverse=True)
    rows = []
    for candidate_id in scored[:top]:
        chain, current = [], candidate_id
        while current is not None and all(step["candidate_id"] != current for step in chain):
            kind, parents = origin.get(current, ("explore", []))
            chain.append({"candidate_id": current, "kind": kind, "parents": parents, "fitness": fitness.get(current)})
            current = parents[0] if parents else None
        rows.append({**chain[0], "chain": chain})
    return rows


def lineage_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """report.md lines: one line per elite, newest ancestor first."""
    if not rows:
        return []
    lines = ["", "## Lineage of the elites", ""]
    for row in rows:
        steps = " <- ".join(
            f"`{step['candidate_id']}` {step['kind']}"
            + (f" (+ {', '.join(step['parents'][1:])})" if len(step["parents"]) > 1 else "")
            for step in row["chain"]
        )
        lines.append(f"- {steps}")
    return lines
