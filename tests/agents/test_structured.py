"""Structured design: the schema derived from each grammar, the wire forms, and replies.

Every genome the offline designer draws is an object of its task's schema; every object
the schema admits renders into a module that passes the gate and the sandbox's validation
(the three MPE tasks, and the generic grammar on a custom PettingZoo env). Scripted servers
give the exact replies: one that ignores the schema, JSON outside it, prose.
"""

from __future__ import annotations

import functools
import json
import math
import random
from typing import Any

import pytest

from lero.agents import Elite, Review, check_candidate, make_team
from lero.agents.budget import UsageLedger
from lero.agents.checks import state_names
from lero.agents.critic import Critic, parse_structured_review, review_targets
from lero.agents.designer import Designer
from lero.agents.evidence import NO_JUDGEMENT, verdict_schema
from lero.agents.llm import ChatModel
from lero.agents.offline.designer import OfflineDesigner, sampled_module
from lero.agents.offline.genome import genome_of
from lero.agents.offline.schema import WEIGHT_MAX, design_schema, schema_errors
from lero.agents.probe import PROBE_SCHEMA
from lero.agents.records import Problem, design_mode
from lero.agents.structured import (
    MUTATION_ORIGIN,
    NOT_JSON,
    OUTSIDE_SCHEMA,
    StructuredDesigner,
    parse_object,
)
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from lero.graph.trust import confirm_env, job_env
from lero.sandbox import Job, get_sandbox
from tests.agents.conftest import SPREAD, llm_config
from tests.support.openai_server import Reply

MPE = ("simple_spread", "simple_reference", "simple_speaker_listener")
PETTINGZOO = "tests.graph.test_custom_env_loop:make_rendezvous"  # a PettingZoo ParallelEnv of the tests


@functools.cache
def task_of(env: str) -> tuple[Problem, dict[str, Any]]:
    """The env's Problem and its sandbox job env (a custom env confirmed as `--env` does)."""
    confirmed = confirm_env(env, env) if env == PETTINGZOO else None
    spec = RunSpec(env=env)
    return problem(spec, confirmed), job_env(spec, confirmed)


