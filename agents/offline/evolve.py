"""Sampling, mutation and crossover of genomes, and mutations guided by training statistics.

Guidance follows Eureka's reflection tips, applied mechanically to the parent's
`reflection_stats` (name -> {"snapshots", "max", "mean", "min"}; the HRF components are
per-episode sums of the *weighted* terms) and its evaluation metrics:
- a component whose mean magnitude dominates the others (>= DOMINANT_RATIO x the median
  of the rest) is rescaled down;
- a near-constant component (range below NEAR_CONSTANT of its scale) carries no learning
  signal and is dropped (the last task term is kept);
- low coverage adds (or strengthens) the team occupancy bonus and the occupancy-aware
  observation features;
- many collisions add (or strengthen) the collision penalty.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

from lero.agents.offline.genome import (
    ASSIGNMENTS,
    FEATURE_KINDS,
    SCHEDULES,
    TASK_TERMS,
    TERM_KINDS,
    TERM_SCALE,
    WEIGHT_MAX,
    Genome,
    Term,
)

DOMINANT_RATIO = 10.0
DOMINANT_RESCALE = 0.3
NEAR_CONSTANT = 1e-3
LOW_COVERAGE = 0.2
MANY_COLLISIONS = 6.0  # agent collisions per episode; MAPPO baselines sit near 4 on simple_spread
STRENGTHEN = 1.5
OCCUPANCY_FEATURES = ("occupancy", "free_landmark")


@dataclass(frozen=True)
class Child:
    """A genome plus the plain-language list of how it was made (the Draft's reply text)."""

    genome: Genome
    notes: tuple[str, ...]
    kind: str = "explore"  # exploit (refines `parents`) or explore (a fresh design)
    parents: tuple[str, ...] = ()


def prior_genome(sparse: bool = False) -> Genome:
    """The first guess: team coverage, individual credit that fades, a collision penalty. On
    a SPARSE task (its TaskSpec's: the reward pays only for occupied landmarks) the native
    reward shaped through the team coverage potential instead: policy-invariant shaping."""
    terms = [Term("team_coverage", 1.0), Term("assigned", 1.0, "ramp_down"), Term("collision", 0.5)]
    if sparse:
        terms = [Term("env", 1.0), Term("team_coverage_potential", 1.0)]
    features = ("nearest_landmark", "occupancy", "free_landmark")
    return Genome.build(terms, features, "optimal")


def random_genome(rng: random.Random) -> Genome:
    """A fresh sample: one task term, one to three other terms, one to four features."""
    task = rng.choice(TASK_TERMS)
    extras = rng.sample([k for k in TERM_KINDS if k != task], k=rng.randint(1, 3))
    terms = [Term(kind, sample_weight(rng, kind), rng.choice(SCHEDULES)) for kind in extras]
    terms.append(Term(task, sample_weight(rng, task)))
    features = rng.sample(FEATURE_KINDS, k=rng.randint(1, 4))
    return Genome.build(terms, features, rng.choice(ASSIGNMENTS))


def sample_weight(rng: random.Random, kind: str) -> float:
    """Log-uniform in [0.2, 2] of the term's typical scale."""
    return round(math.exp(rng.uniform(math.log(0.2), math.log(2.0))) / TERM_SCALE[kind], 3)


def mutate(genome: Genome, rng: random.Random) -> tuple[Genome, str]:
    """One random edit: reweight, reschedule, add/drop a term or a feature, or reassign."""
    operators = [_reweight, _reschedule, _add_term, _drop_term, _toggle_feature]
    if genome.needs_assignment():
        operators.append(_switch_assignment)
    for _ in range(len(operators) * 2):
        result = rng.choice(operators)(genome, rng)
        if result is not None and result[0] != genome:
            return result
    return _reweight(genome, rng)


def crossover(first: Genome, second: Genome, rng: random.Random) -> Genome:
    """Each term kind and feature of either parent is inherited from one of them at random."""
    terms = []
    for kind in TERM_KINDS:
        options = [t for t in (first.term(kind), second.term(kind)) if t is not None]
        if options and (len(options) == 2 or rng.random() < 0.5):
            terms.append(rng.choice(options))
    if not any(t.kind in TASK_TERMS for t in terms):
        terms.append(next(t for t in first.terms if t.kind in TASK_TERMS))
    features = [
        f
        for f in FEATURE_KINDS
        if (f in first.features) + (f in second.features) > rng.random() * 2
    ]
    features = features or list(first.features)
    assignment = rng.choice([first.assignment, second.assignment])
    return Genome.build(terms, features, assignment, {*first.applied, *second.applied})


def guided(
    genome: Genome, stats: dict[str, dict], metrics: dict[str, float]
) -> tuple[Genome, list[str]]:
    """Apply the reflection tips (module docstring) to `genome`; deterministic."""
    notes: list[str] = []
    terms = {t.kind: t for t in genome.terms}
    features = set(genome.features)
    magnitudes = {k: abs(float(stats[k]["mean"])) for k in terms if k in stats}
    for kind, magnitude in magnitudes.items():
        rest = [m for other, m in magnitudes.items() if other != kind]
        if rest and magnitude >= DOMINANT_RATIO * max(statistics.median(rest), 1e-8):
            terms[kind] = scaled(terms[kind], DOMINANT_RESCALE)
            notes.append(
                f"{kind} dominated the reward ({magnitude:.3g} vs median {statistics.median(rest):.3g}): rescaled x{DOMINANT_RESCALE}"
            )
    for kind in list(terms):
        if kind not in stats:
            continue
        low, high, mean = (float(stats[kind][key]) for key in ("min", "max", "mean"))
        flat = high - low <= NEAR_CONSTANT * max(1.0, abs(mean))
        task_terms_left = [k for k in terms if k in TASK_TERMS and k != kind]
        if flat and (kind not in TASK_TERMS or task_terms_left):
            del terms[kind]
            notes.append(f"{kind} was near constant ({low:.3g}..{high:.3g}): dropped")
    if "coverage" in metrics and metrics["coverage"] < LOW_COVERAGE:
        terms["team_occupancy"] = strengthened(terms.get("team_occupancy"), "team_occupancy")
        features |= set(OCCUPANCY_FEATURES)
        notes.append(
            f"coverage {metrics['coverage']:.2f} < {LOW_COVERAGE}: stronger occupancy bonus, occupancy features"
        )
    if metrics.get("collisions", 0.0) > MANY_COLLISIONS:
        terms["collision"] = strengthened(terms.get("collision"), "collision")
        notes.append(
            f"{metrics['collisions']:.1f} collisions per episode: stronger collision penalty"
        )
    return Genome.build(terms.values(), features, genome.assignment, genome.applied), notes


def strengthened(term: Term | None, kind: str) -> Term:
    if term is None:
        return Term(kind, round(1.0 / TERM_SCALE[kind], 3))
    return scaled(term, STRENGTHEN)


def scaled(term: Term, factor: float) -> Term:
    return Term(term.kind, round(min(term.weight * factor, WEIGHT_MAX), 4), term.schedule)


def _reweight(genome: Genome, rng: random.Random) -> tuple[Genome, str]:
    term = rng.choice(genome.terms)
    factor = math.exp(rng.gauss(0.0, 0.5))
    others = [t for t in genome.terms if t is not term]
    return genome.with_terms([*others, scaled(term, factor)]), f"{term.kind} weight x{factor:.2f}"


def _reschedule(genome: Genome, rng: random.Random) -> tuple[Genome, str] | None:
    term = rng.choice(genome.terms)
    schedule = rng.choice([s for s in SCHEDULES if s != term.schedule])
    others = [t for t in genome.terms if t is not term]
    changed = Term(term.kind, term.weight, schedule)
    return genome.with_terms([*others, changed]), f"{term.kind} schedule -> {schedule}"


def _add_term(genome: Genome, rng: random.Random) -> tuple[Genome, str] | None:
    missing = [k for k in TERM_KINDS if genome.term(k) is None]
    if not missing:
        return None
    kind = rng.choice(missing)
    added = Term(kind, sample_weight(rng, kind), rng.choice(SCHEDULES))
    return genome.with_terms([*genome.terms, added]), f"added {kind}"


def _drop_term(genome: Genome, rng: random.Random) -> tuple[Genome, str] | None:
    task_terms = [t for t in genome.terms if t.kind in TASK_TERMS]
    droppable = [t for t in genome.terms if t.kind not in TASK_TERMS or len(task_terms) > 1]
    if len(genome.terms) < 2 or not droppable:
        return None
    term = rng.choice(droppable)
    return genome.with_terms([t for t in genome.terms if t is not term]), f"dropped {term.kind}"


def _toggle_feature(genome: Genome, rng: random.Random) -> tuple[Genome, str]:
    feature = rng.choice(FEATURE_KINDS)
    if feature in genome.features and len(genome.features) > 1:
        return genome.with_features(set(genome.features) - {feature}), f"dropped feature {feature}"
    return genome.with_features({*genome.features, feature}), f"added feature {feature}"


def _switch_assignment(genome: Genome, rng: random.Random) -> tuple[Genome, str]:
    other = next(a for a in ASSIGNMENTS if a != genome.assignment)
    return genome.with_assignment(other), f"assignment -> {other}"
