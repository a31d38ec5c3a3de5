"""Confirmation: does the loop's winner still win at the budget a researcher trains at?

The loop selects after `--steps` per candidate; a candidate that learns faster can win
there and lose its edge later. After the last generation the `confirm_top` best candidates
and native train again at `RunSpec.confirm_budget()` env steps (default 3x `--steps`) on
fresh seeds (`graph.confirmation.confirm_seeds`: the run's seed count, at least 3), in the
sandbox, through the same train-and-evaluate jobs and result cache as the loop, and are
measured on held-out episodes; a sparse task's run adds native@loop
(`graph.confirmation.LOOP_ARM`: native trained with every env step the run spent). Native's
jobs run no candidate code, so their results are also kept in the runs dir's shared cache (`RunDir.shared_cache_dir`): a later run of the
same task and budget reuses them.

Each seed's result is written when its job ends (`confirm/<candidate_id>/seed-<n>.json`); a
run killed here resumes in this node, skips those seeds, and the result caches answer jobs
that finished in the sandbox before their file was written.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from lero.graph.configuration import MAX_STEPS
from lero.graph.confirmation import LOOP_ID, arm_name, confirm_seeds
from lero.graph.context import RunContext
from lero.graph.nodes.train import rank_key, seed_plan
from lero.graph.protocol import cached_seeds, train_and_evaluate_seeds
from lero.graph.rundir import BASELINE_ID
from lero.graph.schedule import jobs_beside_cache, loop_env_steps
from lero.graph.state import RunState


def confirmed_arms(state: RunState, runtime: Runtime[RunContext]) -> list[dict[str, Any]]:
    """The candidates to confirm (the `confirm_top` best that trained the whole budget, best
    first) and native; none when the run confirms nothing or has no winner."""
    spec = runtime.context.spec
    if not spec.confirm_budget() or state.get("stop_reason"):  # only a run that went through all its generations
        return []
    evaluated = state.get("evaluated", [])
    scored = [r for r in evaluated if r["candidate_id"] != BASELINE_ID and r["fitness"] is not None
              and r.get("stopped_at") is None]  # fmt: skip
    best = sorted(scored, key=rank_key(runtime.context.task.task_spec, spec.fitness), reverse=True)[: spec.confirm_top]
    if not best:
        return []
    native = {"candidate_id": BASELINE_ID, "code": None,
              "loop_fitness": next((r["fitness"] for r in evaluated if r["candidate_id"] == BASELINE_ID), None)}
    arms = [native, *({"candidate_id": r["candidate_id"], "code": r["code"], "loop_fitness": r["fitness"]}
                      for r in best)]  # fmt: skip
    if runtime.context.task.task_spec.sparse:  # does the loop pay for itself? native with all its compute
        selection = int(runtime.context.rundir.read_state().get("env_steps") or 0)
        budget = loop_env_steps(selection, spec.confirm_budget(), spec.confirm_seeds, len(arms))
        arms.append({"candidate_id": LOOP_ID, "code": None, "loop_fitness": None, "steps": min(budget, MAX_STEPS)})
    return arms


def _name(arm: dict[str, Any]) -> str:
    return arm_name(arm["candidate_id"])


def confirm(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Train and measure every confirmed arm's missing seeds; nothing goes into the state
    (the report reads the files)."""
    res = runtime.context
    spec = res.spec
    arms = confirmed_arms(state, runtime)
    if not arms:
        return {}
    steps = spec.confirm_budget()
    seeds, eval_seeds = confirm_seeds(spec.confirm_seeds)
    res.rundir.write_confirm_plan({
        "steps": steps, "loop_steps": spec.steps, "seeds": seeds, "eval_seeds": eval_seeds,
        "eval_episodes": spec.eval_episodes,
        "arms": [{"candidate_id": a["candidate_id"], "loop_fitness": a["loop_fitness"],
                  **({"steps": a["steps"]} if "steps" in a else {})} for a in arms],
    })  # fmt: skip
    missing = {a["candidate_id"]: [i for i, seed in enumerate(seeds)
                                   if (res.rundir.read_confirm_seed(a["candidate_id"], seed) or {}).get("status") != "ok"]
               for a in arms}  # fmt: skip
    todo = [a for a in arms if missing[a["candidate_id"]]]
    names = ", ".join(_name(a) + (f" ({a['steps']:,} steps, job limit {spec.job_wall_s(a['steps']):,.0f} s)"
                                  if "steps" in a else "") for a in arms)  # fmt: skip
    res.emit("confirm_started", steps=steps, seeds=seeds, arms=[a["candidate_id"] for a in arms],
             todo={a["candidate_id"]: len(missing[a["candidate_id"]]) for a in todo},
             message=f"confirmation: {names} at {steps:,} env steps on {len(seeds)} fresh seeds, "
                     f"held-out episodes ({sum(map(len, missing.values()))} seeds to train or read from the cache)")  # fmt: skip
    shared = res.sandbox.result_cache(res.rundir.shared_cache_dir)  # sealed like the run's own

    def fields(arm: dict[str, Any], indexes: list[int]) -> dict[str, Any]:
        """`train_and_evaluate_seeds`'s arguments for ARM's seeds at INDEXES."""
        return {"code": arm["code"], "env": res.job_env, "algo": spec.algo, "steps": arm.get("steps", steps),
                "seeds": [seeds[i] for i in indexes], "eval_seeds": [eval_seeds[i] for i in indexes],
                "candidate_id": f"confirm:{arm['candidate_id']}", "eval_episodes": spec.eval_episodes,
                "hparams": spec.hparams, "limits": replace(res.job_limits, wall_s=spec.job_wall_s(arm.get("steps", steps))),
                "cache": shared if arm["code"] is None else None}  # fmt: skip

    # the slots are planned for the seeds that train: with native's read from the cache, the
    # candidate's seeds spread over every slot instead of sharing one job
    by_id = {a["candidate_id"]: a for a in todo}
    jobs = [(by_id[cid], indexes) for cid, indexes in jobs_beside_cache(
        {cid: missing[cid] for cid in by_id},
        {cid: cached_seeds(res.sandbox, **fields(a, missing[cid])) for cid, a in by_id.items()},
        {cid: a.get("steps", steps) / steps for cid, a in by_id.items()},  # native@loop's jobs are longer
        list(range(len(seeds))), lambda lengths, indexes: seed_plan(spec, lengths, indexes),
    )]  # fmt: skip

    def run(arm: dict[str, Any], indexes: list[int]) -> None:
        cid = arm["candidate_id"]
        results = train_and_evaluate_seeds(res.sandbox, **fields(arm, indexes))
        for i, result in zip(indexes, results, strict=True):
            record = {"candidate_id": cid, "seed": seeds[i], "eval_seed": eval_seeds[i], "steps": arm.get("steps", steps),
                      **result.to_dict()}  # fmt: skip
            record.pop("policy_dir", None)
            res.rundir.write_confirm_seed(cid, seeds[i], record)
            res.hooks.job_result(res.rundir, cid, seeds[i], result)
            shown = f"held-out return {result.fitness:.3f}" if result.fitness is not None else result.status
            res.emit("confirm_finished", candidate_id=cid, seed=seeds[i], status=result.status,
                     cached=result.cached, fitness=result.fitness, env_steps=record["steps"],
                     message=f"confirmation {_name(arm)} seed {seeds[i]}: {shown}{' (cached)' if result.cached else ''}")  # fmt: skip

    with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:  # each in a copy of this context: events stream
        for future in [pool.submit(contextvars.copy_context().run, run, arm, indexes) for arm, indexes in jobs]:
            future.result()
    return {}
