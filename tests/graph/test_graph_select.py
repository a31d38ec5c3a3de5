"""Aggregation over seeds and elite ranking (fitness first, the success metric breaks ties)."""

import math
from dataclasses import replace

from lero.graph.nodes.train import aggregate, rank_key
from lero.training.envs.task import Metric
from tests.graph.test_graph_reflection import TASK


def seed_result(seed, status="ok", ret=-10.0, coverage=0.0):
    metrics = {"return": ret, "coverage": coverage, "occupied": 1.0, "collisions": 0.5} if status == "ok" else {}
    return {"seed": seed, "status": status, "fitness": ret if status == "ok" else None, "metrics": metrics,
            "curves": {"steps": [seed]}, "reflection_stats": {"return": {"max": seed}}}


def test_fitness_is_the_mean_over_seeds_with_its_spread_and_seed_0_curves():
    record = aggregate("0-1", 0, "code", [seed_result(1, ret=-12.0), seed_result(0, ret=-8.0)])
    assert record["status"] == "ok" and record["fitness"] == -10.0
    assert math.isclose(record["fitness_std"], 2.0) and record["eval"]["return"] == -10.0
    assert record["curves"] == {"steps": [0]} and [r["seed"] for r in record["per_seed"]] == [0, 1]


def test_a_failed_seed_leaves_no_fitness_and_names_the_failure():
    record = aggregate("0-2", 0, "code", [seed_result(0), seed_result(1, status="timeout")])
    assert record["status"] == "timeout" and record["fitness"] is None and record["eval"] == {}


def test_ties_in_fitness_are_broken_by_the_success_metric():
    low = aggregate("a", 0, "x", [seed_result(0, ret=-5.0, coverage=0.1)])
    high = aggregate("b", 0, "y", [seed_result(0, ret=-5.0, coverage=0.4)])
    best = aggregate("c", 0, "z", [seed_result(0, ret=-4.0, coverage=0.0)])
    ranked = sorted([low, high, best], key=rank_key(TASK), reverse=True)
    assert [r["candidate_id"] for r in ranked] == ["c", "b", "a"]
    lower_is_better = replace(TASK, metrics=(Metric("return", True, ""), Metric("coverage", False, "")))
    ranked = sorted([low, high, best], key=rank_key(lower_is_better), reverse=True)
    assert [r["candidate_id"] for r in ranked] == ["c", "a", "b"]
