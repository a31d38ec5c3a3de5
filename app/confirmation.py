"""The confirmation's verdict: does the loop's winner still beat native at a longer budget?

report.json's `confirmation` block (graph.confirmation) holds each arm's per-seed values at
the confirmation budget; the loop's own result.json files hold them at the loop's budget.
This module adds the statistics `lero study` uses (app.study.stats: mean with a 95%
bootstrap CI per arm, probability of improvement over native with its CI and verdict) at
both budgets, and the steps each confirmed seed's training curve took to reach native's
final training return (sample efficiency); report.md opens with it and the run page shows it.

The two budgets are not measured alike, and the text says so: at the loop's budget the
values are the loop's own seeds on the selection episodes the winner was picked on
(optimistic for the winner), at the confirmation budget fresh seeds on held-out episodes.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

import lero.app.study.stats as stats
from lero.app.numbers import fmt_number
from lero.app.provenance import native_task
from lero.graph.confirmation import CURVE, LOOP_ARM, LOOP_ID, seed_metrics
from lero.graph.rundir import BASELINE_ID
from lero.graph.summary import RunFiles, metric_names

# stats.poi_verdict's words, said of a metric (which direction is good depends on the metric)
SAID = {"higher": "higher than native", "lower": "lower than native", "no difference": "no different from native",
        "too few seeds": "too few seeds for a verdict"}  # fmt: skip


def _loop_values(result: dict | None) -> dict[str, list[float]]:
    """metric -> per-seed values of a loop result.json (its ok seeds; selection episodes)."""
    return seed_metrics([r for r in (result or {}).get("per_seed") or [] if r.get("status") == "ok"])


def _compare(arm: dict[str, list[float]], native: dict[str, list[float]], names: list[str]) -> dict[str, Any]:
    """Per metric both arms have: each arm's summary, the difference, P(> native), verdict."""
    rows = {}
    for metric in names:
        a, b = arm.get(metric), native.get(metric)
        if not a or not b:
            continue
        test = stats.compare(a, b)
        rows[metric] = {"arm": stats.summary(a), "native": stats.summary(b), "diff": test["diff"],
                        "poi": test["poi"], "welch_p": test["welch_p"],
                        "verdict": stats.poi_verdict(test["poi"], min(len(a), len(b)))}  # fmt: skip
    return rows


def _steps_to_native(arm: dict[str, Any], native: dict[str, Any]) -> dict[str, Any]:
    """Steps each of ARM's confirmation seeds took to reach native's final training return
    (the mean over native's seeds of their curves' last point)."""
    finals = [c[CURVE][-1] for c in native["curves"] if c.get(CURVE)]
    if not finals:
        return {"target": None, "per_seed": [], "reached": 0, "mean_of_reached": None}
    target = statistics.fmean(finals)
    reach = [stats.steps_to_reach(c["steps"], c[CURVE], target) if c.get(CURVE) else None for c in arm["curves"]]
    reached = [x for x in reach if x is not None]
    return {"target": target, "per_seed": reach, "reached": len(reached),
            "mean_of_reached": statistics.fmean(reached) if reached else None}  # fmt: skip


def confirmation_verdict(run: RunFiles, block: dict[str, Any] | None) -> dict[str, Any] | None:
    """BLOCK (report.json's raw `confirmation`) with `verdict`: per confirmed candidate, the
    comparison with native at the loop's budget and at the confirmation budget on every task
    metric, and steps to reach native's final return. None when the run confirmed nothing."""
    if block is None:
        return None
    native = next((a for a in block["arms"] if a["candidate_id"] == BASELINE_ID), None)
    loop = next((a for a in block["arms"] if a["candidate_id"] == LOOP_ID), None)  # native@loop
    loop_native = _loop_values(run.baseline)
    results = {c.candidate_id: c.result for c in run.candidates}
    verdict = {}
    for arm in block["arms"]:
        if arm["candidate_id"] in (BASELINE_ID, LOOP_ID) or native is None:
            continue
        loop_arm = _loop_values(results.get(arm["candidate_id"]))
        names = metric_names(arm["per_seed"], native["per_seed"], loop_arm)
        verdict[arm["candidate_id"]] = {
            "at_loop": {"steps": block["loop_steps"], "episodes": "selection (the loop's seeds; the winner was picked on them)",
                        "metrics": _compare(loop_arm, loop_native, names)},
            "at_confirm": {"steps": block["steps"], "episodes": "held out (fresh seeds)",
                           "metrics": _compare(arm["per_seed"], native["per_seed"], names)},
            "steps_to_native": _steps_to_native(arm, native),
        }  # fmt: skip
        if loop is not None:
            verdict[arm["candidate_id"]]["vs_loop"] = {
                "steps": loop["steps"], "episodes": "held out (fresh seeds)",
                "metrics": _compare(arm["per_seed"], loop["per_seed"], names)}  # fmt: skip
    task = native_task(run.spec.get("env"), run.spec.get("env_kwargs", {}))
    return {**block, "verdict": verdict, "better": {m.name: m.better for m in task.metrics} if task else {},
            "success_metric": task.success_metric if task and run.spec.get("fitness") == "success" else "return"}


def _value(row: dict[str, Any], side: str) -> str:
    s = row[side]
    return f"{fmt_number(s['mean'])} [{fmt_number(s['ci_low'])}, {fmt_number(s['ci_high'])}]"


def _poi(row: dict[str, Any]) -> str:
    p = row["poi"]
    return f"{fmt_number(p['value'], 2)} [{fmt_number(p['ci_low'], 2)}, {fmt_number(p['ci_high'], 2)}]"


