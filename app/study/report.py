"""study.json, study.md and plots/ from a study's cell files alone (so they can be rebuilt).

Per cell (algorithm x arm): per-seed values of every task metric, their mean and IQM with
95% bootstrap CIs, the comparison with native (difference, probability of improvement,
Hedges' g, Welch t, Mann-Whitney U), the steps each seed's training curve took to reach
the target return, and the learning curve's mean with a 95% band over seeds. Per
algorithm: performance profiles of `return`, and each candidate variant against each
equal-compute arm (native trained longer), on held-out episodes and at equal steps.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from typing import Any

from lero.app.reports.numbers import fmt_number
from lero.app.study import stats
from lero.app.study.plan import Plan
from lero.app.study.plots import (
    curves_caption,
    figure_lines,
    metric_caption,
    plot_curves,
    plot_metric,
    plot_profiles,
    plot_recheck,
    profiles_caption,
    recheck_caption,
)
from lero.app.study.recheck import judge, recheck_lines, recheck_path
from lero.app.study.variants import VARIANTS, base_variant, is_equal_compute, same_budget_native
from lero.graph.safefs import write_atomic
from lero.graph.summary import native_task
from lero.training.envs.task import Metric

CURVE = "return"  # training-time native return per agent (training curves' key)


def _per_episode(records: list[dict[str, list[float]]], metrics: list[str]) -> dict[str, list[list[float]]]:
    """metric -> each seed's per-episode values, for the metrics every seed's evaluation kept
    (a cell cached before evaluate jobs returned episodes has none)."""
    return {m: [r[m] for r in records] for m in metrics if records and all(m in r for r in records)}


def _cell(plan: Plan, metrics: list[str], algo: str, variant: str) -> dict[str, Any]:
    records = [plan.read_cell(algo, variant, seed) for seed in plan.spec.train_seeds]
    ok = [r for r in records if r is not None and r["status"] == "ok"]
    failed = {str(r["seed"]): r["status"] for r in records if r is not None and r["status"] != "ok"}
    per_seed = {m: [float(r["metrics"][m]) for r in ok] for m in metrics if all(m in r["metrics"] for r in ok)}
    scored = [r["checkpoints"] for r in ok if "checkpoints" in r]
    absolute = {m: [float(c["absolute"][m]) for c in scored] for m in metrics if all(m in c["absolute"] for c in scored)}
    absolute_episodes = [c.get("absolute_values", {}) for c in scored]
    return {
        "algo": algo,
        "variant": variant,
        "steps": plan.steps_of(variant),
        "status": "complete" if len(ok) == len(records) else "incomplete",
        "seeds": [r["seed"] for r in ok],
        "eval_seeds": [r["eval_seed"] for r in ok],
        "failed": failed,
        "per_seed": per_seed,
        "per_episode": _per_episode([r.get("episodes", {}) for r in ok], metrics),
        "summary": {m: stats.summary(v) for m, v in per_seed.items() if v},
        "absolute": None if not scored else {
            "best_steps": [c["best_step"] for c in scored],
            "validation": [{step: v[CURVE] for step, v in c["validation"].items()} for c in scored],
            "validation_episodes": [c.get("validation_returns") for c in scored],
            "episodes": scored[0]["absolute_episodes"],
            "per_seed": absolute,
            "per_episode": _per_episode(absolute_episodes, metrics),
            "summary": {m: stats.summary(v) for m, v in absolute.items() if v},
        },
        "curves": [(r["curves"].get("steps", []), r["curves"].get(CURVE, [])) for r in ok],
    }


def _final_training_return(cell: dict[str, Any]) -> float | None:
    """A cell's mean over seeds of its training curve's last point (None: no curve yet)."""
    finals = [v[-1] for s, v in cell["curves"] if s]
    return sum(finals) / len(finals) if finals else None


def _target(plan: Plan, cells: list[dict[str, Any]]) -> tuple[float | None, str]:
    """The return the training curves are timed to reach, itself a training-curve return so
    that curves are compared with curves (a held-out greedy return is another measure: native
    "reached" 0 of 3 of a target two of its held-out seeds were above)."""
    if plan.spec.target_return is not None:
        return plan.spec.target_return, "stated (--target-return), read against the training curves"
    natives = [r for c in cells if c["variant"] == "native" and (r := _final_training_return(c)) is not None]
    if not natives:
        return None, "none (no native training curve yet)"
    return min(natives), "the lowest native final training return over the algorithms (training curves)"


def _finish_cell(cell: dict[str, Any], natives: dict[tuple[str, str], dict[str, Any]], target: float | None,
                 better: dict[str, str]) -> dict[str, Any]:
    curves = cell.pop("curves")
    reach = [stats.steps_to_reach(s, v, target) if target is not None and s else None for s, v in curves]
    reached = [x for x in reach if x is not None]
    cell["steps_to_target"] = {
        "per_seed": reach,
        "reached": len(reached),
        "mean_of_reached": sum(reached) / len(reached) if reached else None,
    }
    cell["curve"] = stats.curve_band(curves)
    versus = same_budget_native(cell["variant"])  # native at the cell's own budget
    native = natives.get((cell["algo"], versus)) if versus else None
    cell["vs_native_arm"] = versus if native is not None else None
    cell["vs_native"] = (
        {m: stats.compare(v, native["per_seed"][m], better.get(m, "higher") == "higher")
         for m, v in cell["per_seed"].items()
         if native["per_seed"].get(m)}
        if native is not None
        else {}
    )
    return cell


def _equal_compute(variant: dict[str, Any], longer: dict[str, Any]) -> dict[str, Any]:
    """A candidate variant against native trained longer, on held-out episodes (each at its own
    steps) and on the training curves at the variant's steps (equal steps)."""
    held_out = stats.compare(variant["per_seed"][CURVE], longer["per_seed"][CURVE])
    seeds = min(len(variant["seeds"]), len(longer["seeds"]))
    row: dict[str, Any] = {
        "algo": variant["algo"], "arm": variant["variant"], "arm_steps": variant["steps"],
        "versus": longer["variant"], "versus_steps": longer["steps"],
        "held_out": held_out, "held_out_verdict": stats.poi_verdict(held_out["poi"], seeds),
        "equal_steps": None, "equal_steps_verdict": None,
    }  # fmt: skip
    logged = [(s[-1], v[-1]) for s, v in variant["curves"] if s]  # the variant's last log point per seed
    if not logged:
        return row
    step = min(s for s, _ in logged)  # the steps it trained (a rollout can overshoot the budget)
    at_step = [stats.value_at(s, v, step) for s, v in longer["curves"]]
    if at_step and None not in at_step:
        finals = [v for _, v in logged]
        poi = stats.probability_of_improvement([finals], [at_step])
        row["equal_steps"] = {"steps": step, "arm_curve": finals, "versus_curve": at_step, "poi": poi}
        row["equal_steps_verdict"] = stats.poi_verdict(poi, seeds)
    return row


