"""Figures for people and papers (matplotlib, headless Agg backend).

Every figure is written in `FORMATS` (PNG for the web UI and report.md, PDF and SVG for a
paper, fonts kept as text) at a paper column's width (`COLUMN_IN`), saved with a tight box
so no title or label is clipped, and with a CSV of the numbers it draws beside it (tidy:
one row per drawn value). Kept apart from report.py so the report logic stays testable
without reading pixels.
"""

from __future__ import annotations

import csv
import io
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

from lero.graph.safefs import write_atomic

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use("Agg"): no display needed

COLUMN_IN = 3.4  # a two-column paper's column width, inches
WIDE_IN = 7.0  # the page width, for a figure with many categories
HEIGHT_IN = 2.5
FORMATS = ("png", "pdf", "svg")
PNG_DPI = 200
TITLE_CHARS = 48  # a title wraps at this many characters (8 pt across a column)
PAPER_STYLE = {
    "font.size": 7, "axes.titlesize": 8, "axes.labelsize": 7, "legend.fontsize": 6,
    "xtick.labelsize": 6, "ytick.labelsize": 6, "lines.linewidth": 1.2, "lines.markersize": 3.5,
    "legend.frameon": False, "axes.grid": True, "grid.alpha": 0.3,
    "pdf.fonttype": 42, "svg.fonttype": "none",  # text stays text (editable, searchable)
}  # fmt: skip
matplotlib.rcParams.update(PAPER_STYLE)
TRAINING = "training (sampled actions)"
GREEDY = "greedy evaluation (fitness)"


@dataclass
class Table:
    """The numbers a figure draws, one row per value (written as its CSV)."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def csv_bytes(self) -> bytes:
        """The CSV, every text cell `csv_cell`-escaped (run text is data from outside)."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([csv_cell(c) for c in self.columns])
        writer.writerows([csv_cell(v) for v in row] for row in self.rows)
        return out.getvalue().encode()


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet reads a cell starting so as a formula


def csv_cell(value: Any) -> Any:
    """VALUE as a CSV cell: None empty, numbers as they are, text starting with a formula
    character (a run id or candidate name `=HYPERLINK(...)`) behind a `'`, which spreadsheets
    show as text (OWASP's CSV-injection rule)."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def figure(width_in: float = COLUMN_IN, height_in: float = HEIGHT_IN) -> tuple[plt.Figure, plt.Axes]:
    """A figure at paper size."""
    return plt.subplots(figsize=(width_in, height_in), layout="constrained")


def title(ax: plt.Axes, text: str) -> None:
    """A title wrapped to the figure's width, never clipped."""
    ax.set_title("\n".join(textwrap.wrap(text, TITLE_CHARS)))


def figure_files(fig: plt.Figure, table: Table) -> dict[str, bytes]:
    """{extension: bytes} for every format and the CSV; the figure is closed."""
    files = {}
    for fmt in FORMATS:
        buffer = io.BytesIO()
        metadata = {"Software": "lero"} if fmt == "png" else {"Creator": "lero", "Date": None}
        fig.savefig(buffer, format=fmt, dpi=PNG_DPI, bbox_inches="tight", pad_inches=0.03, metadata=metadata)
        files[fmt] = buffer.getvalue()
    plt.close(fig)
    files["csv"] = table.csv_bytes()
    return files


