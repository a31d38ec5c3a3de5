"""`--fitness auc`: a candidate's fitness is its held-out return averaged over the learning
curve's checkpoints and its final policy, each measured by a trusted evaluate job on the
selection episodes."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from lero.app.cli.run_hooks import app_front
from lero.graph.configuration import RunSpec
from lero.graph.nodes.curve_fitness import AUC_POINTS
from lero.graph.runner import start_run
from lero.sandbox import Job, get_sandbox
from tests.graph.test_resume import QuietUI

HPARAMS = {"n_envs": 32, "rollout_len": 25, "epochs": 1}  # one iteration = 800 env steps


def test_auc_fitness_is_the_mean_held_out_return_over_the_curves_checkpoints(tmp_path: Path) -> None:
    spec = RunSpec(generations=1, population=1, steps=3200, seeds=1, eval_episodes=8, hparams=HPARAMS,
                   sandbox="process", fitness="auc", run_id="auc", runs_dir=str(tmp_path / "runs"))  # fmt: skip
    outcome = start_run(spec, QuietUI(), front=app_front())
    assert outcome.status == "completed"
    run_dir = outcome.run_dir
    records = [json.loads(p.read_text()) for p in sorted(run_dir.rglob("seed-0.json"))]
    assert len(records) == 2  # the baseline and the candidate, both scored alike
    sandbox = get_sandbox("process", cache_dir=tmp_path / "fresh", work_dir=run_dir / "cache" / "jobs")
    try:
        for record in records:
            curve = {int(step): value for step, value in record["curve_fitness"].items()}
            assert sorted(curve) == [800, 1600, 2400] and len(curve) + 1 == AUC_POINTS  # 3200 // 4 apart
            assert record["final_fitness"] == record["metrics"]["return"]
            assert record["fitness"] == pytest.approx(statistics.fmean([*curve.values(), record["final_fitness"]]))
            cid = record["candidate_id"]
            folder = run_dir / ("baseline" if cid == "baseline" else f"candidates/{cid}")
            code = json.loads((folder / "result.json").read_text())["code"]  # the module trained (None: native)
            again = sandbox.run_job(Job(kind="evaluate", code=code, env={"name": "simple_spread",
                                    **spec.env_kwargs}, algo="mappo", steps=3200, seed=0, eval_episodes=8,
                                    hparams=HPARAMS, policy_dir=str(Path(record["policy_dir"]) / "step-1600")))  # fmt: skip
            assert again.status == "ok" and not again.cached and again.fitness == curve[1600]
    finally:
        sandbox.close()
    result = json.loads((run_dir / "candidates" / "0-0" / "result.json").read_text())
    assert result["fitness"] == pytest.approx(records[1]["fitness"]) != records[1]["final_fitness"]
    assert "fitness: auc" in (run_dir / "report.md").read_text()


def test_auc_with_halving_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys) -> None:
    from tests.support.cli import lero

    monkeypatch.chdir(tmp_path)
    code, _, err = lero(["run", "--sandbox", "process", "--fitness", "auc", "--schedule", "halving"], capsys)
    assert code == 2 and err.count("\n") == 1 and "fitness 'auc' needs schedule 'full'" in err, err
    code, _, err = lero(["run", "--sandbox", "process", "--fitness", "best"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert not (tmp_path / "runs").exists()
