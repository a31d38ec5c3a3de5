"""Expression design: the typed language, the grammar lero derives from each task, the wire.

Random sentences of each task's GBNF grammar (tests/support/gbnf.py draws them) parse,
type-check and render into modules that pass the gate; an expression that does not check
is named with why; a server that takes a grammar gets it in the field it reads.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, replace

import pytest
from langchain_core.messages import HumanMessage

from lero.agents import Elite, Review, check_candidate, make_team
from lero.agents.checks import state_names
from lero.agents.critic import review_targets
from lero.agents.debugger import UNCHANGED
from lero.agents.expression.expression_design import design_of, parse_design
from lero.agents.expression.gbnf import longest_sentence
from lero.agents.expression.grammar import MAX_NESTING, MAX_OPERANDS, design_grammar, repair_grammar
from lero.agents.expression.parse import ExpressionError
from lero.agents.expression.readable import task_inputs
from lero.agents.expression.render import render_module, slot_at
from lero.agents.expression.roles import (
    ExpressionDesigner,
    example_design,
    failing_slots,
    language_text,
    repaired,
)
from lero.agents.fit import messages_tokens
from lero.agents.grammar_form import PROBE_GRAMMAR
from lero.agents.records import Problem
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from lero.training.envs.task import Pairing, TaskSpec
from tests.agents.conftest import SPREAD, llm_config
from tests.agents.test_structured import MPE, PETTINGZOO, task_of
from tests.support.gbnf import Sentences, accepts, parse_gbnf
from tests.support.openai_server import Reply

GOOD = """Here is my design.
term near: 1 constant = -min(norm(landmark_pos - own(agent_pos), xy), L)
term team: 0.5 ramp_down = env_reward
potential: 0.5 = -min(norm(landmark_pos - own(agent_pos), xy), L)
feature speed = norm(obs_self_vel, xy)
"""


def render_text(text: str, task: Problem) -> str:
    return render_module(parse_design(text, task.task_spec.metric_names), task)


@pytest.mark.parametrize("env", [*MPE, PETTINGZOO])
def test_random_sentences_of_each_tasks_grammar_parse_check_and_render_through_the_gate(env: str) -> None:
    task, _ = task_of(env)
    grammar = design_grammar(task)
    sentences = Sentences(grammar, seed=len(env), depth=5)
    fields = state_names(task)
    kinds = set()
    for _ in range(60):
        text = sentences.draw()
        code = render_text(text, task)  # raises, naming the expression, on any sentence that does not check
        assert check_candidate(code, fields) == [], (text, code)
        design = design_of(code)
        assert design is not None and design.text() == parse_design(text, task.task_spec.metric_names).text()
        kinds |= {s.kind for s in design.slots}
    assert kinds == {"term", "potential", "feature"}
    assert "own(" in grammar or env == PETTINGZOO  # agent i's own entities, where the state has them


def _references(items: list) -> set[str]:
    found = set()
    for kind, value, _ in items:
        if kind == "ref":
            found.add(value)
        elif kind == "group":
            found |= {name for alt in value for name in _references(alt)}
    return found


def _postfixes(items: list) -> set[str]:
    found = set()
    for kind, value, postfix in items:
        found.add(postfix)
        if kind == "group":
            found |= {p for alt in value for p in _postfixes(alt)}
    return found


def _deepest(items: list, rules: dict, peak: dict) -> int:
    """The most brackets open at once in a sentence of `items` (each rule's own brackets close)."""
    level = deepest = 0
    for kind, value, _ in items:
        if kind == "lit":
            for char in value:
                level += (char == "(") - (char == ")")
                deepest = max(deepest, level)
        elif kind in ("ref", "group"):
            inner = peak[value] if kind == "ref" else max(_deepest(alt, rules, peak) for alt in value)
            deepest = max(deepest, level + inner)
    return deepest


@pytest.mark.parametrize("env", [*MPE, PETTINGZOO])
def test_the_grammar_has_no_recursion_so_a_sampler_never_follows_an_endless_nest(env: str) -> None:
    """Each open bracket of a recursive typed grammar multiplied llama.cpp's parse stacks: a
    real SmolLM2 request on the PettingZoo task ran past 420 s (61 s with this grammar). Every
    rule refers only to rules below it, and no sentence nests deeper than MAX_NESTING (one
    more inside an input's own `own(...)` name). Nothing repeats either (no `*` or `+`), so
    every sentence ends: SmolLM2's repair replies of endless `+ max(...)` ran to max_tokens."""
    task, _ = task_of(env)
    for grammar in (design_grammar(task), repair_grammar(task, parse_design(example_design(task)).slots)):
        rules = parse_gbnf(grammar)
        assert not {p for alts in rules.values() for alt in alts for p in _postfixes(alt)} & {"*", "+"}
        more = [alts for name, alts in rules.items() if name.endswith("-prod") or name.split("-")[-1] == "n1"]
        assert more and all(len(alts) == 1 and sum(item[2] == "?" for item in alts[0]) == MAX_OPERANDS - 1
                            for alts in more)  # a sum, a product: at most MAX_OPERANDS operands  # fmt: skip
        refs = {name: {r for alt in alts for r in _references(alt)} for name, alts in rules.items()}
        assert all(r in rules for names in refs.values() for r in names)  # no rule is missing
        peak: dict[str, int] = {}
        while len(peak) < len(rules):  # peel the rules whose references are all peeled: a cycle is left over
            ready = [name for name in rules if name not in peak and refs[name] <= peak.keys()]
            assert ready, f"recursive rules: {sorted(set(rules) - peak.keys())[:4]}"
            peak |= {name: max(_deepest(alt, rules, peak) for alt in rules[name]) for name in ready}
        assert 2 <= peak["root"] <= MAX_NESTING + 1


def test_the_longest_sentence_of_a_grammar() -> None:
    assert longest_sentence('root ::= "ab" [0-9]? (x | "cdef")\nx ::= "g" "h"?\n') == 7
    assert longest_sentence('root ::= "a" [0-9]*\n') == math.inf  # a repetition never has to end
    assert longest_sentence('root ::= "(" x ")"\nx ::= "1" | root\n') == math.inf  # nor does a recursion


@pytest.mark.parametrize("env", [*MPE, PETTINGZOO])
def test_a_repair_grammar_sized_to_the_reply_never_runs_past_it(env: str) -> None:
    """The repair's grammar under the reply's max_tokens (in characters: a token is at least
    one): no sentence is longer, and its sentences still parse, check and render. At 512,
    the example's own-entity distance still fits; the unbounded grammar's longest is billions."""
    task, _ = task_of(env)
    design = parse_design(example_design(task), task.task_spec.metric_names)
    assert longest_sentence(repair_grammar(task, design.slots)) > 10**6
    for budget in (128, 512, 1024):
        for slot in design.slots:
            grammar = repair_grammar(task, [slot], max_chars=budget)
            assert longest_sentence(grammar) <= budget, (slot.label, budget)
            sentences = Sentences(grammar, seed=budget, depth=8)
            for _ in range(10):
                line = sentences.draw()
                assert len(line) <= budget and repaired(design, line, task, {slot.label}, "").code is not None, line
    potential = design.slot("potential")
    assert accepts(repair_grammar(task, [potential], max_chars=512), potential.line())


def test_the_debugger_asks_under_a_grammar_no_longer_than_its_replys_max_tokens(openai_server) -> None:
    fix = "term near: 1 constant = -mean(norm(landmark_pos - own(agent_pos), xy), L)"
    openai_server.script = llama_cpp_python([fix])
    team = make_team(llm_config(openai_server, design="expression", context_tokens=2048))
    draft = team.debugger.repair(SPREAD, render_text(GOOD, SPREAD), "RuntimeError: x", [])
    request = openai_server.requests[-1]
    assert request["max_tokens"] == 512 and longest_sentence(request["grammar"]) <= 512
    assert accepts(request["grammar"], fix) and draft.code is not None


def test_a_debugger_prompt_that_takes_room_from_its_reply_gets_a_grammar_that_fits_the_room_left(openai_server) -> None:
    """A window where the repair prompt does not fit beside a quarter-window reply: the reply
    gets the room left (`ChatModel.fit`), and the grammar is sized to that room, not to the
    quarter, so a constrained reply still ends before it is cut off."""
    fix = "term near: 1 constant = -mean(norm(landmark_pos - own(agent_pos), xy), L)"
    openai_server.script = llama_cpp_python([fix, fix])
    make_team(llm_config(openai_server, design="expression", context_tokens=4096)).debugger.repair(
        SPREAD, render_text(GOOD, SPREAD), "RuntimeError: x", [])
    prompt = messages_tokens([HumanMessage(m["content"]) for m in openai_server.requests[-1]["messages"]])
    window = prompt + 200  # room for a 200-token reply, where a quarter of the window is more
    assert window // 4 > 200
    draft = make_team(llm_config(openai_server, design="expression", context_tokens=window)).debugger.repair(
        SPREAD, render_text(GOOD, SPREAD), "RuntimeError: x", [])
    request = openai_server.requests[-1]
    assert 128 <= request["max_tokens"] < window // 4
    assert longest_sentence(request["grammar"]) <= request["max_tokens"]  # narrower than at 512
    assert draft.code is not None


def test_the_feature_grammar_reads_only_the_agents_own_observation() -> None:
    grammar = design_grammar(SPREAD)
    feature_rules = [line for line in grammar.splitlines() if line.startswith("feature-")]
    assert feature_rules and not any("agent_pos" in line or "landmark_pos" in line or "progress" in line
                                     for line in feature_rules)
    potential_rules = [line for line in grammar.splitlines() if line.startswith("potential-")]
    assert any("own(agent_pos)" in line for line in potential_rules)
    assert not any("env_reward" in line or '"step"' in line for line in potential_rules)


@pytest.mark.parametrize(("line", "named"), [
    ("term near: 1 constant = norm(agent_pos - landmark_pos, xy)",
     "term near = norm(agent_pos - landmark_pos, xy): cannot combine dims (N, xy) with (L, xy)"),
    ("feature peek = norm(own(agent_pos), xy)", "feature peek = norm(own(agent_pos), xy): reads own(agent_pos), "
     "which the agent cannot observe"),
    ("potential: 1 = progress", "potential = progress: reads progress, which a potential cannot read"),
    ("term far: 1 constant = min(landmark_pos, N)", "term far = min(landmark_pos, N): min(..., N): its argument "
     "has dims (L, xy)"),
    ("term wide: 1 constant = norm(landmark_pos, xy)", "term wide = norm(landmark_pos, xy): its value has dims (L)"),
    ("term col: 1 constant = obs[12]", "term col = obs[12]: obs[12] is outside the observation's 12 columns"),
    ("term who: 1 constant = goal_pos", "term who = goal_pos: unknown name goal_pos"),
    ("term coverage: 1 constant = env_reward", None),  # named like a metric: renamed, not refused
])
def test_an_expression_that_does_not_check_is_named(line: str, named: str | None) -> None:
    if named is None:
        assert design_of(render_text(line, SPREAD)).slots[0].name == "coverage_1"
        return
    with pytest.raises(ExpressionError) as raised:
        render_text(f"term ok: 1 constant = env_reward\n{line}", SPREAD)
    assert str(raised.value).startswith(named)


def test_a_run_of_brackets_or_minus_signs_is_an_expression_error_not_a_recursion() -> None:
    """A debugger reply from SmolLM2 once nested so deep that the parser's recursion, not an
    ExpressionError, ended the benchmark; the depth is bounded, ordinary nesting still checks."""
    for expr in ("(" * 600 + "1" + ")" * 600, "-" * 1500 + "1"):
        with pytest.raises(ExpressionError, match="nested deeper than 40 levels"):
            render_text(f"term deep: 1 constant = {expr}", SPREAD)
    assert design_of(render_text("term ok: 1 constant = " + "(" * 20 + "env_reward" + ")" * 20, SPREAD))


def test_a_rendered_module_names_each_expressions_line_for_the_debugger() -> None:
    code = render_text(GOOD, SPREAD)
    lines = code.splitlines()
    near = next(i for i, ln in enumerate(lines, 1) if "# slot: term near" in ln)
    assert slot_at(code, f'File "candidate.py", line 3, in x\nFile "candidate.py", line {near}, in hybrid_reward') == "term near"
    design = design_of(code)
    assert [s.label for s in failing_slots(design, code, "enhance_observation: output contains NaN or inf")] == [
        "feature speed"]
    assert len(failing_slots(design, code, "no hint at all")) == 4
    fixed = repaired(design, "term near: 1 constant = -mean(norm(landmark_pos - own(agent_pos), xy), L)", SPREAD,
                     {"term near"}, code)
    assert fixed.code is not None and "-mean(norm(" in design_of(fixed.code).slot("term near").expr
    wrong = repaired(design, "term near: 1 constant = norm(agent_pos, xy)", SPREAD, {"term near"}, code)
    assert wrong.code is None and "term near = norm(agent_pos, xy): its value has dims (N)" in wrong.error
    elsewhere = repaired(design, "feature speed = obs[0]", SPREAD, {"term near"}, code)
    assert elsewhere.code is None and "replaces feature speed, not term near" in elsewhere.error
    same = design.slot("term near").line()
    assert repaired(design, same, SPREAD, {"term near"}, code).error == UNCHANGED  # the failing expression echoed
    edited = code.replace("dim=-1).min(dim=-1)", "dim=-1).min(dim=-3)", 1)  # code that left its design
    assert repaired(design, same, SPREAD, {"term near"}, edited).code == code  # rendered anew: a repair
    grammar = repair_grammar(SPREAD, [design.slot("term near")])
    assert grammar.startswith('root ::= ("term near: 1 constant = " reward-scalar)')


@pytest.mark.parametrize("env", [*MPE, PETTINGZOO])
def test_the_prompts_example_design_checks(env: str) -> None:
    task, _ = task_of(env)
    assert check_candidate(render_text(example_design(task), task), state_names(task)) == []


def llama_cpp_python(designs: list[str | list[str]]):
    """llama-cpp-python's server: it follows a `grammar` field (the probe's too)."""
    queue = iter(designs)

    def reply(request: dict) -> Reply:
        if request.get("grammar") == PROBE_GRAMMAR:
            return Reply(content="lero-42")
        if "grammar" in request:
            return Reply(content=next(queue))
        return Reply(content="Hello! How can I help?")

    return reply


def test_the_designer_sends_the_tasks_grammar_in_the_field_the_server_takes(openai_server) -> None:
    openai_server.script = llama_cpp_python([[GOOD, "term x: 1 constant = agent_pos"]])
    team = make_team(llm_config(openai_server, design="expression"))
    assert isinstance(team.designer, ExpressionDesigner)
    drafts = team.designer.design(SPREAD, 2, [], "")
    probe, request = openai_server.requests[0], openai_server.requests[1]
    assert probe["grammar"] == PROBE_GRAMMAR and request["grammar"] == design_grammar(SPREAD)
    assert request["n"] == 2 and "term task: 1 constant = env_reward" in request["messages"][-1]["content"]
    assert drafts[0].code is not None and drafts[0].origin == "designer:expression"
    assert check_candidate(drafts[0].code, state_names(SPREAD)) == []
    assert drafts[1].code is None and drafts[1].error.startswith("invalid expression: term x = agent_pos")


def test_a_server_that_ignores_the_grammar_gets_plain_requests_and_replies_are_still_checked(openai_server) -> None:
    openai_server.push("Hello there", "Hi", "sure", GOOD)  # the three probe forms, then the design
    [draft] = make_team(llm_config(openai_server, design="expression")).designer.design(SPREAD, 1, [], "")
    assert [("grammar" in r, "structured_outputs" in r, "guided_grammar" in r) for r in openai_server.requests] == [
        (True, False, False), (False, True, False), (False, False, True), (False, False, False)]
    assert draft.code is not None


def test_exploit_prompts_show_the_elites_expressions_with_their_statistics(openai_server) -> None:
    refined = GOOD.replace("term team: 0.5 ramp_down", "term team: 0.2 ramp_down")
    openai_server.script = llama_cpp_python([GOOD, refined])
    elite = Elite("0-1", render_text(GOOD, SPREAD), -20.5, {"coverage": 0.4}, {}, "near: mean -3.1 (dominant)")
    designer = make_team(llm_config(openai_server, design="expression")).designer
    assert designer.design(SPREAD, 1, [elite], "", exploit=1) == []  # the elite's own design again: dropped
    prompt = openai_server.requests[-1]["messages"][-1]["content"]
    assert "Refine design 0-1" in prompt and "near: mean -3.1 (dominant)" in prompt
    assert "## 0-1 (fitness -20.5, coverage 0.4)" in prompt
    assert "term near: 1 constant = -min(norm(landmark_pos - own(agent_pos), xy), L)" in prompt
    review = Review("revise", ["term team [drowning-weight]: too strong"], "VERDICT: revise\n- term team: too strong")
    revised = designer.revise(SPREAD, elite.code, review)
    assert "term team: too strong" in openai_server.requests[-1]["messages"][-1]["content"]
    assert revised.origin == "designer:expression-revise" and design_of(revised.code).slot("term team").weight == 0.2
    assert review_targets(SPREAD, elite.code) == ("term near", "term team", "potential", "feature speed")


def test_a_declared_pairing_gives_agent_i_its_own_entity() -> None:
    paired = replace(SPREAD, task_spec=replace(SPREAD.task_spec, pairings=(Pairing("landmark_pos", "agent i's own goal"),)))
    assert "own(landmark_pos)" not in task_inputs(SPREAD)  # L landmarks do not follow the agents by themselves
    assert task_inputs(paired)["own(landmark_pos)"].dims == ("xy",)
    assert '"own(landmark_pos)"' in design_grammar(paired)
    assert "- own(landmark_pos): agent i's own goal" in language_text(paired)
    code = render_text("term goal: 1 constant = -norm(own(landmark_pos) - own(agent_pos), xy)", paired)
    assert check_candidate(code, state_names(paired)) == []
    assert TaskSpec.from_dict(json.loads(json.dumps(asdict(paired.task_spec)))) == paired.task_spec


@pytest.mark.slow
def test_random_sentences_of_a_vmas_scenarios_grammar_check_and_render() -> None:
    task = problem(RunSpec(env="vmas:navigation"))
    sentences = Sentences(design_grammar(task), seed=3, depth=5)
    for _ in range(40):
        assert check_candidate(render_text(sentences.draw(), task), state_names(task)) == []
