"""Interval checkpoints of a study cell, scored the way the MARL protocol asks (Gorsane et
al. 2022): every checkpoint (and the final policy) evaluated on a validation episode set,
the best one picked there, then re-evaluated on ABSOLUTE_FACTOR x the held-out episodes:
the "absolute metric".

The train job saves the checkpoints (`policy/step-<n>/`, sandbox.harness) but scores none:
the candidate's HRF runs in that process. Every score here comes from an evaluate job,
which runs only the OEF, in its own worker. Validation, held-out and selection episodes
are disjoint seed ranges (spec.py).
"""

from __future__ import annotations

from typing import Any

from lero.app.study.plan import Plan
from lero.app.study.variants import variant_code
from lero.graph.configuration import MAX_EVAL_EPISODES
from lero.sandbox import EVALUATE, Job, JobResult
from lero.sandbox.results import checkpoint_dirs

ABSOLUTE_FACTOR = 10
SCORE = "return"


def score_cell(plan: Plan, sandbox: Any, algo: str, variant: str, index: int,
               trained: dict[str, Any]) -> dict[str, Any]:
    """Validation score of each checkpoint and the final policy, the best, its absolute metric.

    TRAINED: the cell's train-and-evaluate result (its `policy_dir`, `curves`)."""
    seed = plan.spec.train_seeds[index]
    validation_seed, eval_seed = plan.spec.validation_seeds[index], plan.spec.eval_seeds[index]
    policies = {step: str(folder) for step, folder in checkpoint_dirs(trained["policy_dir"]).items()}
    final_step = int(trained["curves"].get("steps", [plan.steps_of(variant)])[-1])
    policies[final_step] = trained["policy_dir"]  # the final policy is a candidate too
    code = variant_code(plan.code, variant)

    def evaluate(policy_dir: str, episodes_seed: int, episodes: int) -> JobResult:
        return sandbox.run_job(Job(
            kind=EVALUATE.name, code=code, env=plan.env, algo=algo, steps=plan.steps_of(variant), seed=seed,
            policy_dir=policy_dir, eval_seed=episodes_seed, eval_episodes=episodes,
            hparams=plan.hparams[algo], candidate_id=f"study:{algo}:{variant}:checkpoint",
        ))  # fmt: skip

    scored = {step: evaluate(path, validation_seed, plan.spec.eval_episodes) for step, path in policies.items()}
    failed = next((r.status for r in scored.values() if r.status != "ok"), None)
    if failed is not None:
        return {"status": failed}
    validation = {step: result.metrics for step, result in scored.items()}
    best = max(validation, key=lambda step: (validation[step][SCORE], -step))  # ties: the earlier
    episodes = min(ABSOLUTE_FACTOR * plan.spec.eval_episodes, MAX_EVAL_EPISODES)
    absolute = evaluate(policies[best], eval_seed, episodes)
    return {
        "status": absolute.status,
        "every": plan.checkpoint_every(variant),
        "validation_seed": validation_seed,
        "validation": {str(step): metrics for step, metrics in validation.items()},
        "validation_returns": {str(step): r.episodes.get(SCORE, []) for step, r in scored.items()},
        "best_step": best,
        "absolute_eval_seed": eval_seed,
        "absolute_episodes": episodes,
        "absolute": absolute.metrics,
        "absolute_values": absolute.episodes,
    }
