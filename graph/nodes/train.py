"""Training fan-out (one `Send` per candidate and seed group, plus the baseline), the rungs
of successive halving (`promote`) and selection.

Each `train` branch trains its seeds in one sandboxed job and measures them in one more
(`graph.protocol.train_and_evaluate_seeds`). Branches of a generation run in parallel (at most `max_parallel` jobs at once: the sandbox's semaphore); a finished
branch's result is saved as a pending write, so a crash mid-generation re-runs only the
unfinished branches, and the sandbox's result cache answers any that finished in the
sandbox but not in the graph. Under `--schedule halving` a generation trains in rungs
(`graph.schedule`): after each rung, `promote` sends the best half on to the next one.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Send

from lero.graph.configuration import RunSpec, parallel_jobs
from lero.graph.context import RunContext
from lero.graph.nodes.candidates import at_stage, replace
from lero.graph.nodes.curve_fitness import auc_checkpoint_every, curve_scores
from lero.graph.protocol import train_and_evaluate_seeds
from lero.graph.reflection import candidate_feedback
from lero.graph.rundir import BASELINE_ID
from lero.graph.schedule import (
    last_rung,
    latest_by_seed,
    promoted,
    rung_end,
    rung_steps,
    rung_stop,
    sandbox_groups,
)
from lero.graph.state import Candidate, RunState, TrainTask
from lero.sandbox import TRAIN
from lero.sandbox.types import Limits
from lero.training.envs.task import RETURN, TaskSpec


def training_sends(state: RunState, spec: RunSpec) -> list[Send]:
    """One branch per (approved candidate, seed group), plus the baseline once per run."""
    generation = state["generation"]
    jobs: list[tuple[str, str | None]] = [(c["candidate_id"], c["code"]) for c in at_stage(state["candidates"], "approved")]
    if not any(r["candidate_id"] == BASELINE_ID for r in state.get("evaluated", [])):
        jobs.insert(0, (BASELINE_ID, None))
    rungs = [last_rung(spec.schedule) if cid == BASELINE_ID else 0 for cid, _ in jobs]
    lengths = [rung_end(spec.steps, spec.schedule, rung) / spec.steps for rung in rungs]  # each from step 0
    plan = seed_plan(spec, lengths, list(range(spec.seeds)))
    return [
        Send("train", TrainTask(candidate_id=cid, generation=generation, code=code, seeds=seeds,
                                rung=rung, resume_dirs=[None] * len(seeds)))
        for (cid, code), rung, groups in zip(jobs, rungs, plan, strict=True)
        for seeds in groups
    ]  # fmt: skip


def seed_plan(spec: RunSpec, lengths: list[float], seeds: list[int]) -> list[list[list[int]]]:
    """`graph.schedule.sandbox_groups` on this run's slots and executor: each branch's seeds
    split into sandbox jobs."""
    return sandbox_groups(lengths, seeds, parallel_jobs(spec.max_parallel, Limits().cpus), spec.executor)


def _rung_results(state: RunState) -> tuple[int, dict[str, list[dict[str, Any]]]]:
    """This generation's latest rung and its candidates' seed results (baseline apart)."""
    generation = state["generation"]
    latest = latest_by_seed(r for r in state.get("results", [])
                            if r["generation"] == generation and r["candidate_id"] != BASELINE_ID)  # fmt: skip
    rung = max((r.get("rung", 0) for r in latest.values()), default=0)
    at_rung: dict[str, list[dict[str, Any]]] = {}
    for result in latest.values():
        if result.get("rung", 0) == rung:
            at_rung.setdefault(result["candidate_id"], []).append(result)
    return rung, at_rung


def rung_sends(state: RunState, spec: RunSpec) -> list[Send]:
    """The next rung's branches: the best half of the latest rung, each seed continuing its
    own learner state; none once the latest rung trained the full budget."""
    rung, at_rung = _rung_results(state)
    if rung >= last_rung(spec.schedule):
        return []
    codes = {c["candidate_id"]: c["code"] for c in state["candidates"]}
    going_on = promoted(at_rung, spec.seeds)
    length = rung_steps(spec.steps, spec.schedule, rung + 1) / spec.steps
    plan = seed_plan(spec, [length] * len(going_on), list(range(spec.seeds)))
    sends = []
    for cid, groups in zip(going_on, plan, strict=True):
        policy_dirs = {r["seed"]: r["policy_dir"] for r in at_rung[cid]}
        for seeds in groups:
            sends.append(Send("train", TrainTask(candidate_id=cid, generation=state["generation"], code=codes[cid],
                                                 seeds=seeds, rung=rung + 1,
                                                 resume_dirs=[policy_dirs[seed] for seed in seeds])))  # fmt: skip
    return sends


def route_rungs(state: RunState, runtime: Runtime[RunContext]) -> list[Send] | str:
    """After a rung: its promoted candidates train on, or the generation is selected."""
    return rung_sends(state, runtime.context.spec) or "select"


def promote(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Where a rung ends (every branch of it joined): say who goes on (`route_rungs` sends them)."""
    if runtime.context.spec.schedule != "full":
        rung, at_rung = _rung_results(state)
        going_on = sorted({send.arg["candidate_id"] for send in rung_sends(state, runtime.context.spec)})
        runtime.context.emit("rung_finished", generation=state["generation"], rung=rung,
                             trained=sorted(at_rung), promoted=going_on)  # fmt: skip
    return {}


