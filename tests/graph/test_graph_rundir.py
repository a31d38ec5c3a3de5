"""The run directory: atomic JSON, append-only events, wall time summed over processes."""

import json

import pytest

from lero.graph.configuration import RunError, RunSpec
from lero.graph.rundir import RunDir


def _spec(tmp_path):
    return RunSpec(run_id="r1", runs_dir=str(tmp_path))


def test_create_writes_spec_and_state_and_refuses_reuse(tmp_path):
    rundir = RunDir.create(_spec(tmp_path))
    assert rundir.read_spec().run_id == "r1"
    assert rundir.read_state()["status"] == "running"
    with pytest.raises(RunError, match="already exists"):
        RunDir.create(_spec(tmp_path))
    with pytest.raises(RunError, match="no run 'r2'"):
        RunDir.open(tmp_path, "r2")


def test_events_are_appended_one_json_object_per_line(tmp_path):
    rundir = RunDir.create(_spec(tmp_path))
    rundir.append_event("job_started", job_id="j1", kind="train", candidate_id="0-0")
    rundir.append_event(
        "job_finished", job_id="j1", kind="train", candidate_id="0-0", status="ok", cached=False
    )
    lines = (rundir.path / "events.jsonl").read_text().splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["job_started", "job_finished"]
    assert all("ts" in json.loads(line) for line in lines)
    assert RunDir.open(tmp_path, "r1").read_events()[1]["cached"] is False


def test_state_merges_fields_and_wall_time_accumulates_across_openings(tmp_path):
    first = RunDir.create(_spec(tmp_path))
    first.update_state(generation=2)
    assert first.read_state()["generation"] == 2 and first.read_state()["status"] == "running"
    spent = first.update_state()["wall_s"]
    second = RunDir.open(tmp_path, "r1")
    assert second.wall_s() >= spent


def test_candidate_files_and_results(tmp_path):
    rundir = RunDir.create(_spec(tmp_path))
    rundir.write_candidate("0-1", "import torch\n", "# review\n")
    rundir.write_result("0-1", {"candidate_id": "0-1", "fitness": None})
    rundir.write_result("baseline", {"candidate_id": "baseline", "fitness": -3.0})
    folder = tmp_path / "r1" / "candidates" / "0-1"
    assert (folder / "candidate.py").read_text() == "import torch\n"
    assert json.loads((folder / "result.json").read_text())["fitness"] is None
    assert json.loads((tmp_path / "r1" / "baseline" / "result.json").read_text())["fitness"] == -3.0