def _equal_compute_rows(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ready = [c for c in raw if c["per_seed"].get(CURVE)]
    return [_equal_compute(v, e) for v in ready for e in ready
            if v["algo"] == e["algo"] and v["variant"] in VARIANTS and v["variant"] != "native"
            and is_equal_compute(e["variant"])]  # fmt: skip


def _profiles(raw: list[dict[str, Any]], algos: tuple[str, ...]) -> dict[str, Any]:
    """Per algorithm: fraction of seeds whose held-out return exceeds each threshold, per arm."""
    result = {}
    for algo in algos:
        arms = {c["variant"]: [c["per_seed"][CURVE]] for c in raw if c["algo"] == algo and c["per_seed"].get(CURVE)}
        if arms:
            grid = stats.profile_thresholds(*arms.values())
            result[algo] = {arm: stats.performance_profile(values, grid) for arm, values in arms.items()}
    return result


def all_hparams(plan: Plan) -> dict[str, dict[str, Any]]:
    """Every hyper-parameter each algorithm trained with: its defaults with the study's overrides."""
    from lero.training import TrainConfig

    return {a: dataclasses.asdict(TrainConfig(algo=a, hparams=plan.hparams[a]).algo_hparams()) for a in plan.algos}


def build_study(plan: Plan, task_metrics: Sequence[Metric], wall_s: float) -> dict[str, Any]:
    """The study.json document; TASK_METRICS (the env's TaskSpec) name the metrics and which
    way each is better, which every comparison with native follows."""
    metrics = [m.name for m in task_metrics]
    better = {m.name: m.better for m in task_metrics}
    raw = [_cell(plan, metrics, a, v) for a in plan.algos for v in plan.spec.variants]
    target, target_source = _target(plan, raw)
    natives = {(c["algo"], c["variant"]): c for c in raw if base_variant(c["variant"]) == "native"}
    equal_compute = _equal_compute_rows(raw)
    profiles = _profiles(raw, plan.algos)
    cells = [_finish_cell(c, natives, target, better) for c in raw]
    complete = all(c["status"] == "complete" for c in cells)
    return {
        "study_id": plan.study_dir.name,
        "status": "completed" if complete else "incomplete",
        "config": plan.config(),
        "metrics": metrics,
        "better": better,
        "success_metric": _success_metric(plan.env, metrics),
        "variants": list(plan.spec.variants),
        "algos": list(plan.algos),
        "train_seeds": plan.spec.train_seeds,
        "eval_seeds": plan.spec.eval_seeds,
        "selection_eval_seed": plan.config()["selection_eval_seed"],
        "target_return": target,
        "target_source": target_source,
        "arm_steps": {v: plan.steps_of(v) for v in plan.spec.variants},
        "hparams_all": all_hparams(plan),
        "ci": {"level": stats.CONFIDENCE, "method": "percentile bootstrap over seeds (scipy.stats.bootstrap)",
               "samples": stats.BOOTSTRAP_SAMPLES, "seed": stats.BOOTSTRAP_SEED},
        "tests": "probability of improvement P(X better than Y) + P(X = Y)/2 in each metric's own direction "
                 "(`better`), Welch t-test and two-sided "
                 "Mann-Whitney U against native; effect size Hedges' g",
        "equal_compute": equal_compute,
        "profiles": profiles,
        "recheck": judge(recorded) if (recorded := plan.read_json(recheck_path(plan))) is not None else None,
        "generations": plan.generations,
        "cells": cells,
        "wall_s": wall_s,
        "written_ts": time.time(),
    }


def _success_metric(env: dict[str, Any], metrics: list[str]) -> str | None:
    """The task's success metric where it is not the return and the study measured it
    (a sparse task's: its cells test it against native too); None otherwise."""
    task = native_task(env.get("name"), {k: v for k, v in env.items() if k != "name"})
    return task.success_metric if task and task.success_metric != "return" and task.success_metric in metrics else None


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _value_text(value: object) -> str:
    """A setting's value in prose: numbers and words as they are, lists joined, never JSON."""
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "(" + ", ".join(f"{k} {_value_text(v)}" for k, v in value.items()) + ")"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _seeds_text(seeds: list[int]) -> str:
    return ", ".join(map(str, seeds))


def source_text(source: dict[str, Any]) -> str:
    """Where the studied candidate came from, in words (study.json's `config.source`)."""
    if "candidate_file" in source:
        return f"the file `{source['candidate_file']}`"
    fitness = f", loop fitness {fmt_number(source['fitness'])} on the selection episodes" if "fitness" in source else ""
    return f"candidate `{source.get('candidate_id')}` of run `{source.get('run_id')}`{fitness}"


def env_text(env: dict[str, Any]) -> str:
    """An env as a job takes it ({"name", **kwargs}), in words: `simple_spread` (N 3, ...)."""
    kwargs = ", ".join(f"{k} {_value_text(v)}" for k, v in env.items() if k != "name")
    return f"`{env.get('name')}`" + (f" ({kwargs})" if kwargs else "")


def _label(metric: str, study: dict[str, Any]) -> str:
    """A metric's column header with the way that is better (study.json's `better`)."""
    better = study.get("better", {}).get(metric)
    return f"{metric} ({better} is better)" if better else metric


def fewest_seeds(study: dict[str, Any]) -> int:
    """The fewest successful seeds of any arm: what the study's weakest comparison rests on."""
    return min((len(c["seeds"]) for c in study["cells"]), default=0)


def seed_notes(study: dict[str, Any]) -> list[str]:
    """The warning (once) and the reasons for missing intervals and tests, for the terminal
    and the top of study.md alike."""
    seeds = fewest_seeds(study)
    notes = [w] if (w := stats.few_seeds_warning(seeds)) else []
    reasons = [stats.no_interval_reason(seeds), stats.no_test_reason(seeds, seeds)]
    return notes + [r for r in reasons if r]


def cell_line(cell: dict[str, Any]) -> str:
    """One arm in the terminal: held-out return, and its test against native when it has one."""
    summary = cell["summary"].get(CURVE)
    test = cell["vs_native"].get(CURVE, {})
    shown = f"return {stats.shown_spread(summary)}" if summary else "no result"
    if test.get("welch_p") is not None:
        shown += f", vs native p={test['welch_p']:.3g} g={_p(test['hedges_g'])}"
    elif test:
        shown += f", vs native diff {fmt_number(test['diff'])}, P(better) {fmt_number(test['poi']['value'], 2)}"
    return f"{cell['algo']:6s} {cell['variant']:8s} {shown}"


def equal_compute_sentences(rows: list[dict[str, Any]]) -> list[str]:
    """One plain sentence per comparison: which arm beats which, at what steps."""
    said = {"better": "beats", "worse": "loses to", "no difference": "does not differ from",
            "too few seeds": "has too few seeds to be compared with"}
    lines = []
    for row in rows:
        text = (f"{row['algo']}: {row['arm']} at {row['arm_steps']} steps {said[row['held_out_verdict']]} "
                f"{row['versus']} at {row['versus_steps']} steps on held-out episodes")  # fmt: skip
        if row["equal_steps_verdict"] is not None:
            text += (f", and {said[row['equal_steps_verdict']]} it at equal steps "
                     f"({row['equal_steps']['steps']:.0f}, training curves)")
        lines.append(f"- {text}.")
    return lines


def render_markdown(study: dict[str, Any], plots: list[tuple[str, str]]) -> str:
    """study.md: one table per algorithm, then the generation gains and the plots."""
    cfg = study["config"]
    lines = [
        f"# Study {study['study_id']} ({study['status']})", "",
        f"Candidate: {source_text(cfg['source'])}.  ",
        f"Environment: {env_text(cfg['env'])}; {cfg['steps']:,} steps per training, "
        f"training seeds {_seeds_text(study['train_seeds'])}, held-out evaluation seeds "
        f"{_seeds_text(study['eval_seeds'])} x {cfg['eval_episodes']} episodes (selection used seed "
        f"{study['selection_eval_seed']}).  ",
        "Two kinds of return, never compared with each other: **held-out** (the greedy policy after "
        "training, on the held-out episodes) in the metric columns, IQM and every test against native; "
        "**training curves** (the training episodes' return, sampled actions) in `reached target` only.  ",
        f"Held out: mean [95% bootstrap CI] over seeds (below {stats.MIN_INTERVAL_SEEDS} seeds, the seeds' range, "
        f"labelled so); IQM of `return` [95% CI]; vs native on `return`: probability that the arm is better "
        f"(P(better), in each metric's own direction) [95% CI], Hedges' g, Welch p, Mann-Whitney p (an arm at K x the "
        f"steps against native@Kx, when the study has it). Training curves: steps to reach return "
        f"{fmt_number(study['target_return'])} ({study['target_source']}): seeds that reached it, mean step.", "",
    ]  # fmt: skip
    if notes := seed_notes(study):
        lines[2:2] = [f"> **{notes[0]}**" if notes[0].startswith("warning") else f"> {notes[0]}",
                      *(f"> {n}" for n in notes[1:]), ""]  # fmt: skip
    metrics, success = study["metrics"], study.get("success_metric")
    seeds = fewest_seeds(study)
    for algo in study["algos"]:
        lines += [f"## {algo}", "",
                  "| arm | steps | " + " | ".join(_label(m, study) for m in metrics) + " | IQM return | P(better than native) | g | Welch p | MWU p "
                  "| reached target (training curves) |" + (f" P(better than native) on {success} |" if success else ""),
                  "|---" * (len(metrics) + 8 + bool(success)) + "|"]  # fmt: skip
        for cell in (c for c in study["cells"] if c["algo"] == algo):
            values = [stats.shown_spread(cell["summary"].get(m)) for m in metrics]
            test = cell["vs_native"].get("return", {})
            reach = cell["steps_to_target"]
            reached = f"{reach['reached']}/{len(reach['per_seed'])}"
            if reach["mean_of_reached"] is not None:
                reached += f" @ {reach['mean_of_reached']:.3g}"
            lines.append(f"| {cell['variant']} | {cell['steps']} | " + " | ".join(values) + " | "
                         f"{stats.shown_spread(cell['summary'].get('return'), 'iqm', 'iqm_ci')} | "
                         f"{stats.shown_poi(test.get('poi'), seeds)} | {_p(test.get('hedges_g'))} | "
                         f"{_p(test.get('welch_p'))} | {_p(test.get('mannwhitney_p'))} | {reached} |"
                         + (f" {stats.shown_poi(cell['vs_native'].get(success, {}).get('poi'), seeds)} |"
                            if success else ""))  # fmt: skip
        lines.append("")
    absolute = [c for c in study["cells"] if c["absolute"]]
    if absolute:
        lines += ["## Absolute metric", "",
                  f"Each seed's checkpoints ({cfg['checkpoints']} per training, and the final policy) scored on "
                  f"validation episodes (seeds {cfg['validation_seeds']}); the best re-evaluated on "
                  f"{absolute[0]['absolute']['episodes']} held-out episodes.", "",
                  "| algo | arm | best checkpoint per seed | absolute return [95% CI] | IQM [95% CI] |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for cell in absolute:
            summary = cell["absolute"]["summary"].get(CURVE)
            lines.append(f"| {cell['algo']} | {cell['variant']} | {cell['absolute']['best_steps']} | "
                         f"{stats.shown_spread(summary)} | {stats.shown_spread(summary, 'iqm', 'iqm_ci')} |")  # fmt: skip
        lines.append("")
    if study["equal_compute"]:
        lines += ["## Equal compute", "",
                  "Each candidate variant against native trained longer: on held-out episodes (each at "
                  "its own steps), and on the training curves at the variant's steps. P = probability "
                  "of improvement of the variant [95% CI]; a verdict needs the CI to exclude 1/2.", "",
                  "| algo | arm (steps) | vs (steps) | held out: P | verdict | at equal steps: P | verdict |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for row in study["equal_compute"]:
            equal = row["equal_steps"]
            lines.append(f"| {row['algo']} | {row['arm']} ({row['arm_steps']}) | {row['versus']} "
                         f"({row['versus_steps']}) | {stats.shown_poi(row['held_out']['poi'], seeds)} | "
                         f"{row['held_out_verdict']} | {stats.shown_poi(equal['poi'], seeds) if equal else '-'} | "
                         f"{row['equal_steps_verdict'] or '-'} |")  # fmt: skip
        lines += ["", *equal_compute_sentences(study["equal_compute"]), ""]
    if study["recheck"] is not None:
        lines += recheck_lines(study["recheck"])
    gens = study["generations"]
    if gens:
        per_gen = ", ".join(f"gen {g}: {fmt_number(v)}" for g, v in gens["best_per_generation"].items())
        lines += ["## What the generations added", "",
                  f"Best fitness per generation ({gens['note']}): {per_gen}; baseline "
                  f"{fmt_number(gens['baseline_fitness'])}. Gain over generation 0: "
                  f"{fmt_number(gens['gain_over_generation0'])} (offline prior: {gens['offline_prior']}).", ""]  # fmt: skip
    lines += ["## Hyper-parameters", "", *(f"- {algo}: " + ", ".join(f"{k} {_value_text(v)}" for k, v in sorted(h.items()))
                                           for algo, h in study["hparams_all"].items()), ""]  # fmt: skip
    lines += [line for name, caption in plots for line in figure_lines(name, caption)]
    return "\n".join(lines) + "\n"


def write_study(plan: Plan, task_metrics: Sequence[Metric], wall_s: float) -> dict[str, Any]:
    """Write study.json, study.md and plots/ for PLAN from its cell files; returns study.json."""
    study = build_study(plan, task_metrics, wall_s)
    metrics = study["metrics"]
    plots_dir = plan.folder("plots")
    plots = []
    for algo in study["algos"]:
        cells = [c for c in study["cells"] if c["algo"] == algo]
        png = plot_curves(cells, study["target_return"], plots_dir / f"curves-{algo}.png").name
        plots.append((png, curves_caption(algo, cells, study["target_return"])))
    for metric in metrics:
        plots.append((plot_metric(metric, study["cells"], plots_dir / f"{metric}.png").name,
                      metric_caption(metric, study["cells"])))
    for algo, profiles in study["profiles"].items():
        plots.append((plot_profiles(profiles, plots_dir / f"profile-{algo}.png").name,
                      profiles_caption(f"{algo}: held-out return")))
    if study["recheck"] is not None:
        plots.append((plot_recheck(study["recheck"], plots_dir / "recheck.png").name, recheck_caption(study["recheck"])))
    write_atomic(plan.study_dir / "study.json", json.dumps(study, indent=2) + "\n")
    write_atomic(plan.study_dir / "study.md", render_markdown(study, plots))
    return study
