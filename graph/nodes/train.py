"""Training fan-out (one `Send` per candidate and seed, plus the baseline) and selection.

Each `train` branch runs one sandboxed train+evaluate job. Branches of a generation run
in parallel (at most `max_parallel` jobs at once: the sandbox's semaphore); a finished
branch's result is saved as a pending write, so a crash mid-generation re-runs only the
unfinished branches, and the sandbox's result cache answers any that finished in the
sandbox but not in the graph.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Send

from lero.graph.context import RunContext
from lero.graph.nodes.candidates import at_stage, replace
from lero.graph.reflection import candidate_feedback
from lero.graph.rundir import BASELINE_ID
from lero.graph.state import Candidate, RunState, TrainTask
from lero.training.envs.task import TaskSpec


def training_sends(state: RunState) -> list[Send]:
    """One branch per (approved candidate, seed), plus the baseline once per run."""
    seeds = state["spec"]["seeds"]  # the validated spec (routers may run without a context)
    generation = state["generation"]
    jobs: list[tuple[str, str | None]] = [(c["candidate_id"], c["code"]) for c in at_stage(state["candidates"], "approved")]
    if not any(r["candidate_id"] == BASELINE_ID for r in state.get("evaluated", [])):
        jobs.insert(0, (BASELINE_ID, None))
    return [
        Send("train", TrainTask(candidate_id=cid, generation=generation, code=code, seed=seed, spec=state["spec"]))
        for cid, code in jobs
        for seed in range(seeds)
    ]


def train(task: TrainTask, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Train and evaluate one candidate with one seed in the sandbox.

    A seed whose result the run directory already holds (the process died after writing
    it, before the graph saved the branch) is not trained again: the file stays as it is.
    """
    res = runtime.context
    spec = res.spec
    ids = {"candidate_id": task["candidate_id"], "generation": task["generation"], "seed": task["seed"]}
    saved = res.rundir.read_seed_result(task["candidate_id"], task["seed"])
    if saved is not None and saved.get("generation") == task["generation"] and saved.get("status") == "ok":
        res.emit("train_finished", kind="train", status="ok", cached=True, fitness=saved.get("fitness"),
                 elapsed_s=saved.get("elapsed_s"), **ids)
        return {"results": [saved]}
    res.emit("train_started", kind="train", **ids)
    result = res.sandbox.train_and_evaluate(
        task["code"], res.job_env, spec.algo, spec.steps, task["seed"],
        candidate_id=task["candidate_id"], eval_episodes=spec.eval_episodes, hparams=spec.hparams,
        limits=res.job_limits,
    )
    record = {**ids, **result.to_dict()}
    res.rundir.write_seed_result(task["candidate_id"], task["seed"], record)
    res.hooks.job_result(res.rundir, task["candidate_id"], task["seed"], result)
    res.emit("train_finished", kind="train", status=result.status, cached=result.cached,
             fitness=result.fitness, elapsed_s=result.elapsed_s, **ids)
    return {"results": [record]}


def aggregate(candidate_id: str, generation: int, code: str | None, per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """result.json for one candidate: means over seeds (fitness only when every seed is ok)."""
    per_seed = sorted(per_seed, key=lambda r: r["seed"])
    failed = [r for r in per_seed if r["status"] != "ok"]
    fitnesses = [float(r["fitness"]) for r in per_seed if r["status"] == "ok" and r.get("fitness") is not None]
    complete = bool(per_seed) and not failed and len(fitnesses) == len(per_seed)
    shared = [key for key in per_seed[0]["metrics"] if all(key in r["metrics"] for r in per_seed)] if complete else []
    evaluation = {key: statistics.fmean(r["metrics"][key] for r in per_seed) for key in shared}  # the task's metrics
    first = per_seed[0] if per_seed else {}
    return {
        "candidate_id": candidate_id, "generation": generation, "code": code,
        "status": failed[0]["status"] if failed else ("ok" if per_seed else "invalid"),
        "fitness": statistics.fmean(fitnesses) if complete else None,
        "fitness_std": statistics.pstdev(fitnesses) if complete else None,
        "eval": evaluation, "per_seed": per_seed,
        "curves": first.get("curves", {}), "reflection_stats": first.get("reflection_stats", {}),
    }


def dropped_record(candidate: Candidate) -> dict[str, Any]:
    """result.json for a candidate that never trained."""
    return {"candidate_id": candidate["candidate_id"], "generation": candidate["generation"],
            "code": candidate.get("code"), "status": candidate.get("status") or "invalid", "fitness": None, "fitness_std": None,
            "eval": {}, "per_seed": [], "curves": {}, "reflection_stats": {}, "error": candidate.get("error")}


def rank_key(task: TaskSpec) -> Callable[[dict[str, Any]], tuple[float, float]]:
    """Elites are ordered by fitness, ties broken by the task's success metric."""
    sign = 1.0 if task.metric(task.success_metric).higher_is_better else -1.0

    def key(record: dict[str, Any]) -> tuple[float, float]:
        return (record["fitness"], sign * record["eval"].get(task.success_metric, 0.0))

    return key


def select(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Aggregate this generation's results, write result.json files, keep the elites."""
    res = runtime.context
    generation = state["generation"]
    by_id: dict[str, dict[int, dict[str, Any]]] = {}
    for result in state.get("results", []):
        if result["generation"] == generation:  # a re-run branch overwrites its earlier result
            by_id.setdefault(result["candidate_id"], {})[result["seed"]] = result
    codes = {c["candidate_id"]: c["code"] for c in state["candidates"]}
    records = [aggregate(cid, generation, codes.get(cid), list(seeds.values())) for cid, seeds in by_id.items()]
    for record in records:
        res.rundir.write_result(record["candidate_id"], record)
    dropped = at_stage(state["candidates"], "dropped")
    for candidate in dropped:
        res.rundir.write_result(candidate["candidate_id"], dropped_record(candidate))

    evaluated = [*state.get("evaluated", []), *records]
    scored = [r for r in evaluated if r["candidate_id"] != BASELINE_ID and r["fitness"] is not None]
    best = sorted(scored, key=rank_key(res.task.task_spec), reverse=True)[: res.spec.n_elites]
    elites = [{**r, "reflection": candidate_feedback(r, res.task.task_spec)} for r in best]
    trained = [{**c, "stage": "trained"} for c in at_stage(state["candidates"], "approved")]
    env_steps = res.spec.steps * sum(1 for r in evaluated for s in r["per_seed"] if s["status"] == "ok")
    res.rundir.update_state(generation=generation, env_steps=env_steps, llm=res.llm_usage())
    res.emit("generation_finished", generation=generation,
             best_fitness=max((r["fitness"] for r in records if r["fitness"] is not None
                               and r["candidate_id"] != BASELINE_ID), default=None),
             valid=sum(1 for r in records if r["candidate_id"] != BASELINE_ID and r["status"] == "ok"))
    return {"evaluated": evaluated, "elites": elites,
            "candidates": replace(state["candidates"], trained)}

