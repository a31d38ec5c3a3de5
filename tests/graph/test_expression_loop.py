"""Expression design through the whole graph (scripted llama-cpp-python-like server, process
sandbox, real tiny training): the debugger's replacement expression is checked, rendered,
gated and validated again, and the repaired design trains."""

from __future__ import annotations

import json

import pytest

from lero.agents.expression.expression_design import design_of
from lero.agents.grammar_form import PROBE_GRAMMAR
from lero.agents.probe import PROBE_SCHEMA
from lero.graph.runner import start_run
from tests.agents.test_auto_design import is_verdict, weak_model
from tests.agents.test_structured import GOOD
from tests.graph.test_graph_e2e import RecordingUI, events, read, spec
from tests.support.openai_server import OpenAIServer, Reply

BROKEN = "term near: 1 constant = env_reward / (obs[0] - obs[0])\nfeature speed = norm(obs_self_vel, xy)\n"  # 0/0
REPAIR = "term near: 1 constant = env_reward / (1 + norm(obs_self_vel, xy))"


def server_script(debugger_replies: list[str], design: str = BROKEN):
    """The critic accepts, the designer answers DESIGN, the debugger DEBUGGER_REPLIES in turn."""
    replies = iter(debugger_replies)

    def reply(request: dict) -> Reply:
        if request.get("grammar") == PROBE_GRAMMAR:
            return Reply(content="lero-07")
        if is_verdict((request.get("response_format") or {}).get("schema")):
            return Reply(content=json.dumps({"verdict": "accept", "points": []}))
        if (request.get("response_format") or {}).get("type") == "json_schema":
            return Reply(content='{"answer": "yes"}')  # the structured-output probe
        if "the debugger" in request["messages"][0]["content"]:
            return Reply(content=next(replies))
        return Reply(content=design)

    return reply


@pytest.mark.slow
def test_the_debuggers_replacement_expression_is_checked_and_validated(tmp_path) -> None:
    with OpenAIServer() as server:
        server.script = server_script(["term near: 1 constant = agent_pos", REPAIR])  # first: does not check
        run_spec = spec(tmp_path, llm="openai:test-model", base_url=server.base_url, population=1,
                        design="expression", debug_attempts=1)
        outcome = start_run(run_spec, RecordingUI())
        debugger = [r for r in server.requests if "the debugger" in r["messages"][0]["content"]]
    run = outcome.run_dir
    assert outcome.status == "completed"
    task_grammar = debugger[0]["grammar"]
    assert task_grammar.startswith('root ::= ("term near: 1 constant = " reward-scalar)')  # the failing slot alone
    assert "env_reward / (obs[0] - obs[0])" in debugger[0]["messages"][-1]["content"]
    assert "NaN or inf" in debugger[0]["messages"][-1]["content"]
    assert len(debugger) == 2 and "its value has dims (N, xy)" in debugger[1]["messages"][-1]["content"]  # shown back
    validations = [e["status"] for e in events(run) if e["event"] == "job_finished" and e["kind"] == "validate"]
    assert validations[0] != "ok" and validations[-1] == "ok" and len(validations) == 2
    code = (run / "candidates" / "0-0" / "candidate.py").read_text()
    assert design_of(code).slot("term near").expr == REPAIR.split(" = ", 1)[1]
    assert design_of(code).slot("feature speed").expr == "norm(obs_self_vel, xy)"  # the rest kept
    assert read(run / "candidates" / "0-0" / "result.json")["status"] == "ok"
    assert read(run / "report.json")["design"] == {"0-0": "expression"}


@pytest.mark.slow
def test_auto_design_tries_an_expression_draft_first_where_the_server_takes_a_grammar(tmp_path) -> None:
    """The model's code stays invalid (as in tests/agents/test_auto_design.py); this server
    follows a grammar, so the slot's rendered draft is an expression design, which trains."""
    weak = weak_model([GOOD])

    def reply(request: dict) -> Reply:
        if request.get("grammar") == PROBE_GRAMMAR:
            return Reply(content="lero-07")
        if "grammar" in request:
            return Reply(content=REPAIR + "\n")
        return weak(request)

    with OpenAIServer() as server:
        server.script = reply
        outcome = start_run(spec(tmp_path, llm="openai:test-model", base_url=server.base_url, population=1),
                            RecordingUI())
        schema_requests = [r for r in server.requests if (r.get("response_format") or {}).get("schema") not in
                           (None, PROBE_SCHEMA) and not is_verdict(r["response_format"]["schema"])]
    run = outcome.run_dir
    assert outcome.status == "completed" and schema_requests == []  # no structured draft was asked for
    assert read(run / "report.json")["design"] == {"0-0": "expression"}
    assert read(run / "candidates" / "0-0" / "result.json")["status"] == "ok"
