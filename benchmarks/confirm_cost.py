"""What the confirmation costs, and does `--fitness auc` pick winners that keep their edge?

    python -m benchmarks.confirm_cost                          # the default `lero run` shape
    python -m benchmarks.confirm_cost --designer-seeds 3 --json confirm_cost.json
    python -m benchmarks.confirm_cost --compare-fitness 3 --json fitness.json

Cost (the confirmation's cost targets: at most +75% wall time on a spec's first run, at most +40% when
native's confirmation seeds come from the shared cache), in one sitting, each in a fresh
runs dir but the last: a default offline run with `--confirm-steps 0` (the reference), the
same with the default confirmation (3x `--steps`, best candidate and native, 3 seeds: a
first run, nothing cached), and the same again with another designer seed in that runs dir
(native's confirmation from `.shared-cache/`, the candidate's trained). Each ratio is wall
time over the reference's; the load average is recorded around every run. On a machine whose
load changes between runs, each confirmed run's `in_run_ratio` (its wall time over its own
time before the confirmation, from its events) is the steadier figure.

`--compare-fitness N`: for designer seeds 0..N-1, an offline run with `--fitness final` and
one with `--fitness auc`, each confirmed at `--confirm-steps` (default 10x `--steps`): the
confirmation's P(> native) on return for each winner, i.e. whether `auc` picks candidates
that keep more of their edge at the longer budget. Its runs share one runs dir, so
native's confirmation trains once and every later run reads it from `.shared-cache/`.

`--max-parallel` (default 1: one job at a time, as on a machine shared with other work)
applies to every run alike; `--sandbox process` keeps the jobs under this process's `nice`
(Docker's containers are not its children).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.loop_compute import QuietUI
from lero.app.cli.run_hooks import app_front
from lero.app.reports.confirmation_verdict import confirmation_verdict
from lero.graph.configuration import RunSpec
from lero.graph.runner import start_run
from lero.graph.summary import load_run, summarize

COST_FIRST_RUN = 1.75  # the cost target: a first run with confirmation, over one without
COST_NATIVE_CACHED = 1.40  # ... and a later one, native's seeds from the shared cache


def timed_run(spec: RunSpec) -> dict[str, Any]:
    """One run to its end: wall seconds, load around it, the confirmation's verdict and the
    seconds from its start to the run's last event (`confirm_stage`)."""
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    outcome = start_run(spec, QuietUI(), front=app_front())
    wall = time.perf_counter() - started
    run = load_run(outcome.run_dir)
    confirmation = confirmation_verdict(run, summarize(run)["confirmation"])
    return {"run_id": spec.run_id, "status": outcome.status, "wall_s": wall,
            "load": (load_before + os.getloadavg()[0]) / 2, "confirmation": confirmation,
            **confirm_stage(run.events)}  # fmt: skip


def confirm_stage(events: list[dict[str, Any]]) -> dict[str, float | None]:
    """Seconds of the run before the confirmation (`loop_s`, from the first event) and in it
    (`confirm_s`, from `confirm_started` to the last event; None without one), and
    `in_run_ratio` = total / loop: the confirmation's cost measured inside one run, so a
    change of load between two runs does not enter it."""
    stamps = [e["ts"] for e in events if isinstance(e.get("ts"), int | float)]
    start = next((e["ts"] for e in events if e.get("event") == "confirm_started"), None)
    if not stamps or start is None:
        return {"loop_s": None, "confirm_s": None, "in_run_ratio": None}
    loop_s, confirm_s = start - stamps[0], stamps[-1] - start
    return {"loop_s": loop_s, "confirm_s": confirm_s, "in_run_ratio": (loop_s + confirm_s) / loop_s if loop_s > 0 else None}


