"""What does the model add? Structured runs with real models against the offline designer's
random draws from the same grammar without its prior (the null model), on one task.

Every arm is `lero run` as the README gives it (a temporary working directory, the default
`runs/`), on the same task (`--env`, default simple_spread, with every `--env-arg KEY=VALUE`),
at the same generations, candidates, steps, training seeds and sandbox, without confirmation;
arms differ only in who picks the designs:
- `random`: `--llm offline --no-prior --designer-seed S` (fresh draws, then the offline
  evolution's children of the elites: what the grammar gives without a model's choices);
- a model: `--llm openai:MODEL --base-url URL --design structured --designer-seed S`.
S runs over `--designer-seeds`; a model's replicates differ by the server's sampling.
With `--work-dir DIR` the runs stay in DIR/runs: a later sitting of the same command reads
the completed ones and resumes an unfinished one, so an ablation of days can be spread over sittings.

Each run's id names the task (`task_slug`): a sparse task's runs are told from a dense one's.
The fitness compared is each run's own (its spec.json: `success` by default where the task
marks its reward sparse, else `final`), with the metric it selects on; the JSON and the table
say which.

Per arm it reports, for each generation, the IQM over designer seeds of the best and the
mean fitness (with 95% stratified-bootstrap CIs from `app.study.stats`), the run's best
fitness (IQM [CI]), and P(model > random) on the run's best fitness with its CI.

    python -m benchmarks.llm_designer --ablation --arm smollm2-135m=http://127.0.0.1:8091/v1 \
        [--arm gemma3-270m=http://127.0.0.1:8092/v1] [--env vmas:navigation] [--env-arg n_agents=3 ...] \
        [--designer-seeds 3] [--generations 2] [--population 3] [--steps 100000] [--seeds 1] \
        [--context-tokens 2048] [--sandbox process|docker] [--max-parallel 1] [--order seed|arm] \
        [--work-dir DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lero.app.cli.args import env_arg
from lero.app.study.stats import (
    aggregate,
    iqm,
    no_interval_reason,
    no_test_reason,
    probability_of_improvement,
)
from lero.graph.configuration import check_run_id
from lero.graph.confirmation import selected_metric
from lero.graph.summary import native_task

RANDOM = "random"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def llm_flags(arm: str, url: str | None, context_tokens: int | None) -> list[str]:
    """ARM's designer: offline, or the model behind URL (what `lero resume` needs of it too)."""
    if arm == RANDOM:
        return ["--llm", "offline"]
    return ["--llm", f"openai:{arm}", "--base-url", url or ""] + (["--context-tokens", str(context_tokens)] if context_tokens else [])


def arm_flags(arm: str, url: str | None, context_tokens: int | None) -> list[str]:
    """`lero run`'s flags for ARM: its designer, drawing without the prior or designing structured."""
    return llm_flags(arm, url, context_tokens) + (["--no-prior"] if arm == RANDOM else ["--design", "structured"])


def task_slug(env: str, env_args: list[tuple[str, object]]) -> str:
    """The task in a run id: `vmas:navigation` with n_agents=3 -> `vmas-navigation-n_agents.3`."""
    return "-".join([env.replace(":", "-"), *(f"{key}.{value}" for key, value in env_args)])


def run_id_of(arm: str, seed: int, args: argparse.Namespace) -> str:
    return f"{task_slug(args.env, args.env_args)}-{arm.replace(':', '-')}-{seed}"


def selection(spec_path: Path) -> dict[str, Any]:
    """What the run selected on, from its own spec.json: its fitness (`final`, `success`, ...)
    and the metric behind it (`graph.confirmation.selected_metric`: return, or the task's
    success metric under `success`)."""
    spec = json.loads(spec_path.read_text())
    fitness = spec.get("fitness")
    return {"fitness": fitness, "metric": selected_metric(native_task(spec.get("env"), spec.get("env_kwargs")), fitness)}


@contextlib.contextmanager
def work_folder(work_dir: Path | None) -> Iterator[Path]:
    """`--work-dir` (kept: a later sitting reads its finished runs), else a temporary folder."""
    if work_dir is not None:
        work_dir.mkdir(parents=True, exist_ok=True)
        yield work_dir
        return
    with tempfile.TemporaryDirectory(prefix="lero-ablation-") as work:
        yield Path(work)


def completed(run_dir: Path) -> bool:
    report = run_dir / "report.json"
    return report.is_file() and json.loads(report.read_text()).get("status") == "completed"


