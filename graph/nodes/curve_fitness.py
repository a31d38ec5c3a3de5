"""`--fitness auc`: score a candidate by how fast it learns, not only where it ends.

The default fitness (`final`) is the held-out return of the trained policy. `auc` is the
held-out return averaged over the learning curve's checkpoints: the train job saves the
policy at 1/AUC_POINTS, 2/AUC_POINTS, ... of the budget (`Job.checkpoint_every`), every
checkpoint is measured by a trusted evaluate job on the same selection episodes as the
final policy (only the OEF runs there), and the final policy's return joins them. For a
researcher who trains for a budget other than the loop's, a candidate that is ahead all
along the curve is a safer pick than one that is ahead only at its end.
"""

from __future__ import annotations

import statistics
from typing import Any

from lero.graph.configuration import RunSpec
from lero.sandbox import EVALUATE, Job, JobResult, Sandbox
from lero.sandbox.results import checkpoint_dirs

AUC_POINTS = 4  # curve points per seed: 3 interval checkpoints and the final policy


def auc_checkpoint_every(spec: RunSpec) -> int | None:
    """Env steps between a training's checkpoints under `auc` (None: `final` keeps none)."""
    return max(1, spec.steps // AUC_POINTS) if spec.fitness == "auc" else None


def curve_scores(sandbox: Sandbox, code: str | None, env: dict[str, Any], spec: RunSpec, seeds: list[int],
                 results: list[JobResult], **job_fields: Any) -> dict[int, dict[str, Any]]:
    """seed -> {`fitness` (the mean return over its checkpoints and final policy),
    `final_fitness`, `curve_fitness` {step: return}} for each seed whose training is ok;
    a checkpoint whose evaluation fails leaves its seed with that status instead."""
    ok = {i: {step: folder for step, folder in checkpoint_dirs(results[i].policy_dir).items() if step < spec.steps}
          for i, r in enumerate(results) if r.status == "ok" and r.policy_dir and r.fitness is not None}  # fmt: skip
    # (a checkpoint at the budget's end is the final policy, counted once as such)
    returns: dict[int, dict[int, float]] = {i: {} for i in ok}
    failed: dict[int, JobResult] = {}
    for step in sorted({step for folders in ok.values() for step in folders}):
        members = [i for i, folders in ok.items() if step in folders and i not in failed]
        jobs = [Job(kind=EVALUATE.name, code=code, env=env, algo=spec.algo, steps=spec.steps, seed=seeds[i],
                    policy_dir=str(ok[i][step]), eval_episodes=spec.eval_episodes, hparams=spec.hparams,
                    **job_fields) for i in members]  # fmt: skip
        for i, measured in zip(members, sandbox.run_group(jobs) if jobs else [], strict=True):
            if measured.status != "ok" or measured.fitness is None:
                failed[i] = measured
            else:
                returns[i][step] = float(measured.fitness)
    scores = {}
    for i in ok:
        if i in failed:
            scores[seeds[i]] = {"status": failed[i].status, "error": failed[i].error, "fitness": None}
            continue
        final = float(results[i].fitness)
        points = [*returns[i].values(), final]
        scores[seeds[i]] = {"fitness": statistics.fmean(points), "final_fitness": final,
                            "curve_fitness": {str(step): value for step, value in returns[i].items()}}  # fmt: skip
    return scores
