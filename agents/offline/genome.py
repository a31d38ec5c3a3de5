"""The offline designer's genome: the grammar of candidate designs (full table of terms and
features in `agents/prompts/offline_grammar.md`).

    genome     := terms features assignment
    terms      := term+          each kind once, at least one TASK_TERMS kind
    term       := kind weight schedule    component = weight * schedule * raw value
    schedule   := constant | ramp_up | ramp_down     (x 1, x progress, x (1 - progress))
    kind       := env | team_coverage | nearest | assigned          (task terms)
                | team_occupancy | on_target | collision | approach | settle | spread
                | team_coverage_potential | nearest_potential | assigned_potential
                                 (potentials: Phi, rendered into `potential(state, obs)`)
    features   := feature+       landmark_dist | sorted_landmarks | nearest_landmark
                                 | occupancy | free_landmark | nearest_agent | speed
    assignment := greedy | optimal        (which landmark each agent is credited for)

A genome is the whole design; `render.py` turns it into a readable module and embeds
it as a `# lero-genome:` comment so later generations can mutate and cross elites.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from lero.agents import bounded_json
from lero.agents.bounded_json import finite_float

# Reward terms. Team terms give one value per env [B] shared by all agents; the others
# give each agent its own value [B, N] (individual credit).
TEAM_TERMS = ("team_coverage", "team_occupancy")
INDIVIDUAL_TERMS = (
    "env",
    "nearest",
    "assigned",
    "on_target",
    "collision",
    "approach",
    "settle",
    "spread",
)
# Potential forms of the distance task terms: Phi = that term's raw value, rendered into
# `potential(state, obs)` (lero adds gamma Phi(s') - Phi(s): the optimal policies stay the
# task's); their schedule is always constant (Phi may not change over training).
POTENTIAL_OF = {"team_coverage_potential": "team_coverage", "nearest_potential": "nearest",
                "assigned_potential": "assigned"}
TERM_KINDS = TEAM_TERMS + INDIVIDUAL_TERMS + tuple(POTENTIAL_OF)
TASK_TERMS = ("env", "team_coverage", "nearest", "assigned")  # terms that measure the goal itself
ASSIGNMENT_TERMS = ("assigned", "on_target", "approach", "settle", "assigned_potential")  # need a landmark per agent
SCHEDULES = ("constant", "ramp_up", "ramp_down")  # weight x 1, x progress, x (1 - progress)
ASSIGNMENTS = ("greedy", "optimal")

# Observation features, each computed from one agent's own obs, and the slots they read.
FEATURE_SLOTS: dict[str, tuple[str, ...]] = {
    "landmark_dist": ("landmark_rel",),
    "sorted_landmarks": ("landmark_rel",),
    "nearest_landmark": ("landmark_rel",),
    "occupancy": ("landmark_rel", "other_rel"),
    "free_landmark": ("landmark_rel", "other_rel"),
    "nearest_agent": ("other_rel",),
    "speed": ("self_vel",),
}
FEATURE_KINDS = tuple(FEATURE_SLOTS)

# Typical magnitude of each raw term on simple_spread, so that sampled weights start
# every term near unit scale instead of letting one swamp the others.
TERM_SCALE = {
    "env": 1.0,
    "team_coverage": 1.0,
    "team_occupancy": 2.0,
    "nearest": 1.0,
    "assigned": 1.0,
    "on_target": 1.0,
    "collision": 1.0,
    "approach": 0.5,
    "settle": 0.3,
    "spread": 0.5,
}
TERM_SCALE.update({kind: TERM_SCALE[base] for kind, base in POTENTIAL_OF.items()})
GENOME_TAG = "# lero-genome: "
WEIGHT_MAX = 100.0  # no term needs more; mutations stop here (and the design schema's bound)


@dataclass(frozen=True)
class Term:
    kind: str
    weight: float
    schedule: str = "constant"

    def __post_init__(self) -> None:
        if self.kind not in TERM_KINDS:
            raise ValueError(f"unknown reward term {self.kind!r}; known: {', '.join(TERM_KINDS)}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; known: {', '.join(SCHEDULES)}")
        if self.kind in POTENTIAL_OF:  # Phi is fixed over training
            object.__setattr__(self, "schedule", "constant")


@dataclass(frozen=True)
class Genome:
    terms: tuple[Term, ...]
    features: tuple[str, ...]
    assignment: str = "greedy"
    # generation-feedback edits already applied to this lineage (so they are never
    # compounded); not part of the design, so equal designs compare equal
    applied: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        kinds = [t.kind for t in self.terms]
        if not kinds or len(set(kinds)) != len(kinds):
            raise ValueError("a genome needs at least one reward term and each kind at most once")
        if not any(k in TASK_TERMS for k in kinds):
            raise ValueError(f"a genome needs one task term ({', '.join(TASK_TERMS)})")
        unknown = [f for f in self.features if f not in FEATURE_SLOTS]
        if unknown or len(set(self.features)) != len(self.features):
            raise ValueError(
                f"bad feature list {self.features!r}; known: {', '.join(FEATURE_KINDS)}"
            )
        if self.assignment not in ASSIGNMENTS:
            raise ValueError(
                f"unknown assignment {self.assignment!r}; known: {', '.join(ASSIGNMENTS)}"
            )

    @classmethod
    def build(
        cls, terms: Iterable[Term], features: Iterable[str], assignment: str, applied: Iterable[str] = ()
    ) -> Genome:
        """A genome with terms and features in canonical order (so equal designs compare equal)."""
        ordered = tuple(sorted(terms, key=lambda t: TERM_KINDS.index(t.kind)))
        chosen = set(features)
        features = tuple(f for f in FEATURE_KINDS if f in chosen)
        return cls(ordered, features, assignment, tuple(sorted(set(applied))))

    def term(self, kind: str) -> Term | None:
        return next((t for t in self.terms if t.kind == kind), None)

    def with_terms(self, terms: Iterable[Term]) -> Genome:
        return Genome.build(terms, self.features, self.assignment, self.applied)

    def with_features(self, features: Iterable[str]) -> Genome:
        return Genome.build(self.terms, features, self.assignment, self.applied)

    def with_applied(self, applied: Iterable[str]) -> Genome:
        return replace(self, applied=tuple(sorted({*self.applied, *applied})))

    def with_assignment(self, assignment: str) -> Genome:
        return replace(self, assignment=assignment)

    def needs_assignment(self) -> bool:
        return any(t.kind in ASSIGNMENT_TERMS for t in self.terms)

    def to_json(self) -> str:
        terms = [[t.kind, round(t.weight, 4), t.schedule] for t in self.terms]
        body = {"terms": terms, "features": list(self.features), "assignment": self.assignment}
        if self.applied:
            body["applied"] = list(self.applied)
        return json.dumps(body, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Genome:
        body = bounded_json.loads(text)  # the line may come from a module a model edited
        terms = tuple(
            Term(kind, finite_float(weight), schedule) for kind, weight, schedule in body["terms"]
        )
        return cls(terms=terms, features=tuple(body["features"]), assignment=body["assignment"],
                   applied=tuple(body.get("applied", ())))


def genome_of(code: str) -> Genome | None:
    """The genome embedded in a module the offline designer wrote; None for any other code."""
    for line in code.splitlines():
        if line.startswith(GENOME_TAG):
            try:
                return Genome.from_json(line[len(GENOME_TAG) :])
            except (ValueError, KeyError, TypeError):
                return None
    return None
