"""Several studies as one result: IQM and mean over tasks x seeds with stratified bootstrap
CIs, probability of improvement over native, and performance profiles.

One study covers one run's task, so comparing arms across tasks needs a common scale:
each task's held-out returns are min-max normalised over every run of every arm on that
task (marl-eval's normalisation), then every task is one stratum of the bootstrap. Where
the studies' tasks name a success metric other than the return (sparse tasks:
study.json's `success_metric`), the success rate gets the same table, unnormalised (a
rate in [0, 1] on every task).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from lero.app.study import stats
from lero.app.study.export import env_and_task
from lero.app.study.plots import figure_lines, plot_profiles, profiles_caption
from lero.app.study.variants import same_budget_native
from lero.graph.configuration import RunError
from lero.graph.safefs import write_atomic

METRIC = "return"
SCORE_TEXT = {"absolute": "the best checkpoint on 10x the held-out episodes", "final": "the final policy"}
STUDY_FILE = "study.json"


def load_studies(folders: list[Path]) -> list[dict[str, Any]]:
    """Each folder's study.json; RunError (one line) for a folder that has none."""
    studies = []
    for folder in folders:
        path = folder / STUDY_FILE if folder.is_dir() else folder
        try:
            study = json.loads(path.read_text())
        except (OSError, ValueError):
            raise RunError(f"no readable {STUDY_FILE} in {folder}") from None
        if not isinstance(study, dict) or "cells" not in study:
            raise RunError(f"{path} is not a finished study (run `lero study` on it first)")
        studies.append(study)
    return studies


def score_kind(studies: list[dict[str, Any]]) -> str:
    """"absolute" (the best checkpoint on 10x the held-out episodes) when every cell has it,
    else "final" (the final policy's held-out value): one kind for every arm compared."""
    cells = [c for s in studies for c in s["cells"]]
    return "absolute" if cells and all(c.get("absolute") for c in cells) else "final"


def _runs_by_task(studies: list[dict[str, Any]], kind: str, success: bool = False) -> dict[str, dict[str, list[float]]]:
    """task -> arm (`algo:variant`) -> held-out returns over seeds (SUCCESS: each study's
    success metric instead; studies without one are left out)."""
    tasks: dict[str, dict[str, list[float]]] = {}
    for study in studies:
        metric = study.get("success_metric") if success else METRIC
        if not metric:
            continue
        task = "/".join(env_and_task(study["config"]["env"]))
        arms = tasks.setdefault(task, {})
        for cell in study["cells"]:
            values = (cell["absolute"] if kind == "absolute" else cell)["per_seed"].get(metric)
            if not values:
                continue
            arm = f"{cell['algo']}:{cell['variant']}"
            if arm in arms:
                raise RunError(f"two studies give {arm} on {task}; combine them separately")
            arms[arm] = [float(v) for v in values]
    return tasks


def _normalised(arms: dict[str, list[float]]) -> dict[str, np.ndarray]:
    pooled = np.concatenate([np.asarray(v) for v in arms.values()])
    low, span = pooled.min(), pooled.max() - pooled.min()
    return {arm: (np.asarray(v) - low) / (span if span > 0 else 1.0) for arm, v in arms.items()}


def combine_studies(studies: list[dict[str, Any]]) -> dict[str, Any]:
    """combined.json: per arm, aggregates over the tasks that have it; PoI against native."""
    kind = score_kind(studies)
    tasks = {task: _normalised(arms) for task, arms in _runs_by_task(studies, kind).items() if arms}
    if not tasks:
        raise RunError(f"the studies have no {METRIC} values yet")
    strata, aggregates, improvement = _arm_table(tasks)
    successes = {task: {arm: np.asarray(v) for arm, v in arms.items()}
                 for task, arms in _runs_by_task(studies, kind, success=True).items() if arms}  # fmt: skip
    success = None
    if successes:
        _, success_arms, success_gains = _arm_table(successes)
        success = {"tasks": list(successes), "arms": success_arms, "improvement": success_gains}
    grid = stats.profile_thresholds(*strata.values())
    profiles = {arm: stats.performance_profile(s, grid) for arm, s in strata.items()}
    return {
        "studies": [s["study_id"] for s in studies],
        "tasks": list(tasks),
        "metric": METRIC,
        "score": kind,
        "normalisation": "per task, min-max over every run of every arm (0 = worst run, 1 = best)",
        "ci": {"level": stats.CONFIDENCE, "method": "stratified percentile bootstrap (seeds within tasks)",
               "samples": stats.BOOTSTRAP_SAMPLES, "seed": stats.BOOTSTRAP_SEED},
        "arms": aggregates,
        "improvement": improvement,
        "profiles": profiles,
        "success": success,
    }


