"""Running a study: resolve the candidate and settings, train every missing cell, report.

Layout under `runs/<run_id>/studies/<study_id>/` (or `<runs_dir>/studies/<study_id>/` for
a candidate file): `study.json`, `study.md`, `plots/`, the module studied (`CODE_FILE`)
and `cells/<algo>/<variant>/seed-<n>.json`, one per seed, written when the sandbox job that
trained it ends (an arm's seeds train together, as a loop's candidate's do). A second call
with the same settings skips every cell that has its file, and the sandbox's result cache
(the run's own `cache/`) answers jobs that finished before the file was written.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lero.app.cli.named_run import open_named_run
from lero.app.study.interval_checkpoints import score_cell
from lero.app.study.plan import Plan
from lero.app.study.recheck import RECHECK_FACTOR, recheck_path, run_recheck
from lero.app.study.report import write_study
from lero.app.study.spec import StudySpec
from lero.app.study.variants import LOOP_ARM, VARIANTS, step_multiple, variant_code
from lero.graph.configuration import MAX_STEPS, RunError, RunSpec
from lero.graph.confirmation import LOOP_ID
from lero.graph.protocol import cached_seeds, train_and_evaluate_seeds
from lero.graph.rundir import CODE_FILE, STUDIES_DIR
from lero.graph.safefs import write_atomic
from lero.graph.schedule import jobs_beside_cache, loop_env_steps, sandbox_groups
from lero.graph.summary import best_candidate, load_run, summarize
from lero.training.defaults import DEFAULT_ALGO

Progress = Callable[[str], None]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "-", text)


def generation_gains(run_dir: Path) -> dict[str, Any] | None:
    """Best fitness per generation from the run's report, and what generations added over 0."""
    run = load_run(run_dir)
    summary = summarize(run)
    rows = [g for g in summary["generations"] if g["best_fitness"] is not None]
    if not rows:
        return None
    first, best = rows[0]["best_fitness"], max(g["best_fitness"] for g in rows)
    return {
        "offline_prior": run.spec.get("offline_prior", True),
        "llm": run.spec.get("llm"),
        "baseline_fitness": summary["baseline"]["fitness"],
        "best_per_generation": {str(g["generation"]): g["best_fitness"] for g in rows},
        "generation0_best": first,
        "overall_best": best,
        "gain_over_generation0": best - first,
        "note": "selection fitness on the run's own seeds and selection episodes (not held out)",
    }


def spent_env_steps(summary: dict[str, Any]) -> int | None:
    """Every env step the run spent, native@loop's budget (`graph.confirmation.loop_env_steps`):
    the selection loop's and its confirmation's arms but native@loop (None: none recorded)."""
    if summary["env_steps"] is None:
        return None
    block = summary.get("confirmation") or {}
    arms = [a for a in block.get("arms", []) if a["candidate_id"] != LOOP_ID]
    return loop_env_steps(summary["env_steps"], block.get("steps") or 0, len(block.get("seeds") or []), len(arms))


def equal_compute_steps(arms: tuple[str, ...], steps: int, loop_steps: int | None) -> dict[str, int]:
    """Env steps of each equal-compute arm: K x STEPS, or the env steps the run spent."""
    result = {}
    for arm in arms:
        if arm == LOOP_ARM:
            if not loop_steps:
                raise RunError(f"{LOOP_ARM}: the run has no env steps recorded yet (see `lero report`)")
            result[arm] = loop_steps
        elif (times := step_multiple(arm)) is not None:
            result[arm] = times * steps
        else:
            continue
        if result[arm] > MAX_STEPS:
            raise RunError(f"{arm} would train {result[arm]} steps, over the limit of {MAX_STEPS}")
    return result


