"""Does the LERO loop beat the baseline? A default run, then a held-out re-check.

Setting: simple_spread under partial observability (N=3, 1 agent neighbour, 2 landmark
neighbours), MAPPO, offline designer, the default RunSpec budget with 3 seeds. The run
picks its best candidate by evaluated `return` (mean over the 3 seeds); since picking the
best of many is optimistic, the best candidate and the baseline are then trained again
with 3 *fresh* seeds at the same budget and evaluated the same way. Both comparisons are
reported with their spread, plus wall-clock time.

    python -m benchmarks.loop_quality [--steps S] [--generations G] [--population K]
                                      [--sandbox auto|docker|process] [--runs-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from lero.app.cli.run_hooks import app_front
from lero.graph.configuration import DEFAULT_RUNS_DIR, RunSpec
from lero.graph.context import open_sandbox
from lero.graph.protocol import train_and_evaluate
from lero.graph.rundir import BASELINE_ID, RunDir
from lero.graph.runner import start_run
from lero.graph.trust import job_env

HELD_OUT_SEEDS = (1001, 1002, 1003)


class ProgressUI:
    """Prints one line per generation and per finished training job."""

    def on_event(self, event: dict[str, Any]) -> None:
        if event.get("event") == "generation_finished":
            print(f"  generation {event['generation']}: best fitness {event['best_fitness']}", flush=True)
        elif event.get("event") == "train_finished":
            print(f"    trained {event['candidate_id']} seed {event['seed']}: {event['status']} "
                  f"fitness {event['fitness']}", flush=True)

    def ask(self, payload: dict[str, Any]) -> object | None:
        return None


def summary(values: list[float]) -> dict[str, Any]:
    return {"mean": statistics.fmean(values), "std": statistics.pstdev(values), "per_seed": values}


def held_out(spec: RunSpec, code: str | None) -> dict[str, Any]:
    """Train + evaluate `code` (None = baseline) on fresh seeds, same budget as the run."""
    sandbox = open_sandbox(spec, cache_dir=None)
    returns = []
    for seed in HELD_OUT_SEEDS:
        result = train_and_evaluate(sandbox, code, job_env(spec), spec.algo, spec.steps, seed,
                                            eval_episodes=spec.eval_episodes, hparams=spec.hparams)
        if result.status != "ok":
            raise RuntimeError(f"held-out training failed: {result.status}: {result.error}")
        returns.append(float(result.metrics["return"]))
    return summary(returns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=RunSpec().steps)
    parser.add_argument("--generations", type=int, default=RunSpec().generations)
    parser.add_argument("--population", type=int, default=RunSpec().population)
    parser.add_argument("--sandbox", default="auto", choices=["auto", "docker", "process"])
    parser.add_argument("--runs-dir", default=DEFAULT_RUNS_DIR)
    args = parser.parse_args()
    spec = RunSpec(seeds=3, llm="offline", sandbox=args.sandbox, steps=args.steps,
                   generations=args.generations, population=args.population, runs_dir=args.runs_dir,
                   run_id=time.strftime("loop-quality-%Y%m%d-%H%M%S", time.gmtime()))
    started = time.perf_counter()
    outcome = start_run(spec, ProgressUI(), front=app_front())
    run_wall_s = time.perf_counter() - started
    rundir = RunDir(Path(outcome.run_dir))
    state = rundir.read_state()
    baseline = rundir.read_result(BASELINE_ID)
    best_id = (state.get("best") or {}).get("candidate_id")
    if best_id is None or baseline is None:
        raise SystemExit(f"no valid candidate in {rundir.path}")
    best = rundir.read_result(best_id)

    started = time.perf_counter()
    recheck = {"baseline": held_out(spec, None), "best": held_out(spec, best["code"])}
    recheck_wall_s = time.perf_counter() - started

    report = {
        "run_id": spec.run_id, "steps": spec.steps, "generations": spec.generations,
        "population": spec.population, "seeds": spec.seeds, "env_kwargs": spec.env_kwargs,
        "in_run": {
            "baseline": summary([s["metrics"]["return"] for s in baseline["per_seed"]]),
            "best": {"candidate_id": best_id, **summary([s["metrics"]["return"] for s in best["per_seed"]])},
        },
        "held_out": recheck,
        "best_beats_baseline_in_run": best["fitness"] > baseline["fitness"],
        "best_beats_baseline_held_out": recheck["best"]["mean"] > recheck["baseline"]["mean"],
        "run_wall_s": round(run_wall_s, 1), "held_out_wall_s": round(recheck_wall_s, 1),
        "env_steps": state["env_steps"], "best_code_path": str(rundir.code_path(best_id)),
    }
    rundir.write_json("loop_quality.json", report)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