def train(task: TrainTask, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Train and evaluate one candidate with some of its seeds in the sandbox (one train job
    for them, one evaluate job for their policies).

    A seed whose result the run directory already holds (the process died after writing
    it, before the graph saved the branch) is not trained again: the file stays as it is.
    """
    res = runtime.context
    spec = res.spec
    rung = task.get("rung", 0)
    seeds, resume_dirs = task_seeds(task)
    cid = task["candidate_id"]
    def ids(seed: int) -> dict[str, Any]:
        return {"candidate_id": cid, "generation": task["generation"], "seed": seed, "rung": rung}

    records: dict[int, dict[str, Any]] = {}
    saved = {seed: res.rundir.read_seed_result(cid, seed) for seed in seeds}
    for seed in seeds:
        done = saved[seed]
        if (done is not None and done.get("generation") == task["generation"] and done.get("status") == "ok"
                and done.get("rung", 0) == rung):  # fmt: skip
            res.emit("train_finished", kind=TRAIN.name, status="ok", cached=True, fitness=done.get("fitness"),
                     elapsed_s=done.get("elapsed_s"), env_steps=done.get("env_steps"), **ids(seed))  # fmt: skip
            records[seed] = done
    todo = [(seed, resume_dir) for seed, resume_dir in zip(seeds, resume_dirs, strict=True) if seed not in records]
    for seed, _ in todo:
        res.emit("train_started", kind=TRAIN.name, **ids(seed))
    results = train_and_evaluate_seeds(
        res.sandbox, task["code"], res.job_env, spec.algo, spec.steps, [seed for seed, _ in todo], [r for _, r in todo],
        candidate_id=cid, eval_episodes=spec.eval_episodes, hparams=spec.hparams, limits=res.job_limits,
        stop_at=rung_stop(spec.steps, spec.schedule, rung), checkpoint_every=auc_checkpoint_every(spec),
    ) if todo else []  # fmt: skip
    curve = curve_scores(res.sandbox, task["code"], res.job_env, spec, [seed for seed, _ in todo], results,
                         candidate_id=cid, limits=res.job_limits) if spec.fitness == "auc" else {}  # fmt: skip
    for (seed, resume_dir), result in zip(todo, results, strict=True):
        record = {**ids(seed), **result.to_dict(), **curve.get(seed, {})}  # auc: the curve's fitness
        if spec.fitness == "success":
            record["fitness"] = success_fitness(res.task.task_spec, result.metrics, result.fitness)
        resumed = saved[seed] if resume_dir is not None and saved[seed] is not None else None  # the previous rung
        start = _trained(resumed) if resumed is not None else 0
        end = max(_trained(record), start) or rung_end(spec.steps, spec.schedule, rung)
        record |= {"env_steps": end - start, "trained_steps": end, "full_budget": rung == last_rung(spec.schedule)}
        if resumed is not None:  # one curve over the rungs
            record["curves"] = {k: [*resumed.get("curves", {}).get(k, []), *v] for k, v in result.curves.items()}
        res.rundir.write_seed_result(cid, seed, record)
        res.hooks.job_result(res.rundir, cid, seed, result)
        res.emit("train_finished", kind=TRAIN.name, status=record["status"], cached=result.cached,
                 fitness=record["fitness"], elapsed_s=result.elapsed_s, env_steps=record["env_steps"], **ids(seed))  # fmt: skip
        records[seed] = record
    return {"results": [records[seed] for seed in seeds]}


def task_seeds(task: TrainTask) -> tuple[list[int], list[str | None]]:
    """A branch's seeds and their resume dirs (a branch saved before seed groups: its one seed)."""
    if "seeds" in task:
        return list(task["seeds"]), list(task.get("resume_dirs") or [None] * len(task["seeds"]))
    return [task["seed"]], [task.get("resume_dir")]


def _trained(record: dict[str, Any]) -> int:
    """The env steps of the plan a job's policy has trained: its curve's last point (whole
    iterations, so a rung may end past its share; 0 when the job left no curve, as a
    continuation that was already past its rung's end)."""
    steps = (record.get("curves") or {}).get("steps") or [0]
    return int(steps[-1])


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
        "rung": first.get("rung", 0), "trained_steps": first.get("trained_steps"),
        # successive halving stopped it after this many env steps: not comparable, never an elite
        "stopped_at": None if first.get("full_budget", True) else first.get("trained_steps"),
    }


