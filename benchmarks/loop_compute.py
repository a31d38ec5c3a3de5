"""Does the loop use every core? Its env steps/s against cores x one in-process training job.
And does successive halving find as good a candidate with fewer env steps?

    python -m benchmarks.loop_compute                        # the default `lero run` shape
    python -m benchmarks.loop_compute --generations 1 --steps 200000 --json loop_compute.json
    python -m benchmarks.loop_compute --compare-schedules 3 --json schedules.json

`--compare-schedules N` runs, for designer seeds 0..N-1, the same offline run with
`--schedule full` and `--schedule halving`, and compares their best fitness (a candidate
that trained the whole budget, mean over the run's seeds) and the env steps each spent
(the target: the same best fitness within the seeds' spread with <= 55% of the steps).

In one sitting: one in-process ``training.train`` of the run's env, algo and budget with the
threads one sandbox job gets (the reference), then an offline ``lero run`` (default sandbox,
default concurrency), then the reference again. The loop's rate is the run's training env
steps over its wall-clock; the ideal is ``cores x`` the reference's training steps/s (the
target is >= 0.8 of it). Where the rest goes comes from report.json's ``time``: the share of
the slots' seconds (wall x concurrent jobs) spent training, starting sandboxes, evaluating,
and idle (the designer, gates and reflection run while slots wait). Then one baseline train
job alone in the run's sandbox (its cost apart from concurrency), and as many bare
in-process references as the loop runs jobs, side by side in their own processes: the
loop's rate against theirs is what the loop itself costs, apart from what the machine
gives concurrent jobs (a shared machine gives two jobs far less than twice one). The load
average is recorded around every part: absolute speeds on a shared machine mean little, the ratio more.

The references train in this process and its children with the settings every sandbox job
process gets (`sandbox.types.JOB_PROCESS_ENV`: one thread, passive OpenMP waits, glibc malloc
keeping freed memory); glibc reads its settings at start, so the benchmark re-executes itself
once with them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.sandbox_overhead import container_start_cpu_s
from lero.app.cli.run_hooks import app_front
from lero.graph.configuration import DEFAULT_RUNS_DIR, RunSpec, machine_cores, parallel_jobs
from lero.graph.context import open_sandbox
from lero.graph.runner import start_run
from lero.graph.summary import write_summary
from lero.graph.trust import job_env
from lero.sandbox import EVALUATE, TRAIN
from lero.sandbox.types import JOB_PROCESS_ENV, Job, Limits

TARGET = 0.8  # the target: the loop reaches >= 0.8 x (cores x one in-process job)
HALVING_TARGET = 0.55  # the target: halving's env steps over full's, at the same best fitness


class QuietUI:
    """Answers nothing and prints one line per finished generation."""

    def on_event(self, event: dict[str, Any]) -> None:
        if event.get("event") == "generation_finished":
            print(f"  generation {event['generation']} done", file=sys.stderr, flush=True)

    def ask(self, payload: dict[str, Any]) -> object | None:
        return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = RunSpec()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--generations", type=int, default=defaults.generations)
    parser.add_argument("--population", type=int, default=defaults.population)
    parser.add_argument("--seeds", type=int, default=defaults.seeds)
    parser.add_argument("--sandbox", choices=["auto", "docker", "process"], default=defaults.sandbox)
    parser.add_argument("--max-parallel", type=int, default=None)
    parser.add_argument("--runs-dir", default=DEFAULT_RUNS_DIR)
    parser.add_argument("--json", type=Path, help="write the measurement here")
    parser.add_argument("--compare-schedules", type=int, metavar="N", default=0,
                        help="instead: N runs (designer seeds 0..N-1) with each schedule, full and halving")
    args = parser.parse_args(argv)
    try:
        args.spec = RunSpec(
            steps=args.steps,
            generations=args.generations,
            population=args.population,
            seeds=args.seeds,
            sandbox=args.sandbox,
            max_parallel=args.max_parallel,
            runs_dir=args.runs_dir,
            llm="offline",
            run_id=time.strftime("loop-compute-%Y%m%d-%H%M%S", time.gmtime()),
        )
    except ValueError as error:
        parser.error(" ".join(str(error).split())[:300])
    return args


def reference(spec: RunSpec, threads: int, steps: int | None = None) -> dict[str, Any]:
    """One in-process baseline training of the run's env, algo and budget (no evaluation)."""
    from lero.training import TrainConfig, train

    load_before = os.getloadavg()[0]
    cfg = TrainConfig(
        env=spec.env,
        env_kwargs=spec.env_kwargs or {},
        algo=spec.algo,
        steps=steps or spec.steps,
        hparams=spec.hparams,
        threads=threads,
    )
    result = train(cfg, evaluation=False)
    return {"steps_per_s": result.steps_per_s, "load": (load_before + os.getloadavg()[0]) / 2}


