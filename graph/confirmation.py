"""The confirmation's seeds and its report.json block, read from the run directory alone.

After the last generation the loop's winner(s) and native train again at a longer budget
(`RunSpec.confirm_budget()`, default 3x `--steps`) on fresh seeds, and are measured on
held-out episodes (`graph.nodes.confirm`). The seed ranges are disjoint from the loop's
(`0..seeds-1`, selected on `training.defaults.EVAL_SEED`) and from `lero study`'s (`1000+`,
`100000+`, `200000+`), so a study of the run afterwards is an independent replication.

A run whose task marks its reward sparse also trains `native@loop` (`LOOP_ARM`, saved
under `LOOP_ID`): native with every env step the whole run spent, the selection loop's and
the confirmation's other arms' (`graph.schedule.loop_env_steps`), the arm `lero study`
names the same way. Does the winner still beat native given all that compute?

`confirmation_block(rundir, task, fitness)` is report.json's `confirmation` (null when the
run has none): the raw per-seed values, which way each metric is better and the metric the
loop selected on (facts of the engine, stated here once); the app adds the statistics
(`app/reports/confirmation_verdict.py`).
"""

from __future__ import annotations

from typing import Any

from lero.graph.configuration import CANDIDATE_ID, RunSpec
from lero.graph.rundir import BASELINE_ID, RunDir, UnsafeFile
from lero.training.envs.task import RETURN, TaskSpec

FIRST_CONFIRM_SEED = 3000  # training seeds FIRST_CONFIRM_SEED + i
FIRST_CONFIRM_EVAL_SEED = 300_000  # held-out episodes of training seed i: FIRST_CONFIRM_EVAL_SEED + i
CURVE = "return"  # the training curve read for steps-to-reach (native per-agent return)
LOOP_ARM = "native@loop"  # native trained with every env step the run spent (`lero study`'s arm too)
LOOP_ID = "baseline-loop"  # the confirmation's native@loop arm: its files' id (configuration.CANDIDATE_ID)


def loop_arm_plan(spec: RunSpec, steps_per_s: float | None = None) -> str | None:
    """What SPEC's plan says of native@loop before it runs: its env steps per seed and its job
    limit (`RunSpec.job_wall_s`: `--job-timeout` scaled with its steps); at STEPS_PER_S (an
    estimate, None: not known) the time one of its jobs takes. None: the run has no such arm."""
    steps = spec.loop_arm_steps()
    if steps is None:
        return None
    usual, wall = spec.usual_job_steps(), spec.job_wall_s(steps)
    scaled = (f"{steps / usual:.1f}x a confirmation job's {usual:,}: its job limit is --job-timeout "
              f"{spec.job_timeout_s:,.0f} s x {steps / usual:.1f} = {wall:,.0f} s") if wall > spec.job_timeout_s \
        else f"its job limit is --job-timeout {spec.job_timeout_s:,.0f} s"  # fmt: skip
    took = f"; at ~{steps_per_s:,.0f} steps/s one takes ~{steps / steps_per_s:,.0f} s" if steps_per_s else ""
    return f"{LOOP_ARM} trains {steps:,} env steps per seed (every step the run spends), {scaled}{took}"


def arm_name(candidate_id: str) -> str:
    """How reports name a confirmation arm: native, native@loop, or the candidate's id."""
    return {BASELINE_ID: "native", LOOP_ID: LOOP_ARM}.get(candidate_id, candidate_id)


def confirm_seeds(count: int) -> tuple[list[int], list[int]]:
    """(training seeds, held-out evaluation seeds), one of each per confirmation seed."""
    return ([FIRST_CONFIRM_SEED + i for i in range(count)],
            [FIRST_CONFIRM_EVAL_SEED + i for i in range(count)])  # fmt: skip


def _arm(rundir: RunDir, arm: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    """One arm's seeds as saved: metric values of the ok ones, the statuses of the others,
    and each ok seed's training curve (steps, return) for steps-to-reach."""
    cid = arm.get("candidate_id")
    if not isinstance(cid, str) or not CANDIDATE_ID.match(cid):
        raise UnsafeFile(f"corrupt confirmation plan in {rundir.path}: candidate id {cid!r}")
    records = {seed: rundir.read_confirm_seed(cid, seed) for seed in seeds}
    ok = [r for r in records.values() if r is not None and r.get("status") == "ok"]
    return {
        "arm": arm_name(cid),
        "candidate_id": cid,
        "steps": arm["steps"] if _number(arm.get("steps")) else None,  # None: the plan's `steps`
        "loop_fitness": arm.get("loop_fitness"),
        "seeds": [int(r["seed"]) for r in ok],
        "failed": {str(seed): r.get("status") for seed, r in records.items() if r is not None and r.get("status") != "ok"},
        "per_seed": seed_metrics(ok),
        "curves": [{"steps": (r.get("curves") or {}).get("steps", []), CURVE: (r.get("curves") or {}).get(CURVE, [])}
                   for r in ok],
        "cached": sum(1 for r in ok if r.get("cached")),
    }  # fmt: skip


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def seed_metrics(records: list[dict[str, Any]]) -> dict[str, list[float]]:
    """metric -> one value per record (JobResult dicts of a candidate's ok seeds), for the
    metrics every record has."""
    names = [m for m in (records[0].get("metrics") or {}) if all(_number((r.get("metrics") or {}).get(m)) for r in records)] if records else []
    return {m: [float(r["metrics"][m]) for r in records] for m in names}  # fmt: skip


def metric_directions(task: TaskSpec | None) -> dict[str, str]:
    """metric -> `higher` | `lower`, the way that is better: the env's own TaskSpec says (None:
    a task known only once built), and `return` is always `higher` (every task's)."""
    return {RETURN: "higher", **({m.name: m.better for m in task.metrics} if task else {})}


def selected_metric(task: TaskSpec | None, fitness: object) -> str:
    """The metric the loop selected on: the task's success metric under `--fitness success`,
    else `return`."""
    return task.success_metric if task and fitness == "success" else RETURN


def confirmation_block(rundir: RunDir, task: TaskSpec | None = None, fitness: object = None) -> dict[str, Any] | None:
    """report.json's `confirmation`: the plan and each arm's saved seeds (None: no plan), with
    TASK's metric directions and the metric FITNESS (RunSpec.fitness) selected on."""
    plan = rundir.read_confirm_plan()
    if plan is None:
        return None
    seeds = [int(s) for s in plan.get("seeds", []) if _number(s)]
    arms = [_arm(rundir, arm, seeds) for arm in plan.get("arms", []) if isinstance(arm, dict)]
    complete = bool(arms) and all(len(a["seeds"]) == len(seeds) for a in arms)
    steps = plan.get("steps") if _number(plan.get("steps")) else None
    return {
        "status": "completed" if complete else "incomplete",
        "steps": plan.get("steps"),
        "loop_steps": plan.get("loop_steps"),
        "seeds": seeds,
        "eval_seeds": plan.get("eval_seeds"),
        "eval_episodes": plan.get("eval_episodes"),
        "env_steps": sum((a["steps"] or steps) * len(a["seeds"]) for a in arms) if steps is not None else None,
        "arms": arms,
        "better": metric_directions(task),
        "success_metric": selected_metric(task, fitness),
    }