def _budget_sentence(budget: dict[str, Any], metric: str = "return") -> str:
    row = budget["metrics"].get(metric)
    if row is None:
        return f"at {budget['steps']:,} steps: no {metric} yet"
    return (f"at {budget['steps']:,} steps {metric} {_value(row, 'arm')} vs native {_value(row, 'native')}, "
            f"P(> native) {_poi(row)}: {SAID[row['verdict']]}")  # fmt: skip


def verdict_sentences(confirmation: dict[str, Any] | None) -> list[str]:
    """One line per confirmed candidate: the fitness's metric (return, or the success
    metric under `--fitness success`) at both budgets, then sample efficiency."""
    if not confirmation:
        return []
    key = confirmation.get("success_metric", "return")
    lines = []
    for cid, v in confirmation["verdict"].items():
        reach = v["steps_to_native"]
        if reach["target"] is None:
            speed = "native has no training curve yet"
        else:
            speed = (f"{reach['reached']}/{len(reach['per_seed'])} of its seeds reached native's final training "
                     f"return {fmt_number(reach['target'])} within {confirmation['steps']:,} steps")  # fmt: skip
            if reach["mean_of_reached"] is not None:
                speed += f", after {reach['mean_of_reached']:,.0f} on average"
        lines.append(f"{cid}: {_budget_sentence(v['at_loop'], key)}; {_budget_sentence(v['at_confirm'], key)}. {speed}.")
    return lines


def loop_sentence(cid: str, verdict: dict[str, Any], confirmation: dict[str, Any]) -> str | None:
    """Does the loop pay for itself? One sentence: CID at the confirmation budget against
    native@loop, trained with every env step the run spent (None: no native@loop arm)."""
    versus = verdict.get("vs_loop")
    if versus is None:
        return None
    key = confirmation.get("success_metric", "return")
    row = versus["metrics"].get(key)
    if row is None:
        return f"Against {LOOP_ARM} ({versus['steps']:,} env steps: everything the run spent) {cid} has no {key} yet."
    better = confirmation.get("better", {}).get(key, "higher")
    worse = "lower" if better == "higher" else "higher"
    outcome = {better: "beats native given all that compute: the loop pays for itself",
               worse: "loses to native given all that compute: the loop does not pay for itself",
               "no difference": "does not beat native given all that compute: the loop does not pay for itself",
               "too few seeds": "has too few seeds for a verdict against native given all that compute"}[row["verdict"]]
    return (f"Does the loop pay for itself? {cid} at {confirmation['steps']:,} env steps has {key} {_value(row, 'arm')} "
            f"against {LOOP_ARM}'s {_value(row, 'native')} at {versus['steps']:,} (every env step the run spent), "
            f"P(> {LOOP_ARM}) {_poi(row)}: it {outcome}.")  # fmt: skip


def _table(cid: str, verdict: dict[str, Any], better: dict[str, str]) -> list[str]:
    """Every task metric at both budgets."""
    loop, confirm = verdict["at_loop"], verdict["at_confirm"]
    lines = ["", f"| {cid} vs native | at {loop['steps']:,}: {cid} | native | P(> native) | verdict "
             f"| at {confirm['steps']:,}: {cid} | native | P(> native) | verdict |", "|---" * 9 + "|"]  # fmt: skip
    for metric in dict.fromkeys([*loop["metrics"], *confirm["metrics"]]):
        cells = []
        for budget in (loop, confirm):
            row = budget["metrics"].get(metric)
            cells += ([_value(row, "arm"), _value(row, "native"), _poi(row), SAID[row["verdict"]]] if row else ["—"] * 4)
        lines.append(f"| {metric_label(metric, better)} | " + " | ".join(cells) + " |")
    return lines


def metric_label(metric: str, better: dict[str, str]) -> str:
    """METRIC with the way that is better, where its env says ("higher than native" is a
    loss for collisions)."""
    return f"{metric} ({better[metric]} is better)" if metric in better else metric


def confirmation_markdown(confirmation: dict[str, Any] | None) -> list[str]:
    """report.md's opening section (nothing for a run that confirmed nothing)."""
    if not confirmation:
        return []
    seeds = confirmation["seeds"]
    lines = ["## Does the winner still win at a longer budget?", "",
             f"Confirmation ({confirmation['status']}): the best candidate{'s' if len(confirmation['verdict']) > 1 else ''} "
             f"and native trained again at {confirmation['steps']:,} env steps on {len(seeds)} fresh seeds "
             f"({', '.join(map(str, seeds))}), measured on held-out episodes (seeds "
             f"{', '.join(map(str, confirmation['eval_seeds'] or []))} x {confirmation['eval_episodes']}); at the "
             f"loop's {confirmation['loop_steps']:,} steps, the loop's own seeds on the selection episodes the "
             "winner was picked on. Mean [95% bootstrap CI] over seeds; P(> native): probability of improvement "
             "[95% CI]; a verdict needs the CI to exclude 1/2 and 3 seeds per arm.", ""]  # fmt: skip
    loop = next((a for a in confirmation["arms"] if a["candidate_id"] == LOOP_ID), None)
    if loop is not None:
        lines[2] += (f" {LOOP_ARM} trained native at {loop['steps']:,} env steps, every step the run spent "
                     "(the loop and the confirmation's other arms), on the same seeds and held-out episodes.")
    lines += [f"- {line}" for line in verdict_sentences(confirmation)]
    lines += [f"- {line}" for line in filter(None, (loop_sentence(cid, v, confirmation)
                                                    for cid, v in confirmation["verdict"].items()))]
    for cid, verdict in confirmation["verdict"].items():
        lines += _table(cid, verdict, confirmation.get("better", {}))
    failed = {a["arm"]: a["failed"] for a in confirmation["arms"] if a["failed"]}
    if failed:
        lines += ["", f"Seeds that did not finish (status by seed): {json.dumps(failed)}"]
    return [*lines, ""]
