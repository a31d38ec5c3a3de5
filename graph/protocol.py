"""LERO's train-then-evaluate protocol over a sandbox: what a candidate's fitness is.

The sandbox runs jobs and knows nothing of LERO. A candidate's seed is scored by two
jobs: a `train` job that runs the candidate's hooks, then an `evaluate` job in a fresh
sandbox that loads the weights before any candidate code runs and calls only the OEF
(the trusted measurement). The two results combine into one (`combined`: the curves of
the one, the score of the other), cached as a whole under a key of its own
(`combined_cache_key`), so a resumed run or a repeated study never trains a finished
seed again. The graph's train node and `lero study` both call this module.
"""

from __future__ import annotations

from typing import Any

from lero.sandbox import EVALUATE, TRAIN, Job, JobResult, Sandbox
from lero.sandbox.cache import ResultCache, cache_key


def train_and_evaluate(
    sandbox: Sandbox, code: str | None, env: dict, algo: str, steps: int, seed: int, **job_fields: Any
) -> JobResult:
    """Train, then evaluate the weights in a fresh sandbox with the OEF only; cached as a whole."""
    resume_dir, eval_seed = job_fields.pop("resume_dir", None), job_fields.pop("eval_seed", None)
    return train_and_evaluate_seeds(sandbox, code, env, algo, steps, [seed], [resume_dir], [eval_seed],
                                    **job_fields)[0]  # fmt: skip


def train_and_evaluate_seeds(
    sandbox: Sandbox,
    code: str | None,
    env: dict,
    algo: str,
    steps: int,
    seeds: list[int],
    resume_dirs: list[str | None] | None = None,
    eval_seeds: list[int | None] | None = None,
    cache: ResultCache | None = None,
    **job_fields: Any,
) -> list[JobResult]:
    """`train_and_evaluate` for several seeds of one candidate: the seeds the cache
    misses train in one sandbox, and their policies are measured in one fresh sandbox
    (`Sandbox.run_group`), each on its own EVAL_SEEDS' episodes (None: the selection
    episodes; a study gives each seed its held-out one). Every seed's result and cache
    entry are what it gets alone. CACHE: where the whole results are also looked up and
    kept (native jobs that several runs share); the sandbox's own cache holds them regardless."""
    train_jobs = _train_jobs(code, env, algo, steps, seeds, resume_dirs, eval_seeds, **job_fields)
    keys = [combined_cache_key(job) for job in train_jobs]
    caches = [c for c in (sandbox.cache, cache) if c is not None]
    results: list[JobResult | None] = [next(filter(None, (c.get(key) for c in caches)), None) for key in keys]
    for job, hit in zip(train_jobs, results, strict=True):
        if hit is not None:
            sandbox.report_cache_hit(job, hit)
    missed = [i for i, hit in enumerate(results) if hit is None]
    trained = dict(zip(missed, sandbox.run_group([train_jobs[i] for i in missed]), strict=True)) if missed else {}
    ok = [i for i in missed if trained[i].status == "ok"]
    eval_fields = {k: v for k, v in job_fields.items() if k not in ("job_id", *TRAIN.fields - EVALUATE.fields)}
    eval_jobs = [Job(kind=EVALUATE.name, code=code, env=env, algo=algo, steps=steps, seed=seeds[i],
                     policy_dir=trained[i].policy_dir, eval_seed=train_jobs[i].eval_seed, **eval_fields)
                 for i in ok]  # fmt: skip
    evaluated = dict(zip(ok, sandbox.run_group(eval_jobs), strict=True)) if ok else {}
    for i in missed:
        results[i] = trained[i] if i not in evaluated else combined(trained[i], evaluated[i])
        for kept in caches if i in evaluated else ():
            kept.put(keys[i], results[i])
    return results  # type: ignore[return-value]


def cached_seeds(sandbox: Sandbox, cache: ResultCache | None = None, **fields: Any) -> list[bool]:
    """Which seeds `train_and_evaluate_seeds(sandbox, cache=CACHE, **FIELDS)` would answer
    from a cache (the sandbox's or CACHE) without training: a scheduler plans sandbox slots
    for the others only."""
    caches = [c for c in (sandbox.cache, cache) if c is not None]
    return [any(c.get(combined_cache_key(job)) is not None for c in caches) for job in _train_jobs(**fields)]


def _train_jobs(
    code: str | None, env: dict, algo: str, steps: int, seeds: list[int],
    resume_dirs: list[str | None] | None = None, eval_seeds: list[int | None] | None = None, **job_fields: Any,
) -> list[Job]:  # fmt: skip
    """One train job per seed (None: no learner state to continue / the selection episodes)."""
    resume_dirs = [None] * len(seeds) if resume_dirs is None else resume_dirs
    eval_seeds = [None] * len(seeds) if eval_seeds is None else eval_seeds
    if len(resume_dirs) != len(seeds) or len(eval_seeds) != len(seeds) \
            or ("job_id" in job_fields and len(seeds) > 1):
        raise ValueError("train_and_evaluate_seeds: one resume_dir and eval seed per seed, and no shared job_id")
    return [Job(kind=TRAIN.name, code=code, env=env, algo=algo, steps=steps, seed=seed,
                resume_dir=resume_dir, eval_seed=eval_seed, **job_fields)
            for seed, resume_dir, eval_seed in zip(seeds, resume_dirs, eval_seeds, strict=True)]  # fmt: skip


def combined_cache_key(train_job: Job) -> str:
    """The key of a seed's combined result: its train job's, marked as the whole protocol,
    with the held-out episodes and the learner state it continues where they are set."""
    held_out = {} if train_job.eval_seed is None else {"eval_seed": train_job.eval_seed}
    if train_job.resume_dir is not None:
        held_out["resume_dir"] = train_job.resume_dir
    return cache_key(
        train_job.code, {**train_job.config(), "kind": "train_and_evaluate", **held_out}, train_job.seed
    )


FROM_EVALUATE = ("status", "error", "metrics", "fitness", "episodes")  # the seed's score
FROM_TRAIN = ("curves", "reflection_stats", "policy_dir")  # how it learned, and what
SUMMED = ("elapsed_s", "wait_s", "run_s")  # the seed's time: both jobs'


def combined(trained: JobResult, evaluated: JobResult) -> JobResult:
    """A seed's train and evaluate results as one: the curves of the one, the score of the other."""
    return JobResult(**{name: getattr(evaluated, name) for name in FROM_EVALUATE},
                     **{name: getattr(trained, name) for name in FROM_TRAIN},
                     **{name: getattr(trained, name) + getattr(evaluated, name) for name in SUMMED})
