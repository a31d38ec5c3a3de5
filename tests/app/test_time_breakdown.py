"""Where a run's time went: job timings and node times reach report.json and report.md."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from lero.agents import LLMConfig
from lero.app.reports.run_report import write_report
from lero.app.ui.app import create_app


@pytest.mark.slow
@pytest.mark.docker
def test_a_tiny_docker_run_reports_where_its_time_went(tiny_docker_run):
    outcome = tiny_docker_run
    assert outcome.status == "completed"
    report = json.loads((outcome.run_dir / "report.json").read_text())
    jobs, loop = report["time"]["jobs"], report["time"]["loop"]
    assert set(jobs) == {"validate", "train", "evaluate"}
    for kind, row in jobs.items():
        assert row["jobs"] >= 1 and row["cached"] == 0, kind
        assert row["run_s"] > 0 and row["start_s"] >= 0 and row["wait_s"] >= 0, kind
        parts = row["wait_s"] + row["start_s"] + row["run_s"]
        assert parts == pytest.approx(row["elapsed_s"], abs=1e-6), kind
    # baseline + two candidates, one seed each: three train and three evaluate jobs
    assert jobs["train"]["jobs"] == jobs["evaluate"]["jobs"] == 3
    assert jobs["train"]["sandboxes"] == jobs["evaluate"]["sandboxes"] == 3  # one seed: no groups
    assert {"setup", "design", "validate", "select", "reflect"} <= set(loop)
    assert "train" not in loop and all(seconds >= 0 for seconds in loop.values())
    write_report(outcome.run_dir)
    markdown = (outcome.run_dir / "report.md").read_text()
    assert "## Where the time went" in markdown
    assert "| train | 3 (0) | 3 |" in markdown and "| evaluate | 3 (0) | 3 |" in markdown
    app = create_app(str(outcome.run_dir.parent), "t0ken", 8765, LLMConfig.from_spec("offline"))
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        page = client.get("/runs/t?token=t0ken").text
    app.state.workers.close()
    assert "Where the time went" in page and "<td>evaluate</td>" in page and "loop: design" in page
