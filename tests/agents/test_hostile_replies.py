"""Hostile JSON from a model is a named failure, never a traceback: a weight written as a
400-digit integer (`math.isfinite` / `float` raised OverflowError) and JSON nested 100k deep
(`json.loads` raised RecursionError), in the designer and the critic, in every design mode
(the JSON reply of `structured`, the genome line of a module a model wrote in `code` /
`auto`, which the structured critic and the fallback designer read)."""

from __future__ import annotations

import json

import pytest

from lero.agents import Elite, make_team
from lero.agents.bounded_json import MAX_DEPTH, loads, nesting_depth
from lero.agents.budget import UsageLedger
from lero.agents.llm import ChatModel
from lero.agents.offline.schema import design_schema
from lero.agents.structured import NOT_JSON, OUTSIDE_SCHEMA, parse_object
from tests.agents.conftest import SPREAD, llm_config
from tests.agents.test_structured import GOOD
from tests.support.openai_server import Reply

HUGE = int("9" * 400)
DEEP = "[" * 100_000 + "]" * 100_000
NESTED = "[" * 10_000 + "]" * 10_000  # within the size bound and the gate's module size
PROBE_KEPT = '{"answer": "no"}'  # the probe's reply: the server keeps schemas (json_schema)


def huge_weight() -> str:
    return json.dumps({**GOOD, "goal": {**GOOD["goal"], "weight": HUGE}})


def deep_object() -> str:
    return json.dumps({**GOOD, "features": "FEATURES"}).replace('"FEATURES"', DEEP)


def genome_module(body: str) -> str:
    """A rendered design whose embedded genome line a model replaced with BODY."""
    code = design_schema(SPREAD).render(GOOD)
    return "\n".join("# lero-genome: " + body if line.startswith("# lero-genome: ") else line
                     for line in code.splitlines())


def hostile_genomes() -> list[str]:
    valid = json.loads(next(line for line in design_schema(SPREAD).render(GOOD).splitlines()
                            if line.startswith("# lero-genome: "))[len("# lero-genome: "):])
    valid["terms"][0][1] = "HUGE"
    return [json.dumps(valid).replace('"HUGE"', str(HUGE)), NESTED]


def test_bounds_are_checked_before_parsing() -> None:
    assert nesting_depth('{"a": "[[[[", "b": [[1]]}') == 3  # brackets in strings do not count
    with pytest.raises(ValueError, match=f"more than {MAX_DEPTH}$"):
        loads(NESTED)
    with pytest.raises(ValueError, match="more than the 65536 read as JSON"):
        loads(DEEP)
    with pytest.raises(ValueError, match="not a JSON number"):
        loads('{"w": NaN}')
    assert parse_object(DEEP) is None and parse_object("x" * (1 << 20) + '{"a": 1}') == {"a": 1}


def test_the_structured_designer_names_a_huge_number_and_deep_nesting(openai_server) -> None:
    openai_server.push(PROBE_KEPT, huge_weight(), deep_object())
    designer = make_team(llm_config(openai_server, design="structured")).designer
    [huge] = designer.design(SPREAD, 1, [], "")
    [deep] = designer.design(SPREAD, 1, [], "")
    assert huge.code is None and huge.error.startswith(OUTSIDE_SCHEMA) and "400-digit number, out of range" in huge.error
    assert deep.code is None and deep.error.startswith(NOT_JSON)


def test_the_structured_critic_reads_a_deep_reply_as_outside_the_schema(openai_server) -> None:
    openai_server.push(PROBE_KEPT, json.dumps({"verdict": "accept", "points": ["P"]}).replace('"P"', DEEP))
    review = make_team(llm_config(openai_server, design="structured")).critic.review(
        SPREAD, design_schema(SPREAD).render(GOOD))
    assert review.points[0].startswith(f"the critic's reply was {OUTSIDE_SCHEMA}")


@pytest.mark.parametrize("design", ["code", "auto"])
def test_a_hostile_genome_line_in_model_code_is_no_design(openai_server, design: str) -> None:
    """The structured critic (auto) and the fallback designer read the genome line of code a
    model wrote: a hostile one makes the code no rendered design, reviewed as code."""
    openai_server.script = lambda request: Reply(content=PROBE_KEPT if request["max_tokens"] == 16
                                                 else "VERDICT: accept\n- fine")
    team = make_team(llm_config(openai_server, design=design, context_tokens=32768))
    for body in hostile_genomes():
        code = genome_module(body)
        assert design_schema(SPREAD).object_of(code) is None
        review = team.critic.review(SPREAD, code)
        assert review.verdict == "accept" and review.by != "gate"
        if team.structured is not None:  # auto: the fallback shows elites as designs
            elite = Elite("0-0", code, 1.0, {})
            assert "Designs trained so far" not in team.structured.values(SPREAD, design_schema(SPREAD), [elite], "",
                                                                         None, None)["elites"]



def test_a_deep_probe_reply_means_the_server_keeps_no_schema(openai_server) -> None:
    openai_server.push(DEEP, DEEP)
    model = ChatModel(llm_config(openai_server), UsageLedger())
    assert model.structured_form() == "none" and len(openai_server.requests) == 2