def dropped_record(candidate: Candidate) -> dict[str, Any]:
    """result.json for a candidate that never trained."""
    return {"candidate_id": candidate["candidate_id"], "generation": candidate["generation"],
            "code": candidate.get("code"), "status": candidate.get("status") or "invalid", "fitness": None, "fitness_std": None,
            "eval": {}, "per_seed": [], "curves": {}, "reflection_stats": {}, "error": candidate.get("error")}


def success_fitness(task: TaskSpec, metrics: dict[str, float], fitness: float | None) -> float | None:
    """`--fitness success`: the task's success metric from the trusted evaluation (negated
    where lower is better); None where the seed has no score."""
    if fitness is None or task.success_metric not in metrics:
        return None
    sign = 1.0 if task.metric(task.success_metric).higher_is_better else -1.0
    return sign * float(metrics[task.success_metric])


def rank_key(task: TaskSpec, fitness: str = "final") -> Callable[[dict[str, Any]], tuple[float, float]]:
    """Elites are ordered by fitness, ties broken by the task's success metric (by the
    native return where the fitness already is the success metric)."""
    tie = RETURN if fitness == "success" else task.success_metric
    sign = 1.0 if task.metric(tie).higher_is_better else -1.0

    def key(record: dict[str, Any]) -> tuple[float, float]:
        return (record["fitness"], sign * record["eval"].get(tie, 0.0))

    return key


def select(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Aggregate this generation's results, write result.json files, keep the elites."""
    res = runtime.context
    generation = state["generation"]
    by_id: dict[str, dict[int, dict[str, Any]]] = {}
    latest = latest_by_seed(r for r in state.get("results", []) if r["generation"] == generation)
    for (cid, seed), result in latest.items():  # a later rung or a re-run branch replaced the earlier result
        by_id.setdefault(cid, {})[seed] = result
    codes = {c["candidate_id"]: c["code"] for c in state["candidates"]}
    records = [aggregate(cid, generation, codes.get(cid), list(seeds.values())) for cid, seeds in by_id.items()]
    for record in records:
        res.rundir.write_result(record["candidate_id"], record)
    dropped = at_stage(state["candidates"], "dropped")
    for candidate in dropped:
        res.rundir.write_result(candidate["candidate_id"], dropped_record(candidate))

    evaluated = [*state.get("evaluated", []), *records]
    scored = [r for r in evaluated if r["candidate_id"] != BASELINE_ID and r["fitness"] is not None
              and r.get("stopped_at") is None]  # elites only from candidates that trained the whole budget
    best = sorted(scored, key=rank_key(res.task.task_spec, res.spec.fitness), reverse=True)[: res.spec.n_elites]
    elites = [{**r, "reflection": candidate_feedback(r, res.task.task_spec)} for r in best]
    trained = [{**c, "stage": "trained"} for c in at_stage(state["candidates"], "approved")]
    jobs = {(r["generation"], r["candidate_id"], r["seed"], r.get("rung", 0)): r for r in state.get("results", [])}
    env_steps = sum(r.get("env_steps", res.spec.steps) for r in jobs.values() if r["status"] == "ok")
    res.rundir.update_state(generation=generation, env_steps=env_steps, llm=res.llm_usage())
    res.emit("generation_finished", generation=generation,
             best_fitness=max((r["fitness"] for r in records if r["fitness"] is not None
                               and r["candidate_id"] != BASELINE_ID and r["stopped_at"] is None), default=None),
             valid=sum(1 for r in records if r["candidate_id"] != BASELINE_ID and r["status"] == "ok"))
    res.hooks.generation_end(res.rundir, generation)
    return {"evaluated": evaluated, "elites": elites,
            "candidates": replace(state["candidates"], trained)}

