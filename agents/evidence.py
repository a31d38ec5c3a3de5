"""The evidence a structured critic's rejection must carry: a point naming its target (a term,
feature or expression of the candidate) and the rubric item it breaks.

A small model's bare "reject" is noise (SmolLM2-135M rejected 3 of 4 schema-valid designs
with `"points": []`). So in structured and expression mode a `revise` or `reject` without
one valid point is recorded as `NO_JUDGEMENT` and the candidate goes on. The rubric is
written once, in `prompts/critic_rubric.md` (one `- \\`item\\`: meaning` line each); its
item names are the schema's enum.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from lero.agents.records import Point
from lero.agents.templates import render

NO_JUDGEMENT = "no judgement"  # the verdict of a rejection that named no valid point
RUBRIC_LINE = re.compile(r"^- `([a-z-]+)`: ")
MAX_POINTS = 4
MAX_WHY = 300
MAX_TARGET = 120


@functools.cache
def rubric_items() -> tuple[str, ...]:
    """The rubric's item names, in the prompt file's order."""
    items = tuple(m[1] for line in rubric_text().splitlines() if (m := RUBRIC_LINE.match(line)))
    if not items:
        raise ImportError("agents/prompts/critic_rubric.md lists no rubric item")
    return items


def rubric_text() -> str:
    return render("critic_rubric")


def verdict_schema(targets: tuple[str, ...] | None) -> dict[str, Any]:
    """The critic's reply object; `targets` (the candidate's terms, features or expressions)
    become the target's enum where lero knows them, else any short string."""
    target: dict[str, Any] = {"type": "string", "enum": list(targets)} if targets else {
        "type": "string", "maxLength": MAX_TARGET}
    point = {"type": "object",
             "properties": {"target": target, "rubric_item": {"type": "string", "enum": list(rubric_items())},
                            "why": {"type": "string", "maxLength": MAX_WHY}},
             "required": ["target", "rubric_item", "why"], "additionalProperties": False}
    return {"type": "object",
            "properties": {"verdict": {"type": "string", "enum": ["accept", "revise", "reject"]},
                           "points": {"type": "array", "items": point, "maxItems": MAX_POINTS}},
            "required": ["verdict", "points"], "additionalProperties": False}


def valid_points(raw: object, targets: tuple[str, ...] | None, code: str) -> list[Point]:
    """The points of a reply that are evidence: a known rubric item, a reason (not the prompt's
    placeholder), and a target that is in the candidate (one of `targets`, or text of `code`
    when lero knows none)."""
    if not isinstance(raw, list):
        return []
    points = []
    for item in raw[:MAX_POINTS]:
        if not isinstance(item, dict):
            continue
        target, rubric, why = (str(item.get(k) or "").strip() for k in ("target", "rubric_item", "why"))
        known = target in targets if targets else bool(target) and target in code
        echoed = why.startswith("<") and why.endswith(">")  # the prompt's `<one sentence>` copied (SmolLM2 does)
        if known and rubric in rubric_items() and why and not echoed:
            points.append(Point(target, rubric, why[:MAX_WHY]))
    return points
