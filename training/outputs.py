"""What `lero train` leaves in its output directory, and in which order.

One seed: `policy.pt`, `curve.csv` and, last, `result.json`; several seeds: that per seed
in `seed-<k>/` and `seeds.json`, the evaluation over the seeds. The documents are
training's (they hold a `TrainResult`); the caller passes its atomic writer, so a reader
never sees half a `result.json` and its presence means the seed's files are complete.
"""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lero.training.curves import GREEDY_PREFIX, split_greedy
from lero.training.files import POLICY_FILE
from lero.training.policy import save_policy
from lero.training.trainer import TrainResult

RESULT_FILE, SEEDS_FILE, CURVE_FILE = "result.json", "seeds.json", "curve.csv"

WriteAtomic = Callable[[Path, str], None]


def write_curve_csv(curves: dict[str, list[float]], path: Path) -> None:
    """One row per env-step count where a training point or a greedy evaluation point was
    logged; columns `steps`, the training curves, then `greedy/<metric>` (training.curves); a
    row leaves empty what was not measured at its steps."""
    training, greedy = split_greedy(curves)
    names = sorted(k for k in training if k != "steps")
    measured = sorted(k for k in greedy if k != "steps")
    rows: dict[float, dict[str, float]] = {}
    for series, columns, prefix in ((training, names, ""), (greedy, measured, GREEDY_PREFIX)):
        for i, step in enumerate(series.get("steps") or []):
            rows.setdefault(step, {}).update({prefix + n: series[n][i] for n in columns})
    header = ["steps", *names, *(GREEDY_PREFIX + n for n in measured)]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows([step, *(row.get(n, "") for n in header[1:])] for step, row in sorted(rows.items()))


def train_result_document(result: TrainResult, measured_on: dict[str, Any]) -> dict[str, Any]:
    """result.json; MEASURED_ON: torch's threads and OpenMP wait, which its steps/s depend on."""
    cfg = result.config
    return {
        "env": cfg.env,
        "env_kwargs": cfg.env_kwargs,
        "algo": cfg.algo,
        "steps": result.steps,
        "seed": cfg.seed,
        "wall_s": result.wall_s,
        "steps_per_s": result.steps_per_s,
        **measured_on,
        "eval": result.eval,
        "curves": result.curves,
        "reflection_stats": result.reflection_stats,
        "config": cfg.to_dict(),
        "policy_path": POLICY_FILE,
    }


def write_train_result(result: TrainResult, out: Path, measured_on: dict[str, Any], write_atomic: WriteAtomic) -> None:
    """One seed's policy.pt, curve.csv and, last and atomically, result.json in OUT."""
    out.mkdir(parents=True, exist_ok=True)
    save_policy(result.policy, out / POLICY_FILE)
    write_curve_csv(result.curves, out / CURVE_FILE)
    write_atomic(out / RESULT_FILE, json.dumps(train_result_document(result, measured_on), indent=2) + "\n")


def seeds_summary(results: list[TrainResult]) -> dict[str, Any]:
    """seeds.json: per metric the seeds' greedy evaluations, their mean and sample std."""
    metrics = {}
    for name in results[0].eval:
        values = [result.eval[name] for result in results]
        metrics[name] = {"values": values, "mean": statistics.fmean(values), "std": statistics.stdev(values)}
    return {
        "seeds": [result.config.seed for result in results],
        "results": [f"seed-{result.config.seed}/{RESULT_FILE}" for result in results],
        "eval": metrics,
        "steps": sum(result.steps for result in results),
        "wall_s": sum(result.wall_s for result in results),
    }


def write_train_outputs(
    results: list[TrainResult], out: Path, measured_on: dict[str, Any], write_atomic: WriteAtomic
) -> Path:
    """Everything `lero train` writes for RESULTS in OUT; returns the file that sums it up
    (result.json for one seed, seeds.json for several)."""
    if len(results) == 1:
        write_train_result(results[0], out, measured_on, write_atomic)
        return out / RESULT_FILE
    for result in results:
        write_train_result(result, out / f"seed-{result.config.seed}", measured_on, write_atomic)
    write_atomic(out / SEEDS_FILE, json.dumps(seeds_summary(results), indent=2) + "\n")
    return out / SEEDS_FILE
