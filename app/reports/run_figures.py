"""A run's figures for report.md, each with the caption that says what it shows (the
figures carry no title: a paper captions them itself).

- `fitness`: every candidate's fitness per generation with its seeds' range, each
  generation's best, native's;
- `learning_curves`: native's and the best candidate's training curves over the loop's
  seeds, with their greedy evaluation (the fitness);
- `confirmation`: every arm of the confirmation (the confirmed candidates, native,
  native@loop when it ran) at the confirmation budget on fresh seeds, bands over seeds, with
  the held-out return after training;
- `confirmation_<metric>`: when the verdict compares the task's success metric rather than the
  return (a sparse task), that metric held out, per arm and seed.

Colours follow the arm (`app.study.arm_colors`), the same in every figure and in `lero study`'s.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lero.app.study.arm_colors import CANDIDATE, NATIVE, arm_color, arm_line
from lero.app.study.stats import curve_band
from lero.graph.confirmation import CURVE, LOOP_ID, arm_name
from lero.graph.rundir import BASELINE_ID
from lero.graph.summary import RunFiles, best_candidate, seed_fitnesses
from lero.training.envs.task import RETURN
from lero.training.validation import finite_number

if TYPE_CHECKING:
    from lero.app.reports.figures import CurveSeries

HELD_OUT = "held-out evaluation"  # the confirmation's return after training (fresh episodes)
CONFIRMATION_FIGURE = "confirmation"
UNSAFE_IN_STEM = re.compile(r"[^A-Za-z0-9_-]")  # a metric's characters a plot's file name replaces by "_"
MAX_STEM_METRIC = 60


@dataclass(frozen=True)
class RunFigure:
    """One figure of report.md: plots/STEM.{png,pdf,svg,csv} and its caption."""

    stem: str
    files: dict[str, bytes]
    caption: str
    under_verdict: bool = False  # report.md shows it under the confirmation's verdict, not under Plots


def candidate_label(candidate_id: str) -> str:
    """How figures name a candidate: its id, the generation-index report.md's tables use."""
    return f"candidate {candidate_id}"


def curve_series(label: str, result: dict | None, color: str = "C0") -> CurveSeries | None:
    """LABEL's learning curve over its ok seeds (`app.study.stats.curve_band`: a 95% band from
    MIN_INTERVAL_SEEDS seeds, each seed below) and each seed's greedy evaluation after
    training (under `--fitness auc` the final policy's, not the curve's average), in COLOR."""
    from lero.app.reports.figures import CurveSeries

    seeds = [r for r in (result or {}).get("per_seed") or [] if isinstance(r, dict) and r.get("status") == "ok"]
    # a result written before seed records kept their curves: the one (seed 0's) it has
    curves = [c for c in map(_return_curve, seeds) if c is not None] or \
        [c for c in [_return_curve(result or {})] if c is not None]  # fmt: skip
    if not curves:
        return None
    greedy = [r.get("final_fitness", r.get("fitness")) for r in seeds]
    return CurveSeries(label=label, band=curve_band(curves), seeds=len(curves), color=color,
                       greedy=[float(g) for g in greedy if finite_number(g)], end_step=max(s[-1] for s, _ in curves))  # fmt: skip


def _return_curve(record: dict) -> tuple[list[float], list[float]] | None:
    steps, returns = ((record.get("curves") or {}).get(k) or [] for k in ("steps", "return"))
    ok = steps and len(steps) == len(returns) and all(map(finite_number, [*steps, *returns]))
    return (steps, returns) if ok else None


def fitness_figure(run: RunFiles, summary: dict[str, Any]) -> RunFigure:
    """Fitness per generation with its spread over each candidate's seeds."""
    from lero.app.reports.figures import FitnessPoint, plot_fitness

    generations: dict[int, list[FitnessPoint]] = defaultdict(list)
    for c in run.candidates:
        if c.fitness is not None:
            generations[c.generation].append(FitnessPoint(c.candidate_id, c.fitness, seed_fitnesses(c.result),
                                                     stopped=c.stopped_at is not None))  # fmt: skip
    base = summary["baseline"]["fitness"]
    native = FitnessPoint(NATIVE, float(base), seed_fitnesses(run.baseline)) if finite_number(base) else None
    best = {g["generation"]: g["best_fitness"] for g in summary["generations"]}
    kind = run.spec.get("fitness") or "final"
    files = plot_fitness(dict(generations), best, native, (arm_color(CANDIDATE), arm_color(NATIVE)), f"fitness ({kind})")
    seeds = run.spec.get("seeds")
    caption = (f"Fitness per generation (the loop's `{kind}` fitness of the greedy policy on the selection "
               f"episodes, mean over {seeds} seed{'s' * (seeds != 1)}; `--fitness` in the settings above). "
               "Each dot is a candidate (bar: its seeds' range; hollow: stopped early by halving, at a "
               "smaller budget); the line is each generation's best; dashed, native (shaded: its seeds' range).")  # fmt: skip
    return RunFigure("fitness", files, caption)


def learning_figure(run: RunFiles) -> RunFigure | None:
    """native's and the best candidate's training curves over the loop's seeds (None: neither has one)."""
    from lero.app.reports.figures import curve_band_kind, plot_learning_curves

    best = best_candidate(run)
    series = [curve_series(NATIVE, run.baseline, arm_color(NATIVE))]
    if best:
        series.append(curve_series(candidate_label(best.candidate_id), best.result, arm_color(CANDIDATE)))
    drawn = [s for s in series if s is not None]
    if not drawn:
        return None
    caption = (f"Learning curves at the loop's {run.spec.get('steps'):,} env steps: native and the best "
               "candidate. Lines: the native return of the training episodes, where the policy samples its "
               f"actions (exploration), mean over seeds (shaded: {curve_band_kind(drawn)}; thin: each seed); "
               "the fitness is the greedy policy's return on separate evaluation episodes after training "
               "(diamond: mean over seeds; dots: each seed), so a curve may end below its fitness.")  # fmt: skip
    return RunFigure("learning_curves", plot_learning_curves(drawn), caption)


