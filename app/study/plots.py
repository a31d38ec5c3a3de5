"""Study plots: learning curves of every arm with 95% bands per algorithm (one plot, so
sample efficiency compares at a glance), per-metric CI charts and performance profiles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lero.app.plots import plt, save_figure  # the Agg backend is set there
from lero.app.study.stats import MIN_INTERVAL_SEEDS


def plot_curves(algo: str, cells: list[dict[str, Any]], target: float | None, path: Path) -> Path:
    """Training-time native return (mean over seeds, 95% band) of every arm of ALGO; a log step
    axis when equal-compute arms train far longer than the variants."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for cell in cells:
        band = cell["curve"]
        if band["steps"]:
            line = ax.plot(band["steps"], band["mean"], label=cell["variant"])[0]
            if band["low"]:
                ax.fill_between(band["steps"], band["low"], band["high"], color=line.get_color(), alpha=0.2)
            for seed in band.get("per_seed") or []:  # too few seeds for a band: each seed, thin
                ax.plot(band["steps"], seed, color=line.get_color(), linewidth=0.7, alpha=0.5)
    ends = [c["curve"]["steps"][-1] for c in cells if c["curve"]["steps"]]
    if ends and min(ends) > 0 and max(ends) > 5 * min(ends):
        ax.set_xscale("log")
    if target is not None:
        ax.axhline(target, color="black", linestyle=":", label=f"target {target:.2f}")
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return (native, per agent)")
    few = any(c["curve"].get("per_seed") for c in cells)
    shown = f"mean and each seed (no band: fewer than {MIN_INTERVAL_SEEDS} seeds)" if few else "mean, 95% band over seeds"
    ax.set_title(f"{algo}: learning curves ({shown})", fontsize=10)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return save_figure(fig, path)


def plot_metric(metric: str, cells: list[dict[str, Any]], path: Path) -> Path:
    """Held-out METRIC per (algorithm, variant): mean with its 95% bootstrap CI, seeds as dots."""
    fig, ax = plt.subplots(figsize=(max(4.0, 0.7 * len(cells) + 1.5), 4))
    labels = []
    for x, cell in enumerate(cells):
        labels.append(f"{cell['algo']}\n{cell['variant']}")
        summary = cell["summary"].get(metric)
        if summary is None:
            continue
        spread = None if summary["ci_low"] is None else [[summary["mean"] - summary["ci_low"]],
                                                         [summary["ci_high"] - summary["mean"]]]  # fmt: skip
        ax.errorbar([x], [summary["mean"]], yerr=spread, fmt="o", capsize=4, color="C0")  # no CI: too few seeds
        values = cell["per_seed"][metric]
        ax.scatter([x + 0.15] * len(values), values, s=10, color="C1", alpha=0.7)
    ax.set_xticks(range(len(cells)), labels, fontsize=8)
    ax.set_ylabel(f"{metric} (held-out episodes)")
    few = any(c["summary"].get(metric, {}).get("no_ci") for c in cells)
    note = f"\nno CI: fewer than {MIN_INTERVAL_SEEDS} seeds (dots: seeds)" if few else ""
    ax.set_title(f"{metric}: mean and 95% CI over seeds{note}", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    return save_figure(fig, path)


def plot_profiles(title: str, profiles: dict[str, dict[str, list[float]]], path: Path) -> Path:
    """Performance profiles: fraction of runs above each score, one line (95% band) per arm."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for arm, profile in profiles.items():
        line = ax.plot(profile["thresholds"], profile["fraction"], label=arm)[0]
        ax.fill_between(profile["thresholds"], profile["low"], profile["high"], color=line.get_color(), alpha=0.2)
    ax.set_xlabel("score threshold")
    ax.set_ylabel("fraction of runs above")
    ax.set_title(f"{title}: performance profiles (95% bands)")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    return save_figure(fig, path)


def plot_recheck(check: dict[str, Any], path: Path) -> Path:
    """The reward-hacking check's training curves: native return and training reward."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    curves = check["curves"]
    for key, label in (("return", "native return"), ("train_reward", "training reward")):
        if curves.get(key):
            ax.plot(curves["steps"], curves[key], label=label)
    ax.axvline(check["budget"], color="black", linestyle=":", label="study budget")
    ax.set_xlabel("env steps")
    ax.set_ylabel("per-agent episode return")
    ax.set_title(f"reward-hacking check ({check['algo']}, {'flagged' if check['reward_hacking'] else 'not flagged'})")
    ax.grid(alpha=0.3)
    ax.legend()
    return save_figure(fig, path)
