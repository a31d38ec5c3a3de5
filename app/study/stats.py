"""Statistics of a study cell: bootstrap CIs, effect sizes, tests, curve bands, steps-to-return.

Everything is computed from the per-seed values stored in study.json, so a reader can
recompute any number from the same file. The bootstrap uses a fixed generator: the same
values give the same interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
BOOTSTRAP_SAMPLES = 10_000
BOOTSTRAP_SEED = 0
CURVE_POINTS = 50


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def bootstrap_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean (resampling seeds with replacement)."""
    data = np.asarray(values, dtype=np.float64)  # [S]
    if data.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = rng.integers(0, data.size, size=(BOOTSTRAP_SAMPLES, data.size))  # [R, S]
    means = data[picks].mean(axis=1)  # [R]
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


def summary(values: Sequence[float]) -> dict[str, float | int | None]:
    """Mean, sample std and 95% bootstrap CI of one metric over seeds."""
    data = np.asarray(values, dtype=np.float64)
    low, high = bootstrap_ci(data)
    return {
        "n": int(data.size),
        "mean": float(data.mean()),
        "std": float(data.std(ddof=1)) if data.size > 1 else 0.0,
        "ci_low": low,
        "ci_high": high,
    }


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


def compare(treated: Sequence[float], control: Sequence[float]) -> dict[str, float | None]:
    """A variant against native on one metric: difference, Hedges' g, Welch t and Mann-Whitney U."""
    a, b = np.asarray(treated, np.float64), np.asarray(control, np.float64)
    result: dict[str, float | None] = {
        "diff": float(a.mean() - b.mean()),
        "hedges_g": hedges_g(a, b),
        "welch_t": None,
        "welch_p": None,
        "mannwhitney_u": None,
        "mannwhitney_p": None,
    }
    if a.size >= 2 and b.size >= 2 and (a.var(ddof=1) > 0 or b.var(ddof=1) > 0):
        welch = stats.ttest_ind(a, b, equal_var=False)
        result["welch_t"], result["welch_p"] = _finite(welch.statistic), _finite(welch.pvalue)
    if a.size >= 1 and b.size >= 1:
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
    """Seeds' (steps, values) curves on one step grid: mean and a 95% t-interval band over seeds."""
    usable = [(np.asarray(s, np.float64), np.asarray(v, np.float64)) for s, v in curves if len(s) > 0]
    if not usable:
        return {"steps": [], "mean": [], "low": [], "high": []}
    end = min(s[-1] for s, _ in usable)
    start = max(s[0] for s, _ in usable)
    grid = np.linspace(start, end, points) if end > start else np.array([end])  # [P]
    table = np.stack([np.interp(grid, s, v) for s, v in usable])  # [S, P]
    mean = table.mean(axis=0)
    half = (
        stats.t.ppf(0.5 + CONFIDENCE / 2, table.shape[0] - 1) * table.std(axis=0, ddof=1) / math.sqrt(table.shape[0])
        if table.shape[0] > 1
        else np.zeros_like(mean)
    )
    return {
        "steps": grid.tolist(),
        "mean": mean.tolist(),
        "low": (mean - half).tolist(),
        "high": (mean + half).tolist(),
    }
