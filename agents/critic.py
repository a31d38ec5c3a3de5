"""The critic, and the gate every code change passes: static checks, then the LLM's review.

The gate (the static contract and the critic's rules that need no LLM) runs on every
code change: a design, a revision, a debugger's fix, a human edit. A candidate failing
it never reaches the LLM: rules that signal an attempt to escape the sandbox or game the
evaluation reject it, the rest ask for a revision. Without an LLM (offline, or once the
LLM stopped, or once the review rounds are spent) the gate is the whole review.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from lero.agents.checks import check_candidate, state_names
from lero.agents.evidence import NO_JUDGEMENT, rubric_text, valid_points, verdict_schema
from lero.agents.expression.expression_design import design_of
from lero.agents.expression.roles import design_lines
from lero.agents.extract import without_thinking
from lero.agents.fit import Fitted, PromptTooLarge, made_for_the_window
from lero.agents.llm import ChatModel
from lero.agents.offline.schema import design_schema
from lero.agents.records import VERDICTS, Problem, Review, Verdict, code_digest
from lero.agents.replies import Reply
from lero.agents.structured import OUTSIDE_SCHEMA, parse_object
from lero.agents.templates import render
from lero.training.contract import Violation, contract_text

REJECT_RULES = frozenset({"dunder", "private-attribute", "denied-attribute", "reward-hacking"})
HOSTILE_NAMES = (
    "eval",
    "exec",
    "compile",
    "open",
    "__import__",
    "globals",
    "locals",
    "vars",
    "breakpoint",
)
VERDICT_LINE = re.compile(r"^\W*verdict\W*[:=-]?\s*\W*(accept|revise|reject)\b", re.IGNORECASE)



class Critic:
    """Reviews a candidate before any compute is spent on it; `model=None` = static checks only.

    `structured`: the critic answers an `agents.evidence.verdict_schema` object, constrained
    where the server can, and sees a rendered design's JSON beside its code; a revise or
    reject naming no valid point (free text included) is `no judgement`."""

    def __init__(self, model: ChatModel | None = None, structured: bool = False):
        self.model = model
        self.structured = structured

    def review(self, task: Problem, code: str, use_llm: bool = True) -> Review:
        """The gate's verdict, then (with a model and `use_llm`) the LLM critic's on `code`."""
        violations = check_candidate(code, state_names(task))
        if violations:
            return replace(static_review(violations), code_sha=code_digest(code))
        if self.model is None or not use_llm:
            return gate_accept(code)
        try:
            reply = made_for_the_window(lambda: self._reply(task, code))
        except PromptTooLarge as error:  # the code is too long for the window: the gate decides
            return gate_accept(code, f"no LLM review: {error}")
        if self.structured:
            review = parse_structured_review(reply.text, review_targets(task, code), code)
        else:
            review = parse_review(reply.text)
        return replace(review, code_sha=code_digest(code))

    def _reply(self, task: Problem, code: str) -> Reply:
        prompt = self._prompt(task, code)
        schema = verdict_schema(review_targets(task, code)) if self.structured else None
        return self.model.replies("critic", prompt.messages, n=1, temperature=0.0, shortened=prompt.shortened,
                                  schema=schema)[0]


    def _prompt(self, task: Problem, code: str) -> Fitted:
        """The review request. A structured critic judges a rendered design by its JSON and
        its code, or the JSON alone when the code does not fit the window: lero wrote the
        code, so the contract is not what there is to judge (nor in the prompt)."""
        assert self.model is not None
        values = {"task": task.task, "env_description": task.env_description}
        fenced = f"```python\n{code.strip()}\n```"
        if not self.structured:
            system = render("critic_system", contract=contract_text(task.task_spec.sparse), answer=render("critic_answer_text").strip())
            return self.model.fit("critic", system, "critic_user", {**values, "code": code.strip()})
        answer = render("critic_answer_json", rubric=rubric_text()).strip()
        shown = shown_design(task, code)
        if shown is None:
            system = render("critic_system", contract=contract_text(task.task_spec.sparse), answer=answer)
            return self.model.fit("critic", system, "critic_structured_user", {**values, "candidate": fenced})
        system = render("critic_design_system", answer=answer)
        try:
            return self.model.fit("critic", system, "critic_structured_user", {**values, "candidate": f"{shown}\n\n{fenced}"})
        except PromptTooLarge:
            return self.model.fit("critic", system, "critic_structured_user", {**values, "candidate": shown})


def gate_accept(code: str, *notes: str) -> Review:
    """The gate's pass: the static checks found nothing (and why no LLM read it, if asked)."""
    points = ["static checks passed", *notes]
    return Review(verdict="accept", points=points, text=_text("accept", points),
                  code_sha=code_digest(code), by="gate")


