"""PNG plots for a run report (matplotlib, headless Agg backend).

Kept apart from report.py so the report logic stays testable without reading pixels.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib

from lero.graph.safefs import write_atomic

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use("Agg"): no display needed


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def plot_fitness(generations: list[dict], baseline_fitness: float | None) -> bytes:
    """Best and mean fitness per generation, with the baseline as a horizontal line (PNG)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    gens = [g["generation"] for g in generations]
    for key, label, marker in (("best_fitness", "best", "o"), ("mean_fitness", "mean", "s")):
        points = [(x, g[key]) for x, g in zip(gens, generations, strict=True) if _finite(g[key])]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker=marker, label=f"{label} candidate")
    if _finite(baseline_fitness):
        ax.axhline(baseline_fitness, color="black", linestyle="--", label="baseline")
    ax.set_xlabel("generation")
    ax.set_ylabel("fitness (mean native return per agent)")
    ax.set_title("Fitness per generation")
    if gens:
        ax.set_xticks(gens)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return png_bytes(fig)


def plot_learning_curves(curves_by_label: dict[str, dict[str, list[float]]]) -> bytes:
    """Training-time native return against env steps, one line per labelled run (PNG)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, curves in curves_by_label.items():
        steps, returns = curves.get("steps") or [], curves.get("return") or []
        if steps and len(steps) == len(returns):
            ax.plot(steps, returns, label=label, marker="o" if len(steps) <= 20 else None)
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return (native, per agent)")
    ax.set_title("Learning curves (seed 0)")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return png_bytes(fig)


def png_bytes(fig: plt.Figure) -> bytes:
    """The figure as PNG bytes: the caller stores them (RunDir writes atomically, no symlink followed)."""
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return buffer.getvalue()


def save_figure(fig: plt.Figure, path: Path) -> Path:
    """The figure as a PNG file outside any run directory (a study's plots)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, png_bytes(fig))
    return path