def save_figure(fig: plt.Figure, path: Path, table: Table) -> Path:
    """The figure as PATH (.png) and beside it .pdf, .svg and .csv, outside any run
    directory's own files (a study's plots); returns the PNG's path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for ext, data in figure_files(fig, table).items():
        write_atomic(path.with_suffix(f".{ext}"), data)
    return path


def plot_fitness(generations: list[dict], baseline_fitness: float | None) -> dict[str, bytes]:
    """Best and mean fitness per generation, with the baseline as a horizontal line."""
    fig, ax = figure()
    table = Table(("series", "generation", "fitness"))
    gens = [g["generation"] for g in generations]
    for key, label, marker in (("best_fitness", "best", "o"), ("mean_fitness", "mean", "s")):
        points = [(x, g[key]) for x, g in zip(gens, generations, strict=True) if _finite(g[key])]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker=marker, label=f"{label} candidate")
            table.rows += [(f"{label} candidate", x, y) for x, y in points]
    if _finite(baseline_fitness):
        ax.axhline(baseline_fitness, color="black", linestyle="--", label="baseline")
        table.rows.append(("baseline", None, baseline_fitness))
    ax.set_xlabel("generation")
    ax.set_ylabel("fitness (greedy return per agent)")
    title(ax, "Fitness per generation")
    if gens:
        ax.set_xticks(gens)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return figure_files(fig, table)


@dataclass(frozen=True)
class CurveSeries:
    """One policy's learning curve over seeds (app.study.stats.curve_band's `band`) and its
    greedy evaluation per seed (the fitness, measured after training at `end_step`)."""

    label: str
    band: dict[str, list]  # steps, mean, low, high, per_seed
    seeds: int
    greedy: Sequence[float]
    end_step: float | None


def plot_learning_curves(series: list[CurveSeries], heading: str = "Learning curves") -> dict[str, bytes]:
    """Native return per agent against env steps: the training episodes' mean over seeds
    (a 95% band, or each seed thin below the band's seed count) and, apart, the greedy
    evaluation after training (each seed a dot, their mean a diamond)."""
    fig, ax = figure(height_in=2.7)
    table = Table(("series", "kind", "statistic", "steps", "return"))
    for index, s in enumerate(series):
        color = f"C{index}"
        band = s.band
        if band["steps"]:
            many = bool(band["low"])
            shown = f"mean of {s.seeds} seeds" + (", 95% band" if many else ", thin: each" if s.seeds > 1 else "")
            ax.plot(band["steps"], band["mean"], color=color, label=f"{s.label}: {TRAINING}, {shown}",
                    marker="o" if len(band["steps"]) <= 2 else None)  # fmt: skip
            table.rows += [(s.label, TRAINING, "mean", x, y) for x, y in zip(band["steps"], band["mean"], strict=True)]
            if many:
                ax.fill_between(band["steps"], band["low"], band["high"], color=color, alpha=0.2, linewidth=0)
                table.rows += [(s.label, TRAINING, stat, x, y) for stat in ("ci_low", "ci_high")
                               for x, y in zip(band["steps"], band[stat.removeprefix("ci_")], strict=True)]  # fmt: skip
            for seed, values in enumerate(band.get("per_seed") or []):
                ax.plot(band["steps"], values, color=color, linewidth=0.5, alpha=0.5)
                table.rows += [(s.label, TRAINING, f"seed {seed}", x, y) for x, y in zip(band["steps"], values, strict=True)]
        greedy = [g for g in s.greedy if _finite(g)]
        if greedy and s.end_step is not None:
            ax.scatter([s.end_step] * len(greedy), greedy, color=color, s=8, alpha=0.6, zorder=3)
            ax.scatter([s.end_step], [sum(greedy) / len(greedy)], color=color, marker="D", s=22, zorder=4,
                       edgecolors="black", linewidths=0.5, label=f"{s.label}: {GREEDY}")  # fmt: skip
            table.rows += [(s.label, GREEDY, f"seed {seed}", s.end_step, g) for seed, g in enumerate(s.greedy)]
            table.rows.append((s.label, GREEDY, "mean", s.end_step, sum(greedy) / len(greedy)))
    ax.set_xlabel("env steps")
    ax.set_ylabel("native return per agent")
    title(ax, f"{heading}: training episodes vs greedy evaluation")
    if ax.get_legend_handles_labels()[0]:
        fig.legend(loc="outside lower center", ncols=1)
    return figure_files(fig, table)