def static_review(violations: list[Violation]) -> Review:
    """Reject escape or gaming attempts, ask to revise everything else."""
    verdict: Verdict = "reject" if any(_hostile(v) for v in violations) else "revise"
    points = [str(v) for v in violations]
    rules = tuple(dict.fromkeys(v.rule for v in violations))
    return Review(verdict=verdict, points=points, text=_text(verdict, points), rules=rules, by="gate")


def _hostile(violation: Violation) -> bool:
    """Escaping the sandbox or gaming the evaluation, as opposed to an honest mistake."""
    if violation.rule in REJECT_RULES:
        return True
    return violation.rule == "forbidden-name" and any(
        f"'{name}'" in violation.message for name in HOSTILE_NAMES
    )


def design_object(task: Problem, code: str) -> dict | None:
    """The design JSON of a module rendered from the task's grammar (None for other code)."""
    try:
        return design_schema(task).object_of(code)
    except ValueError:  # a grammar with no schema
        return None


def shown_design(task: Problem, code: str) -> str | None:
    """A rendered design as the critic reads it (its JSON, or its expression lines); None for
    other code."""
    if (lines := design_lines(code)) is not None:
        return f"Design (expressions), rendered by lero into the module:\n\n{lines}"
    design = design_object(task, code)
    return None if design is None else f"Design (JSON), rendered by lero into the module:\n\n{json.dumps(design)}"


def review_targets(task: Problem, code: str) -> tuple[str, ...] | None:
    """What a point may name in a rendered design: its goal, shaping terms and features on,
    or its expressions' slots (`term near`, `potential`, `feature gap`); None for other code,
    whose points name text of the code."""
    expressions = design_of(code)
    if expressions is not None:
        return tuple(slot.label for slot in expressions.slots)
    design = design_object(task, code)
    if design is None:
        return None
    features = [name for name, on in (design.get("features") or {}).items() if on]
    return tuple(dict.fromkeys([design["goal"]["kind"], *(design.get("shaping") or {}), *features]))


def parse_structured_review(reply: str, targets: tuple[str, ...] | None, code: str) -> Review:
    """A `verdict_schema` object whose revise or reject keeps only its valid points
    (`agents.evidence.valid_points`); one with none left is `no judgement`. A reply outside
    the schema (a server that ignored it) is read as free text (`parse_review`), which
    carries no evidence: its accept stands, anything else is `no judgement`."""
    body = parse_object(reply)
    if body is None or body.get("verdict") not in VERDICTS:
        review = parse_review(reply)
        why = "no JSON object" if body is None else "no verdict in its object"
        return _without_evidence(review.verdict, [f"the critic's reply was {OUTSIDE_SCHEMA}: {why}", *review.points])
    evidence = tuple(valid_points(body.get("points"), targets, code))
    if body["verdict"] == "accept" or not evidence:
        if body["verdict"] == "accept":  # an accept needs no evidence: its points are kept as said
            said = [str(p).strip() for p in body.get("points") or [] if isinstance(p, str | int | float) and str(p).strip()]
            return _without_evidence("accept", [*(p.line() for p in evidence), *said])
        return _without_evidence(body["verdict"], ["it named no point with a target in the candidate and a rubric item"])
    points = [p.line() for p in evidence]
    return Review(verdict=body["verdict"], points=points, text=_text(body["verdict"], points), evidence=evidence)


def _without_evidence(verdict: Verdict, points: list[str]) -> Review:
    """An accept as it is; a revise or reject without a valid point is `no judgement`."""
    if verdict != "accept":
        points = [f"the critic said {verdict} without evidence", *points]
        verdict = NO_JUDGEMENT  # type: ignore[assignment]
    return Review(verdict=verdict, points=points, text=_text(verdict, points))


def _text(verdict: str, points: list[str]) -> str:
    return f"VERDICT: {verdict}\n" + "\n".join(f"- {p}" for p in points)


def parse_review(reply: str) -> Review:
    """`VERDICT: ...` on the first non-empty line (tolerating markdown), then one point per line.

    A reply without a verdict line is treated as `revise`: the graph bounds revise rounds,
    and accepting unread code would defeat the critic.
    """
    text = without_thinking(reply).replace("\r\n", "\n")
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    verdict: Verdict = "revise"
    body = lines
    for index, line in enumerate(lines[:3]):
        match = VERDICT_LINE.match(line)
        if match and match[1].lower() in VERDICTS:
            verdict = match[1].lower()  # type: ignore[assignment]
            body = lines[index + 1 :]
            break
    else:
        body = ["the critic's reply had no VERDICT line", *lines]
    points = [re.sub(r"^(?:[-*•]|\d+[.)])\s*", "", line) for line in body]
    return Review(verdict=verdict, points=[p for p in points if p], text=reply.strip())
