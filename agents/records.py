"""The plain records the agents exchange with the graph: problem, elites, drafts, reviews."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

from lero.training.envs.task import TaskSpec

Verdict = Literal["accept", "revise", "reject", "no judgement"]  # the last: a rejection without evidence
VERDICTS: tuple[str, ...] = ("accept", "revise", "reject")  # what a critic may answer
DraftKind = Literal["exploit", "explore"]  # refine an elite / a new idea
# The role an llm_call record names for lero's own questions to a server (which forms it takes):
# a refusal there is the server's answer, not a failed request
PROBE_ROLE = "probe"


@dataclass(frozen=True)
class Problem:
    """What the designer is asked to solve: the environment's own `TaskSpec` (its names,
    state fields, metrics, grammar) plus this instance of it.

    `obs_layout` maps observation slot names ("self_vel", "self_pos", "landmark_rel",
    "other_rel", "comm") to half-open column ranges `(start, end)` of one agent's obs;
    the graph fills it from the env. The offline designer needs it to write OEFs.
    `task` is the task in words (the run's, else the TaskSpec's own text).
    """

    task_spec: TaskSpec
    env_name: str
    env_description: str
    task: str
    algo: str
    n_agents: int
    obs_dim: int
    obs_layout: dict[str, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.n_agents < 1 or self.obs_dim < 1:
            raise ValueError(
                f"Problem needs n_agents >= 1 and obs_dim >= 1, got {self.n_agents}, {self.obs_dim}"
            )
        for slot, (start, end) in self.obs_layout.items():
            if not 0 <= start < end <= self.obs_dim:
                raise ValueError(
                    f"obs_layout slot {slot!r} = ({start}, {end}) is outside 0..{self.obs_dim}"
                )


@dataclass(frozen=True)
class Elite:
    """A trained candidate kept for the next generation, with what training taught us."""

    candidate_id: str
    code: str
    fitness: float
    metrics: dict[str, float] = field(default_factory=dict)
    reflection_stats: dict[str, dict] = field(default_factory=dict)
    reflection: str = ""


@dataclass(frozen=True)
class Draft:
    """One candidate module proposed by a designer/debugger; `code is None` iff `error` says why."""

    code: str | None
    reply: str
    error: str | None
    origin: str  # "designer", "designer:revise", "debugger", "offline", "offline:mutate", ...
    kind: DraftKind = "explore"
    parents: tuple[str, ...] = ()  # candidate ids of the elites it refines


@dataclass(frozen=True)
class Point:
    """One piece of a structured critic's evidence: what in the candidate (a term, feature or
    expression), which item of the rubric (`agents.evidence.rubric_items`) it breaks, and why."""

    target: str
    rubric_item: str
    why: str

    def line(self) -> str:
        return f"{self.target} [{self.rubric_item}]: {self.why}"


@dataclass(frozen=True)
class Review:
    """The critic's verdict on a candidate before any compute is spent on it.

    `code_sha` ties the verdict to the exact code reviewed (`code_digest`); `rules` names
    the static rules the code broke (empty when it passed them); `by` is `critic` for an
    LLM review and `gate` for the static checks alone; `evidence`: a structured critic's
    valid points (`agents.evidence`), which send a `reject` to a bounded revision.
    """

    verdict: Verdict
    points: list[str]
    text: str
    code_sha: str = ""
    rules: tuple[str, ...] = ()
    by: str = "critic"
    evidence: tuple[Point, ...] = ()


MUTATED = "+mutation"  # an origin's suffix: the model's design, changed by the offline designer's mutation


def design_mode(origin: str) -> str:
    """How a candidate's code was designed, from its Draft origin: `structured` (a schema'd
    JSON design, rendered), `expression` (expressions under the task's grammar, rendered),
    `edit` (a changed complete module), `offline`, `human`, else `code`; with `MUTATED`
    after it where the offline designer mutated the model's design."""
    mode = next((m for m in ("structured", "expression", "edit", "offline", "human") if m in origin), "code")
    return mode + MUTATED if origin.endswith(MUTATED) else mode


def exploit_parents(elites: list[Elite], slots: int, limit: int) -> list[Elite]:
    """The elite each of `slots` exploit drafts refines: the best `limit`, round robin."""
    ranked = sorted(elites, key=lambda e: e.fitness, reverse=True)[:limit]
    return [ranked[i % len(ranked)] for i in range(slots)] if ranked else []


def request_slots(elites: list[Elite], k: int, exploit: int, limit: int) -> list[tuple[Elite | None, int]]:
    """A designer's requests for `k` drafts: (elite, its slots) for each refined elite, then
    (None, the explore slots); one request per entry."""
    parents = exploit_parents(elites, min(exploit, k), limit)
    slots: list[tuple[Elite | None, int]] = []
    for elite in parents:
        if all(other is not elite for other, _ in slots):
            slots.append((elite, sum(p is elite for p in parents)))
    if k > len(parents):
        slots.append((None, k - len(parents)))
    return slots


def code_digest(code: str) -> str:
    """Short sha256 of a module: what a verdict was given on."""
    return hashlib.sha256(code.encode()).hexdigest()[:16]