def one_run(arm: str, url: str | None, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """`lero run` for one arm and designer seed (in `--work-dir`: a completed run there is read,
    an unfinished one resumed); its report.json's numbers and its spec's fitness."""
    run_id = run_id_of(arm, seed, args)
    with work_folder(args.work_dir) as work:
        run_dir = work / "runs" / run_id
        started, reused = time.monotonic(), completed(run_dir)
        if not reused:
            if run_dir.exists():
                command = [sys.executable, "-m", "lero.app.cli.main", "resume", run_id,
                           *llm_flags(arm, url, args.context_tokens)]
            else:
                task = ["--env", args.env, *(f"--env-arg={key}={value}" for key, value in args.env_args)]
                command = [sys.executable, "-m", "lero.app.cli.main", "run", *task, "--generations", str(args.generations),
                           "--population", str(args.population), "--steps", str(args.steps), "--seeds", str(args.seeds),
                           "--designer-seed", str(seed), "--confirm-steps", "0", "--sandbox", args.sandbox,
                           "--max-parallel", str(args.max_parallel), "--run-id", run_id, *arm_flags(arm, url, args.context_tokens)]
            done = subprocess.run(command, cwd=work, capture_output=True, text=True)
            if not (run_dir / "report.json").exists():
                return {"arm": arm, "seed": seed, "run_id": run_id, "status": f"no report (exit {done.returncode})",
                        "stderr": done.stderr[-500:], "generations": []}
        report = json.loads((run_dir / "report.json").read_text())
        selected = selection(run_dir / "spec.json")
    return {
        "arm": arm, "seed": seed, "run_id": run_id, "status": report["status"], "stop_reason": report.get("stop_reason"),
        "wall_s": round(time.monotonic() - started, 1), "reused": reused, "fitness": selected,
        "baseline": report["baseline"]["fitness"], "best": report["best"]["fitness"], "generations": report["generations"],
        "design": report["design"], "llm": report["llm"],
    }


def compared_fitness(runs: list[dict[str, Any]]) -> str:
    """The fitness the runs compare, as their specs name it (`success (coverage)`); several
    when the runs disagree, so a table never hides a mix."""
    return ", ".join(sorted({f"{r['fitness']['fitness']} ({r['fitness']['metric']})" for r in runs if "fitness" in r})) or "—"


def summary(runs: list[dict[str, Any]], arms: list[str], generations: int) -> dict[str, Any]:
    """Per arm: per-generation IQM of best and mean fitness, the runs' best, P(arm > random)."""
    def value(run: dict, gen: int, key: str) -> float | None:
        row = next((g for g in run["generations"] if g["generation"] == gen), None)
        return None if row is None else row[key]

    def described(values: list[float]) -> dict[str, Any]:
        if not values:
            return {"n": 0}
        if no_interval_reason(len(values)):
            return {"n": len(values), "values": values}
        return {"n": len(values), **{k: v for k, v in aggregate([values]).items() if k.startswith("iqm")}}

    out: dict[str, Any] = {}
    best_of = {arm: [r["best"] for r in runs if r["arm"] == arm and r.get("best") is not None] for arm in arms}
    for arm in arms:
        mine = [r for r in runs if r["arm"] == arm]
        per_gen = []
        for gen in range(generations):
            best = [v for r in mine if (v := value(r, gen, "best_fitness")) is not None]
            mean = [v for r in mine if (v := value(r, gen, "mean_fitness")) is not None]
            valid = sum(value(r, gen, "valid") or 0 for r in mine)
            total = sum(value(r, gen, "candidates") or 0 for r in mine)
            per_gen.append({"generation": gen, "valid": valid, "candidates": total,
                            "best": described(best), "mean": described(mean)})
        entry: dict[str, Any] = {"runs": len(mine), "completed": sum(r["status"] == "completed" for r in mine),
                                 "per_generation": per_gen, "run_best": described(best_of[arm])}
        if best_of[arm]:
            entry["run_best"]["iqm_point"] = iqm(best_of[arm])
        if arm != RANDOM and best_of[arm] and best_of.get(RANDOM):
            reason = no_test_reason(len(best_of[arm]), len(best_of[RANDOM]))
            entry["p_better_than_random"] = ({"reason": reason} if reason else
                                             probability_of_improvement([best_of[arm]], [best_of[RANDOM]]))
        out[arm] = entry
    return out


def table(result: dict[str, Any]) -> str:
    """Markdown: per arm and generation, then per arm; its first line names the task and the fitness."""
    def fmt(cell: dict) -> str:
        if cell.get("n", 0) == 0:
            return "—"
        if "iqm" in cell:
            return f"{cell['iqm']:.2f} [{cell['iqm_ci_low']:.2f}, {cell['iqm_ci_high']:.2f}]"
        return " / ".join(f"{v:.2f}" for v in cell["values"])

    lines = [f"Task `{result['env']}` {json.dumps(result['env_args'])}; fitness: {result['fitness']}.", "",
             "| arm | generation | valid / candidates | best fitness, IQM [95% CI] | mean fitness, IQM [95% CI] |",
             "|---|---|---|---|---|"]
    for arm, entry in result["arms"].items():
        for g in entry["per_generation"]:
            lines.append(f"| {arm} | {g['generation']} | {g['valid']} / {g['candidates']} | {fmt(g['best'])} "
                         f"| {fmt(g['mean'])} |")
    lines += ["", "| arm | runs completed | run's best fitness, IQM [95% CI] | P(arm > random) [95% CI] |",
              "|---|---|---|---|"]
    for arm, entry in result["arms"].items():
        poi = entry.get("p_better_than_random")
        p = "—" if poi is None else poi.get("reason") or f"{poi['value']:.2f} [{poi['ci_low']:.2f}, {poi['ci_high']:.2f}]"
        lines.append(f"| {arm} | {entry['completed']} / {entry['runs']} | {fmt(entry['run_best'])} | {p} |")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.llm_designer --ablation",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--arm", action="append", default=[], metavar="MODEL=BASE_URL",
                        help="a real model's arm (repeatable); the random arm always runs")
    parser.add_argument("--env", default="simple_spread", help="the task of every arm's `lero run`")
    parser.add_argument("--env-arg", dest="env_args", action="append", type=env_arg, default=[], metavar="KEY=VALUE",
                        help="an env argument of every arm's run, repeatable (reward=sparse); part of the run ids")
    parser.add_argument("--designer-seeds", type=int, default=3)
    parser.add_argument("--generations", type=int, default=2)
    parser.add_argument("--population", type=int, default=3)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, default=1, help="training seeds per candidate (the same in every arm)")
    parser.add_argument("--context-tokens", type=int, default=2048)
    parser.add_argument("--sandbox", default="process", choices=("process", "docker"))
    parser.add_argument("--max-parallel", type=int, default=1,
                        help="sandbox jobs at once in each run, the same in every arm (fitness does not depend on it; "
                             "the runs' wall time does)")
    parser.add_argument("--order", default="seed", choices=("seed", "arm"),
                        help="seed: every arm for one seed, then the next (load drifts alike); arm: one arm's seeds at a time")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="keep the runs here (default: a temporary folder each): a completed run is read, "
                             "not trained again, an unfinished one resumed, so a stopped ablation continues")
    parser.add_argument("--out", type=Path, default=None)
    return parser


