"""The study's aggregate metrics, each recomputed here by a different route: IQM by scipy's
trimmed mean, probability of improvement by counting pairs, the bootstrap CI by enumerating
every resample (3 seeds: 27, or 27 x 27 stratified over two tasks)."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from scipy import stats

from lero.app.study import stats as study_stats


def _exact_quantile(outcomes: list[float], level: float) -> float:
    """Inverted-CDF quantile of equally likely OUTCOMES; refuses a level at a CDF step."""
    values, counts = np.unique(np.round(outcomes, 12), return_counts=True)
    cdf = np.cumsum(counts) / len(outcomes)  # at each distinct outcome
    index = int(np.searchsorted(cdf, level))
    # a Monte Carlo bootstrap agrees with the exact one only away from the CDF's steps
    assert abs(cdf[index] - level) > 0.01 and (index == 0 or abs(cdf[index - 1] - level) > 0.01)
    return float(values[index])


def _exact_ci(tasks: list[list[float]], reduce, confidence: float) -> tuple[float, float]:
    """Every stratified resample (seeds drawn with replacement within each task), enumerated."""
    per_task = [list(itertools.product(values, repeat=len(values))) for values in tasks]
    outcomes = [reduce(np.concatenate(draw)) for draw in itertools.product(*per_task)]
    tail = (1 - confidence) / 2
    return _exact_quantile(outcomes, tail), _exact_quantile(outcomes, 1 - tail)


def test_iqm_is_the_quarter_trimmed_mean() -> None:
    values = [3.0, -1.0, 7.5, 2.0, 2.0, 100.0, -50.0, 4.0, 0.5, 6.0, 1.0]
    assert study_stats.iqm(values) == pytest.approx(stats.trim_mean(values, 0.25))
    eight = [8.0, 1.0, 6.0, 3.0, 5.0, 2.0, 7.0, 4.0]
    assert study_stats.iqm(eight) == pytest.approx(np.mean([3.0, 4.0, 5.0, 6.0]))  # the middle half
    summary = study_stats.summary(values)
    assert summary["iqm"] == pytest.approx(stats.trim_mean(values, 0.25))
    assert summary["iqm_ci_low"] <= summary["iqm"] <= summary["iqm_ci_high"]
    tasks = [[1.0, 2.0, 30.0, 4.0], [-5.0, 0.0, 5.0, 10.0, 15.0]]
    pooled = tasks[0] + tasks[1]
    result = study_stats.aggregate(tasks)
    assert result["iqm"] == pytest.approx(stats.trim_mean(pooled, 0.25))
    assert result["mean"] == pytest.approx(np.mean(pooled))


@pytest.mark.parametrize("confidence", [0.95, 0.8])
def test_bootstrap_ci_equals_the_enumerated_bootstrap_on_three_seeds(confidence: float) -> None:
    seeds = [0.0, 1.0, 10.0]
    assert len(list(itertools.product(seeds, repeat=3))) == 27
    expected = _exact_ci([seeds], np.mean, confidence)
    assert study_stats.aggregate_ci([seeds], "mean", confidence) == pytest.approx(expected)
    assert study_stats.bootstrap_ci(seeds, confidence) == pytest.approx(expected)
    assert study_stats.aggregate_ci([seeds], "iqm", confidence) == pytest.approx(
        _exact_ci([seeds], lambda x: stats.trim_mean(x, 0.25), confidence)
    )


def test_the_bootstrap_is_stratified_by_task() -> None:
    tasks = [[0.0, 1.0, 10.0], [20.0, 40.0]]  # 27 x 4 resamples
    iqm = lambda x: stats.trim_mean(x, 0.25)  # noqa: E731
    expected = _exact_ci(tasks, iqm, 0.9)
    assert study_stats.aggregate_ci(tasks, "iqm", 0.9) == pytest.approx(expected)
    # pooling the five runs (no strata) would give another interval: the strata matter
    pooled = tasks[0] + tasks[1]
    unstratified = [iqm(np.asarray(draw)) for draw in itertools.product(pooled, repeat=5)]
    assert (np.quantile(unstratified, 0.05), np.quantile(unstratified, 0.95)) != pytest.approx(expected)


def test_probability_of_improvement_counts_pairs() -> None:
    treated = [[1.0, 2.0, 3.0, 3.0], [5.0, 0.0]]
    control = [[3.0, 0.5, 2.0], [5.0, 4.0, 6.0]]
    brute = []
    for xs, ys in zip(treated, control, strict=True):
        wins = sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in xs for y in ys)
        brute.append(wins / (len(xs) * len(ys)))
    result = study_stats.probability_of_improvement(treated, control)
    assert result["value"] == pytest.approx(np.mean(brute))
    assert result["ci_low"] <= result["value"] <= result["ci_high"]
    # three seeds per arm, one task: the CI is the quantiles of all 27 x 27 resamples
    x, y = [0.0, 1.0, 5.0], [0.5, 2.0, 3.0]
    outcomes = [
        np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a in xs for b in ys])
        for xs in itertools.product(x, repeat=3)
        for ys in itertools.product(y, repeat=3)
    ]
    low = study_stats.probability_of_improvement([x], [y], confidence=0.8)
    assert (low["ci_low"], low["ci_high"]) == pytest.approx(
        (_exact_quantile(outcomes, 0.1), _exact_quantile(outcomes, 0.9))
    )
    assert study_stats.compare(x, y)["poi"]["value"] == pytest.approx(np.mean(outcomes))


def test_performance_profile_is_the_fraction_above_each_threshold() -> None:
    tasks = [[1.0, 2.0, 3.0, 4.0], [10.0, 20.0]]
    grid = study_stats.profile_thresholds(tasks, [[0.0, 30.0]], points=7)
    assert grid[0] == 0.0 and grid[-1] == 30.0 and len(grid) == 7
    profile = study_stats.performance_profile(tasks, grid)
    for tau, fraction, low, high in zip(grid, profile["fraction"], profile["low"], profile["high"], strict=True):
        per_task = [sum(v > tau for v in values) / len(values) for values in tasks]
        assert fraction == pytest.approx(np.mean(per_task))
        assert low <= fraction <= high
    assert profile["fraction"][0] == 1.0 and profile["fraction"][-1] == 0.0


def test_a_verdict_needs_the_interval_to_exclude_one_half_and_enough_seeds() -> None:
    assert study_stats.poi_verdict({"value": 0.9, "ci_low": 0.6, "ci_high": 1.0}, 5) == "better"
    assert study_stats.poi_verdict({"value": 0.1, "ci_low": 0.0, "ci_high": 0.4}, 5) == "worse"
    assert study_stats.poi_verdict({"value": 0.7, "ci_low": 0.4, "ci_high": 0.9}, 5) == "no difference"
    assert study_stats.poi_verdict({"value": 1.0, "ci_low": 1.0, "ci_high": 1.0}, 2) == "too few seeds"
    assert study_stats.value_at([10, 20], [1.0, 3.0], 15) == 2.0
    assert study_stats.value_at([10, 20], [1.0, 3.0], 5) is None and study_stats.value_at([10, 20], [1.0, 3.0], 25) is None


def test_the_recheck_flags_only_a_rising_reward_with_a_falling_return() -> None:
    from lero.app.study.recheck import judge

    steps = [100.0 * i for i in range(1, 21)]
    up = [float(i) for i in range(20)]
    down = [-v for v in up]
    record = {"algo": "mappo", "seed": 1000, "status": "ok", "budget": 500, "steps": 2000, "metrics": {}}
    honest = judge({**record, "curves": {"steps": steps, "return": up, "train_reward": up}})
    assert honest["native_keeps_rising"] and not honest["reward_hacking"]
    hacked = judge({**record, "curves": {"steps": steps, "return": down, "train_reward": up}})
    assert hacked["reward_hacking"] and hacked["trends"]["return"]["direction"] == "falling"
    # the trend is read past the budget only: a fall before it does not count
    late_rise = [-v if s <= 500 else v for s, v in zip(steps, up, strict=True)]
    assert judge({**record, "curves": {"steps": steps, "return": late_rise, "train_reward": up}})["native_keeps_rising"]
    flat = judge({**record, "curves": {"steps": steps, "return": [1.0, -1.0] * 10, "train_reward": up}})
    assert flat["trends"]["return"]["direction"] == "flat" and not flat["reward_hacking"]


@pytest.mark.parametrize("seeds", [1, 2])
def test_too_few_seeds_give_values_and_a_reason_not_an_interval(seeds: int) -> None:
    values = [-19.5, -17.0][:seeds]
    summary = study_stats.summary(values)
    assert summary["mean"] == pytest.approx(np.mean(values)) and summary["n"] == seeds
    assert summary["ci_low"] is summary["ci_high"] is summary["iqm_ci_low"] is None
    assert "no CI" in summary["no_ci"] and str(study_stats.MIN_INTERVAL_SEEDS) in summary["no_ci"]
    result = study_stats.compare(values, [-20.0, -21.0, -22.0])
    assert result["welch_p"] is result["mannwhitney_p"] is result["hedges_g"] is None
    assert result["poi"] == {"value": 1.0, "ci_low": None, "ci_high": None}
    assert result["no_test"].startswith(f"no p-value: {seeds} seed")
    warning = study_stats.few_seeds_warning(seeds)
    assert warning.startswith(f"warning: {seeds} seed") and "Gorsane" in warning


def test_enough_seeds_get_intervals_and_tests() -> None:
    treated, control = [1.0, 2.0, 4.0, 3.0, 2.5], [0.0, 0.5, 1.5]
    summary = study_stats.summary(treated)
    assert summary["no_ci"] is None and summary["ci_low"] <= summary["mean"] <= summary["ci_high"]
    assert study_stats.shown_spread(summary) == f"2.500 [{summary['ci_low']:.3f}, {summary['ci_high']:.3f}]"
    result = study_stats.compare(treated, control)
    assert result["no_test"] is None and result["welch_p"] is not None and result["poi"]["ci_low"] is not None
    assert study_stats.few_seeds_warning(study_stats.WARN_SEEDS - 1) is not None
    assert study_stats.few_seeds_warning(study_stats.WARN_SEEDS) is None


def test_a_learning_curve_band_needs_five_seeds() -> None:
    curves = [([0.0, 10.0], [1.0, 2.0]), ([0.0, 10.0], [3.0, 6.0])]
    two = study_stats.curve_band(curves, points=3)
    assert two["mean"] == [2.0, 3.0, 4.0] and two["low"] == two["high"] == []
    assert two["per_seed"] == [[1.0, 1.5, 2.0], [3.0, 4.5, 6.0]]
    more = [*curves, ([0.0, 10.0], [2.0, 4.0]), ([0.0, 10.0], [2.5, 3.0])]
    assert study_stats.curve_band(more, points=3)["low"] == []  # 4 seeds: their curves, no band
    five = study_stats.curve_band([*more, ([0.0, 10.0], [1.5, 5.0])], points=3)
    assert five["per_seed"] == [] and all(lo < m < hi for lo, m, hi in zip(five["low"], five["mean"], five["high"], strict=True))


def test_three_seeds_are_shown_as_their_range_never_as_a_95_ci() -> None:
    """The quick start's native: its 3 seeds' percentile bootstrap "95% CI" is exactly their
    min and max (1/27 of the resamples repeat the lowest seed), so it is shown as the range."""
    native = [-15.147, -14.991, -15.07]
    assert study_stats.bootstrap_ci(native) == pytest.approx((-15.147, -14.991))  # what the CI was
    summary = study_stats.summary(native)
    assert summary["ci_low"] is summary["ci_high"] is summary["iqm_ci_low"] is None
    assert (summary["min"], summary["max"]) == (-15.147, -14.991)
    assert study_stats.shown_spread(summary) == "-15.069 (range of 3 seeds [-15.147, -14.991])"
    result = study_stats.compare([-12.2, -12.1, -12.3], native)
    assert result["poi"]["ci_low"] == 1.0  # computed, for the verdict ...
    assert study_stats.shown_poi(result["poi"], 3) == "1.00 (3 seeds per arm, no CI)"  # ... not shown as a CI
    assert study_stats.shown_poi(result["poi"], 5) == "1.00 [1.00, 1.00]"


def test_p_better_follows_the_metrics_direction() -> None:
    """Fewer collisions are better: the quick start's winner collides more, so it is worse,
    and the verdict says so with the raw direction beside it."""
    winner, native = [3.95, 3.81, 3.85], [3.02, 3.05, 3.03]
    more = study_stats.compare(winner, native, higher_is_better=False)
    assert more["poi"]["value"] == 0.0 and more["diff"] == pytest.approx(np.mean(winner) - np.mean(native))
    assert more["better"] == "lower"
    verdict = study_stats.poi_verdict(more["poi"], 3)
    assert verdict == "worse" and study_stats.said(verdict, "collisions", False) == "worse (collisions higher)"
    fewer = study_stats.compare(native, winner, higher_is_better=False)  # a second run's winner collides less
    assert fewer["poi"]["value"] == 1.0 and study_stats.poi_verdict(fewer["poi"], 3) == "better"
    assert study_stats.said("better", "collisions", False) == "better (collisions lower)"
    assert study_stats.said("better", "return", True) == "better (return higher)"
    assert study_stats.compare(winner, native)["poi"]["value"] == 1.0  # higher is better: the other way


def test_an_arm_whose_seeds_all_agree_is_tested_without_a_warning() -> None:
    """Native's episodes on a sparse task all run to the limit (100, 100, 100): scipy's
    "precision loss" warning reached the console of every such run; the test stands."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = study_stats.compare([38.91, 40.41, 40.40], [100.0, 100.0, 100.0], higher_is_better=False)
    assert result["welch_p"] is not None and result["welch_p"] < 0.001
    assert result["poi"]["value"] == 1.0
