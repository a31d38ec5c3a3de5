"""`--design auto` in a real run (scripted server, process sandbox): code that stays invalid
after the debugger's bound, and a reply with no code at all, each get a structured draft,
which passes the gate and validation and trains; report.json and report.md say how each
candidate was designed."""

from __future__ import annotations

import json

import pytest

from lero.agents.probe import PROBE_SCHEMA
from lero.app.reports.run_report import write_report
from lero.graph.runner import start_run
from tests.agents.samples import GOOD_MODULE
from tests.agents.test_structured import GOOD
from tests.graph.test_graph_e2e import RecordingUI, events, read, spec
from tests.support.openai_server import OpenAIServer, Reply


def is_verdict(schema: dict | None) -> bool:
    """The critic's request: its schema asks for a verdict."""
    return "verdict" in (schema or {}).get("properties", {})


BROKEN = '''import torch

LANDMARKS = "landmark_positions"  # a state field the env does not have: a KeyError in validation


def hybrid_reward(ctx):
    near = ctx.state[LANDMARKS]
    return ctx.env_reward, {"near": ctx.env_reward}


def enhance_observation(obs):
    return obs
'''
STATIC = BROKEN.replace("ctx.state[LANDMARKS]", 'ctx.state["landmark_positions"]')  # the gate sees this one
OTHER = {**GOOD, "shaping": {"spread": {"weight": 0.3, "schedule": "ramp_up"}}}


def weak_model(designs: list[dict], verdicts: tuple[dict, ...] = ()):
    """A server with llama-cpp-python's forms and a weak model: code requests get code that
    fails validation (the designer one module and prose, the debugger the same module back);
    schema'd requests are honoured, the design schema with `designs` in turn, the critic's
    with `verdicts` (an accept once they run out)."""
    queue, verdict_queue = iter(designs), iter(verdicts)

    def reply(request: dict) -> Reply:
        form = request.get("response_format") or {}
        if form.get("type") == "json_schema":
            return Reply(status=500, error_message="'json_schema' is not supported")
        schema = form.get("schema")
        if schema == PROBE_SCHEMA:
            return Reply(content='{"answer": "yes"}')
        if is_verdict(schema):
            return Reply(content=json.dumps(next(verdict_queue, {"verdict": "accept", "points": []})))
        if schema is not None:
            return Reply(content=json.dumps(next(queue)))
        if int(request.get("n") or 1) > 1:  # the designer's explore request for both slots
            return Reply(content=[f"```python\n{BROKEN}```", f"```python\n{STATIC}```"])
        return Reply(content=f"```python\n{BROKEN if 'debugger' in request['messages'][0]['content'] else STATIC}```")

    return reply


@pytest.mark.slow
def test_auto_design_gives_invalid_code_slots_structured_drafts_that_train(tmp_path) -> None:
    with OpenAIServer() as server:
        server.script = weak_model([GOOD, OTHER])
        outcome = start_run(spec(tmp_path, llm="openai:test-model", base_url=server.base_url), RecordingUI())
        requests = list(server.requests)
    assert outcome.status == "completed"
    run = outcome.run_dir
    report = read(run / "report.json")
    assert report["design"] == {"0-0": "structured", "0-1": "structured"}
    for cid in ("0-0", "0-1"):
        assert read(run / "candidates" / cid / "result.json")["status"] == "ok"
    stages = [e["stage"] for e in events(run) if e["event"] == "candidate" and e["candidate_id"] == "0-0"]
    assert stages == ["review", "validate", "debug", "review", "validate", "ready"]  # bound 1, then structured
    roles = [r["messages"][0]["content"].split(".")[0] for r in requests]
    assert sum("debugger" in r for r in roles) == 1  # the debugger's one attempt, then the structured draft
    stages = [e["stage"] for e in events(run) if e["event"] == "candidate" and e["candidate_id"] == "0-1"]
    assert stages == ["review", "revise", "review", "review", "validate", "ready"]  # revised once, then structured
    write_report(run)  # what `lero run` writes at the end
    assert "| `0-1` | structured | ok |" in (run / "report.md").read_text()


@pytest.mark.slow
def test_a_reply_without_code_gets_its_structured_draft_at_once_and_code_mode_keeps_todays_drop(tmp_path) -> None:
    for design, mode, status in (("auto", "structured", "ok"), ("code", "code", "invalid")):
        with OpenAIServer() as server:
            server.script = lambda request: (Reply(content="I would reward covering landmarks.")
                                             if not request.get("response_format") else weak_model([GOOD])(request))
            outcome = start_run(spec(tmp_path / design, llm="openai:test-model", base_url=server.base_url,
                                     population=1, design=design), RecordingUI())
        result = read(outcome.run_dir / "candidates" / "0-0" / "result.json")
        assert (read(outcome.run_dir / "report.json")["design"]["0-0"], result["status"]) == (mode, status)


def test_the_design_flag_reaches_the_spec_and_the_agents_and_a_bad_mode_is_a_usage_error(capsys) -> None:
    from lero.app.cli.args import build_parser, resume_overrides, spec_fields
    from lero.graph.configuration import RunSpec, llm_settings
    from tests.support.cli import lero

    parser = build_parser()
    fields = spec_fields(parser.parse_args(["run", "--design", "structured", "--llm", "offline"]))
    spec = RunSpec.parse(fields)
    assert spec.design == "structured" and RunSpec().design == "auto"
    assert llm_settings(spec.model_dump())["design"] == "structured"  # what LLMConfig gets
    assert resume_overrides(parser.parse_args(["resume", "r1", "--design", "code"]))["design"] == "code"
    code, _, err = lero(["run", "--design", "clever", "--llm", "offline"], capsys)
    assert code == 2 and "invalid choice: 'clever'" in err and err.count("\n") == 1


@pytest.mark.slow
def test_code_the_llm_critic_rejects_gets_its_structured_draft(tmp_path) -> None:
    """The critic rejects the model's module with evidence (as SmolLM2's did, 2 of 12 slots of
    a default run), again after its one revision, and accepts the structured draft, which
    trains: the slot is not lost."""

    def reply(request: dict) -> Reply:
        if is_verdict((request.get("response_format") or {}).get("schema")):
            judged = request["messages"][-1]["content"]
            verdict = "accept" if "Design (JSON)" in judged else "reject"
            point = {"target": "hybrid_reward", "rubric_item": "rewards-penalised", "why": "it pays for collisions"}
            return Reply(content=json.dumps({"verdict": verdict, "points": [point]}))
        if not request.get("response_format"):
            return Reply(content=f"```python\n{GOOD_MODULE}```")
        return weak_model([GOOD])(request)

    with OpenAIServer() as server:
        server.script = reply
        outcome = start_run(spec(tmp_path, llm="openai:test-model", base_url=server.base_url, population=1),
                            RecordingUI())
    run = outcome.run_dir
    assert outcome.status == "completed"
    assert read(run / "report.json")["design"] == {"0-0": "structured"}
    assert read(run / "candidates" / "0-0" / "result.json")["status"] == "ok"
    stages = [(e["stage"], e["origin"]) for e in events(run) if e["event"] == "candidate" and e["candidate_id"] == "0-0"]
    assert stages[:4] == [("review", "designer:edit"), ("revise", "designer:edit"),  # the module, its revision,
                          ("review", "designer:revise"), ("review", "designer:structured")]  # then the draft
