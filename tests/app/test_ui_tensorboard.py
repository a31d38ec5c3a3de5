"""TensorBoard event files: written from a job's curves, read back with TensorBoard's own reader."""

from __future__ import annotations

import pytest

from lero.app.reports.tensorboard import scalar_tag, write_job_scalars

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")

CURVES = {
    "steps": [800, 1600, 2400],
    "return": [-30.0, -25.0, -20.0],
    "coverage": [0.0, 0.0, 0.1],
    "occupied": [0.5, 0.8, 1.2],
    "collisions": [2.0, 1.5, 1.0],
    "train_reward": [-40.0, -35.0, -30.0],
    "team_coverage": [-50.0, -45.0, -41.0],
    "collision": [-1.0, -0.5, float("nan")],  # a non-finite point is skipped, not written
}
METRICS = {"return": -19.5, "coverage": 0.125, "occupied": 1.25, "collisions": 0.75}


def read_scalars(log_dir) -> dict[str, list[tuple[int, float]]]:
    accumulator = event_accumulator.EventAccumulator(str(log_dir))
    accumulator.Reload()
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


def test_job_curves_become_scalars_per_metric_and_hrf_component(tmp_path):
    log_dir = write_job_scalars(tmp_path / "tb" / "0-1" / "seed-0", CURVES, METRICS)
    scalars = read_scalars(log_dir)
    assert set(scalars) == {
        "task/return", "task/coverage", "task/occupied", "task/collisions", "train/train_reward",
        "hrf/team_coverage", "hrf/collision",
        "eval/return", "eval/coverage", "eval/occupied", "eval/collisions",
    }
    assert scalars["task/return"] == [(800, -30.0), (1600, -25.0), (2400, -20.0)]
    assert scalars["hrf/team_coverage"][-1] == (2400, -41.0)
    assert scalars["hrf/collision"] == [(800, -1.0), (1600, -0.5)]
    assert scalars["eval/coverage"] == [(2400, 0.125)]


def test_rewriting_a_job_replaces_its_events_and_untrained_jobs_write_nothing(tmp_path):
    log_dir = tmp_path / "seed-0"
    write_job_scalars(log_dir, CURVES, METRICS)
    write_job_scalars(log_dir, CURVES, METRICS)  # a resumed run records the job again
    assert len(list(log_dir.glob("events.out.tfevents.*"))) == 1
    assert len(read_scalars(log_dir)["task/return"]) == 3
    assert write_job_scalars(tmp_path / "none", {}, {}) is None
    assert not (tmp_path / "none").exists()


def test_tags_group_task_metrics_training_reward_and_components():
    assert [scalar_tag(n, ("return", "coverage")) for n in ("return", "train_reward", "assigned")] == ["task/return", "train/train_reward", "hrf/assigned"]


def test_the_greedy_evaluation_curve_is_its_own_tag_against_its_own_steps(tmp_path):
    curves = {**CURVES, "greedy/steps": [1600, 2400], "greedy/return": [-22.0, -18.0], "greedy/coverage": [0.0, 0.25]}
    scalars = read_scalars(write_job_scalars(tmp_path / "seed-0", curves, METRICS))
    assert scalars["greedy/return"] == [(1600, -22.0), (2400, -18.0)]
    assert scalars["greedy/coverage"] == [(1600, 0.0), (2400, 0.25)]
    assert "hrf/greedy/return" not in scalars and "hrf/greedy/steps" not in scalars