def cost(base: dict[str, Any], seeds: int) -> dict[str, Any]:
    """The reference, a first run with confirmation, then a later one reusing native's seeds."""
    rows = []
    for seed in range(seeds):
        plain = Path(tempfile.mkdtemp(prefix="lero-confirm-off-"))
        shared = Path(tempfile.mkdtemp(prefix="lero-confirm-on-"))
        try:
            off = timed_run(RunSpec(**base, designer_seed=seed, confirm_steps=0, runs_dir=str(plain), run_id="off"))
            first = timed_run(RunSpec(**base, designer_seed=seed, confirm_steps=None, runs_dir=str(shared), run_id="first"))
            later = timed_run(RunSpec(**base, designer_seed=seed + 1000, confirm_steps=None, runs_dir=str(shared),
                                      run_id="later"))  # fmt: skip
        finally:
            shutil.rmtree(plain, ignore_errors=True)
            shutil.rmtree(shared, ignore_errors=True)
        rows.append({"designer_seed": seed, "off": off, "first": first, "later": later,
                     "first_ratio": first["wall_s"] / off["wall_s"], "later_ratio": later["wall_s"] / off["wall_s"]})  # fmt: skip
    return {"targets": {"first_run": COST_FIRST_RUN, "native_cached": COST_NATIVE_CACHED}, "rows": rows}


def compare_fitness(base: dict[str, Any], seeds: int, confirm_steps: int) -> dict[str, Any]:
    """Per designer seed and fitness kind: the winner's P(> native) on return at the confirmation."""
    rows = []
    folder = Path(tempfile.mkdtemp(prefix="lero-fitness-"))  # one runs dir: native's confirmation is shared
    try:
        for seed in range(seeds):
            for fitness in ("final", "auc"):
                run = timed_run(RunSpec(**base, designer_seed=seed, fitness=fitness, confirm_steps=confirm_steps,
                                        runs_dir=str(folder), run_id=f"{fitness}-{seed}"))  # fmt: skip
                rows.append(fitness_row(seed, fitness, run))
                print(json.dumps(rows[-1], default=str), flush=True)  # a sitting cut short keeps its rows
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"confirm_steps": confirm_steps, "rows": rows}


def fitness_row(seed: int, fitness: str, run: dict[str, Any]) -> dict[str, Any]:
    """One --compare-fitness run: its winner, and the winner's return against native at both
    budgets (difference of means, P(> native), verdict)."""
    winner, verdict = next(iter((run["confirmation"] or {}).get("verdict", {}).items()), (None, {}))
    at = {budget: verdict.get(budget, {}).get("metrics", {}).get("return") or {} for budget in ("at_loop", "at_confirm")}
    return {"designer_seed": seed, "fitness": fitness, "winner": winner, "wall_s": run["wall_s"], "load": run["load"],
            **{f"{b}_{k}": row.get(k) for b, row in at.items() for k in ("diff", "poi", "verdict")}}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=RunSpec().steps)
    parser.add_argument("--designer-seeds", type=int, default=1, help="cost: repeats with designer seeds 0..N-1")
    parser.add_argument("--compare-fitness", type=int, default=0, metavar="N", help="final vs auc over N designer seeds")
    parser.add_argument("--confirm-steps", type=int, default=None, help="--compare-fitness's budget (default 10x --steps)")
    parser.add_argument("--sandbox", default="auto", choices=["auto", "docker", "process"])
    parser.add_argument("--max-parallel", type=int, default=1, help="concurrent jobs in every run (default 1)")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args(argv)
    base = {"steps": args.steps, "sandbox": args.sandbox, "llm": "offline", "max_parallel": args.max_parallel}
    result: dict[str, Any] = {"load_before": os.getloadavg()[0]}
    if args.compare_fitness:
        result["fitness"] = compare_fitness(base, args.compare_fitness, args.confirm_steps or 10 * args.steps)
    else:
        result["cost"] = cost(base, args.designer_seeds)
    result["load_after"] = os.getloadavg()[0]
    text = json.dumps(result, indent=2, default=str)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
