"""The critic's rubric, measured, through the whole graph (scripted llama-cpp-python-like
server, process sandbox, real tiny training): a design whose validation rollout shows a
rubric point goes back to the designer with that point and its numbers, the revised design
trains, and the points reach report.json, report.md and review.md. And a non-finite term
is named by validation, so the debugger is shown that slot, not the first."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from lero.agents import LLMConfig
from lero.agents.expression.expression_design import design_of
from lero.agents.grammar_form import PROBE_GRAMMAR
from lero.app.reports.run_report import write_report
from lero.app.ui.app import create_app
from lero.graph.runner import start_run
from tests.graph.test_expression_loop import server_script
from tests.graph.test_graph_e2e import RecordingUI, events, read, spec
from tests.support.openai_server import OpenAIServer, Reply

MODEL = "openai:test-model"
PAYS_DISTANCE = ("term task: 1 constant = env_reward\n"
                 "term far: 0.5 constant = min(norm(landmark_pos - own(agent_pos), xy), L)\n"
                 "feature size = norm(obs_self_vel, xy)\n")
SOUND = ("term task: 1 constant = env_reward\n"
         "term near: 0.3 constant = -min(norm(landmark_pos - own(agent_pos), xy), L)\n"
         "feature size = norm(obs_self_vel, xy)\n")


def scripted(design: str, revised: str, debugger_replies: list[str] = ()):
    """`server_script`'s server whose designer answers REVISED to a measured revision."""
    base = server_script(list(debugger_replies), design)

    def reply(request: dict) -> Reply:
        if "Measured on the validation rollout" in request["messages"][-1]["content"]:
            return Reply(content=revised)
        return base(request)

    return reply


def designer_requests(server: OpenAIServer) -> list[dict]:
    return [r for r in server.requests if "the designer" in r["messages"][0]["content"] and r.get("grammar")
            and r["grammar"] != PROBE_GRAMMAR]


@pytest.mark.slow
def test_a_design_whose_rollout_breaks_the_rubric_is_revised_with_the_measured_point(tmp_path) -> None:
    with OpenAIServer() as server:
        server.script = scripted(PAYS_DISTANCE, SOUND)
        outcome = start_run(spec(tmp_path, llm=MODEL, base_url=server.base_url, population=1, design="expression"),
                            RecordingUI())
        revisions = [r for r in designer_requests(server)
                     if "Measured on the validation rollout" in r["messages"][-1]["content"]]
    run = outcome.run_dir
    assert outcome.status == "completed" and len(revisions) == 1
    asked = revisions[0]["messages"][-1]["content"]
    assert "term far [rewards-penalised]: its contribution correlates -0." in asked and "(threshold -0.25)" in asked
    code = (run / "candidates" / "0-0" / "candidate.py").read_text()
    assert design_of(code).slot("term near") is not None and design_of(code).slot("term far") is None
    assert read(run / "candidates" / "0-0" / "result.json")["status"] == "ok"  # the revision trained
    validations = [e["status"] for e in events(run) if e["event"] == "job_finished" and e["kind"] == "validate"]
    assert validations == ["ok", "ok"]  # the flagged design, then its revision
    measured = [e for e in events(run) if e["event"] == "measured"]
    assert [(e["candidate_id"], e["revised"], [p["rubric_item"] for p in e["points"]]) for e in measured] == [
        ("0-0", True, ["rewards-penalised"])]
    report = write_report(run)
    [point] = report["measured"]["0-0"]
    assert (point["target"], point["rubric_item"], point["revised"]) == ("term far", "rewards-penalised", True)
    assert "## Measured evidence" in (run / "report.md").read_text()
    review_md = (run / "candidates" / "0-0" / "review.md").read_text()
    assert "(evidence, code " in review_md and "term far [rewards-penalised]" in review_md
    app = create_app(str(run.parent), "t0ken", 8765, LLMConfig.from_spec("offline"))
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        page = client.get(f"/runs/{run.name}?token=t0ken").text
    app.state.workers.close()
    assert '<span class="measured">term far [rewards-penalised]: its contribution correlates' in page


BROKEN_SECOND = ("term task: 1 constant = env_reward\n"
                 "term near: 1 constant = env_reward / (obs[0] - obs[0])\n"  # 0/0: NaN, on no line of its own
                 "feature speed = norm(obs_self_vel, xy)\n")
REPAIR = "term near: 1 constant = env_reward / (1 + norm(obs_self_vel, xy))"


@pytest.mark.slow
def test_the_debugger_is_shown_the_non_finite_term_not_the_first(tmp_path) -> None:
    with OpenAIServer() as server:
        server.script = scripted(BROKEN_SECOND, BROKEN_SECOND, [REPAIR])
        outcome = start_run(spec(tmp_path, llm=MODEL, base_url=server.base_url, population=1, design="expression",
                                 debug_attempts=1), RecordingUI())
        debugger = [r for r in server.requests if "the debugger" in r["messages"][0]["content"]]
    run = outcome.run_dir
    assert outcome.status == "completed" and len(debugger) == 1
    assert debugger[0]["grammar"].startswith('root ::= ("term near: 1 constant = "')  # that slot alone
    asked = debugger[0]["messages"][-1]["content"]
    assert "component 'near' contains NaN or inf" in asked and "env_reward / (obs[0] - obs[0])" in asked
    code = (run / "candidates" / "0-0" / "candidate.py").read_text()
    assert design_of(code).slot("term near").expr == REPAIR.split(" = ", 1)[1]
    assert design_of(code).slot("term task").expr == "env_reward"  # the sound term kept
    assert read(run / "candidates" / "0-0" / "result.json")["status"] == "ok"
