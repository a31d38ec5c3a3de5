"""The critic, and the gate every code change passes: static checks, then the LLM's review.

The gate (the static contract and the critic's rules that need no LLM) runs on every
code change: a design, a revision, a debugger's fix, a human edit. A candidate failing
it never reaches the LLM: rules that signal an attempt to escape the sandbox or game the
evaluation reject it, the rest ask for a revision. Without an LLM (offline, or once the
LLM stopped, or once the review rounds are spent) the gate is the whole review.
"""

from __future__ import annotations

import re
from dataclasses import replace

from lero.agents.checks import check_candidate, state_names
from lero.agents.extract import without_thinking
from lero.agents.fit import PromptTooLarge
from lero.agents.llm import ChatModel
from lero.agents.templates import render
from lero.agents.types import VERDICTS, Problem, Review, Verdict, code_digest
from lero.training.contract import CONTRACT_TEXT, Violation

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
    """Reviews a candidate before any compute is spent on it; `model=None` = static checks only."""

    def __init__(self, model: ChatModel | None = None):
        self.model = model

    def review(self, task: Problem, code: str, use_llm: bool = True) -> Review:
        """The gate's verdict, then (with a model and `use_llm`) the LLM critic's on `code`."""
        violations = check_candidate(code, state_names(task))
        if violations:
            return replace(static_review(violations), code_sha=code_digest(code))
        if self.model is None or not use_llm:
            return gate_accept(code)
        try:
            prompt = self.model.fit(
                "critic",
                render("critic_system", contract=CONTRACT_TEXT),
                "critic_user",
                {"task": task.task, "env_description": task.env_description, "code": code.strip()},
            )
        except PromptTooLarge as error:  # the code is too long for the window: the gate decides
            return gate_accept(code, f"no LLM review: {error}")
        reply = self.model.replies("critic", prompt.messages, n=1, temperature=0.0, shortened=prompt.shortened)[0]
        return replace(parse_review(reply.text), code_sha=code_digest(code))


def gate_accept(code: str, *notes: str) -> Review:
    """The gate's pass: the static checks found nothing (and why no LLM read it, if asked)."""
    points = ["static checks passed", *notes]
    return Review(verdict="accept", points=points, text="VERDICT: accept\n" + "\n".join(f"- {p}" for p in points),
                  code_sha=code_digest(code), by="gate")


def static_review(violations: list[Violation]) -> Review:
    """Reject escape or gaming attempts, ask to revise everything else."""
    verdict: Verdict = "reject" if any(_hostile(v) for v in violations) else "revise"
    points = [str(v) for v in violations]
    text = f"VERDICT: {verdict}\n" + "\n".join(f"- {p}" for p in points)
    rules = tuple(dict.fromkeys(v.rule for v in violations))
    return Review(verdict=verdict, points=points, text=text, rules=rules, by="gate")


def _hostile(violation: Violation) -> bool:
    """Escaping the sandbox or gaming the evaluation, as opposed to an honest mistake."""
    if violation.rule in REJECT_RULES:
        return True
    return violation.rule == "forbidden-name" and any(
        f"'{name}'" in violation.message for name in HOSTILE_NAMES
    )


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