def main(argv: list[str]) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    models = dict(arm.split("=", 1) for arm in args.arm)
    arms = [RANDOM, *models]
    for arm in arms:  # at the edge: a run id lero refuses would end every arm's run at once
        try:
            check_run_id(run_id_of(arm, args.designer_seeds - 1, args))
        except ValueError as error:
            parser.error(f"{error} (shorter --arm names or fewer --env-arg)")
    started = {"uptime": uptime(), "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    order = ([(seed, arm) for seed in range(args.designer_seeds) for arm in arms] if args.order == "seed"
             else [(seed, arm) for arm in arms for seed in range(args.designer_seeds)])
    runs = []
    for seed, arm in order:
        run = one_run(arm, models.get(arm), seed, args)
        runs.append(run)
        print(f"{arm} seed {seed}: {run['status']}, best {run.get('best')}, "
              f"generations {[(g['valid'], g['best_fitness']) for g in run['generations']]}", flush=True)
        result = {"env": args.env, "env_args": dict(args.env_args), "fitness": compared_fitness(runs),
                  "budget": {k: getattr(args, k) for k in ("generations", "population", "steps", "seeds",
                                                           "designer_seeds", "sandbox", "max_parallel", "order")},
                  "started": started, "ended": {"uptime": uptime(), "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())},
                  "cpu_count": os.cpu_count(), "runs": runs, "arms": summary(runs, arms, args.generations)}
        if args.out is not None:  # after every run: an interrupted ablation keeps what it measured
            args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
