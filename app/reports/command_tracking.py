"""What `lero train --logger` and `lero study --logger` send their tracker (app.reports.tracking),
once the work is done and its own files are written (a tracker that fails loses nothing)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lero.app.reports.tracking import Identity, finite, log_curves, metric_key, open_tracker
from lero.app.study.combine import STUDY_FILE

if TYPE_CHECKING:
    from lero.training import TrainResult

SEED_AXIS = "seed"


def log_training(kind: str, out: Path, results: list[TrainResult], summary_file: Path) -> None:
    """`lero train`: the configuration, each seed's curves against its env steps (the greedy
    evaluation curve among them), its final held-out metrics, and result.json / seeds.json."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    tracker = open_tracker(kind, out, Identity(run_id=f"train-{out.resolve().name}-{stamp}", name=out.resolve().name))
    try:
        tracker.config({**results[0].config.to_dict(), "seed": [r.config.seed for r in results]})
        for result in results:
            prefix = f"seed-{result.config.seed}"
            log_curves(tracker, prefix, result.curves)
            steps = result.curves.get("steps") or [result.steps]
            tracker.metrics(finite({metric_key(prefix, "eval", k): v for k, v in result.eval.items()}),
                            metric_key(prefix, "env_steps"), int(steps[-1]))  # fmt: skip
        tracker.artifact(summary_file)
    finally:
        tracker.close()


def study_cell_metrics(cell: dict[str, Any]) -> dict[int, dict[str, float]]:
    """train seed -> `<algo>/<variant>/<metric>` of that seed's held-out evaluation."""
    prefix = (str(cell.get("algo")), str(cell.get("variant")))
    seeds = cell.get("seeds") or []
    points: dict[int, dict[str, float]] = {}
    for metric, values in (cell.get("per_seed") or {}).items():
        for seed, value in zip(seeds, values or [], strict=False):
            points.setdefault(int(seed), {}).update(finite({metric_key(*prefix, metric): value}))
    return points


def log_study(kind: str, study: dict[str, Any], runs_dir: Path) -> None:
    """`lero study`: the configuration, each job's held-out metrics (against its train seed),
    each cell's mean training curve and mean metrics, and study.md / study.json; the
    tracker's local records under RUNS_DIR, as a run's."""
    study_md = Path(study["study_md"])
    tracker = open_tracker(kind, runs_dir, Identity(run_id=f"study-{study['study_id']}", name=str(study["study_id"])))
    try:
        tracker.config(study.get("config") or {})
        for cell in study.get("cells") or []:
            for seed, values in study_cell_metrics(cell).items():
                tracker.metrics(values, SEED_AXIS, seed)
            prefix = metric_key(str(cell.get("algo")), str(cell.get("variant")))
            curve = cell.get("curve") or {}
            log_curves(tracker, metric_key(prefix, "curve"), {"steps": curve.get("steps") or [],
                                                              "mean_return": curve.get("mean") or []})  # fmt: skip
            means = {metric_key(prefix, "mean", m): s.get("mean") for m, s in (cell.get("summary") or {}).items()}
            if finite(means):
                tracker.metrics(finite(means), SEED_AXIS, max(study_cell_metrics(cell) or [0]))
        for path in (study_md, study_md.with_name(STUDY_FILE)):
            if path.is_file():
                tracker.artifact(path)
    finally:
        tracker.close()