def side_by_side(spec: RunSpec, threads: int, jobs: int) -> dict[str, Any]:
    """``jobs`` in-process references at once, one process each (no sandbox): what the
    machine gives that many bare jobs now, against which the loop's own overheads show."""
    load_before = os.getloadavg()[0]
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        rates = pool.starmap(_reference_rate, [(spec, threads)] * jobs)
    return {"steps_per_s": sum(rates), "per_job": rates, "load": (load_before + os.getloadavg()[0]) / 2}


def sandboxed(spec: RunSpec) -> dict[str, Any]:
    """One baseline train job of the run's budget alone in the run's sandbox (after a tiny
    one warms a container): the sandbox's own cost against the in-process reference."""
    sandbox = open_sandbox(spec, cache_dir=None)
    try:
        rates = []
        for steps in (1, spec.steps):
            job = Job(kind=TRAIN.name, code=None, env=job_env(spec), algo=spec.algo, steps=steps,
                      seed=0, hparams=spec.hparams)  # fmt: skip
            result = sandbox.run_job(job)
            if result.status != "ok":
                raise SystemExit(f"loop_compute: the sandboxed job failed: {result.error}")
            rates.append(steps / result.run_s)
    finally:
        sandbox.close()
    return {"steps_per_s": rates[-1], "backend": sandbox.kind}


def _reference_rate(spec: RunSpec, threads: int) -> float:
    reference(spec, threads, steps=1)
    return reference(spec, threads)["steps_per_s"]


def slot_shares(time_: dict[str, Any], wall_s: float, slots: int) -> dict[str, float]:
    """Shares of the slots' seconds (wall x concurrent jobs): training's own work, each job
    kind's sandbox start and imports and work, and what no job used (idle)."""
    capacity = wall_s * slots
    shares: dict[str, float] = {}
    for kind, row in time_["jobs"].items():
        shares[f"{kind}.run"] = row["run_s"] / capacity
        shares[f"{kind}.start"] = row["start_s"] / capacity
    shares["idle"] = 1.0 - sum(shares.values())
    return shares


def ceiling(train_cpu_s: float, sandboxes: int, start_cpu_s: float) -> float:
    """The loop's best ratio to cores x one job when only its sandbox starts cost: training
    that needs TRAIN_CPU_S at the reference's speed shares the cores with SANDBOXES starts."""
    return train_cpu_s / (train_cpu_s + sandboxes * start_cpu_s)


def start_costs(spec: RunSpec, time_: dict[str, Any], train_cpu_s: float, repeats: int = 5) -> dict[str, Any]:
    """One sandbox start's machine CPU-seconds, measured now, and the loop's ceilings."""
    sandbox = open_sandbox(spec, cache_dir=None)
    try:
        costs = container_start_cpu_s(sandbox, repeats)
    finally:
        sandbox.close()
    start_cpu_s = costs["engine"]
    jobs = time_["jobs"]
    started = sum(row["sandboxes"] for row in jobs.values())
    irreducible = sum(jobs.get(kind, {}).get("sandboxes", 0) for kind in (TRAIN.name, EVALUATE.name))
    return {
        "start_cpu_s": start_cpu_s,
        "start_cpu_s_sandbox_alone": costs["pass"],  # of which the container and an empty script
        "train_cpu_s": train_cpu_s,
        "sandboxes": started,
        "ceiling": ceiling(train_cpu_s, started, start_cpu_s),
        "ceiling_train_and_evaluate_only": ceiling(train_cpu_s, irreducible, start_cpu_s),
    }


def schedule_run(spec: RunSpec, schedule: str, designer_seed: int) -> dict[str, Any]:
    """One offline run with SCHEDULE: its best fitness (whole budget), the best's seed spread, its steps."""
    run_spec = spec.model_copy(update={"schedule": schedule, "designer_seed": designer_seed,
                                       "run_id": f"{spec.run_id}-{schedule}-{designer_seed}"})  # fmt: skip
    outcome = start_run(run_spec, QuietUI(), front=app_front())
    report = write_summary(outcome.run_dir)
    best = report["best"]["candidate_id"]
    spread = None
    if best is not None:
        result = json.loads(next(outcome.run_dir.glob(f"candidates/{best}/result.json")).read_text())
        spread = result.get("fitness_std")
    print(f"  {schedule} designer seed {designer_seed}: best {report['best']['fitness']}, "
          f"{report['env_steps']:,} env steps, {report['wall_s']:.0f} s", file=sys.stderr, flush=True)
    return {"schedule": schedule, "designer_seed": designer_seed, "status": report["status"],
            "best_fitness": report["best"]["fitness"], "best_seed_std": spread, "env_steps": report["env_steps"],
            "wall_s": report["wall_s"], "rungs": report["schedule"]["rungs"], "run_dir": str(outcome.run_dir)}  # fmt: skip


