"""The critic's rubric, measured: rubric points read off a candidate's validation rollout.

The validate job measures what each reward term and observation feature did on real env
batches (`training.rollout_evidence`, the result's `evidence`, checked by the host); these
rules turn those numbers plus the design's static facts (the task is sparse, a term is the
task's own reward) into `Point`s whose `why` states the numbers and the threshold. A
candidate with points goes to the critic's bounded revision with them as its reasons, as a
structured critic's reject with points does. Nothing here runs candidate code.

Thresholds were set on `benchmarks/data/critic_set.json`'s rollouts (simple_spread, N=3,
random actions): no rule fires on its 5 sound designs (`benchmarks.critic_precision
--evidence`, docs/results.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lero.agents.expression.expression_design import design_of
from lero.agents.records import Point, Problem

# A feature that moves less than this over the rollout's envs, agents and steps tells the
# policy nothing (the sound set's features move by 0.36 to 0.55); a hybrid reward that moves
# less than this from step to step pays for nothing the agents do.
CONSTANT_STD = 1e-6
# A term whose contribution correlates this well with the native reward is the task's own
# reward (rescaled), never a shaping term (the sound set's shaping terms: 0.18 to 0.94).
TASK_CORR = 0.9
# A shaping term whose spread is more than this many times the native reward's decides what
# is learned on its own (the sound set's largest: 0.3x; the planted speed terms: 120x-135x).
DROWNING_RATIO = 10.0
# A term whose contribution correlates this negatively with the native reward pays for what
# the task punishes (the sound set's shaping terms: +0.18 or above; a paid distance: -0.35).
ANTI_CORR = -0.25
# A term whose contribution correlates this well with a penalty the task reports (collisions)
# pays for it (the sound set's shaping terms: 0.02 or below; paid touching: 0.83).
PENALTY_CORR = 0.3

Rule = Callable[[str, dict[str, Any], dict[str, Any], Problem], str | None]  # -> why, or None


def spread(stats: dict[str, Any]) -> float:
    """How far a term moves the hybrid reward: |effective weight| x its std."""
    return abs(stats["weight"]) * stats["std"]


def is_task_term(stats: dict[str, Any]) -> bool:
    return stats["native_corr"] >= TASK_CORR


def team_sign(name: str, stats: dict[str, Any], evidence: dict[str, Any], task: Problem) -> str | None:
    if stats["native_corr"] <= -TASK_CORR:
        return (f"its contribution (weight {stats['weight']:.3g}) correlates {stats['native_corr']:.2f} with the "
                f"native reward (<= -{TASK_CORR}): the task's reward enters with a minus")
    return None


def rewards_penalised(name: str, stats: dict[str, Any], evidence: dict[str, Any], task: Problem) -> str | None:
    penalties = {p: c for p, c in stats["penalty_corr"].items() if c >= PENALTY_CORR}
    if penalties:
        said = ", ".join(f"{p} {c:.2f}" for p, c in penalties.items())
        return f"its contribution correlates with what the task penalises ({said}; threshold {PENALTY_CORR})"
    if stats["native_corr"] <= ANTI_CORR:
        return (f"its contribution correlates {stats['native_corr']:.2f} with the native reward "
                f"(threshold {ANTI_CORR}): it pays for what the task punishes")
    return None


def drowning_weight(name: str, stats: dict[str, Any], evidence: dict[str, Any], task: Problem) -> str | None:
    native = max(evidence["native_std"], 1e-9)
    ratio = spread(stats) / native
    if not is_task_term(stats) and ratio > DROWNING_RATIO:
        return (f"its spread ({abs(stats['weight']):.3g} x std {stats['std']:.3g}) is {ratio:.1f}x the native "
                f"reward's std {native:.3g} (threshold {DROWNING_RATIO:g}x): it, not the task, decides what is learned")
    return None


def not_invariant(name: str, stats: dict[str, Any], evidence: dict[str, Any], task: Problem) -> str | None:
    punishes = any(c <= -PENALTY_CORR for c in stats["penalty_corr"].values())  # the task's own penalty, reweighted
    if task.task_spec.sparse and not is_task_term(stats) and not punishes and spread(stats) > CONSTANT_STD:
        return (f"the task is sparse and this term (std {stats['std']:.3g}, correlation {stats['native_corr']:.2f} "
                f"with the native reward) is added to the reward, not shaped through a potential: "
                f"it can change the optimal policies")
    return None


TERM_RULES: tuple[tuple[str, Rule], ...] = (  # the first that fires is the term's point
    ("team-sign", team_sign), ("rewards-penalised", rewards_penalised), ("drowning-weight", drowning_weight),
    ("not-invariant", not_invariant),
)


def evidence_points(task: Problem, code: str, evidence: dict[str, Any]) -> list[Point]:
    """The rubric points EVIDENCE (a checked `evidence` result field; empty: none measured)
    shows in CODE: at most one per term and one per feature."""
    if not evidence:
        return []
    design = design_of(code)
    points = []
    for name, stats in evidence["terms"].items():
        for item, rule in TERM_RULES:
            if why := rule(name, stats, evidence, task):
                points.append(Point(term_target(design, name), item, why))
                break
    # a hybrid reward that does not move while the native one does (the same threshold): it pays for nothing the
    # agents do. Where the native reward does not move either (a sparse task on a short rollout), that is the task.
    if evidence["hybrid_step_std"] <= CONSTANT_STD < evidence["native_std"] and evidence["terms"]:
        name = max(evidence["terms"], key=lambda n: spread(evidence["terms"][n]))
        points.append(Point(term_target(design, name), "drops-task", f"the hybrid reward does not change while the "
                            f"agents act (its std over a rollout's steps is {evidence['hybrid_step_std']:.3g}, threshold "
                            f"{CONSTANT_STD:g}) and this term makes most of it: it pays for nothing they do"))
    features = design.of("feature") if design is not None else ()
    for column, stats in enumerate(evidence["features"]):
        target = features[column].label if column < len(features) else "enhance_observation"
        where = f"column {task.obs_dim + column} of the enhanced observation"
        if stats["row_leak"]:
            points.append(Point(target, "unobservable-feature", f"{where} changed when other agents' rows were left "
                                "out of the batch: it reads what this agent cannot observe"))
        elif stats["std"] <= CONSTANT_STD:
            points.append(Point(target, "constant-feature", f"{where} has std {stats['std']:.3g} over the "
                                f"validation rollout (threshold {CONSTANT_STD:g}): it tells the policy nothing"))
    return points


def term_target(design: Any, name: str) -> str:
    """What a point names for the component NAME: its slot in an expression design, else the
    component's own name (a key in the code)."""
    label = f"term {name}"
    return label if design is not None and design.slot(label) is not None else name