def random_object(schema: dict[str, Any], rng: random.Random) -> Any:
    """Any object `schema` admits: optional keys at random, numbers across their whole range."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema["type"]
    if kind == "number":
        return rng.choice([schema["minimum"], schema["maximum"], round(math.exp(rng.uniform(-7, math.log(schema["maximum"]))), 4)])
    if kind == "boolean":
        return rng.random() < 0.5
    required = set(schema.get("required", ()))
    return {key: random_object(sub, rng) for key, sub in schema["properties"].items()
            if key in required or rng.random() < 0.4}


def offline_draws(task: Problem, seeds: range) -> list[str]:
    """Modules the offline designer draws: first generations, then children of elites."""
    codes = []
    for seed in seeds:
        designer = OfflineDesigner(seed=seed, prior=seed % 2 == 0)
        first = designer.design(task, 4, [], "")
        elites = [Elite(f"0-{i}", d.code or "", float(i), {"coverage": 0.1, "collisions": 9.0}) for i, d in enumerate(first)]
        codes += [d.code or "" for d in first + designer.design(task, 4, elites, "", exploit=3)]
    return codes


@pytest.mark.parametrize("env", [*MPE, PETTINGZOO])
def test_every_offline_draw_is_an_object_of_its_tasks_schema_and_renders_back(env: str) -> None:
    task, _ = task_of(env)
    schema = design_schema(task)
    assert schema.grammar == (env if env in MPE else "generic")
    codes = offline_draws(task, range(12))
    assert len(codes) >= 90
    for code in codes:
        design = schema.object_of(code)
        assert design is not None and schema_errors(design, schema.schema) == [], code
        assert schema.render(design) == code  # the object is the whole design


def test_long_lineages_of_mutations_stay_inside_the_schema() -> None:
    for task in (SPREAD, task_of(PETTINGZOO)[0]):
        schema = design_schema(task)
        code = OfflineDesigner(seed=3).design(task, 1, [], "")[0].code or ""
        stats = {"collision": {"mean": 50.0, "min": 0.0, "max": 90.0}}
        for generation in range(400):  # each child of the last, as an elite refined every generation
            elite = Elite(f"{generation}-0", code, 1.0, {"coverage": 0.0, "collisions": 10.0}, stats)
            code = OfflineDesigner(seed=generation).design(task, 1, [elite], "", exploit=1)[0].code or ""
            assert schema_errors(schema.object_of(code), schema.schema) == []


@pytest.mark.slow
@pytest.mark.parametrize("env", [*MPE, PETTINGZOO])
def test_every_schema_valid_object_renders_a_module_that_passes_the_gate_and_validation(env: str) -> None:
    task, job = task_of(env)
    schema, rng = design_schema(task), random.Random(env)
    objects = [random_object(schema.schema, rng) for _ in range(150)]
    objects += [{**objects[0], "shaping": {k: {"weight": WEIGHT_MAX, "schedule": "ramp_up"}
                                           for k in schema.schema["properties"]["shaping"]["properties"]}}]
    modules = []
    for design in objects:
        assert schema_errors(design, schema.schema) == []
        code = schema.render(design)
        assert check_candidate(code, state_names(task)) == [], code
        modules.append(code)
    sandbox = get_sandbox("process")
    try:
        for code in [modules[0], modules[-1], *rng.sample(modules, 2)]:  # validation is a real env's job
            result = sandbox.run_job(Job(kind="validate", code=code, env=job, algo="mappo", seed=0))
            assert result.status == "ok", (result.error, code)
    finally:
        sandbox.close()


def test_the_schema_bounds_numbers_and_names_what_is_outside_it() -> None:
    schema = design_schema(SPREAD).schema
    design = {"goal": {"kind": "env", "weight": 1234567890, "schedule": "constant"},
              "shaping": {"spread": {"weight": 1, "schedule": "later"}, "bogus": {}},
              "features": {"speed": "yes"}, "assignment": "optimal"}
    errors = schema_errors(design, schema)
    assert any("1234567890 is above 100" in e for e in errors)
    assert any("'later' is not one of" in e for e in errors)
    assert any("unknown key 'bogus'" in e for e in errors)
    assert any("features.speed: expected boolean" in e for e in errors)
    assert schema_errors({**design, "goal": {"kind": "spread", "weight": 1, "schedule": "constant"}}, schema)


def test_an_integer_is_a_whole_number_that_is_no_boolean_and_keeps_its_bounds() -> None:
    integer = {"type": "integer", "minimum": 1, "maximum": 64}
    assert schema_errors(4, integer) == []
    assert schema_errors(4.0, integer) == ["$: expected integer, got float"]
    assert schema_errors(True, integer) == ["$: expected integer, got bool"]
    assert schema_errors(65, integer) == ["$: 65 is above 64"]
    assert schema_errors(0, integer) == ["$: 0 is below 1"]


# ---------------------------------------------------------------- the wire, scripted servers

GOOD = {"goal": {"kind": "team_coverage", "weight": 1.0, "schedule": "constant"},
        "shaping": {"collision": {"weight": 0.5, "schedule": "constant"}},
        "features": {"nearest_landmark": True}, "assignment": "greedy"}


def llama_cpp_python(request: dict) -> Reply:
    """What llama-cpp-python 0.3.36's server does: HTTP 500 for `json_schema`, the schema
    honoured under `json_object`."""
    form = (request.get("response_format") or {}).get("type")
    if form == "json_schema":
        return Reply(status=500, error_message="'json_schema' is not supported")
    schema = (request.get("response_format") or {}).get("schema")
    if schema == PROBE_SCHEMA:
        return Reply(content='{"answer": "yes"}')
    if "verdict" in (schema or {}).get("properties", {}):
        return Reply(content='{"verdict": "accept", "points": []}')
    return Reply(content=json.dumps(GOOD))


def test_the_probe_finds_the_form_the_server_takes_once_and_sends_the_schema_in_it(openai_server) -> None:
    openai_server.script = llama_cpp_python
    calls: list[dict] = []
    team = make_team(llm_config(openai_server, design="structured", max_retries=3),
                     on_call=lambda role, info: calls.append(info))
    drafts = team.designer.design(SPREAD, 2, [], "")
    review = team.critic.review(SPREAD, drafts[0].code or "")
    forms = [(r.get("response_format") or {}).get("type") for r in openai_server.requests]
    # probed once (500 not retried); the design, its repeat asked again, the review
    assert forms == ["json_schema", "json_object", "json_object", "json_object", "json_object"]
    sent = openai_server.requests[2]["response_format"]["schema"]
    assert sent == design_schema(SPREAD).schema
    assert [d.origin for d in drafts] == ["designer:structured", MUTATION_ORIGIN] and drafts[0].code  # repeat mutated
    assert genome_of(drafts[0].code).to_json() == genome_of(design_schema(SPREAD).render(GOOD)).to_json()
    assert check_candidate(drafts[0].code, state_names(SPREAD)) == []
    assert review.verdict == "accept" and review.points == []
    assert [c["role"] for c in calls] == ["probe", "probe", "designer", "designer", "critic"]
    assert calls[2]["response_format"] == "json_object"


def test_a_server_that_ignores_the_schema_gets_plain_requests_and_its_replies_are_still_checked(openai_server) -> None:
    prose_then_json = f"Sure! Here is my design:\n```json\n{json.dumps(GOOD)}\n```\nGood luck."
    openai_server.push("Yes, 2 is greater than 1.", "yes", prose_then_json,
                       Reply(content=["I think the agents should spread out.", json.dumps({**GOOD, "assignment": "random"})]))
    team = make_team(llm_config(openai_server, design="structured"))
    first = team.designer.design(SPREAD, 1, [], "")
    second = team.designer.design(SPREAD, 2, [], "")
    assert "response_format" not in openai_server.requests[2]  # neither form was kept: plain requests
    assert first[0].code is not None and check_candidate(first[0].code, state_names(SPREAD)) == []
    assert second[0].code is None and second[0].error.startswith(NOT_JSON)
    assert second[1].code is None and second[1].error.startswith(OUTSIDE_SCHEMA)
    assert "'random' is not one of greedy, optimal" in second[1].error


def test_json_outside_the_schema_is_its_own_failure_even_from_a_constraining_server(openai_server) -> None:
    outside = {**GOOD, "goal": {"kind": "team_coverage", "weight": 1234567890, "schedule": "constant"},
               "features": {"nearest_landmark": True, "nearest_landmark_twice": True}}
    openai_server.push('{"answer": "no"}', json.dumps(outside))
    [draft] = make_team(llm_config(openai_server, design="structured")).designer.design(SPREAD, 1, [], "")
    assert draft.code is None and draft.error.startswith(OUTSIDE_SCHEMA)
    assert "above 100" in draft.error and "unknown key 'nearest_landmark_twice'" in draft.error


def test_parse_object_takes_a_bare_fenced_or_embedded_object() -> None:
    assert parse_object('{"a": 1}') == {"a": 1}
    assert parse_object('<think>{"b": 2}</think>```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_object('the design is {"a": 1} as asked') == {"a": 1}
    assert parse_object("no json here") is None and parse_object("[1, 2]") is None


def test_exploit_prompts_show_the_elite_as_its_design_and_a_revision_is_a_structured_edit(openai_server) -> None:
    openai_server.script = llama_cpp_python
    elite_code = design_schema(SPREAD).render(GOOD)
    elite = Elite("0-1", elite_code, -20.5, {"coverage": 0.4}, {}, "collision: mean -3.1 (dominant)")
    designer = make_team(llm_config(openai_server, design="structured")).designer
    assert isinstance(designer, StructuredDesigner)
    designer.design(SPREAD, 1, [elite], "", exploit=1)  # GOOD again: a duplicate of the elite, dropped
    exploit = openai_server.requests[-1]["messages"][-1]["content"]
    assert "Refine design 0-1" in exploit and json.dumps(GOOD) in exploit and "collision: mean -3.1" in exploit
    assert "-20.5" in exploit and "coverage 0.4" in exploit
    revised = designer.revise(SPREAD, elite_code, Review("revise", ["lower the collision weight"], ""))
    asked = openai_server.requests[-1]["messages"][-1]["content"]
    assert "lower the collision weight" in asked and json.dumps(GOOD) in asked
    assert openai_server.requests[-1]["response_format"]["type"] == "json_object"
    assert revised.origin == "designer:structured-revise" and revised.code is not None


def test_a_reply_that_repeats_a_trained_design_is_asked_for_again_once_naming_it(openai_server) -> None:
    """SmolLM2-135M answered 2 of generation 1's 4 slots in a default run with the elite it was
    shown, and both slots stayed empty."""
    changed = {**GOOD, "shaping": {"collision": {"weight": 0.7, "schedule": "constant"}}}
    answers = iter([GOOD, changed, GOOD, GOOD])

    def repeating(request: dict) -> Reply:  # the probe as llama-cpp-python answers it, then the answers
        form = request.get("response_format") or {}
        if form.get("type") == "json_schema" or form.get("schema") == PROBE_SCHEMA:
            return llama_cpp_python(request)
        return Reply(content=json.dumps(next(answers)))

    openai_server.script = repeating
    elite = Elite("0-1", design_schema(SPREAD).render(GOOD), -20.5, {"coverage": 0.4}, {}, "collision: mean -3.1")
    designer = make_team(llm_config(openai_server, design="structured")).designer
    [draft] = designer.design(SPREAD, 1, [elite], "", exploit=1)
    assert design_schema(SPREAD).object_of(draft.code) == changed and draft.parents == ("0-1",)
    asked_again = openai_server.requests[-1]["messages"][-1]["content"]
    assert "repeated a design" in asked_again and json.dumps(GOOD) in asked_again
    [mutated] = designer.design(SPREAD, 1, [elite], "", exploit=1)  # a repeat again: asked once more only,
    assert sum("repeated a design" in r["messages"][-1]["content"] for r in openai_server.requests) == 2
    assert mutated.origin == MUTATION_ORIGIN and mutated.parents == ("0-1",)  # then the repeat is mutated
    assert design_mode(mutated.origin) == "structured+mutation" and design_mode(draft.origin) == "structured"
    assert design_schema(SPREAD).object_of(mutated.code) not in (GOOD, changed)


def test_two_equal_replies_to_one_request_count_as_a_repeat(openai_server) -> None:
    other = {**GOOD, "shaping": {"collision": {"weight": 0.2, "schedule": "ramp_up"}}}
    answers = iter([GOOD, GOOD, other])
    openai_server.script = lambda request: (
        llama_cpp_python(request) if (request.get("response_format") or {}).get("schema") == PROBE_SCHEMA
        or (request.get("response_format") or {}).get("type") == "json_schema"
        else Reply(content=[json.dumps(next(answers)) for _ in range(request.get("n") or 1)]))
    drafts = make_team(llm_config(openai_server, design="structured")).designer.design(SPREAD, 2, [], "")
    assert [design_schema(SPREAD).object_of(d.code) for d in drafts] == [GOOD, other]
    assert "repeated a design" in openai_server.requests[-1]["messages"][-1]["content"]


def test_an_elites_long_statistics_are_shortened_to_fit_a_small_window(openai_server) -> None:
    """A default-budget SmolLM2 run (n_ctx 2048) stopped in generation 1: the exploit slot's
    statistics sat inside the instruction, which is never shortened, and the prompt did not fit
    even with every other part left out. They are now a part of their own, shortened in turn."""
    openai_server.script = llama_cpp_python
    statistics = "".join(f"term_{i}: mean -3.1 std 0.4 share 0.2 (dominant in phase {i})\n" for i in range(150))
    elite = Elite("0-1", design_schema(SPREAD).render(GOOD), -20.5, {"coverage": 0.4}, {}, statistics)
    designer = make_team(llm_config(openai_server, design="structured", context_tokens=2048)).designer
    designer.design(SPREAD, 1, [elite], "", exploit=1)
    exploit = openai_server.requests[-1]["messages"][-1]["content"]
    assert "Refine design 0-1" in exploit and "Its statistics:" in exploit and "term_0: mean -3.1" in exploit
    assert "shortened to fit the model's context window" in exploit and "term_149" not in exploit


def test_the_structured_critic_reads_a_verdict_object_and_falls_back_to_a_verdict_line(openai_server) -> None:
    point = {"target": "collision", "rubric_item": "drowning-weight", "why": "it swamps the coverage goal"}
    openai_server.push("yes", "yes", json.dumps({"verdict": "reject", "points": [point]}), "VERDICT: accept\n- fine")
    model = ChatModel(llm_config(openai_server), UsageLedger())
    critic = Critic(model, structured=True)
    code = design_schema(SPREAD).render(GOOD)
    rejected = critic.review(SPREAD, code)
    assert (rejected.verdict, rejected.points) == ("reject", ["collision [drowning-weight]: it swamps the coverage goal"])
    assert [(p.target, p.rubric_item) for p in rejected.evidence] == [("collision", "drowning-weight")]
    shown = openai_server.requests[2]["messages"]
    assert json.dumps(GOOD) in shown[-1]["content"] and "lero writes its code" in shown[0]["content"]
    assert "`drowning-weight`: a weight that drowns the task's reward" in shown[0]["content"]  # the rubric
    prose = critic.review(SPREAD, code)
    assert prose.verdict == "accept" and prose.points[0].startswith(f"the critic's reply was {OUTSIDE_SCHEMA}")


def test_the_critics_schema_names_the_designs_targets_and_the_rubric_items() -> None:
    schema = verdict_schema(review_targets(SPREAD, design_schema(SPREAD).render(GOOD)))
    point = schema["properties"]["points"]["items"]["properties"]
    assert point["target"]["enum"] == ["team_coverage", "collision", "nearest_landmark"]
    assert point["rubric_item"]["enum"] == ["rewards-penalised", "team-sign", "constant-feature", "drowning-weight",
                                            "unobservable-feature", "not-invariant", "drops-task"]


@pytest.mark.parametrize("reply", [
    {"verdict": "reject", "points": []},  # SmolLM2-135M's answer to 3 of 4 valid designs
    {"verdict": "reject", "points": ["pays for standing still"]},  # a reason, but no target nor rubric item
    {"verdict": "revise", "points": [{"target": "speed", "rubric_item": "constant-feature", "why": "not in it"}]},
    {"verdict": "reject", "points": [{"target": "collision", "rubric_item": "too-slow", "why": "no such item"}]},
    {"verdict": "reject", "points": [{"target": "collision", "rubric_item": "team-sign", "why": " "}]},
    {"verdict": "reject", "points": [{"target": "collision", "rubric_item": "team-sign", "why": "<one sentence>"}]},
])
def test_a_rejection_without_a_valid_point_is_no_judgement(reply: dict) -> None:
    code = design_schema(SPREAD).render(GOOD)
    review = parse_structured_review(json.dumps(reply), review_targets(SPREAD, code), code)
    assert review.verdict == NO_JUDGEMENT and review.evidence == ()
    assert review.points[0] == f"the critic said {reply['verdict']} without evidence"
    assert parse_structured_review("VERDICT: reject\n- bad", None, code).verdict == NO_JUDGEMENT  # free text: none


def test_a_point_on_free_code_must_name_text_of_the_code() -> None:
    code = "def hybrid_reward(ctx):\n    bonus = 50.0 * ctx.env_reward\n"
    point = {"target": "bonus", "rubric_item": "drowning-weight", "why": "50x the task reward"}
    assert parse_structured_review(json.dumps({"verdict": "reject", "points": [point]}), None, code).evidence
    elsewhere = {**point, "target": "penalty"}
    assert parse_structured_review(json.dumps({"verdict": "reject", "points": [elsewhere]}), None, code).verdict == NO_JUDGEMENT


# ---------------------------------------------------------------- edit design


def test_edit_design_starts_explore_slots_from_a_rendered_draw_and_drops_it_unchanged(openai_server) -> None:
    start = sampled_module(SPREAD, random.Random(0))  # the first draw of a designer seeded 0
    changed = start.replace("features = []", "features = []  # unchanged idea, new comment").replace(
        "torch.cat([obs, *features], dim=-1)", "torch.cat([obs, *features, obs[:, 0:1] * 0.0], dim=-1)")
    openai_server.push(Reply(content=[f"```python\n{start}```", f"```python\n{changed}```"]),
                       f"```python\n{start}```")  # asked again for the lost slot: unchanged again
    designer = Designer(ChatModel(llm_config(openai_server), UsageLedger()), 0.7, edit=True, seed=0)
    drafts = designer.design(SPREAD, 2, [], "")
    prompt = openai_server.requests[0]["messages"][-1]["content"]
    assert start.strip() in prompt and "Change it into a better design" in prompt
    assert "# lero-genome" not in prompt  # the starting module carries no genome: edits change it
    assert [d.origin for d in drafts] == ["designer:edit"] and drafts[0].code is not None
    assert "obs[:, 0:1] * 0.0" in drafts[0].code


def test_the_probe_does_not_calibrate_characters_per_token(openai_server) -> None:
    """A probe is a few words in a chat template: counted, it would shrink every later prompt's
    room (SmolLM2: 1.4 characters per token, and no designer prompt fitted 2048 tokens)."""
    from lero.agents.fit import CHARS_PER_TOKEN

    openai_server.script = llama_cpp_python
    model = ChatModel(llm_config(openai_server), UsageLedger())
    assert model.structured_form() == "json_object" and model.chars_per_token == CHARS_PER_TOKEN
