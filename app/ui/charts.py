"""The web UI's small SVG line charts (a candidate's reward components and return against env
steps), with axes: tick marks and labels on both, and what each axis holds. Pure Python: a
page load draws them without matplotlib."""

from __future__ import annotations

import math
from typing import Any

CHART_W, CHART_H = 520, 210
LEFT, RIGHT, TOP, BOTTOM = 62, 12, 10, 38  # margins: room for tick labels and the axis titles
TICKS = 5
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def nice_ticks(low: float, high: float, count: int = TICKS) -> list[float]:
    """About COUNT round values (steps of 1, 2, 2.5 or 5 x 10^k) from LOW to HIGH."""
    if not high > low:
        return [low]
    raw = (high - low) / max(1, count - 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step - 1e-9) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def chart(curves: dict[str, list[float]], names: list[str], y_label: str) -> dict[str, Any] | None:
    """Polyline points per curve against `steps`, the plot area, ticks on both axes and their
    titles (x: env steps; y: Y_LABEL); None with fewer than 2 points."""
    steps = curves.get("steps") or []
    series = {n: curves[n] for n in names if curves.get(n)}
    if len(steps) < 2 or not series:
        return None
    values = [v for vs in series.values() for v in vs if isinstance(v, int | float)]
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    x0, x1 = steps[0], steps[-1] if steps[-1] != steps[0] else steps[0] + 1
    right, bottom = CHART_W - RIGHT, CHART_H - BOTTOM

    def px(step: float) -> float:
        return LEFT + (step - x0) / (x1 - x0) * (right - LEFT)

    def py(value: float) -> float:
        return bottom - (value - low) / span * (bottom - TOP)

    lines = []
    for index, (name, vs) in enumerate(series.items()):
        points = " ".join(f"{px(s):.1f},{py(v):.1f}" for s, v in zip(steps, vs, strict=False) if isinstance(v, int | float))
        lines.append({"name": name, "points": points, "color": PALETTE[index % len(PALETTE)], "last": vs[-1]})
    return {
        "width": CHART_W, "height": CHART_H, "lines": lines, "low": low, "high": high, "x0": x0, "x1": steps[-1],
        "area": {"left": LEFT, "right": right, "top": TOP, "bottom": bottom},
        "x_ticks": [{"at": round(px(t), 1), "label": f"{t:,.0f}"} for t in nice_ticks(x0, steps[-1])],
        "y_ticks": [{"at": round(py(t), 1), "label": f"{t:.4g}"} for t in nice_ticks(low, high)],
        "x_label": "env steps", "y_label": y_label,
    }  # fmt: skip
