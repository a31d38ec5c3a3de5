"""`--schedule halving`: rungs of 1/4, 1/2 and the whole budget, the best half of each rung
going on from its learner state, elites only from the whole budget, the steps accounted."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from lero.app.reports.run_report import write_report
from lero.graph.configuration import RunSpec
from lero.graph.reflection import candidate_feedback
from lero.graph.runner import start_run
from lero.graph.schedule import planned, promoted, rung_end
from lero.training import task_spec
from tests.graph.test_graph_e2e import RecordingUI, events, read, spec

STEPS = 6400  # 800-step iterations (32 envs x 25): rungs end at 1600, 3200, 6400


def seed_result(cid: str, seed: int, fitness: float | None, status: str = "ok") -> dict:
    return {"candidate_id": cid, "seed": seed, "fitness": fitness, "status": status}


def test_the_best_half_goes_on_and_failures_never_do() -> None:
    at_rung = {
        "0-0": [seed_result("0-0", 0, -5.0), seed_result("0-0", 1, -7.0)],  # mean -6
        "0-1": [seed_result("0-1", 0, -1.0), seed_result("0-1", 1, None, "timeout")],
        "0-2": [seed_result("0-2", 0, -6.0), seed_result("0-2", 1, -6.0)],  # ties -6: the lower id first
        "0-3": [seed_result("0-3", 0, -2.0)],  # a seed missing
        "0-4": [seed_result("0-4", 0, -9.0), seed_result("0-4", 1, -9.0)],
    }
    assert promoted(at_rung, seeds=2) == ["0-0", "0-2", "0-4"]  # ceil(5 / 2) of the three complete ones
    assert promoted({k: at_rung[k] for k in ("0-0", "0-2")}, seeds=2) == ["0-0"]
    assert promoted({"0-1": at_rung["0-1"]}, seeds=2) == []


@pytest.mark.parametrize(("population", "jobs", "share"), [(4, 7, 0.5), (8, 14, 0.5), (3, 6, 7 / 12), (1, 3, 1.0)])
def test_the_plan_of_a_generation(population: int, jobs: int, share: float) -> None:
    assert planned(300_000, "full", population) == (population, population * 300_000)
    halving_jobs, halving_steps = planned(300_000, "halving", population)
    assert halving_jobs == jobs and halving_steps == pytest.approx(share * population * 300_000)
    spec_full = RunSpec(population=population, generations=3, seeds=2)
    spec_halving = RunSpec(population=population, generations=3, seeds=2, schedule="halving")
    assert spec_full.budget() == ((3 * population + 1) * 2, (3 * population + 1) * 2 * 300_000)
    assert spec_halving.budget() == ((3 * jobs + 1) * 2, (3 * halving_steps + 300_000) * 2)


@pytest.mark.slow
def test_a_halving_run_trains_rungs_and_keeps_only_whole_budget_elites(tmp_path: Path) -> None:
    run_spec = spec(tmp_path, schedule="halving", population=4, seeds=2, steps=STEPS, generations=1)
    outcome = start_run(run_spec, RecordingUI())
    assert outcome.status == "completed"
    run_dir = tmp_path / "runs" / "t"
    log = events(run_dir)
    trained = [e for e in log if e["event"] == "train_finished" and e["candidate_id"] != "baseline"]
    rungs = [e for e in log if e["event"] == "rung_finished"]
    assert [(e["rung"], len(e["trained"]), len(e["promoted"])) for e in rungs] == [(0, 4, 2), (1, 2, 1), (2, 1, 0)]
    for rung in rungs[:2]:  # recomputed from the train events: the best half by mean fitness over seeds
        means = {cid: statistics.fmean(e["fitness"] for e in trained if e["candidate_id"] == cid and e["rung"] == rung["rung"])
                 for cid in rung["trained"]}  # fmt: skip
        best_half = sorted(means, key=lambda c: (-means[c], c))[: len(means) // 2]
        assert rung["promoted"] == sorted(best_half)  # the event lists them by id
    assert sorted(rungs[1]["trained"]) == sorted(rungs[0]["promoted"]) and rungs[2]["trained"] == rungs[1]["promoted"]
    winner = rungs[2]["trained"][0]

    results = {p.name: read(p / "result.json") for p in (run_dir / "candidates").iterdir()}
    for cid, record in results.items():
        reached = 2 if cid == winner else 1 if cid in rungs[1]["trained"] else 0
        assert record["rung"] == reached and record["trained_steps"] == rung_end(STEPS, "halving", reached)
        assert record["stopped_at"] == (None if cid == winner else rung_end(STEPS, "halving", reached))
        steps = record["curves"]["steps"]  # one curve over the rungs: each rung continued the last
        assert steps == sorted(set(steps)) and steps[-1] == record["trained_steps"]
    report = read(run_dir / "report.json")
    assert report["best"]["candidate_id"] == winner  # a stopped candidate never is, whatever its fitness
    per_seed = STEPS + 4 * 1600 + 2 * 1600 + 1 * 3200  # baseline, then the rungs' new steps
    assert report["env_steps"] == read(run_dir / "state.json")["env_steps"] == 2 * per_seed
    assert report["schedule"] == {"name": "halving", "full_env_steps": 2 * 5 * STEPS, "rungs": [
        {"rung": 0, "steps": 1600, "candidates": 4}, {"rung": 1, "steps": 3200, "candidates": 2},
        {"rung": 2, "steps": 6400, "candidates": 1}]}  # fmt: skip
    markdown = (run_dir / "report.md").read_text() if write_report(run_dir) else ""
    assert "successive halving, rungs to 1,600 / 3,200 / 6,400 env steps, reached by 4 / 2 / 1" in markdown
    assert f"env steps spent: {2 * per_seed} = 60% of the 64,000" in markdown
    assert "1,600 (stopped by halving)" in markdown
    stopped = next(r for r in results.values() if r["stopped_at"] == 1600)
    feedback = candidate_feedback(stopped, task_spec("simple_spread"))
    assert "Successive halving stopped it after 1600 env steps" in feedback
