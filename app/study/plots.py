"""Study plots: learning curves of every arm with 95% bands per algorithm (one plot, so
sample efficiency compares at a glance), per-metric CI charts and performance profiles.
Each is written as PNG, PDF and SVG at a paper column's width with its CSV (`app.reports.figures`),
untitled, every arm in its own colour (`app.study.arm_colors`, as in a run's figures); each
`plot_*` has a `*_caption` that study.md prints under it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lero.app.reports.figures import (
    COLUMN_IN,
    HEIGHT_IN,
    WIDE_IN,
    Table,
    figure,
    log_steps_if_far,
    save_figure,
)
from lero.app.study.arm_colors import CANDIDATE, LONGER, arm_color, arm_line
from lero.app.study.stats import MIN_INTERVAL_SEEDS

COLUMN_CELLS = 6  # more categories than this: the figure takes the page's width


def figure_lines(png: str, caption: str) -> list[str]:
    """A figure in study.md or combined.md: plots/PNG, then its caption."""
    return [f"![{png}](plots/{png})", "", f"**Figure.** {caption}", ""]


def plot_curves(cells: list[dict[str, Any]], target: float | None, path: Path) -> Path:
    """Training-time native return (mean over seeds, 95% band) of every arm of one algorithm's
    CELLS; a log step axis when equal-compute arms train far longer than the variants."""
    fig, ax = figure(height_in=2.7)
    table = Table(("arm", "statistic", "steps", "return"))
    for index, cell in enumerate(cells):
        band, color, style = cell["curve"], arm_color(cell["variant"], index), arm_line(cell["variant"])
        if band["steps"]:
            ax.plot(band["steps"], band["mean"], label=cell["variant"], color=color, linestyle=style)
            table.rows += [(cell["variant"], "mean", x, y) for x, y in zip(band["steps"], band["mean"], strict=True)]
            if band["low"]:
                ax.fill_between(band["steps"], band["low"], band["high"], color=color, alpha=0.2, linewidth=0)
                table.rows += [(cell["variant"], f"ci_{k}", x, y) for k in ("low", "high")
                               for x, y in zip(band["steps"], band[k], strict=True)]  # fmt: skip
            for seed, values in zip(cell.get("seeds") or [], band.get("per_seed") or [], strict=False):
                ax.plot(band["steps"], values, color=color, linestyle=style, linewidth=0.5, alpha=0.5)  # too few seeds: each, thin
                table.rows += [(cell["variant"], f"seed {seed}", x, y) for x, y in zip(band["steps"], values, strict=True)]
    log_steps_if_far(ax, [c["curve"]["steps"][-1] for c in cells if c["curve"]["steps"]])
    if target is not None:
        ax.axhline(target, color="black", linestyle=":", label=f"target {target:.2f}")
        table.rows.append(("target", "target", None, target))
    ax.set_xlabel("env steps")
    ax.set_ylabel("native return per agent (training)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return save_figure(fig, path, table)


def curves_caption(algo: str, cells: list[dict[str, Any]], target: float | None) -> str:
    """What `plot_curves` shows, for study.md."""
    few = any(c["curve"].get("per_seed") for c in cells)
    shown = f"thin lines: each seed (no band below {MIN_INTERVAL_SEEDS} seeds)" if few else "shaded: 95% bands over seeds"
    text = (f"{algo}: learning curves of every arm, the training episodes' native return per agent, mean over "
            f"seeds ({shown}); dashed: an arm trained K times longer; a log step axis when an arm trains far longer.")
    return text + (f" Dotted: the target return {target:.2f} (a training return, as the curves)." if target is not None else "")


def plot_metric(metric: str, cells: list[dict[str, Any]], path: Path) -> Path:
    """Held-out METRIC per (algorithm, variant): mean with its 95% bootstrap CI, seeds as dots."""
    fig, ax = figure(COLUMN_IN if len(cells) <= COLUMN_CELLS else WIDE_IN, HEIGHT_IN)
    table = Table(("algo", "arm", "statistic", metric))
    labels = []
    for x, cell in enumerate(cells):
        labels.append(f"{cell['algo']}\n{cell['variant']}")
        summary = cell["summary"].get(metric)
        if summary is None:
            continue
        spread = None if summary["ci_low"] is None else [[summary["mean"] - summary["ci_low"]],
                                                         [summary["ci_high"] - summary["mean"]]]  # fmt: skip
        color = arm_color(cell["variant"], x)
        ax.errorbar([x], [summary["mean"]], yerr=spread, fmt="o", capsize=3, color=color)  # no CI: too few seeds
        values = cell["per_seed"][metric]
        ax.scatter([x + 0.15] * len(values), values, s=6, color=color, alpha=0.5)
        table.rows += [(cell["algo"], cell["variant"], k, summary[k]) for k in ("mean", "ci_low", "ci_high")]
        table.rows += [(cell["algo"], cell["variant"], f"seed {seed}", v)
                       for seed, v in zip(cell.get("seeds") or range(len(values)), values, strict=False)]  # fmt: skip
    ax.set_xticks(range(len(cells)), labels)
    ax.set_ylabel(f"{metric} (held-out episodes)")
    ax.grid(False, axis="x")
    return save_figure(fig, path, table)


def metric_caption(metric: str, cells: list[dict[str, Any]]) -> str:
    """What `plot_metric` shows, for study.md."""
    few = any(c["summary"].get(metric, {}).get("no_ci") for c in cells)
    note = f"; no CI below {MIN_INTERVAL_SEEDS} seeds" if few else ""
    return (f"{metric} on the held-out episodes per algorithm and arm: mean with its 95% bootstrap CI over "
            f"seeds{note}; small dots beside it: each seed.")


def plot_profiles(profiles: dict[str, dict[str, list[float]]], path: Path) -> Path:
    """Performance profiles: fraction of runs above each score, one line (95% band) per arm."""
    fig, ax = figure()
    table = Table(("arm", "threshold", "fraction", "ci_low", "ci_high"))
    for index, (arm, profile) in enumerate(profiles.items()):
        color = arm_color(arm.rsplit(":", 1)[-1], index)  # a combined study's arms: <algo>:<arm>
        ax.plot(profile["thresholds"], profile["fraction"], label=arm, color=color, linestyle=arm_line(arm))
        ax.fill_between(profile["thresholds"], profile["low"], profile["high"], color=color, alpha=0.2,
                        linewidth=0)  # fmt: skip
        table.rows += [(arm, *row) for row in zip(profile["thresholds"], profile["fraction"], profile["low"],
                                                  profile["high"], strict=True)]  # fmt: skip
    ax.set_xlabel("score threshold")
    ax.set_ylabel("fraction of runs above")
    ax.set_ylim(-0.02, 1.02)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return save_figure(fig, path, table)


def profiles_caption(name: str) -> str:
    """What `plot_profiles` shows, for study.md."""
    return (f"{name}: performance profiles, the fraction of runs (seeds) scoring above each threshold, per arm "
            "(shaded: 95% bootstrap bands).")


def plot_recheck(check: dict[str, Any], path: Path) -> Path:
    """The reward-hacking check's training curves: native return and training reward."""
    fig, ax = figure()
    table = Table(("series", "steps", "value"))
    curves = check["curves"]
    for key, label, style in (("return", "native return", "-"), ("train_reward", "training reward", LONGER)):
        if curves.get(key):  # the candidate's own colour (not native's: native trains no reward of its own)
            ax.plot(curves["steps"], curves[key], label=label, color=arm_color(CANDIDATE), linestyle=style)
            table.rows += [(label, x, y) for x, y in zip(curves["steps"], curves[key], strict=False)]
    ax.axvline(check["budget"], color="black", linestyle=":", label="study budget")
    table.rows.append(("study budget", check["budget"], None))
    ax.set_xlabel("env steps")
    ax.set_ylabel("per-agent episode return (training)")
    ax.legend()
    return save_figure(fig, path, table)


def recheck_caption(check: dict[str, Any]) -> str:
    """What `plot_recheck` shows, for study.md."""
    verdict = "flagged" if check["reward_hacking"] else "not flagged"
    return (f"Reward-hacking check ({check['algo']}, {verdict}): the candidate's native return (solid) and its "
            "training reward (dashed) over a longer training; dotted: the study's budget.")
