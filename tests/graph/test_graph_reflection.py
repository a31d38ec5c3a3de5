"""Reflection text: Eureka-style snapshots and max/mean/min, tips read off the numbers."""

from dataclasses import replace

from lero.graph.reflection import candidate_feedback, generation_reflection, merge_feedback
from lero.training.envs.registry import task_spec
from lero.training.envs.task import Metric

TASK = task_spec("simple_spread")  # return, coverage (its success measure), occupied, collisions


def _record(candidate_id, fitness, stats):
    return {
        "candidate_id": candidate_id,
        "generation": 0,
        "status": "ok",
        "fitness": fitness,
        "fitness_std": 0.5,
        "eval": {"return": fitness, "coverage": 0.02},
        "per_seed": [{"status": "ok"}],
        "reflection_stats": stats,
    }


def _stats(snapshots):
    return {
        "snapshots": snapshots,
        "max": max(snapshots),
        "mean": sum(snapshots) / len(snapshots),
        "min": min(snapshots),
    }


def test_candidate_feedback_lists_snapshots_and_summary_per_component():
    record = _record(
        "0-1", -12.5, {"dist": _stats([-3.0, -2.0, -1.0]), "return": _stats([-30.0, -20.0])}
    )
    text = candidate_feedback(record, TASK)
    assert "Candidate 0-1" in text and "-12.5" in text
    assert "dist: [-3, -2, -1]  max -1  mean -2  min -3" in text
    assert "return: [-30, -20]" in text


def test_tips_flag_flat_and_dominant_components_and_missing_coverage():
    stats = {
        "flat": _stats([5.0, 5.0, 5.0]),
        "huge": _stats([100.0, 400.0]),
        "tiny": _stats([0.1, 0.5]),
        "coverage": _stats([0.0, 0.01]),
    }
    text = candidate_feedback(_record("0-0", -10.0, stats), TASK)
    assert "`flat` hardly changes" in text
    assert "`huge` is over 10x larger than `tiny`" in text
    assert "`coverage` (the task's success measure) stays near zero" in text
    custom = replace(TASK, metrics=(Metric("return", True, ""), Metric("episode_length", False, "")),
                     success_metric="return")
    assert "stays near zero" not in candidate_feedback(_record("0-0", -10.0, stats), custom)


def test_generation_text_has_baseline_others_failures_and_feedback_but_not_the_elites():
    elite = {**_record("0-0", -9.0, {}), "reflection": "ELITE TEXT"}
    other = _record("0-1", -20.0, {})
    baseline = {"candidate_id": "baseline", "fitness": -15.0, "eval": {"return": -15.0}}
    dropped = [
        {
            "candidate_id": "0-2",
            "status": "code_error",
            "error": "ZeroDivisionError in hybrid_reward",
        }
    ]
    text = generation_reflection(0, [elite, other], [elite], baseline, dropped, TASK)
    assert "Baseline" in text and "-15" in text
    assert "ELITE TEXT" not in text and "Candidate 0-0" not in text and "Candidate 0-1" in text
    assert "0-2: code_error: ZeroDivisionError" in text
    merged = merge_feedback(text, ["reward spreading more", "fewer collisions"])
    assert merged.startswith(text) and merged.endswith("- reward spreading more\n- fewer collisions")
    assert merge_feedback(text, ["  "]) == text
