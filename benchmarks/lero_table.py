"""docs/results.md's LERO table in one resumable command: for each built-in task, an offline
run (no hand-written prior) with each loop algorithm, then `lero study` of each run's best
candidate for every algorithm, then the studies combined across tasks.

Arms: native, hrf, oef, hrf+oef, native@10x (native with ten times the candidate's steps:
the equal-compute answer) and hrf+oef@10x (the candidate at ten times its steps, tested
against native@10x: does its edge last?); `--arms` picks others, e.g. native@loop (native
with the env steps the whole run spent). `verdicts` says, per row, the gain at the loop's
budget and at 10x on return and on each task metric, a null as plainly as a gain. Every study value is held out (fresh training seeds,
evaluation seeds disjoint from the selection episodes); the combination gives IQM and mean
over tasks x seeds with stratified bootstrap CIs, the probability of improvement over
native and performance profiles (`app.study.combine`, the code `lero study --combine` runs).

    python -m benchmarks.lero_table                     # everything (hours on 2 cores)
    python -m benchmarks.lero_table --tasks simple_spread --loop-algos mappo --algos mappo
    python -m benchmarks.lero_table --steps qmix=1000000,vdn=1000000 --seeds 10 --checkpoints 10
    python -m benchmarks.lero_table --tasks vmas:balance --env-arg n_agents=4 --loop-algos mappo --algos mappo,qmix

Resumable: run ids are fixed (`lero-table-<task>-<loop algo>`), an interrupted run is
resumed, and every finished training is a cell file of its study, so the same command
continues where the last sitting stopped. The JSON result (`--out`) is rewritten after
each study. A task's runs share their finished jobs (`share_results`): native and
native@Kx trainings touch no candidate, so they run once per task, not once per run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from lero.app.cli.args import env_arg
from lero.app.cli.run_hooks import app_front
from lero.app.cli.stops import EXIT_INTERRUPTED, first_stop_cancels
from lero.app.study import PAPER_ALGOS, StudySpec, run_study
from lero.app.study.combine import combine_studies, render_combined
from lero.app.study.spec import DEFAULT_SEEDS, PAPER_ARMS, PAPER_SEEDS
from lero.app.study.stats import poi_verdict, said, shown_poi, shown_spread
from lero.graph.configuration import DEFAULT_RUNS_DIR, RunSpec
from lero.graph.context import CancelScope
from lero.graph.rundir import STUDIES_DIR, RunDir
from lero.graph.runner import resume_run, start_run
from lero.training.defaults import EVAL_EPISODES
from lero.training.envs import ENV_NAMES

LOOP_ALGOS = ("mappo", "qmix")
ARMS = PAPER_ARMS  # the four variants, native@10x, hrf+oef@10x
GAIN_ARMS = (("hrf+oef", "the loop's budget"), ("hrf+oef@10x", "10x"))  # the verdicts' two budgets
OUT = Path("benchmarks/results/lero_table.json")


class QuietUI:
    """Prints one line per generation; never answers questions (the run asks none)."""

    def on_event(self, event: dict[str, Any]) -> None:
        if event.get("event") == "generation_finished":
            print(f"  generation {event['generation']}: best fitness {event['best_fitness']}", flush=True)

    def ask(self, payload: dict[str, Any]) -> object | None:
        return None


def budgets(text: str) -> dict[str, int]:
    """`--steps mappo=300000,qmix=1000000`: env steps per training, per algorithm."""
    result = {}
    for item in (i for i in text.split(",") if i.strip()):
        algo, sep, steps = item.partition("=")
        if not sep or not steps.strip().isdigit() or int(steps) < 1:
            raise argparse.ArgumentTypeError(f"expected ALGO=STEPS, got {item!r}")
        result[algo.strip()] = int(steps)
    return result


def table_run_id(task: str, algo: str, env_args: dict[str, Any]) -> str:
    """`lero-table-<task>-<algo>` (`vmas:navigation` -> `vmas-navigation`), then, when
    `--env-arg` gave any, a digest of them: other env arguments make another run, never a
    resumed one."""
    run_id = f"lero-table-{task.replace(':', '-')}-{algo}"
    if not env_args:
        return run_id
    return f"{run_id}-{hashlib.sha256(json.dumps(env_args, sort_keys=True).encode()).hexdigest()[:8]}"


def ensure_run(task: str, algo: str, steps: int, args: argparse.Namespace, scope: CancelScope | None = None) -> str:
    """The task's offline run with ALGO: started, resumed, or (finished) reused; SCOPE's
    first stop (Ctrl-C, SIGTERM) kills its jobs."""
    env_args = dict(args.env_args)
    run_id = table_run_id(task, algo, env_args)
    started = time.perf_counter()
    if (Path(args.runs_dir) / run_id).is_dir():
        outcome = resume_run(run_id, args.runs_dir, QuietUI(), front=app_front(scope))
    else:
        env_kwargs = {**RunSpec.default_env_kwargs(task), **env_args} if env_args else None
        spec = RunSpec(llm="offline", env=task, env_kwargs=env_kwargs, algo=algo, steps=steps, sandbox=args.sandbox,
                       runs_dir=args.runs_dir, offline_prior=False, run_id=run_id,
                       confirm_steps=0, max_parallel=args.max_parallel, eval_episodes=args.eval_episodes)  # the study's hrf+oef@10x vs native@10x asks it, with more seeds  # fmt: skip
        print(f"run {run_id}: offline designer, no prior, {algo} at {steps} steps", flush=True)
        outcome = start_run(spec, QuietUI(), front=app_front(scope))
    print(f"run {run_id}: {outcome.status} ({time.perf_counter() - started:.0f} s)", flush=True)
    return run_id


def share_results(runs_dir: str, run_ids: list[str]) -> int:
    """Give each of RUN_IDS' result caches the entries of the others; returns how many were
    copied. The cache is keyed by what a job computes (code, config, seed), so an entry
    answers only the same computation: in practice the arms without candidate code."""
    caches = [RunDir(Path(runs_dir) / run_id).cache_dir for run_id in run_ids]
    copied = 0
    for source in caches:
        for entry in source.glob("*.json"):
            for target in (c for c in caches if c != source and not (c / entry.name).exists()):
                shutil.copyfile(entry, target / entry.name)
                copied += 1
    return copied


def cell_row(cell: dict[str, Any], better: dict[str, str]) -> dict[str, Any]:
    """What the table shows of one study cell; BETTER (study.json's): which way each metric is better."""
    summary = cell["summary"].get("return", {})
    test = cell["vs_native"].get("return", {})
    return {"algo": cell["algo"], "arm": cell["variant"], "steps": cell["steps"], "seeds": cell["seeds"],
            "return": cell["per_seed"].get("return"),
            **{k: summary.get(k) for k in ("n", "min", "max", "iqm", "iqm_ci_low", "iqm_ci_high", "mean", "ci_low",
                                           "ci_high")},
            "poi_vs_native": test.get("poi"), "versus": cell.get("vs_native_arm"),
            "metrics": {m: {**{k: s.get(k) for k in ("n", "min", "max", "mean", "ci_low", "ci_high")},
                            "better": better.get(m), "poi": cell["vs_native"].get(m, {}).get("poi")}
                        for m, s in cell["summary"].items()}}  # fmt: skip


def verdicts(rows: list[dict[str, Any]]) -> list[str]:
    """Per (task, loop algorithm, algorithm): hrf+oef against native at the loop's budget and
    hrf+oef@10x against native@10x, on every metric: `better` / `worse` with the raw direction
    (the probability of being better, in the metric's own direction, has a 95% CI that excludes
    1/2), `no difference`, or `too few seeds`."""
    groups: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["task"], row["loop_algo"], row["algo"]), {})[row["arm"]] = row
    lines = []
    for (task, loop_algo, algo), by_arm in groups.items():
        parts = []
        for arm, budget in GAIN_ARMS:
            row = by_arm.get(arm)
            tested = {m: v for m, v in (row or {}).get("metrics", {}).items() if v["poi"] is not None}
            if not tested:
                parts.append(f"at {budget}: not measured")
                continue
            seeds = len(row["seeds"])
            parts.append(f"at {budget} ({arm} vs {row['versus']}): " + ", ".join(
                f"{m} {v['mean']:.2f} {said(poi_verdict(v['poi'], seeds), m, v.get('better') != 'lower')} "
                f"(P(better) {v['poi']['value']:.2f})"
                for m, v in tested.items()))  # fmt: skip
        lines.append(f"- {task}, evolved with {loop_algo}, {algo}: " + "; ".join(parts) + ".")
    return lines


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one row per (task, loop algorithm, algorithm, arm)."""
    lines = ["| task | evolved with | algo | arm | steps | IQM return [95% CI] | P(better than native) [95% CI] |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in rows:
        shown = shown_poi(row["poi_vs_native"], len(row["return"] or [])) if row["poi_vs_native"] else ""
        iqm = shown_spread(row, "iqm", "iqm_ci", 2) if row["iqm"] is not None else "-"
        lines.append(f"| {row['task']} | {row['loop_algo']} | {row['algo']} | {row['arm']} | {row['steps']} | "
                     f"{iqm} | {shown} |")  # fmt: skip
    return "\n".join(lines)


def grid(rows: list[dict[str, Any]], arms: list[str]) -> str:
    """Markdown, one row per (task, loop algorithm, algorithm), one column per arm:
    `IQM [95% CI] (P(better than native))` (below 5 seeds the seeds' range, labelled so),
    docs/results.md's table."""
    cells: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for row in rows:
        cells.setdefault((row["task"], row["loop_algo"], row["algo"]), {})[row["arm"]] = row
    lines = ["| task | evolved with | algo | " + " | ".join(arms) + " |", "|---|---|---|" + "---|" * len(arms)]
    for (task, loop_algo, algo), by_arm in cells.items():
        shown = []
        for arm in arms:
            row = by_arm.get(arm)
            if row is None or row["iqm"] is None:
                shown.append("-")
                continue
            poi = row["poi_vs_native"]
            seeds = len(row["return"] or [])
            text = shown_spread(row, "iqm", "iqm_ci", 2)
            text += f" ({poi['value']:.2f})" if poi else ""
            shown.append(text + (f" n={seeds}" if seeds != len(row["seeds"]) else ""))
        lines.append(f"| {task} | {loop_algo} | {algo} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


def tabulate(args: argparse.Namespace, scope: CancelScope | None = None) -> dict[str, Any]:
    """Every task's runs and studies (resumed where an earlier sitting stopped), the result
    JSON rewritten after each study; SCOPE's first stop kills the jobs in flight."""
    split = lambda text: [x.strip() for x in text.split(",") if x.strip()]  # noqa: E731
    steps_of = lambda algo: args.steps.get(algo, RunSpec().steps)  # noqa: E731
    rows: list[dict[str, Any]] = []
    equal_compute: list[dict[str, Any]] = []
    studies: dict[str, list[dict[str, Any]]] = {}  # loop algorithm -> its candidates' studies
    arms = tuple(split(args.arms))
    result: dict[str, Any] = {"settings": {**vars(args), "out": str(args.out), "arms": list(arms)}}
    for task in split(args.tasks):
        run_ids = {loop_algo: ensure_run(task, loop_algo, steps_of(loop_algo), args, scope)
                   for loop_algo in split(args.loop_algos)}  # fmt: skip
        for loop_algo, run_id in run_ids.items():
            for algo in split(args.algos):
                print(f"shared {share_results(args.runs_dir, list(run_ids.values()))} finished jobs "
                      f"between the runs of {task}", flush=True)
                study = run_study(
                    StudySpec(run_id=run_id, runs_dir=args.runs_dir, seeds=args.seeds, steps=steps_of(algo),
                              algos=(algo,), variants=arms, sandbox=args.sandbox, checkpoints=args.checkpoints,
                              max_parallel=args.max_parallel, eval_episodes=args.eval_episodes),
                    progress=lambda line: print(line, flush=True),
                )  # fmt: skip
                studies.setdefault(loop_algo, []).append(study)
                rows += [{"task": task, "loop_algo": loop_algo, "run_id": run_id, **cell_row(c, study.get("better", {}))}
                         for c in study["cells"]]
                equal_compute += [{"task": task, "loop_algo": loop_algo, **r} for r in study["equal_compute"]]
                result |= {"rows": rows, "equal_compute": equal_compute,
                           "combined": {a: combine_studies(s) for a, s in studies.items()}}  # fmt: skip
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(ENV_NAMES))
    parser.add_argument("--env-arg", dest="env_args", action="append", type=env_arg, default=[], metavar="KEY=VALUE",
                        help="every task's env argument, repeatable (vmas:balance: n_agents=4); part of the run ids")
    parser.add_argument("--loop-algos", default=",".join(LOOP_ALGOS), help="one offline run per task each")
    parser.add_argument("--algos", default=",".join(PAPER_ALGOS), help="studied algorithms")
    parser.add_argument("--steps", type=budgets, default={}, help=f"ALGO=STEPS,... (default {RunSpec().steps} each)")
    parser.add_argument("--arms", default=",".join(ARMS),
                        help="study arms (native first; e.g. native,hrf+oef,native@10x,native@loop)")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help=f"study seeds (the paper preset: {PAPER_SEEDS})")
    parser.add_argument("--checkpoints", type=int, default=0,
                        help="interval checkpoints per training: the table then uses the absolute metric")
    parser.add_argument("--runs-dir", default=DEFAULT_RUNS_DIR)
    parser.add_argument("--max-parallel", type=int, default=None,
                        help="concurrent training jobs (default: one per core); 1 on a shared machine")
    parser.add_argument("--eval-episodes", type=int, default=EVAL_EPISODES,
                        help="evaluation episodes per training, the loop's and the held-out ones")
    parser.add_argument("--sandbox", default="auto", choices=["auto", "docker", "process"])
    parser.add_argument("--out", type=Path, default=OUT, help="the JSON result, rewritten after each study")
    args = parser.parse_args(argv)
    with first_stop_cancels() as interrupts:  # SIGTERM as Ctrl-C: no job's container outlives the table
        try:
            result = tabulate(args, interrupts.scope)
        except KeyboardInterrupt:
            interrupts.wait()
            print("interrupted; finished runs and cells are kept: the same command continues the table",
                  file=sys.stderr)  # fmt: skip
            raise SystemExit(EXIT_INTERRUPTED) from None
    rows, arms = result.get("rows", []), result["settings"]["arms"]
    print()
    print(table(rows))
    print()
    print(grid(rows, list(arms)))
    print()
    print("\n".join(verdicts(rows)))
    for loop_algo, combined in result.get("combined", {}).items():
        print(f"\ncandidates evolved with {loop_algo}, all tasks:\n")
        print(render_combined(combined, []))
    print(f"\nresult: {args.out}; studies under {Path(args.runs_dir)}/<run>/{STUDIES_DIR}/")


if __name__ == "__main__":
    main()
