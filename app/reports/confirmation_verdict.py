"""The confirmation's verdict: does the loop's winner still beat native at a longer budget?

report.json's `confirmation` block (graph.confirmation) holds each arm's per-seed values at
the confirmation budget, each metric's better direction and the metric the loop selected on
(the engine's facts, read here, never recomputed); the loop's own result.json files hold the
values at the loop's budget.
This module adds the statistics `lero study` uses (app.study.stats: mean with a 95%
bootstrap CI per arm, or the seeds' range below stats.MIN_INTERVAL_SEEDS; the probability
that the arm is better than native, in each metric's own direction, with its CI and verdict)
at both budgets, and the steps each confirmed seed's training curve took to reach native's
final training return (sample efficiency); report.md opens with it and the run page shows it.

The two budgets are not measured alike, and the text says so: at the loop's budget the
values are the loop's own seeds on the selection episodes the winner was picked on
(optimistic for the winner), at the confirmation budget fresh seeds on held-out episodes.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from typing import Any

import lero.app.study.stats as stats
from lero.app.reports.numbers import fmt_number
from lero.graph.confirmation import CURVE, LOOP_ARM, LOOP_ID, seed_metrics
from lero.graph.rundir import BASELINE_ID
from lero.graph.summary import RunFiles, metric_names
from lero.training.envs.task import RETURN


def _loop_values(result: dict | None) -> dict[str, list[float]]:
    """metric -> per-seed values of a loop result.json (its ok seeds; selection episodes)."""
    return seed_metrics([r for r in (result or {}).get("per_seed") or [] if r.get("status") == "ok"])


def compare_arms(arm: dict[str, list[float]], native: dict[str, list[float]], names: list[str],
             better: dict[str, str]) -> dict[str, Any]:
    """Per metric both arms have: each arm's summary, the difference, P(better than native)
    in the metric's direction (BETTER; higher where the env does not say; its CI only from
    stats.MIN_INTERVAL_SEEDS seeds per arm, `stats.stored_poi`), verdict."""
    rows = {}
    for metric in names:
        a, b = arm.get(metric), native.get(metric)
        if not a or not b:
            continue
        test, seeds = stats.compare(a, b, better.get(metric, "higher") == "higher"), min(len(a), len(b))
        rows[metric] = {"arm": stats.summary(a), "native": stats.summary(b), "diff": test["diff"],
                        "poi": stats.stored_poi(test["poi"], seeds), "welch_p": test["welch_p"],
                        "verdict": stats.poi_verdict(test["poi"], seeds)}  # fmt: skip
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


def confirmation_verdict(run: RunFiles, block: dict[str, Any] | None,
                         only: Sequence[str] | None = None) -> dict[str, Any] | None:
    """BLOCK (report.json's raw `confirmation`) with `verdict`: per confirmed candidate, the
    comparison with native at the loop's budget and at the confirmation budget on every task
    metric (ONLY these, when given), and steps to reach native's final return. None when the
    run confirmed nothing."""
    if block is None:
        return None
    native = next((a for a in block["arms"] if a["candidate_id"] == BASELINE_ID), None)
    loop = next((a for a in block["arms"] if a["candidate_id"] == LOOP_ID), None)  # native@loop
    loop_native = _loop_values(run.baseline)
    results = {c.candidate_id: c.result for c in run.candidates}
    better, success = block["better"], block["success_metric"]  # the engine's (graph.confirmation)
    verdict = {}
    for arm in block["arms"]:
        if arm["candidate_id"] in (BASELINE_ID, LOOP_ID) or native is None:
            continue
        loop_arm = _loop_values(results.get(arm["candidate_id"]))
        names = [m for m in metric_names(arm["per_seed"], native["per_seed"], loop_arm)
                 if only is None or m in only or m == success]
        verdict[arm["candidate_id"]] = {
            "at_loop": {"steps": block["loop_steps"], "episodes": "selection (the loop's seeds; the winner was picked on them)",
                        "metrics": compare_arms(loop_arm, loop_native, names, better)},
            "at_confirm": {"steps": block["steps"], "episodes": "held out (fresh seeds)",
                           "metrics": compare_arms(arm["per_seed"], native["per_seed"], names, better)},
            "steps_to_native": _steps_to_native(arm, native),
        }  # fmt: skip
        if loop is not None:
            verdict[arm["candidate_id"]]["vs_loop"] = {
                "steps": loop["steps"], "episodes": "held out (fresh seeds)",
                "metrics": compare_arms(arm["per_seed"], loop["per_seed"], names, better)}  # fmt: skip
    return {**block, "verdict": verdict}


def confirmed_return(run: RunFiles, summary: dict[str, Any]) -> dict[str, Any] | None:
    """The confirmation's verdict on `return` (and the success metric a run selected on) alone
    (what `headline` and `short_verdict` read):
    cheap enough for every row of `lero runs`, compare and the runs page. SUMMARY: summarize(RUN)."""
    return confirmation_verdict(run, summary.get("confirmation"), only=(RETURN,))


def _seeds(row: dict[str, Any]) -> int:
    """The seeds per arm a comparison rests on (the fewer of the two arms')."""
    return min(row["arm"]["n"], row["native"]["n"])


def said(row: dict[str, Any], metric: str, better: dict[str, str]) -> str:
    """ROW's verdict as a person reads it: "worse (collisions higher)"; where the env does not
    say which way is better, only the raw direction."""
    if metric not in better and row["verdict"] in ("better", "worse"):
        return f"{metric} {'higher' if row['verdict'] == 'better' else 'lower'} than native (better way unknown)"
    return stats.said(row["verdict"], metric, better.get(metric, "higher") == "higher")


def _budget_sentence(budget: dict[str, Any], better: dict[str, str], metric: str = "return") -> str:
    row = budget["metrics"].get(metric)
    if row is None:
        return f"at {budget['steps']:,} steps: no {metric} yet"
    return (f"at {budget['steps']:,} steps {metric} {stats.shown_spread(row['arm'])} vs native "
            f"{stats.shown_spread(row['native'])}, P(better than native) {stats.shown_poi(row['poi'], _seeds(row))}: "
            f"{said(row, metric, better)}")  # fmt: skip


def fewest_seeds(confirmation: dict[str, Any]) -> int:
    """The fewest seeds any arm of the confirmation has (what its verdict rests on)."""
    return min((len(a["seeds"]) for a in confirmation["arms"]), default=0)


UNCONFIRMED = "not confirmed (no confirmation stage ran): the loop's numbers are on the selection episodes"


def headline(confirmation: dict[str, Any] | None, metric: str | None = None) -> str:
    """The confirmed verdict in one line, for the terminal's first line, `lero report` and the
    top of the run page: the winner against native on held-out episodes at the confirmation
    budget, with the small-sample caveat; UNCONFIRMED when nothing was confirmed."""
    if not confirmation or not confirmation["verdict"]:
        return UNCONFIRMED
    metric = metric or confirmation.get("success_metric", RETURN)  # what the run selected on
    cid, verdict = next(iter(confirmation["verdict"].items()))
    row = verdict["at_confirm"]["metrics"].get(metric)
    if row is None:
        return f"confirmation {confirmation['status']}: no {metric} yet"
    seeds = _seeds(row)
    caveat = f", {seeds} seeds per arm: a pilot" if seeds < stats.WARN_SEEDS else f", {seeds} seeds per arm"
    return (f"confirmed at {verdict['at_confirm']['steps']:,} steps on held-out episodes: {cid} "
            f"{said(row, metric, confirmation.get('better', {}))}, {metric} {fmt_number(row['arm']['mean'])} vs "
            f"native {fmt_number(row['native']['mean'])}{caveat}")  # fmt: skip


def short_verdict(confirmation: dict[str, Any] | None, metric: str | None = None, means: bool = False) -> str:
    """A table cell of the confirmed verdict (`lero runs`, compare, the runs list): "better",
    "worse", "no difference", "few seeds" (with `*` below WARN_SEEDS seeds per arm), or "-"
    when nothing was confirmed; MEANS adds both arms' means ("better* (-12.200 vs -15.069)")."""
    if not confirmation or not confirmation["verdict"]:
        return "-"
    metric = metric or confirmation.get("success_metric", RETURN)
    row = next(iter(confirmation["verdict"].values()))["at_confirm"]["metrics"].get(metric)
    if row is None:
        return "-"
    word = {"too few seeds": "few seeds"}.get(row["verdict"], row["verdict"])
    word += "*" if _seeds(row) < stats.WARN_SEEDS else ""
    return f"{word} ({fmt_number(row['arm']['mean'])} vs {fmt_number(row['native']['mean'])})" if means else word


def verdict_sentences(confirmation: dict[str, Any] | None) -> list[str]:
    """One line per confirmed candidate: the fitness's metric (return, or the success
    metric under `--fitness success`) at both budgets, then sample efficiency."""
    if not confirmation:
        return []
    key = confirmation.get("success_metric", RETURN)
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
        better = confirmation.get("better", {})
        lines.append(f"{cid}: {_budget_sentence(v['at_loop'], better, key)} (selection episodes); "
                     f"{_budget_sentence(v['at_confirm'], better, key)} (held-out episodes). {speed}.")
    return lines


def loop_sentence(cid: str, verdict: dict[str, Any], confirmation: dict[str, Any]) -> str | None:
    """Does the loop pay for itself? One sentence: CID at the confirmation budget against
    native@loop, trained with every env step the run spent (None: no native@loop arm)."""
    versus = verdict.get("vs_loop")
    if versus is None:
        return None
    key = confirmation.get("success_metric", RETURN)
    row = versus["metrics"].get(key)
    if row is None:
        return f"Against {LOOP_ARM} ({versus['steps']:,} env steps: everything the run spent) {cid} has no {key} yet."
    outcome = {"better": "beats native given all that compute: the loop pays for itself",
               "worse": "loses to native given all that compute: the loop does not pay for itself",
               "no difference": "does not beat native given all that compute: the loop does not pay for itself",
               "too few seeds": "has too few seeds for a verdict against native given all that compute"}[row["verdict"]]
    return (f"Does the loop pay for itself? {cid} at {confirmation['steps']:,} env steps has {key} "
            f"{stats.shown_spread(row['arm'])} against {LOOP_ARM}'s {stats.shown_spread(row['native'])} at "
            f"{versus['steps']:,} (every env step the run spent), P(better than {LOOP_ARM}) "
            f"{stats.shown_poi(row['poi'], _seeds(row))}: it {outcome}.")  # fmt: skip


def _cells(verdict: dict[str, Any], better: dict[str, str]) -> dict[str, list[str]]:
    """Metric label -> [arm, native, P(better), verdict] at the loop's budget, then the same at
    the confirmation budget: every task metric, as report.md's table and the run page show it."""
    loop, confirm = verdict["at_loop"], verdict["at_confirm"]
    rows = {}
    for metric in dict.fromkeys([*loop["metrics"], *confirm["metrics"]]):
        cells = []
        for budget in (loop, confirm):
            row = budget["metrics"].get(metric)
            cells += ([stats.shown_spread(row["arm"]), stats.shown_spread(row["native"]),
                       stats.shown_poi(row["poi"], _seeds(row)), said(row, metric, better)] if row else ["—"] * 4)
        rows[metric_label(metric, better)] = cells
    return rows


def confirmation_rows(confirmation: dict[str, Any] | None) -> dict[str, dict[str, list[str]]]:
    """Candidate -> its table (`_cells`), for the run page."""
    if not confirmation:
        return {}
    return {cid: _cells(v, confirmation.get("better", {})) for cid, v in confirmation["verdict"].items()}


def _table(cid: str, verdict: dict[str, Any], better: dict[str, str]) -> list[str]:
    """Every task metric at both budgets."""
    loop, confirm = verdict["at_loop"], verdict["at_confirm"]
    lines = ["", f"| {cid} vs native | at {loop['steps']:,}: {cid} (selection episodes) | native | P(better) | "
             f"verdict | at {confirm['steps']:,}: {cid} (held out) | native | P(better) | verdict |",
             "|---" * 9 + "|"]  # fmt: skip
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in _cells(verdict, better).items()]
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
             f"winner was picked on. Mean [95% bootstrap CI] over seeds (below {stats.MIN_INTERVAL_SEEDS} seeds "
             "the seeds' range, labelled so); P(better): the probability that a seed of the candidate beats "
             "one of native in the metric's own direction (fewer collisions are better), with its 95% CI; a "
             f"verdict needs that CI to exclude 1/2 and {stats.MIN_VERDICT_SEEDS} seeds per arm.", ""]  # fmt: skip
    loop = next((a for a in confirmation["arms"] if a["candidate_id"] == LOOP_ID), None)
    if loop is not None:
        lines[2] += (f" {LOOP_ARM} trained native at {loop['steps']:,} env steps, every step the run spent "
                     "(the loop and the confirmation's other arms), on the same seeds and held-out episodes.")
    if warning := stats.few_seeds_warning(fewest_seeds(confirmation)):
        lines += [f"> **{warning}**", ""]
    lines += [f"- {line}" for line in verdict_sentences(confirmation)]
    lines += [f"- {line}" for line in filter(None, (loop_sentence(cid, v, confirmation)
                                                    for cid, v in confirmation["verdict"].items()))]
    for cid, verdict in confirmation["verdict"].items():
        lines += _table(cid, verdict, confirmation.get("better", {}))
    failed = {a["arm"]: a["failed"] for a in confirmation["arms"] if a["failed"]}
    if failed:
        lines += ["", f"Seeds that did not finish (status by seed): {json.dumps(failed)}"]
    return [*lines, ""]