def plan_study(spec: StudySpec, confirm: str | None = None) -> Plan:
    """Resolve the candidate, environment, algorithms and budget; RunError when impossible.

    `confirm`: the `package.module:factory` env a person typed (`--env`, graph.trust); a
    run's stored spec env is imported only when it equals that.
    """
    from lero.graph.trust import confirm_endpoints, confirm_env, job_env

    runs_dir = Path(spec.runs_dir)
    if spec.run_id is not None:
        rundir = open_named_run(runs_dir, spec.run_id)
        run_spec = rundir.read_spec()
        run = load_run(rundir.path)
        if spec.candidate_id is not None:
            record = next((c for c in run.candidates if c.candidate_id == spec.candidate_id), None)
        else:
            record = best_candidate(run)
        if record is None or record.code_path is None:
            wanted = spec.candidate_id or "a best candidate (no candidate has a fitness yet)"
            raise RunError(f"run {spec.run_id!r} has no {wanted}")
        code = rundir.read_code(record.folder) or ""
        source = {"run_id": spec.run_id, "candidate_id": record.candidate_id,
                  "fitness": record.fitness}  # fmt: skip
        env_name = spec.env or run_spec.env
        env_kwargs = spec.env_kwargs if spec.env_kwargs is not None else (
            run_spec.env_kwargs if env_name == run_spec.env else RunSpec(env=env_name).env_kwargs
        )  # fmt: skip
        algos = spec.algos or (run_spec.algo,)
        steps = spec.steps or run_spec.steps
        sandbox = spec.sandbox or run_spec.sandbox
        given = {k: v for k, v in (("executor", spec.executor), ("ray_address", spec.ray_address),
                                   ("sandbox", spec.sandbox)) if v}
        if spec.ray_address:
            given.setdefault("executor", "ray")  # an address implies the ray executor
        if spec.executor == "local":
            given["ray_address"] = None  # the local executor uses no stored address
        confirm_endpoints(run_spec, given, rundir.written_here(), "lero study", ("executor", "ray_address", "sandbox"))
        executor = {"executor": spec.executor or run_spec.executor,
                    "ray_address": given.get("ray_address", run_spec.ray_address)}
        hparams = {run_spec.algo: dict(run_spec.hparams)} if run_spec.hparams else {}
        parent, cache_dir = rundir.studies_dir, rundir.cache_dir
        generations = generation_gains(rundir.path)
        loop_steps = spent_env_steps(summarize(run))
    else:
        path = Path(str(spec.candidate))
        if not path.is_file():
            raise RunError(f"candidate file not found: {path}")
        code = path.read_text()
        source = {"candidate_file": str(path.resolve())}
        env_name = spec.env or RunSpec().env
        env_kwargs = spec.env_kwargs if spec.env_kwargs is not None else RunSpec(env=env_name).env_kwargs
        algos = spec.algos or (DEFAULT_ALGO,)
        steps = spec.steps or RunSpec().steps
        sandbox = spec.sandbox or "auto"
        executor = {"executor": spec.executor or "local", "ray_address": spec.ray_address}
        hparams = {}
        parent = runs_dir / STUDIES_DIR  # a study of a module file belongs to no run
        cache_dir = parent / "cache"
        generations = None
        loop_steps = None
    for variant in spec.variants:
        variant_code(code, variant)  # the candidate must split into its variants
    from lero.training import ALGOS, TrainConfig

    unknown = [a for a in algos if a not in ALGOS]
    if unknown:
        raise RunError(f"unknown algorithm {unknown[0]!r}; choose from {', '.join(ALGOS)}")
    hparams = {a: {**hparams.get(a, {}), **spec.hparams.get(a, {}), **spec.hparams_every} for a in algos}
    for algo in algos:  # each against its algorithm's typed hyper-parameters, before any job
        try:
            TrainConfig(algo=algo, hparams=hparams[algo])
        except ValueError as error:
            raise RunError(f"hyper-parameters of {algo}: {error}") from None
    env_spec = RunSpec(env=env_name, env_kwargs=env_kwargs or {})  # names, bounds: the run's rules
    env = job_env(env_spec, confirm_env(env_name, confirm))
    arms = "" if spec.variants == VARIANTS else "-" + "_".join(spec.variants)
    study_id = spec.study_id or _slug(
        f"{source.get('candidate_id', Path(str(spec.candidate)).stem)}-{'+'.join(algos)}-{steps}steps-{spec.seeds}seeds{arms}"
    )
    return Plan(spec=spec, study_dir=parent / study_id, cache_dir=cache_dir, code=code,
                source=source, env=env, algos=tuple(algos),
                steps=steps, sandbox=sandbox, hparams=hparams, generations=generations,
                executor=executor, arm_steps=equal_compute_steps(spec.variants, steps, loop_steps))  # fmt: skip


def _start_dir(plan: Plan) -> None:
    """Create the study directory, or check that an existing one has the same settings."""
    path = plan.folder() / "study.json"
    stored = plan.read_json(path)
    if stored is not None:
        recorded = stored.get("config")
        if recorded != json.loads(json.dumps(plan.config())):
            raise RunError(
                f"study {plan.study_dir.name!r} exists with other settings; pass another --study-id"
            )
        return
    write_atomic(plan.study_dir / CODE_FILE, plan.code)
    write_atomic(path, json.dumps({"study_id": plan.study_dir.name, "status": "running",
                                   "config": plan.config()}, indent=2) + "\n")  # fmt: skip


def _run_seeds(plan: Plan, sandbox: Any, algo: str, variant: str, indexes: list[int]) -> list[dict[str, Any]]:
    """Some seeds of one (algorithm, variant) trained in one sandbox and measured in one more
    (`graph.protocol.train_and_evaluate_seeds`; each seed's result is what it gets alone), each on
    its own held-out episodes; every seed's cell file is written when they end."""
    fields = _job_fields(plan, algo, variant, indexes)
    seeds, eval_seeds = fields["seeds"], fields["eval_seeds"]
    results = train_and_evaluate_seeds(sandbox, **fields)
    records = []
    for index, seed, eval_seed, result in zip(indexes, seeds, eval_seeds, results, strict=True):
        record = {"algo": algo, "variant": variant, "seed": seed, "eval_seed": eval_seed,
                  **result.to_dict()}  # fmt: skip
        if result.status == "ok" and plan.spec.checkpoints:
            record["checkpoints"] = score_cell(plan, sandbox, algo, variant, index, record)
            record["status"] = record["checkpoints"]["status"]
        record.pop("policy_dir", None)
        path = plan.cell_path(algo, variant, seed)
        plan.folder(str(path.parent.relative_to(plan.study_dir)))
        write_atomic(path, json.dumps(record) + "\n")
        records.append(record)
    return records


