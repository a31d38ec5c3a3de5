"""A structured critic's rejection needs evidence, through the whole graph (scripted server,
process sandbox, real tiny training).

SmolLM2-135M's critic answered `{"verdict": "reject", "points": []}` to 3 of 4 valid designs,
and those 3 were dropped untrained. Now such a verdict is `no judgement`: the candidate is
trained and report.json's `verdicts` counts it for the model. A rejection naming a target
of the design and a rubric item goes to a bounded revision.
"""

from __future__ import annotations

import json

import pytest

from lero.app.reports.run_report import write_report
from lero.graph.runner import start_run
from tests.agents.test_auto_design import OTHER, is_verdict, weak_model
from tests.agents.test_structured import GOOD
from tests.graph.test_graph_e2e import RecordingUI, read, spec
from tests.support.openai_server import OpenAIServer

MODEL = "openai:test-model"


def critic_requests(server: OpenAIServer) -> list[dict]:
    return [r for r in server.requests if is_verdict((r.get("response_format") or {}).get("schema"))]


@pytest.mark.slow
def test_a_reject_without_points_does_not_drop_the_candidate_and_the_funnel_counts_it(tmp_path) -> None:
    with OpenAIServer() as server:
        server.script = weak_model([GOOD], ({"verdict": "reject", "points": []},))
        outcome = start_run(spec(tmp_path, llm=MODEL, base_url=server.base_url, population=1, design="structured"),
                            RecordingUI())
        asked = len(critic_requests(server))
    run = outcome.run_dir
    assert outcome.status == "completed" and asked == 1  # no revision was asked for
    assert read(run / "candidates" / "0-0" / "result.json")["status"] == "ok"  # trained, not dropped
    report = write_report(run)
    assert report["verdicts"] == {MODEL: {"accept": 0, "revise": 0, "reject": 0, "no judgement": 1}}
    markdown = (run / "report.md").read_text()
    assert "## Critic verdicts" in markdown and f"| `{MODEL}` | 0 | 0 | 0 | 1 |" in markdown
    review_md = (run / "candidates" / "0-0" / "review.md").read_text()
    assert ": no judgement" in review_md and "the critic said reject without evidence" in review_md


@pytest.mark.slow
def test_a_reject_with_points_is_revised_and_the_revision_reviewed(tmp_path) -> None:
    point = {"target": "nearest_landmark", "rubric_item": "constant-feature", "why": "it is the same for everyone"}
    with OpenAIServer() as server:
        server.script = weak_model([GOOD, OTHER], ({"verdict": "reject", "points": [point]},))
        outcome = start_run(spec(tmp_path, llm=MODEL, base_url=server.base_url, population=1, design="structured"),
                            RecordingUI())
        critics = critic_requests(server)
        revise = [r for r in server.requests if "it is the same for everyone" in r["messages"][-1]["content"]]
    run = outcome.run_dir
    assert outcome.status == "completed" and len(critics) == 2 and len(revise) == 1
    assert json.dumps(OTHER) in critics[1]["messages"][-1]["content"]  # the critic judged the revision
    assert read(run / "candidates" / "0-0" / "result.json")["status"] == "ok"
    report = write_report(run)
    assert report["verdicts"] == {MODEL: {"accept": 1, "revise": 0, "reject": 1, "no judgement": 0}}
    assert "nearest_landmark [constant-feature]: it is the same for everyone" in (
        run / "candidates" / "0-0" / "review.md").read_text()
