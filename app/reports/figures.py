"""Figures for people and papers (matplotlib, headless Agg backend).

Every figure is written in `FORMATS` (PNG for the web UI and report.md, PDF and SVG for a
paper, fonts kept as text) at a paper column's width (`COLUMN_IN`), saved with a tight box
so no label is clipped, and with a CSV of the numbers it draws beside it (tidy: one row per
drawn value). No figure carries a title: a paper captions its figures itself, so the
words go in the caption report.md and study.md give each figure. Legends name runs and arms
by their names, never by run ids; colours follow the arm (`app.study.arm_colors`). Kept apart from
report.py so the report logic stays testable without reading pixels.
"""

from __future__ import annotations

import csv
import io
import math
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
PAPER_STYLE = {  # 7-8 pt at a column's width: the size of a paper's own small print
    "font.size": 8, "axes.labelsize": 8, "legend.fontsize": 7,
    "xtick.labelsize": 7, "ytick.labelsize": 7, "lines.linewidth": 1.2, "lines.markersize": 3.5,
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


@dataclass(frozen=True)
class FitnessPoint:
    """One policy's fitness as the loop measured it: the mean over its seeds and each seed's
    value (`seeds`), drawn as a dot with the seeds' range as its bar. STOPPED: cut short by
    halving (its fitness is at a smaller budget, drawn hollow)."""

    label: str
    mean: float
    seeds: Sequence[float] = ()
    stopped: bool = False


JITTER = 0.28  # a generation's candidates spread over +-JITTER around it on the x axis


def _spread(seeds: Sequence[float]) -> tuple[float, float] | None:
    finite = [s for s in seeds if _finite(s)]
    return (min(finite), max(finite)) if len(finite) > 1 else None


def plot_fitness(generations: dict[int, list[FitnessPoint]], best: dict[int, float | None], native: FitnessPoint | None,
                 colors: tuple[str, str], y_label: str = "fitness") -> dict[str, bytes]:
    """Fitness per generation with its spread: every candidate of GENERATIONS a dot (the mean
    over its seeds; bar: their range), BEST per generation a line, NATIVE a dashed line over
    its seeds' range; COLORS (candidates, native)."""
    candidate_color, native_color = colors
    fig, ax = figure()
    table = Table(("series", "generation", "candidate", "statistic", "fitness"))
    at = {}  # generation -> the x of its best candidate's dot, where the best line passes
    for gen, members in sorted(generations.items()):
        shown = [m for m in members if _finite(m.mean)]
        for i, m in enumerate(shown):
            x = gen + (JITTER * (2 * i / (len(shown) - 1) - 1) if len(shown) > 1 else 0.0)
            if m.mean == best.get(gen) and not m.stopped:
                at[gen] = x
            spread = _spread(m.seeds)
            yerr = None if spread is None else [[m.mean - spread[0]], [spread[1] - m.mean]]
            ax.errorbar([x], [m.mean], yerr=yerr, fmt="o", color=candidate_color, markersize=3, capsize=1.5,
                        elinewidth=0.6, alpha=0.8, markerfacecolor="none" if m.stopped else candidate_color)  # fmt: skip
            table.rows.append(("candidate", gen, m.label, "mean" + " (stopped early)" * m.stopped, m.mean))
            table.rows += [("candidate", gen, m.label, f"seed {s}", v) for s, v in enumerate(m.seeds)]
    points = [(g, v) for g, v in sorted(best.items()) if _finite(v)]
    if points:
        ax.plot([at.get(g, g) for g, _ in points], [v for _, v in points], color=candidate_color,
                label="best of generation", zorder=3)  # fmt: skip
        table.rows += [("best of generation", g, None, "max of means", v) for g, v in points]
    if native is not None and _finite(native.mean):
        ax.axhline(native.mean, color=native_color, linestyle="--", label=native.label)
        table.rows.append((native.label, None, None, "mean", native.mean))
        if (spread := _spread(native.seeds)) is not None:
            ax.axhspan(*spread, color=native_color, alpha=0.12, linewidth=0)
            table.rows += [(native.label, None, None, f"seed {s}", v) for s, v in enumerate(native.seeds)]
    if shown_any := [m for ms in generations.values() for m in ms if _finite(m.mean)]:
        ax.scatter([], [], color=candidate_color, s=8, label=f"candidates ({len(shown_any)})")
    ax.set_xlabel("generation")
    ax.set_ylabel(y_label)
    if generations:
        ax.set_xticks(sorted(generations))
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return figure_files(fig, table)


@dataclass(frozen=True)
class CurveSeries:
    """One policy's learning curve over seeds (app.study.stats.curve_band's `band`) and its
    greedy evaluation per seed (measured after training at `end_step`), drawn in COLOR with
    LINESTYLE (`app.study.arm_colors`: the arm's own)."""

    label: str
    band: dict[str, list]  # steps, mean, low, high, per_seed
    seeds: int
    greedy: Sequence[float]
    end_step: float | None
    color: str = "C0"
    linestyle: str = "-"



@dataclass(frozen=True)
class ArmValues:
    """One arm's value of a metric per seed, measured once after training (a success rate has
    no learning curve), in its arm's COLOR."""

    label: str
    values: Sequence[float]
    color: str = "C0"


SEED_OFFSET = 0.06  # seeds of one arm drawn this far apart on the x axis, so equal values stay countable


def plot_arm_values(arms: list[ArmValues], y_label: str) -> dict[str, bytes]:
    """Each arm's values side by side: every seed a dot, their mean a diamond (Y_LABEL: what
    was measured and where)."""
    fig, ax = figure()
    table = Table(("arm", "statistic", "value"))
    for x, arm in enumerate(arms):
        values = [v for v in arm.values if _finite(v)]
        if not values:
            continue
        offsets = [(s - (len(values) - 1) / 2) * SEED_OFFSET for s in range(len(values))]
        mean = sum(values) / len(values)
        ax.scatter([x + o for o in offsets], values, color=arm.color, s=10, alpha=0.7, zorder=3)
        ax.scatter([x], [mean], color=arm.color, marker="D", s=26, edgecolors="black", linewidths=0.5, zorder=4)
        table.rows += [(arm.label, f"seed {seed}", v) for seed, v in enumerate(arm.values)]
        table.rows.append((arm.label, "mean", mean))
    ax.set_xticks(range(len(arms)), [a.label for a in arms])
    ax.set_xlim(-0.5, len(arms) - 0.5)
    ax.set_ylabel(y_label)
    return figure_files(fig, table)

FAR = 5  # curves ending more than FAR times apart: a log step axis, so the short ones show


def log_steps_if_far(ax: plt.Axes, ends: Sequence[float]) -> None:
    """A log step axis when one curve trains more than FAR times longer than another
    (equal-compute arms, native@loop)."""
    if ends and min(ends) > 0 and max(ends) > FAR * min(ends):
        ax.set_xscale("log")


def _seed_range(band: dict[str, list]) -> tuple[list[float], list[float]] | None:
    """(low, high) of the seeds at each step, for a band below the CI's seed count."""
    per_seed = band.get("per_seed") or []
    if len(per_seed) < 2:
        return None
    columns = list(zip(*per_seed, strict=True))
    return [min(c) for c in columns], [max(c) for c in columns]


def curve_band_kind(series: Sequence[CurveSeries]) -> str:
    """What the shaded bands of SERIES are, for a caption."""
    kinds = {"95% CI over seeds" if s.band["low"] else "the seeds' range" for s in series
             if s.band["steps"] and (s.band["low"] or _seed_range(s.band))}  # fmt: skip
    return " or ".join(sorted(kinds)) or "none (one seed)"


def plot_learning_curves(series: list[CurveSeries], evaluated: str = GREEDY) -> dict[str, bytes]:
    """Native return per agent against env steps: the training episodes' mean over seeds
    (shaded: a 95% band, or below the band's seed count the seeds' range with each seed thin)
    and, apart, the evaluation after training (EVALUATED: each seed a dot, their mean a
    diamond). Colour says the policy; line or diamond says which kind of return."""
    fig, ax = figure(height_in=2.7)
    table = Table(("series", "kind", "statistic", "steps", "return"))
    for s in series:
        band, color = s.band, s.color
        if band["steps"]:
            ax.plot(band["steps"], band["mean"], color=color, linestyle=s.linestyle, label=s.label,
                    marker="o" if len(band["steps"]) <= 2 else None)  # fmt: skip
            table.rows += [(s.label, TRAINING, "mean", x, y) for x, y in zip(band["steps"], band["mean"], strict=True)]
            spread = (band["low"], band["high"]) if band["low"] else _seed_range(band)
            if spread is not None:
                name = ("ci_low", "ci_high") if band["low"] else ("range_low", "range_high")
                ax.fill_between(band["steps"], *spread, color=color, alpha=0.2 if band["low"] else 0.12, linewidth=0)
                table.rows += [(s.label, TRAINING, stat, x, y) for stat, ys in zip(name, spread, strict=True)
                               for x, y in zip(band["steps"], ys, strict=True)]  # fmt: skip
            for seed, values in enumerate(band.get("per_seed") or []):
                ax.plot(band["steps"], values, color=color, linestyle=s.linestyle, linewidth=0.5, alpha=0.5)
                table.rows += [(s.label, TRAINING, f"seed {seed}", x, y) for x, y in zip(band["steps"], values, strict=True)]
        greedy = [g for g in s.greedy if _finite(g)]
        if greedy and s.end_step is not None:
            ax.scatter([s.end_step] * len(greedy), greedy, color=color, s=8, alpha=0.6, zorder=3)
            ax.scatter([s.end_step], [sum(greedy) / len(greedy)], color=color, marker="D", s=22, zorder=4,
                       edgecolors="black", linewidths=0.5)  # fmt: skip
            table.rows += [(s.label, evaluated, f"seed {seed}", s.end_step, g) for seed, g in enumerate(s.greedy)]
            table.rows.append((s.label, evaluated, "mean", s.end_step, sum(greedy) / len(greedy)))
    log_steps_if_far(ax, [s.band["steps"][-1] for s in series if s.band["steps"]])
    ax.set_xlabel("env steps")
    ax.set_ylabel("native return per agent")
    if ax.get_legend_handles_labels()[0]:
        if any(s.greedy for s in series):  # the two kinds of return, told apart by mark, in grey
            ax.plot([], [], color="grey", label=TRAINING)
            ax.scatter([], [], color="grey", marker="D", s=22, edgecolors="black", linewidths=0.5, label=evaluated)
        fig.legend(loc="outside lower center", ncols=2)
    return figure_files(fig, table)
