"""Statistics of a study: the rliable aggregates (IQM, mean, probability of improvement,
performance profiles) with stratified bootstrap CIs, effect sizes, tests, curve bands and
steps-to-return.

Everything is computed from the per-seed values stored in study.json, so a reader can
recompute any number from the same file. `scipy.stats` gives the trimmed mean and the
bootstrap (its independent resampling of each sample is the stratified bootstrap); only
the statistics themselves are written here, since rliable is archived and pins old
dependencies. The bootstrap uses a fixed generator: the same values give the same interval.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import stats

from lero.app.reports.numbers import fmt_number

CONFIDENCE = 0.95
BOOTSTRAP_SAMPLES = 10_000
BOOTSTRAP_SEED = 0
CURVE_POINTS = 50
PROFILE_POINTS = 101
# How many seeds a number needs. With n seeds the percentile bootstrap draws n^n resamples:
# with 3 seeds the resample of the lowest seed three times has probability 1/27 > 2.5%, so
# the "95% CI" of a mean is exactly the seeds' [min, max]; 2 seeds give their range, 1 seed
# a point, and Agarwal et al. (2021, rliable) show that percentile intervals under-cover in
# that few-run regime. Welch's t on 2 + 2 seeds rests on two 1-degree-of-freedom variances,
# and the exact two-sided Mann-Whitney p of 2 vs 2 seeds cannot go below 1/3. Gorsane et al.
# (2022, the cooperative MARL evaluation protocol) ask for 10 independent runs per arm with
# 95% bootstrap CIs.
MIN_TEST_SEEDS = 3  # fewer seeds in either arm: no p-value, effect size or P(improvement) CI
MIN_VERDICT_SEEDS = MIN_TEST_SEEDS  # fewer seeds per arm: no "better" / "worse" verdict
WARN_SEEDS = 5  # a verdict on fewer seeds per arm is flagged in the terminal, study.md and report.md
MIN_INTERVAL_SEEDS = WARN_SEEDS  # fewer seeds: the seeds' range (labelled so), never a 95% CI
RECOMMENDED_SEEDS = 10  # Gorsane et al. (2022)


def no_interval_reason(seeds: int) -> str | None:
    """Why SEEDS values get no confidence interval (None when they do)."""
    if seeds >= MIN_INTERVAL_SEEDS:
        return None
    shown = "1 seed has no spread" if seeds == 1 else f"{seeds} seeds are shown as their range"
    return f"no CI: {shown}; an interval needs >= {MIN_INTERVAL_SEEDS} seeds"


def no_test_reason(treated: int, control: int) -> str | None:
    """Why arms of TREATED and CONTROL seeds get no test (None when they do)."""
    fewest = min(treated, control)
    if fewest >= MIN_TEST_SEEDS:
        return None
    return f"no p-value: {fewest} seed{'s' * (fewest != 1)} in an arm; a test needs >= {MIN_TEST_SEEDS} per arm"


def few_seeds_warning(seeds: int) -> str | None:
    """The one warning for verdicts that rest on fewer than WARN_SEEDS seeds per arm (a study's
    or a run's confirmation)."""
    if seeds >= WARN_SEEDS:
        return None
    return (f"warning: {seeds} seed{'s' * (seeds != 1)} per arm. Intervals need >= {MIN_INTERVAL_SEEDS} "
            f"(below that, each arm's range of seeds is shown) and tests >= {MIN_TEST_SEEDS}; "
            f"Gorsane et al. (2022) recommend {RECOMMENDED_SEEDS} runs per arm. Read any difference "
            "here as a pilot, not a result.")  # fmt: skip


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


Strata = Sequence[Sequence[float]]  # one list of per-seed values per task


def iqm(values: Sequence[float]) -> float:
    """Interquartile mean: the mean of the middle 50% (robust to a few outlying seeds)."""
    return float(stats.trim_mean(np.asarray(values, np.float64), 0.25))


def _iqm_along(pooled: np.ndarray) -> np.ndarray:
    return stats.trim_mean(pooled, 0.25, axis=-1)


AGGREGATES = {"iqm": _iqm_along, "mean": lambda pooled: pooled.mean(axis=-1)}


def _bootstrap(samples: list[np.ndarray], statistic: Callable[..., np.ndarray],
               confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap of STATISTIC(*samples), each sample resampled on its own.

    scipy resamples each sample of a multi-sample statistic independently, which is the
    stratified bootstrap (seeds within each task). A one-value sample cannot be
    resampled (scipy refuses it, and every resample would equal it), so it stays fixed.
    """
    free = [i for i, s in enumerate(samples) if s.size > 1]
    if not free:
        value = np.asarray(statistic(*samples))
        return value, value

    def resampled(*drawn: np.ndarray, axis: int = -1) -> np.ndarray:
        batch = drawn[0].shape[:-1]
        full = [np.broadcast_to(s, (*batch, s.size)) for s in samples]  # [..., n_i] each
        for i, d in zip(free, drawn, strict=True):
            full[i] = d
        return statistic(*full)

    result = stats.bootstrap(
        tuple(samples[i] for i in free), resampled, vectorized=True, method="percentile",
        n_resamples=BOOTSTRAP_SAMPLES, confidence_level=confidence,
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    )  # fmt: skip
    return np.asarray(result.confidence_interval.low), np.asarray(result.confidence_interval.high)


def _arrays(strata: Strata) -> list[np.ndarray]:
    arrays = [np.asarray(s, np.float64) for s in strata]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError("every task needs at least one value")
    return arrays


def aggregate_ci(strata: Strata, aggregate: str = "iqm", confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Stratified percentile bootstrap CI of AGGREGATE ("iqm" or "mean") over tasks x seeds."""
    reduce = AGGREGATES[aggregate]
    low, high = _bootstrap(_arrays(strata), lambda *s: reduce(np.concatenate(s, axis=-1)), confidence)
    return float(low), float(high)


def bootstrap_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of one cell's seeds."""
    return aggregate_ci([values], "mean", confidence)


def aggregate(strata: Strata) -> dict[str, float]:
    """IQM and mean over tasks x seeds, each with its stratified bootstrap CI."""
    pooled = np.concatenate(_arrays(strata))
    result: dict[str, float] = {}
    for name in AGGREGATES:
        low, high = aggregate_ci(strata, name)
        result |= {name: float(AGGREGATES[name](pooled)), f"{name}_ci_low": low, f"{name}_ci_high": high}
    return result


def _poi_along(*pairs: np.ndarray) -> np.ndarray:
    """Mean over tasks of P(X > Y) + P(X = Y) / 2; PAIRS = x_task1, y_task1, x_task2, ..."""
    per_task = []
    for x, y in zip(pairs[::2], pairs[1::2], strict=True):
        above = x[..., :, None] > y[..., None, :]  # [..., n, m]
        tied = x[..., :, None] == y[..., None, :]
        per_task.append((above + 0.5 * tied).mean(axis=(-2, -1)))
    return np.mean(per_task, axis=0)


def probability_of_improvement(treated: Strata, control: Strata, confidence: float = CONFIDENCE) -> dict[str, float]:
    """P(a run of TREATED beats a run of CONTROL on the same task), averaged over tasks, with
    its stratified bootstrap CI (each arm's seeds resampled within each task)."""
    x, y = _arrays(treated), _arrays(control)
    if len(x) != len(y):
        raise ValueError("both arms need the same tasks")
    samples = [a for pair in zip(x, y, strict=True) for a in pair]
    low, high = _bootstrap(samples, _poi_along, confidence)
    return {"value": float(_poi_along(*samples)), "ci_low": float(low), "ci_high": float(high)}


def profile_thresholds(*arms: Strata, points: int = PROFILE_POINTS) -> list[float]:
    """An even grid of thresholds spanning every score of every arm."""
    pooled = np.concatenate([a for arm in arms for a in _arrays(arm)])
    return np.linspace(pooled.min(), pooled.max(), points).tolist()


def performance_profile(strata: Strata, thresholds: Sequence[float]) -> dict[str, list[float]]:
    """Fraction of runs scoring above each threshold (per task, averaged over tasks), with a
    pointwise stratified bootstrap band."""
    tau = np.asarray(thresholds, np.float64)  # [T]

    def fractions(*tasks: np.ndarray) -> np.ndarray:
        per_task = [(t[..., None, :] > tau[:, None]).mean(axis=-1) for t in tasks]  # [..., T, n] -> [..., T]
        return np.moveaxis(np.mean(per_task, axis=0), -1, 0)  # [T, ...]: scipy wants outputs first

    arrays = _arrays(strata)
    low, high = _bootstrap(arrays, fractions, CONFIDENCE)
    return {"thresholds": tau.tolist(), "fraction": fractions(*arrays).tolist(),
            "low": np.asarray(low).tolist(), "high": np.asarray(high).tolist()}  # fmt: skip


def summary(values: Sequence[float]) -> dict[str, Any]:
    """Mean, sample std, IQM and their 95% bootstrap CIs of one metric over seeds, and the
    seeds' range; below MIN_INTERVAL_SEEDS the CIs (and with one seed the std) are None,
    `no_ci` says why and the range stands in for them (`shown_spread`)."""
    data = np.asarray(values, dtype=np.float64)
    reason = no_interval_reason(int(data.size))
    low = high = iqm_low = iqm_high = None
    if reason is None:
        low, high = bootstrap_ci(data)
        iqm_low, iqm_high = aggregate_ci([data], "iqm")
    return {
        "n": int(data.size),
        "mean": float(data.mean()),
        "std": float(data.std(ddof=1)) if data.size > 1 else None,
        "ci_low": low,
        "ci_high": high,
        "iqm": iqm(data),
        "iqm_ci_low": iqm_low,
        "iqm_ci_high": iqm_high,
        "no_ci": reason,
        "min": float(data.min()),
        "max": float(data.max()),
    }


def shown_spread(summary: dict[str, Any] | None, key: str = "mean", ci: str = "ci", digits: int = 3) -> str:
    """SUMMARY's KEY with its 95% CI, "value [low, high]"; below MIN_INTERVAL_SEEDS the seeds'
    range, labelled as such, so that no reader takes it for a CI."""
    if not summary:
        return "-"
    low, high = summary.get(ci + "_low"), summary.get(ci + "_high")
    value = fmt_number(summary[key], digits)
    if low is not None:
        return f"{value} [{fmt_number(low, digits)}, {fmt_number(high, digits)}]"
    n = summary.get("n") or 0
    if n < 2 or summary.get("min") is None:  # one seed, or a summary written before the range was kept
        return f"{value} ({n} seed{'s' * (n != 1)}, no CI)"
    return f"{value} (range of {n} seeds [{fmt_number(summary['min'], digits)}, {fmt_number(summary['max'], digits)}])"


def shown_poi(poi: dict[str, Any] | None, seeds: int) -> str:
    """P(better) with its 95% CI when each arm has MIN_INTERVAL_SEEDS seeds; below, the point
    value and the seeds it rests on (its bootstrap interval is as coarse as the seeds' range)."""
    if not poi:
        return "-"
    value = fmt_number(poi["value"], 2)
    if seeds >= MIN_INTERVAL_SEEDS and poi.get("ci_low") is not None:
        return f"{value} [{fmt_number(poi['ci_low'], 2)}, {fmt_number(poi['ci_high'], 2)}]"
    return f"{value} ({seeds} seed{'s' * (seeds != 1)} per arm, no CI)"


def stored_poi(poi: dict[str, Any], seeds: int) -> dict[str, Any]:
    """POI as report.json keeps it: with its 95% CI from MIN_INTERVAL_SEEDS seeds per arm;
    below, the bootstrap bounds (computed for `poi_verdict`, as coarse as the seeds' order) are
    null and `no_ci` says why, as `summary` does for a mean."""
    if seeds >= MIN_INTERVAL_SEEDS:
        return poi
    return {**poi, "ci_low": None, "ci_high": None,
            "no_ci": f"no CI: {seeds} seed{'s' * (seeds != 1)} per arm; an interval needs >= {MIN_INTERVAL_SEEDS}"}


def poi_verdict(poi: dict[str, float], seeds: int) -> str:
    """"better" / "worse" when the probability of improvement's CI excludes 1/2, else "no
    difference"; below MIN_VERDICT_SEEDS per arm the bootstrap CI is too coarse to say.

    POI is P(better), computed with the metric's own direction (`compare`'s
    `higher_is_better`: fewer collisions are better), so the words are its worth."""
    if seeds < MIN_VERDICT_SEEDS:
        return "too few seeds"
    if poi["ci_low"] > 0.5:
        return "better"
    if poi["ci_high"] < 0.5:
        return "worse"
    return "no difference"


def said(verdict: str, metric: str, higher_is_better: bool) -> str:
    """A verdict in words with the raw direction beside it: "worse (collisions higher)"."""
    if verdict not in ("better", "worse"):
        return {"no difference": "no difference", "too few seeds": "too few seeds for a verdict"}.get(verdict, verdict)
    raw = "higher" if (verdict == "better") == higher_is_better else "lower"
    return f"{verdict} ({metric} {raw})"


def value_at(steps: Sequence[float], values: Sequence[float], step: float) -> float | None:
    """A logged curve's value at STEP (linear between log points; None outside them)."""
    if not len(steps) or not steps[0] <= step <= steps[-1]:
        return None
    return float(np.interp(step, steps, values))


def trend(steps: Sequence[float], values: Sequence[float]) -> dict[str, Any]:
    """Theil-Sen slope of a curve with its 95% CI: "rising" / "falling" when the CI excludes 0.

    Theil-Sen (the median of pairwise slopes) so that a few noisy log points do not decide."""
    if len(values) < 3:
        return {"slope": None, "ci_low": None, "ci_high": None, "direction": "too few points"}
    fit = stats.theilslopes(np.asarray(values, np.float64), np.asarray(steps, np.float64), alpha=CONFIDENCE)
    low, high = float(fit.low_slope), float(fit.high_slope)
    direction = "rising" if low > 0 else "falling" if high < 0 else "flat"
    return {"slope": float(fit.slope), "ci_low": low, "ci_high": high, "direction": direction}


def hedges_g(treated: Sequence[float], control: Sequence[float]) -> float | None:
    """Standardised mean difference (treated - control) with Hedges' small-sample correction."""
    a, b = np.asarray(treated, np.float64), np.asarray(control, np.float64)
    n_a, n_b = a.size, b.size
    if n_a < 2 or n_b < 2:
        return None
    pooled = math.sqrt(((n_a - 1) * a.var(ddof=1) + (n_b - 1) * b.var(ddof=1)) / (n_a + n_b - 2))
    if pooled == 0.0:
        return None
    correction = 1.0 - 3.0 / (4.0 * (n_a + n_b) - 9.0)
    return float((a.mean() - b.mean()) / pooled * correction)


def compare(treated: Sequence[float], control: Sequence[float], higher_is_better: bool = True) -> dict[str, Any]:
    """An arm against another on one metric: difference (raw, treated - control), probability
    that TREATED is better (the larger value when HIGHER_IS_BETTER, else the smaller) with its
    CI, Hedges' g, Welch t and Mann-Whitney U. Below MIN_TEST_SEEDS in either arm only the
    difference and the point P(better) are given, and `no_test` says why."""
    a, b = np.asarray(treated, np.float64), np.asarray(control, np.float64)
    sign = 1.0 if higher_is_better else -1.0  # P(better) = P(sign * a > sign * b)
    reason = no_test_reason(a.size, b.size)
    result: dict[str, Any] = {
        "diff": float(a.mean() - b.mean()),
        "better": "higher" if higher_is_better else "lower",
        "poi": {"value": float(_poi_along(sign * a, sign * b)), "ci_low": None, "ci_high": None},
        "hedges_g": None,
        "welch_t": None,
        "welch_p": None,
        "mannwhitney_u": None,
        "mannwhitney_p": None,
        "no_test": reason,
    }
    if reason is not None:
        return result
    result["poi"] = probability_of_improvement([sign * a], [sign * b])
    result["hedges_g"] = hedges_g(a, b)
    if a.var(ddof=1) > 0 or b.var(ddof=1) > 0:
        with warnings.catch_warnings():  # scipy warns of "precision loss" on an arm whose seeds all agree
            warnings.simplefilter("ignore", RuntimeWarning)  # (native's 100-step episodes): its variance is 0, exactly
            welch = stats.ttest_ind(a, b, equal_var=False)
        result["welch_t"], result["welch_p"] = _finite(welch.statistic), _finite(welch.pvalue)
    mann = stats.mannwhitneyu(a, b, alternative="two-sided")
    result["mannwhitney_u"], result["mannwhitney_p"] = _finite(mann.statistic), _finite(mann.pvalue)
    return result


def steps_to_reach(steps: Sequence[float], values: Sequence[float], target: float) -> float | None:
    """The first logged step at which the curve reaches TARGET (None = never within the budget)."""
    for step, value in zip(steps, values, strict=True):
        if value >= target:
            return float(step)
    return None


def curve_band(
    curves: Sequence[tuple[Sequence[float], Sequence[float]]], points: int = CURVE_POINTS
) -> dict[str, list[float]]:
    """Seeds' (steps, values) curves on one step grid: mean and a 95% t-interval band over seeds;
    below MIN_INTERVAL_SEEDS no band (`low` / `high` empty: with 2 seeds its t-quantile is
    12.7) but every seed's curve (`per_seed`), for the plot to draw instead."""
    usable = [(np.asarray(s, np.float64), np.asarray(v, np.float64)) for s, v in curves if len(s) > 0]
    if not usable:
        return {"steps": [], "mean": [], "low": [], "high": [], "per_seed": []}
    end = min(s[-1] for s, _ in usable)
    start = max(s[0] for s, _ in usable)
    grid = np.linspace(start, end, points) if end > start else np.array([end])  # [P]
    table = np.stack([np.interp(grid, s, v) for s, v in usable])  # [S, P]
    mean = table.mean(axis=0)
    if no_interval_reason(table.shape[0]) is not None:
        return {"steps": grid.tolist(), "mean": mean.tolist(), "low": [], "high": [], "per_seed": table.tolist()}
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, table.shape[0] - 1) * table.std(axis=0, ddof=1) / math.sqrt(table.shape[0])
    return {
        "steps": grid.tolist(),
        "mean": mean.tolist(),
        "low": (mean - half).tolist(),
        "high": (mean + half).tolist(),
        "per_seed": [],
    }