def _arm_table(tasks: dict[str, dict[str, np.ndarray]]) -> tuple[dict, dict, dict]:
    """(strata, aggregates, improvement) of per-task arm values: each arm's values per task,
    IQM and mean over tasks x seeds (`_aggregate`), and P(better than the same algorithm's
    native at its budget)."""
    names = sorted({arm for arms in tasks.values() for arm in arms})
    strata = {arm: [arms[arm] for arms in tasks.values() if arm in arms] for arm in names}
    aggregates = {arm: _aggregate(s) for arm, s in strata.items()}
    improvement = {}
    for arm in names:
        algo, variant = arm.split(":", 1)
        native = f"{algo}:{same_budget_native(variant) or 'native'}"  # an arm at K x the steps: native@Kx
        shared = [t for t, arms in tasks.items() if arm in arms and native in arms]
        if arm != native and shared:
            improvement[arm] = {"versus": native, "tasks": len(shared), **stats.probability_of_improvement(
                [tasks[t][arm] for t in shared], [tasks[t][native] for t in shared])}  # fmt: skip
    return strata, aggregates, improvement


def _aggregate(strata: list[np.ndarray]) -> dict[str, Any]:
    """One arm's IQM and mean over tasks x seeds with their CIs; below stats.MIN_INTERVAL_SEEDS
    runs no CI (None) but the runs' range, as a cell of a study shows it."""
    pooled = np.concatenate(strata)
    row = {"tasks": len(strata), "runs": int(pooled.size), "n": int(pooled.size), **stats.aggregate(strata),
           "min": float(pooled.min()), "max": float(pooled.max())}  # fmt: skip
    if pooled.size < stats.MIN_INTERVAL_SEEDS:
        row |= {f"{name}_ci_{side}": None for name in stats.AGGREGATES for side in ("low", "high")}
    return row


def shown_row(row: dict[str, Any], key: str) -> str:
    """An arm's KEY ("iqm" / "mean") with its CI, or its runs' range when it has too few."""
    return stats.shown_spread(row, key, key + "_ci")


def shown_improvement(table: dict[str, Any], arm: str) -> str:
    """ARM's P(better than native) in TABLE (combined.json, or its `success` part), with a CI
    only when both arms have enough runs."""
    poi = table["improvement"].get(arm)
    if not poi:
        return "-"
    return stats.shown_poi(poi, min(table["arms"][arm]["runs"], table["arms"][poi["versus"]]["runs"]))


def render_combined(combined: dict[str, Any], plots: list[tuple[str, str]]) -> str:
    """combined.md: one row per arm."""
    lines = [f"# Combined studies: {', '.join(combined['studies'])}", "",
             f"Tasks: {', '.join(combined['tasks'])}. Held-out `{combined['metric']}` ({combined['score']}: "
             f"{SCORE_TEXT[combined['score']]}) normalised "
             f"{combined['normalisation']}; IQM and mean over tasks x seeds with 95% stratified "
             f"bootstrap CIs (below {stats.MIN_INTERVAL_SEEDS} runs the runs' range, labelled so); "
             "P(better than native): probability that a run of the arm beats one of the same algorithm's native "
             "(at the arm's budget: native@Kx for an arm at K x the steps).", "",
             "| arm | tasks | runs | IQM [95% CI] | mean [95% CI] | P(better than native) [95% CI] |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    lines += _rows(combined)
    if combined.get("success"):
        lines += ["", f"Success rate (each task's own success metric, unnormalised) on {', '.join(combined['success']['tasks'])}:",
                  "", "| arm | tasks | runs | IQM [95% CI] | mean [95% CI] | P(better than native) [95% CI] |",
                  "|---|---|---|---|---|---|", *_rows(combined["success"])]  # fmt: skip
    lines += ["", *(line for name, caption in plots for line in figure_lines(name, caption))]
    return "\n".join(lines) + "\n"


def _rows(table: dict[str, Any]) -> list[str]:
    """One line per arm of TABLE (combined.json, or its `success` part)."""
    return [f"| {arm} | {row['tasks']} | {row['runs']} | {shown_row(row, 'iqm')} | {shown_row(row, 'mean')} "
            f"| {shown_improvement(table, arm)} |" for arm, row in table["arms"].items()]


def write_combined(studies: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """combined.json, combined.md and one profile plot per algorithm under OUT."""
    combined = combine_studies(studies)
    out.mkdir(parents=True, exist_ok=True)
    plots = []
    for algo in sorted({arm.split(":", 1)[0] for arm in combined["profiles"]}):
        mine = {arm: p for arm, p in combined["profiles"].items() if arm.startswith(f"{algo}:")}
        png = plot_profiles(mine, out / "plots" / f"profile-{algo}.png").name
        plots.append((png, profiles_caption(f"{algo}: normalised return")))
    write_atomic(out / "combined.json", json.dumps(combined, indent=2) + "\n")
    write_atomic(out / "combined.md", render_combined(combined, plots))
    return combined
