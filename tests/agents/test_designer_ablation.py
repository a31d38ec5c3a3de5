"""benchmarks.designer_ablation on a sparse task: every arm's `lero run` gets the task and its
env arguments, the run ids name it, and the JSON and the table say which fitness the runs
compared, as each run's spec.json says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import designer_ablation
from lero.graph.configuration import RunSpec
from tests.agents.test_auto_design import weak_model
from tests.agents.test_structured import GOOD
from tests.support.openai_server import OpenAIServer

TINY = ["--designer-seeds", "1", "--generations", "1", "--population", "1", "--steps", "1000", "--sandbox", "process"]


@pytest.mark.slow
def test_both_arms_run_on_sparse_simple_spread_and_compare_its_success_metric(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ablation.json"
    with OpenAIServer() as server:  # the model arm: structured designs from a scripted server
        server.script = weak_model([GOOD] * 8)
        designer_ablation.main(["--env-arg", "reward=sparse", "--arm", f"test-model={server.base_url}", *TINY,
                                "--out", str(out)])  # fmt: skip
    result = json.loads(out.read_text())
    assert (result["env"], result["env_args"], result["fitness"]) == ("simple_spread", {"reward": "sparse"}, "success (coverage)")
    runs = {r["arm"]: r for r in result["runs"]}
    assert {arm: r["run_id"] for arm, r in runs.items()} == {"random": "simple_spread-reward.sparse-random-0",
                                                             "test-model": "simple_spread-reward.sparse-test-model-0"}
    for run in runs.values():
        assert run["status"] == "completed" and run["fitness"] == {"fitness": "success", "metric": "coverage"}
        assert 0.0 <= run["best"] <= 1.0  # a coverage rate, not a (negative) return
    assert (runs["random"]["design"], runs["test-model"]["design"]) == ({"0-0": "offline"}, {"0-0": "structured"})
    assert set(result["arms"]) == {"random", "test-model"}
    printed = capsys.readouterr().out
    assert 'Task `simple_spread` {"reward": "sparse"}; fitness: success (coverage).' in printed


def test_the_fitness_is_read_from_the_runs_spec(tmp_path: Path) -> None:
    cases = {"dense": (RunSpec(env="simple_spread"), {"fitness": "final", "metric": "return"}),
             "navigation": (RunSpec(env="vmas:navigation", env_kwargs={"n_agents": 3, "pos_shaping_factor": 0}),
                            {"fitness": "success", "metric": "success"})}  # fmt: skip
    for name, (spec, selected) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(spec.model_dump_json())
        assert designer_ablation.selection(path) == selected, name


def test_run_ids_name_the_task_and_one_lero_would_refuse_is_a_usage_error(capsys) -> None:
    parser = designer_ablation.build_parser()
    args = parser.parse_args(["--env", "vmas:navigation", "--env-arg", "n_agents=3", "--env-arg", "pos_shaping_factor=0"])
    assert designer_ablation.run_id_of("gemma3-270m", 4, args) == "vmas-navigation-n_agents.3-pos_shaping_factor.0-gemma3-270m-4"
    with pytest.raises(SystemExit) as exit_:
        designer_ablation.main(["--env-arg", "reward=sparse", "--arm", f"{'m' * 60}=http://127.0.0.1:1/v1"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "must be 1-64 characters" in err and "shorter --arm names" in err


@pytest.mark.slow
def test_a_work_dir_keeps_the_runs_so_a_second_sitting_trains_nothing_again(tmp_path: Path, monkeypatch) -> None:
    """The random arm's tiny run, twice with one --work-dir: the second sitting reads the
    completed run (no `lero` started) and reports the same numbers; a run folder without a
    completed report is resumed, not started again."""
    work, first, second = tmp_path / "work", tmp_path / "first.json", tmp_path / "second.json"
    designer_ablation.main([*TINY, "--work-dir", str(work), "--out", str(first)])
    started: list[list[str]] = []
    real_run = designer_ablation.subprocess.run

    def watched(command, **kwargs):
        started.append(command)
        return real_run(command, **kwargs) if command == ["uptime"] else real_run(["true"], **kwargs)

    monkeypatch.setattr(designer_ablation.subprocess, "run", watched)
    designer_ablation.main([*TINY, "--work-dir", str(work), "--out", str(second)])
    assert [c for c in started if c != ["uptime"]] == []  # nothing trained again
    (before,), (after,) = (json.loads(path.read_text())["runs"] for path in (first, second))
    assert after["reused"] and not before["reused"] and after["status"] == "completed"
    assert {k: after[k] for k in ("run_id", "best", "baseline", "generations")} == \
        {k: before[k] for k in ("run_id", "best", "baseline", "generations")}  # fmt: skip
    report = work / "runs" / before["run_id"] / "report.json"
    report.write_text(json.dumps({**json.loads(report.read_text()), "status": "stopped"}))
    designer_ablation.main([*TINY, "--work-dir", str(work), "--out", str(second)])
    resumed = [c for c in started if c != ["uptime"]]
    assert len(resumed) == 1 and resumed[0][3:6] == ["resume", before["run_id"], "--llm"]


def test_every_arms_run_gets_the_same_max_parallel_and_the_json_keeps_it(tmp_path: Path, monkeypatch) -> None:
    started: list[list[str]] = []
    real_run = designer_ablation.subprocess.run

    def watched(command, **kwargs):
        started.append(command)
        return real_run(command if command == ["uptime"] else ["true"], **kwargs)

    monkeypatch.setattr(designer_ablation.subprocess, "run", watched)
    out = tmp_path / "ablation.json"
    designer_ablation.main([*TINY, "--arm", "m=http://127.0.0.1:1/v1", "--max-parallel", "2",
                            "--work-dir", str(tmp_path), "--out", str(out)])  # fmt: skip
    runs = [c for c in started if c != ["uptime"]]
    assert len(runs) == 2 and all(c[c.index("--max-parallel") + 1] == "2" for c in runs)
    result = json.loads(out.read_text())  # runs that wrote no report are counted, not a crash
    assert result["budget"]["max_parallel"] == 2 and [r["status"] for r in result["runs"]] == ["no report (exit 0)"] * 2