def _styled_arms(confirmation: dict[str, Any]) -> list[tuple[dict[str, Any], str, str]]:
    """(arm, name, colour) for every arm of a confirmation block, candidates first, then native
    and native@loop; the first candidate in the candidate's colour, the others in extra ones."""
    order = {BASELINE_ID: 1, LOOP_ID: 2}
    styled: list[tuple[dict[str, Any], str, str]] = []
    extra = 0  # the colour index of a second, third... confirmed candidate
    for arm in sorted(confirmation["arms"], key=lambda a: order.get(a["candidate_id"], 0)):
        cid = arm["candidate_id"]
        if cid in order:
            styled.append((arm, arm_name(cid), arm_color(arm_name(cid))))
            continue
        winner = not any(color == arm_color(CANDIDATE) for _, _, color in styled)
        styled.append((arm, candidate_label(cid), arm_color(CANDIDATE) if winner else arm_color("", extra)))
        extra += not winner
    return styled


def confirmation_series(confirmation: dict[str, Any]) -> list[CurveSeries]:
    """Every arm of a confirmation block (report.json's) as a learning curve at its budget:
    the curves its seeds trained and each seed's held-out return."""
    from lero.app.reports.figures import CurveSeries

    series: list[CurveSeries] = []
    for arm, name, color in _styled_arms(confirmation):
        curves = [(c["steps"], c[CURVE]) for c in arm["curves"] if c.get(CURVE) and len(c[CURVE]) == len(c["steps"])]
        if curves:
            series.append(CurveSeries(label=name, band=curve_band(curves), seeds=len(curves), color=color,
                                      linestyle=arm_line(arm_name(arm["candidate_id"])),
                                      greedy=arm["per_seed"].get(CURVE, []),
                                      end_step=arm["steps"] or confirmation["steps"]))  # fmt: skip
    return series


def confirmation_figure(confirmation: dict[str, Any] | None) -> RunFigure | None:
    """The confirmation's arms at its budget (None: no confirmation, or no curve yet)."""
    from lero.app.reports.figures import curve_band_kind, plot_learning_curves

    series = confirmation_series(confirmation) if confirmation else []
    if not series:
        return None
    seeds = len(confirmation["seeds"])
    longer = [s for s in series if s.end_step and s.end_step > confirmation["steps"]]
    caption = (f"Confirmation at {confirmation['steps']:,} env steps on {seeds} fresh seeds: "
               f"{', '.join(s.label for s in series)}. Lines: the training episodes' native return per agent, "
               f"mean over seeds (shaded: {curve_band_kind(series)}; thin: each seed); diamond: the mean "
               "held-out return of the greedy policy after training (dots: each seed), the numbers the "
               "verdict above compares.")  # fmt: skip
    if longer:
        caption += " " + "; ".join(f"{s.label} trained {s.end_step:,} env steps" for s in longer) + \
            " (every step the run spent; the step axis is logarithmic when it is far longer)."  # fmt: skip
    return RunFigure(CONFIRMATION_FIGURE, plot_learning_curves(series, HELD_OUT), caption, under_verdict=True)


def confirmation_metric_figure(confirmation: dict[str, Any] | None) -> RunFigure | None:
    """The held-out value of the metric the verdict compares, per arm and seed, when that metric
    is not the return (a sparse task's success rate): the return curves cannot show it, and on a
    sparse task they may even rank the arms the other way (None: the verdict is on the return,
    or no arm measured the metric)."""
    from lero.app.reports.figures import ArmValues, plot_arm_values

    metric = (confirmation or {}).get("success_metric", RETURN)
    if metric == RETURN:
        return None
    arms = [ArmValues(name, [float(v) for v in arm["per_seed"].get(metric, []) if finite_number(v)], color)
            for arm, name, color in _styled_arms(confirmation)]  # fmt: skip
    arms = [a for a in arms if a.values]
    if not arms:
        return None
    caption = (f"The metric the verdict compares, `{metric}`, on held-out episodes after training: "
               f"{', '.join(a.label for a in arms)}. Dots: each seed; diamond: their mean. The return "
               "curves of the next figure are the task's own return, which on a sparse task need not rise with "
               f"`{metric}`.")  # fmt: skip
    stem = f"{CONFIRMATION_FIGURE}_{UNSAFE_IN_STEM.sub('_', metric)[:MAX_STEM_METRIC]}"  # a file name whatever the task calls it
    return RunFigure(stem, plot_arm_values(arms, f"held-out {metric}"), caption, under_verdict=True)


def run_figures(run: RunFiles, summary: dict[str, Any]) -> list[RunFigure]:
    """report.md's figures in the order it shows them: the confirmation first (the verdict's
    evidence: the metric it compares when that is not the return, then the curves), then the
    loop's fitness and learning curves."""
    confirmation = summary.get("confirmation")
    figures = [confirmation_metric_figure(confirmation), confirmation_figure(confirmation),
               fitness_figure(run, summary), learning_figure(run)]  # fmt: skip
    return [f for f in figures if f is not None]
