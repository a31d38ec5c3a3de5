"""Real replies, kept as test data: what SmolLM2-135M answered to lero's actual prompts.

Recorded with `python -m benchmarks.llm_designer ... --record DIR` (two runs; the second one,
after the characters-per-token calibration, is prefixed `run2-`)
against llama-cpp-python's server (n_ctx 2048); the `critic-*` replies are the critic's
(`Critic.review` of tests/agents/samples.GOOD_MODULE, which no SmolLM2 candidate reached).
`expected.json` says, per reply, what lero
makes of it, read by a person off the reply: the draft's stated failure (no code, cut off
at max_tokens), or the gate's rules for the code it extracted. Every failure kind seen
there is here, with the handling that follows it in a run.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from lero.agents.checks import check_candidate, state_names
from lero.agents.critic import parse_review, static_review
from lero.agents.extract import CUT_OFF, draft_from_reply
from lero.graph.configuration import RunSpec
from lero.graph.context import problem

FIXTURES = Path(__file__).parent / "fixtures" / "smollm2"
EXPECTED: dict[str, str] = json.loads((FIXTURES / "expected.json").read_text())


@functools.cache
def state_fields(env: str) -> tuple[str, ...]:
    return state_names(problem(RunSpec(env=env)))


def recorded(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def handling(record: dict) -> str:
    """What lero makes of one recorded reply, in one line."""
    reply, finish = record["replies"][0], record["finish_reasons"][0]
    if record["role"] == "critic":
        review = parse_review(reply)
        return f"critic: {review.verdict}; {review.points[0]}"
    draft = draft_from_reply(reply, record["role"], cut_off=finish == "length")
    if draft.code is None:
        return draft.error or ""
    violations = check_candidate(draft.code, state_fields(record["task"]))
    if not violations:
        return "passes the gate"
    return "gate: " + ", ".join(sorted({v.rule for v in violations}))


def test_every_recorded_reply_has_an_expectation():
    names = {p.name for p in FIXTURES.glob("*.json")} - {"expected.json"}
    assert names == set(EXPECTED) and len(names) >= 10


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_real_reply_gets_its_stated_handling(name):
    record = recorded(name)
    assert record["model"] == "smollm2-135m" and record["prompt"][0]["content"].startswith("You are the")
    assert handling(record) == EXPECTED[name]


def test_code_the_gate_stops_goes_back_for_revision_with_its_points():
    gated = [recorded(n) for n, what in EXPECTED.items() if what.startswith("gate: ")]
    assert gated
    for record in gated:
        code = draft_from_reply(record["replies"][0], record["role"]).code
        review = static_review(check_candidate(code, state_fields(record["task"])))
        assert review.verdict in ("revise", "reject") and review.points  # the designer or debugger reads these


def test_a_reply_cut_off_at_max_tokens_is_named_so_not_blamed_on_the_code():
    cut = [recorded(n) for n, what in EXPECTED.items() if what == CUT_OFF]
    assert cut and all(r["finish_reasons"] == ["length"] for r in cut)
    for record in cut:  # without the finish reason the same text reads as a code problem
        draft = draft_from_reply(record["replies"][0], record["role"])
        assert draft.error != CUT_OFF


def test_a_critic_reply_without_a_verdict_line_is_a_revise_that_says_so():
    critics = [recorded(n) for n in EXPECTED if n.startswith("critic-")]
    assert len(critics) == 3
    for record in critics:  # prose about the task, no VERDICT line: never an accept of unread code
        review = parse_review(record["replies"][0])
        assert review.verdict == "revise" and review.points[0] == "the critic's reply had no VERDICT line"
