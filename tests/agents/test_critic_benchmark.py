"""The critic benchmark's labelled set and its scoring (`benchmarks.critic_precision`), against
a scripted server; the real models' numbers are the benchmark's (docs/results.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import critic_precision
from benchmarks.critic_precision import STATIC, load_set
from lero.agents.critic import Critic
from lero.agents.evidence import rubric_items
from lero.agents.expression.roles import design_lines
from lero.agents.llm import PROBE_SCHEMA
from tests.agents.test_auto_design import is_verdict
from tests.support.openai_server import OpenAIServer, Reply

MODEL = "test-model"


@pytest.fixture(scope="module")
def items():
    return load_set()


def test_the_set_passes_the_gate_and_plants_every_rubric_item(items) -> None:
    """Each design is one the critic would get (it passes the static rules); every rubric item
    is planted, in an expression design where the language can write it, and sound designs
    outnumber no single flaw."""
    assert len({i.id for i in items}) == len(items)
    assert all(Critic(None).review(i.task, i.code).verdict == "accept" for i in items)
    planted = [i.flaw for i in items if i.flaw]
    assert set(planted) == set(rubric_items())
    expression_flaws = {i.flaw for i in items if i.flaw and design_lines(i.code) is not None}
    assert expression_flaws == set(rubric_items()) - {"unobservable-feature"}
    assert sum(i.flaw is None for i in items) >= max(planted.count(f) for f in planted)


def test_a_design_whose_target_is_not_in_it_is_named(tmp_path: Path) -> None:
    raw = json.loads(critic_precision.SET_PATH.read_text())
    bad = next(d for d in raw["designs"] if d["id"] == "expression-pays-distance")
    path = tmp_path / "set.json"
    path.write_text(json.dumps({"designs": [{**bad, "target": "term nowhere"}]}))
    with pytest.raises(ValueError, match="expression-pays-distance: target 'term nowhere'"):
        load_set(path)
    path.write_text(json.dumps({"designs": [{**bad, "flaw": "ugly"}]}))
    with pytest.raises(ValueError, match="expression-pays-distance: flaw 'ugly'"):
        load_set(path)


def critic_server(items, answer):
    """llama-cpp-python's forms (no json_schema; the probe answered); each verdict request is
    answered by `answer(item)` for the labelled design its prompt carries."""
    keys = [(design_lines(i.code) or i.code.strip(), i) for i in items]

    def reply(request: dict) -> Reply:
        form = request.get("response_format") or {}
        if form.get("type") == "json_schema":
            return Reply(status=500, error_message="'json_schema' is not supported")
        if form.get("schema") == PROBE_SCHEMA:
            return Reply(content='{"answer": "yes"}')
        assert is_verdict(form.get("schema"))
        prompt = request["messages"][-1]["content"]
        [item] = [i for key, i in keys if key in prompt]
        return Reply(content=json.dumps(answer(item)))

    return reply


def some_target(item) -> str:
    """A target that is in the design: its planted one, else its first slot or `env_reward`."""
    lines = design_lines(item.code)
    return item.target or ("term task" if lines else "env_reward")


def run(tmp_path: Path, items, answer, *flags: str) -> dict:
    with OpenAIServer() as server:
        server.script = critic_server(items, answer)
        out = tmp_path / "critic.json"
        critic_precision.main(["--arm", f"{MODEL}={server.base_url}", *flags, "--out", str(out)])
    result = json.loads(out.read_text())
    assert result["arms"][STATIC]["rejected"] == 0  # the static rules see none of the rubric's flaws
    assert result["arms"][STATIC]["recall"] == 0.0 and result["arms"][STATIC]["precision"] is None
    return result["arms"][MODEL]


def test_a_critic_that_rejects_exactly_the_flaws_scores_one(tmp_path: Path, items) -> None:
    def oracle(item) -> dict:
        if item.flaw is None:
            return {"verdict": "accept", "points": []}
        return {"verdict": "reject", "points": [{"target": item.target, "rubric_item": item.flaw, "why": "planted"}]}

    arm = run(tmp_path, items, oracle)
    flawed = sum(i.flaw is not None for i in items)
    assert (arm["precision"], arm["recall"], arm["named"], arm["no_judgement"]) == (1.0, 1.0, flawed, 0)
    assert arm["per_item"]["code-reads-all-agents"]["verdict"] == "reject"
    assert arm["decided_by"] == {"critic": len(items)}


def test_designs_the_models_window_cannot_hold_are_counted_as_the_gates_not_the_models(tmp_path: Path, items) -> None:
    """A window too small for some designs' critic prompts (here the code modules', even with
    the reply at its floor, `agents.fit.MIN_REPLY_TOKENS`): the gate decides those (accept, "no
    LLM review"), and the arm says its model never read them."""
    def oracle(item) -> dict:
        return {"verdict": "reject", "points": [{"target": item.target, "rubric_item": item.flaw, "why": "planted"}]} \
            if item.flaw else {"verdict": "accept", "points": []}  # fmt: skip

    arm = run(tmp_path, items, oracle, "--context-tokens", "1080")  # 952 for the prompt: between the two sizes
    unread = {k for k, v in arm["per_item"].items() if v["by"] == "gate"}
    assert unread == {i.id for i in items if not design_lines(i.code)}
    assert all(arm["per_item"][k]["verdict"] == "accept" and "no LLM review" in " ".join(arm["per_item"][k]["points"])
               for k in unread)  # fmt: skip
    assert arm["decided_by"] == {"critic": len(items) - len(unread), "gate": len(unread)}
    assert arm["recall"] == sum(i.flaw is not None and i.id not in unread for i in items) / arm["flawed"]


def test_bare_rejects_are_no_judgement_and_rejecting_everything_scores_the_base_rate(tmp_path: Path, items) -> None:
    flawed = sum(i.flaw is not None for i in items)
    bare = run(tmp_path, items, lambda item: {"verdict": "reject", "points": []})
    assert (bare["rejected"], bare["no_judgement"], bare["recall"], bare["precision"]) == (0, len(items), 0.0, None)

    def everything(item) -> dict:
        point = {"target": some_target(item), "rubric_item": "drowning-weight", "why": "too heavy"}
        return {"verdict": "revise", "points": [point]}

    arm = run(tmp_path, items, everything)
    assert (arm["rejected"], arm["true_rejections"], arm["false_rejections"]) == (len(items), flawed, len(items) - flawed)
    assert arm["precision"] == pytest.approx(flawed / len(items)) and arm["recall"] == 1.0
    assert arm["named"] == sum(i.flaw == "drowning-weight" for i in items)


@pytest.mark.slow
def test_the_evidence_rules_catch_every_planted_flaw_and_no_sound_design(tmp_path: Path, items) -> None:
    """The `evidence` arm: each design validated in the process sandbox, its rollout read by
    `agents.evidence_rules`. Every rule fires on its planted design, naming the planted item,
    and none fires on the sound ones (the static rules alone catch none)."""
    out = tmp_path / "critic.json"
    critic_precision.main(["--evidence", "--out", str(out)])
    arms = json.loads(out.read_text())["arms"]
    arm = arms[critic_precision.EVIDENCE]
    flawed = sum(i.flaw is not None for i in items)
    assert arms[STATIC]["recall"] == 0.0
    assert (arm["precision"], arm["recall"], arm["named"], arm["false_rejections"]) == (1.0, 1.0, flawed, 0)
    for item in items:
        verdict = arm["per_item"][item.id]
        if item.flaw is None:
            assert verdict["verdict"] == "accept" and verdict["points"] == [], item.id
        else:
            assert any(f"[{item.flaw}]" in line for line in verdict["points"]), (item.id, verdict["points"])