def _seed_jobs(plan: Plan, sandbox: Any) -> list[tuple[str, str, list[int]]]:
    """The cells still to train, as (algorithm, variant, seed indexes) sandbox jobs: the
    seeds of one arm grouped as the loop groups a candidate's (`graph.schedule.sandbox_groups`,
    which keeps the study no longer on its slots than one job per seed), planned for the
    seeds no cache answers (`graph.schedule.jobs_beside_cache`: a lero_table run's native
    arms, shared from an earlier run, take no slot time)."""
    arms = [(algo, variant) for algo in plan.algos for variant in plan.spec.variants]
    missing = {arm: [i for i, seed in enumerate(plan.spec.train_seeds)
                     if (plan.read_cell(*arm, seed) or {}).get("status") != "ok"] for arm in arms}  # fmt: skip
    todo = {arm: indexes for arm, indexes in missing.items() if indexes}
    jobs = jobs_beside_cache(
        todo, {arm: cached_seeds(sandbox, **_job_fields(plan, *arm, indexes)) for arm, indexes in todo.items()},
        {arm: float(plan.steps_of(arm[1])) for arm in todo}, list(range(plan.spec.seeds)),
        lambda lengths, seeds: sandbox_groups(lengths, seeds, sandbox.max_parallel, plan.executor["executor"]),
    )  # fmt: skip
    return [(*arm, indexes) for arm, indexes in jobs]


def _job_fields(plan: Plan, algo: str, variant: str, indexes: list[int]) -> dict[str, Any]:
    """`graph.protocol.train_and_evaluate_seeds`'s arguments for one arm's seeds at INDEXES."""
    return {"code": variant_code(plan.code, variant), "env": plan.env, "algo": algo, "steps": plan.steps_of(variant),
            "seeds": [plan.spec.train_seeds[i] for i in indexes], "eval_seeds": [plan.spec.eval_seeds[i] for i in indexes],
            "eval_episodes": plan.spec.eval_episodes, "hparams": plan.hparams[algo],
            "candidate_id": f"study:{algo}:{variant}", "checkpoint_every": plan.checkpoint_every(variant),
            "limits": plan.job_limits(plan.steps_of(variant))}  # fmt: skip


def run_study(spec: StudySpec, progress: Progress | None = None, confirm: str | None = None) -> dict[str, Any]:
    """Train what is missing, then write study.json / study.md / plots; returns study.json
    with `study_md`, where study.md went (for the person; not stored in study.json).

    `confirm`: the env a person typed to confirm a `package.module:factory` env (plan_study).
    """
    from lero.graph.context import env_facts, open_sandbox

    say = progress or (lambda line: None)
    plan = plan_study(spec, confirm)
    sandbox = open_sandbox(plan.sandbox_spec(), plan.cache_dir, env=plan.env)
    try:
        # one env slot (in the sandbox for a custom env): bad env kwargs fail before any job
        metrics = env_facts(plan.env, sandbox)[0].metrics
        _start_dir(plan)
        jobs = _seed_jobs(plan, sandbox)
        todo = sum(len(indexes) for *_, indexes in jobs)
        total = len(plan.algos) * len(spec.variants) * spec.seeds
        say(f"study {plan.study_dir.name}: {total - todo} of {total} cells done, {todo} to train")
        started = time.monotonic()
        done = 0
        with ThreadPoolExecutor(max_workers=sandbox.max_parallel) as pool:
            futures = [pool.submit(_run_seeds, plan, sandbox, *job) for job in jobs]
            try:
                for future in futures:
                    for record in future.result():
                        done += 1
                        value = record.get("fitness")
                        shown = f"return {value:.3f}" if value is not None else record["status"]
                        say(f"[{done}/{todo}] {record['algo']} {record['variant']} "
                            f"seed {record['seed']}: {shown}{' (cached)' if record['cached'] else ''}")  # fmt: skip
            except KeyboardInterrupt:  # Ctrl-C: the running trainings end now, not when they finish
                sandbox.cancel_all()  # the pool's exit would otherwise wait for every one of them
                raise
        if spec.recheck and not recheck_path(plan).is_file():
            say(f"reward-hacking check: {plan.algos[0]} at {RECHECK_FACTOR}x {plan.steps} steps")
            say(f"reward-hacking check: {run_recheck(plan, sandbox)['status']}")
    finally:
        sandbox.close()
    study = write_study(plan, metrics, time.monotonic() - started)
    return {**study, "study_md": str(plan.study_dir / "study.md")}
