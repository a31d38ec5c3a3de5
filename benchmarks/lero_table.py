"""The README's LERO table in one command: an offline-designer run without the hand-written
prior, then `lero study` on its best candidate (native / hrf / oef / hrf+oef x algorithms x
fresh seeds, held-out evaluation episodes), printed as a markdown table.

Setting: simple_spread under partial observability (N=3, 1 agent neighbour, 2 landmark
neighbours, LERO's setting), the default RunSpec budget for the loop (MAPPO), then the
study at `--steps` per training. Every number comes with its 95% bootstrap CI over seeds
and a Welch test against native.

    python -m benchmarks.lero_table                       # paper: mappo,ippo,vdn,qmix x 5 seeds
    python -m benchmarks.lero_table --algos mappo --steps 300000 --run-id ID   # what we ran

Re-running the same command resumes: the run is reused (`--run-id`), finished study
cells are skipped.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from lero.app.study import PAPER_ALGOS, StudySpec, run_study
from lero.app.study.spec import DEFAULT_SEEDS
from lero.graph.configuration import DEFAULT_RUNS_DIR, RunSpec
from lero.graph.runner import start_run


class QuietUI:
    """Prints one line per generation; never answers questions (the run asks none)."""

    def on_event(self, event: dict[str, Any]) -> None:
        if event.get("event") == "generation_finished":
            print(f"  generation {event['generation']}: best fitness {event['best_fitness']}", flush=True)

    def ask(self, payload: dict[str, Any]) -> object | None:
        return None


def cell_text(cell: dict[str, Any], metric: str) -> str:
    summary = cell["summary"].get(metric)
    if summary is None:
        return "-"
    return f"{summary['mean']:.2f} [{summary['ci_low']:.2f}, {summary['ci_high']:.2f}]"


def table(study: dict[str, Any]) -> str:
    """Markdown: one row per (algorithm, variant); return and coverage with CIs, test vs native."""
    rows = ["| algo | variant | return [95% CI] | coverage [95% CI] | diff vs native | Hedges' g | Welch p |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    for cell in study["cells"]:
        test = cell["vs_native"].get("return", {})
        diff = f"{test['diff']:+.2f}" if test else ""
        g = f"{test['hedges_g']:.2f}" if test.get("hedges_g") is not None else ""
        p = f"{test['welch_p']:.3g}" if test.get("welch_p") is not None else ""
        rows.append(f"| {cell['algo']} | {cell['variant']} | {cell_text(cell, 'return')} | "
                    f"{cell_text(cell, 'coverage')} | {diff} | {g} | {p} |")  # fmt: skip
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", default=",".join(PAPER_ALGOS))
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS)
    parser.add_argument("--steps", type=int, default=RunSpec().steps, help="per study training")
    parser.add_argument("--run-id", help="reuse this run (default: start one)")
    parser.add_argument("--runs-dir", default=DEFAULT_RUNS_DIR)
    parser.add_argument("--sandbox", default="auto", choices=["auto", "docker", "process"])
    parser.add_argument("--with-prior", action="store_true", help="keep the offline designer's prior")
    args = parser.parse_args(argv)
    run_id = args.run_id
    if run_id is None or not (Path(args.runs_dir) / run_id).is_dir():
        spec = RunSpec(llm="offline", sandbox=args.sandbox, runs_dir=args.runs_dir,
                       offline_prior=args.with_prior,
                       run_id=run_id or time.strftime("lero-table-%Y%m%d-%H%M%S", time.gmtime()))  # fmt: skip
        started = time.perf_counter()
        print(f"run {spec.run_id}: offline designer, prior {spec.offline_prior}", flush=True)
        outcome = start_run(spec, QuietUI())
        print(f"run {spec.run_id}: {outcome.status} in {time.perf_counter() - started:.0f} s", flush=True)
        run_id = str(spec.run_id)
    study = run_study(
        StudySpec(run_id=run_id, runs_dir=args.runs_dir, seeds=args.seeds, steps=args.steps,
                  algos=tuple(a for a in args.algos.split(",") if a)),
        progress=lambda line: print(line, flush=True),
    )  # fmt: skip
    print()
    print(table(study))
    gens = study.get("generations")
    if gens:
        print(f"\ngenerations (selection fitness): {json.dumps(gens['best_per_generation'])}, "
              f"gain over generation 0: {gens['gain_over_generation0']:+.3f}")  # fmt: skip
    print(f"\nstudy: {Path(args.runs_dir) / run_id / 'studies' / study['study_id']}")


if __name__ == "__main__":
    main()