def compare_schedules(spec: RunSpec, runs: int) -> dict[str, Any]:
    """Full against halving, paired by designer seed (alternating which goes first)."""
    rows = []
    for designer_seed in range(runs):
        order = ("full", "halving") if designer_seed % 2 == 0 else ("halving", "full")
        rows += [schedule_run(spec, schedule, designer_seed) for schedule in order]
    summary: dict[str, Any] = {}
    for schedule in ("full", "halving"):
        mine = [r for r in rows if r["schedule"] == schedule and r["best_fitness"] is not None]
        fitness = [r["best_fitness"] for r in mine]
        summary[schedule] = {
            "best_fitness": fitness,
            "mean_best_fitness": statistics.fmean(fitness) if fitness else None,
            "std_best_fitness": statistics.pstdev(fitness) if len(fitness) > 1 else None,
            "mean_best_seed_std": statistics.fmean(r["best_seed_std"] for r in mine) if mine else None,
            "env_steps": statistics.fmean(r["env_steps"] for r in rows if r["schedule"] == schedule),
        }
    full, halving = summary["full"], summary["halving"]
    spread = max(full["std_best_fitness"] or 0.0, full["mean_best_seed_std"] or 0.0)
    gap = (halving["mean_best_fitness"] - full["mean_best_fitness"]
           if None not in (halving["mean_best_fitness"], full["mean_best_fitness"]) else None)  # fmt: skip
    return {"runs": rows, "summary": summary, "steps_share": halving["env_steps"] / full["env_steps"],
            "fitness_gap": gap, "spread": spread, "within_spread": gap is not None and gap >= -spread,
            "target_steps_share": HALVING_TARGET}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spec: RunSpec = args.spec
    if args.compare_schedules:
        result = {"date": datetime.now(UTC).isoformat(timespec="seconds"),
                  "spec": {k: getattr(spec, k) for k in ("steps", "generations", "population", "seeds", "sandbox")},
                  "load_before": os.getloadavg()[0], **compare_schedules(spec, args.compare_schedules),
                  "load_after": os.getloadavg()[0]}  # fmt: skip
        print(json.dumps(result, indent=1))
        if args.json:
            args.json.write_text(json.dumps(result, indent=1))
        return 0
    job_threads = Limits().cpus  # the loop's jobs run with the default Limits
    slots = parallel_jobs(spec.max_parallel, job_threads)
    cores = machine_cores()
    threads = max(1, int(job_threads))
    reference(spec, threads, steps=1)  # one iteration: first-call costs stay out of the reference
    refs = [reference(spec, threads)]
    print(f"reference: {refs[0]['steps_per_s']:,.0f} steps/s", file=sys.stderr, flush=True)
    load_before = os.getloadavg()[0]
    outcome = start_run(spec, QuietUI(), front=app_front())
    report = write_summary(outcome.run_dir)
    loop_load = (load_before + os.getloadavg()[0]) / 2
    refs.append(reference(spec, threads))
    alone = sandboxed(spec)
    together = side_by_side(spec, threads, slots)
    ref_rate = statistics.fmean(ref["steps_per_s"] for ref in refs)
    starts = start_costs(spec, report["time"], report["env_steps"] * threads / ref_rate)
    loop_rate = report["env_steps"] / report["wall_s"]
    train = report["time"]["jobs"].get("train", {})
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "run_dir": str(outcome.run_dir),
        "status": report["status"],
        "spec": {k: getattr(spec, k) for k in ("steps", "generations", "population", "seeds", "sandbox")},
        "cores": cores,
        "concurrent_jobs": slots,
        "job_threads": threads,
        "reference_steps_per_s": [ref["steps_per_s"] for ref in refs],
        "reference_load": [ref["load"] for ref in refs],
        "loop_env_steps": report["env_steps"],
        "loop_wall_s": report["wall_s"],
        "loop_steps_per_s": loop_rate,
        "loop_load": loop_load,
        "ratio_to_cores_x_reference": loop_rate / (cores * ref_rate),
        "sandboxed_job_steps_per_s": alone["steps_per_s"],
        "sandbox": alone["backend"],
        "side_by_side_steps_per_s": together["per_job"],
        "side_by_side_load": together["load"],
        "ratio_to_side_by_side": loop_rate / together["steps_per_s"],
        "target": TARGET,
        "train_job_steps_per_s": report["env_steps"] / train["run_s"] if train.get("run_s") else None,
        "slot_shares": slot_shares(report["time"], report["wall_s"], slots),
        "starts": starts,
        "time": report["time"],
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


def with_job_env() -> None:
    """Re-execute this benchmark with `JOB_PROCESS_ENV` unless it already runs with it."""
    if any(os.environ.get(key) != value for key, value in JOB_PROCESS_ENV.items()):
        argv = [sys.executable, "-m", "benchmarks.loop_compute", *sys.argv[1:]]
        os.execve(sys.executable, argv, {**os.environ, **JOB_PROCESS_ENV})


if __name__ == "__main__":
    with_job_env()
    sys.exit(main())
