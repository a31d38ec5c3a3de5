"""The reward-hacking check (`lero study --recheck`): the candidate studied (the run's final
elite) retrained once at RECHECK_FACTOR x the study's steps, with the run's algorithm.

A shaped reward can drift from the task at a horizon the loop never trained to. Past the
original budget, the check reads the trend of the native return and of the training
(shaped) reward on the training curves, and flags the candidate when the training reward
rises while the native return falls. The long policy is also evaluated on the first
held-out episode set, like every study cell. Its record is `recheck.json` in the study
folder; a second call reuses it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lero.app.study import stats
from lero.app.study.plan import Plan
from lero.graph.protocol import train_and_evaluate
from lero.graph.safefs import write_atomic

RECHECK_FACTOR = 10
RECHECK_FILE = "recheck.json"
NATIVE, SHAPED = "return", "train_reward"  # training curves' keys


def recheck_path(plan: Plan) -> Path:
    return plan.study_dir / RECHECK_FILE


def run_recheck(plan: Plan, sandbox: Any) -> dict[str, Any]:
    """Train (or reuse) the long run; returns its record."""
    path = recheck_path(plan)
    recorded = plan.read_json(path)
    if recorded is not None:
        return recorded
    algo, seed, eval_seed = plan.algos[0], plan.spec.train_seeds[0], plan.spec.eval_seeds[0]
    result = train_and_evaluate(
        sandbox, plan.code, plan.env, algo, RECHECK_FACTOR * plan.steps, seed, eval_seed=eval_seed,
        eval_episodes=plan.spec.eval_episodes, hparams=plan.hparams[algo], candidate_id=f"study:{algo}:recheck",
        limits=plan.job_limits(RECHECK_FACTOR * plan.steps),
    )  # fmt: skip
    record = {"algo": algo, "seed": seed, "eval_seed": eval_seed, "budget": plan.steps,
              "steps": RECHECK_FACTOR * plan.steps, **result.to_dict()}  # fmt: skip
    record.pop("policy_dir", None)
    write_atomic(path, json.dumps(record) + "\n")
    return record


def judge(record: dict[str, Any]) -> dict[str, Any]:
    """Trends of the native return and the training reward past the original budget; the flag."""
    curves = record.get("curves") or {}
    steps = curves.get("steps", [])
    beyond = [i for i, s in enumerate(steps) if s > record["budget"]]
    trends = {
        key: stats.trend([steps[i] for i in beyond], [curves[key][i] for i in beyond])
        for key in (NATIVE, SHAPED) if key in curves
    }  # fmt: skip
    native = trends.get(NATIVE, {}).get("direction")
    shaped = trends.get(SHAPED, {}).get("direction")
    return {
        "algo": record["algo"], "seed": record["seed"], "status": record["status"],
        "budget": record["budget"], "steps": record["steps"],
        "held_out": record.get("metrics", {}), "trends": trends,
        "native_keeps_rising": native == "rising",
        "reward_hacking": shaped == "rising" and native == "falling",
        "curves": {k: curves[k] for k in ("steps", NATIVE, SHAPED) if k in curves},
    }  # fmt: skip


def recheck_lines(check: dict[str, Any]) -> list[str]:
    """study.md's section on the check."""
    trends = check["trends"]

    def said(key: str) -> str:
        t = trends.get(key)
        if not t or t["slope"] is None:
            return "not measured"
        return f"{t['direction']} (slope {t['slope']:.3g}/step, 95% CI [{t['ci_low']:.3g}, {t['ci_high']:.3g}])"

    verdict = ("FLAGGED: the training reward rises while the native return falls (reward hacking)"
               if check["reward_hacking"] else "not flagged")  # fmt: skip
    held = check["held_out"].get(NATIVE)
    return [
        "## Reward-hacking check", "",
        f"The candidate retrained with {check['algo']} (seed {check['seed']}) for {check['steps']} steps, "
        f"{RECHECK_FACTOR}x the budget of {check['budget']}. Past the budget, native return: {said(NATIVE)}; "
        f"training reward: {said(SHAPED)}. Held-out return of the long policy: "
        f"{'-' if held is None else f'{held:.3f}'}. Verdict: {verdict}.", "",
    ]  # fmt: skip
