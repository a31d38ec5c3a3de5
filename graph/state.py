"""The graph state: plain JSON-able dicts and lists, so every checkpoint is portable.

Candidate record (`Candidate`): one HRF+OEF module moving through a generation. Its
`stage` says what the graph does with it next:

    review -> (revise -> review)* -> validate -> (debug -> review -> validate)* -> ready
           -> approved -> trained                       (or `dropped` at any step)

`review` is the gate every code change passes (design, revision, repair, human edit):
the static rules, then the LLM critic within `critic_rounds`.

A dropped candidate keeps the reason in `status` (`rejected_by_critic`,
`rejected_by_human`, `invalid`, or the sandbox status of its last validation).

Human approvals are `interrupt()` calls; the payload is a JSON object with a `kind`, a
`question` and the `answers` it accepts; resume with `Command(resume=answer)`.

kind "spec" — before any compute:
    payload {"kind": "spec", "run_id", "spec": {RunSpec fields}, "env_description",
             "budget": {"train_jobs", "env_steps", "max_llm_requests", "wall_clock_s"},
             "question", "answers": ["approve", "reject"]}
    answer  {"action": "approve" | "reject"}            (a bare string is accepted too)

kind "candidates" — after validation, before training:
    payload {"kind": "candidates", "generation", "question", "answers": [...],
             "candidates": [{"candidate_id", "code", "code_sha", "origin", "kind", "parents",
                             "review": {"verdict", "points", "text", "code_sha", "rules", "by"} | null,
                             "parent_code": str | null (the first parent's module, for a diff),
                             "note": str | null, "refused_edit": {"code", "reason"} | null}]}
    `review.code_sha` equals `code_sha`: the verdict shown is the one on the code shown.
    `note` says why an earlier edit was stopped by the gate (the code before it is shown);
    `refused_edit` is that edit as the person wrote it and the gate's reason, so a front end
    can give it back to fix (answer `edit` again) or drop (any other answer).
    answer  {"decisions": {candidate_id: {"action": "approve" | "reject" | "edit" | "comment",
                                          "code": str (edit), "comment": str (comment)}},
             "default": "approve" | "reject"}           (candidates not named get `default`)
    `edit` replaces the code (validated again, then trained without asking again);
    `comment` sends the text to the designer as a review, and the revision comes back.

kind "generation" — after the reflection, when another generation follows:
    payload {"kind": "generation", "generation", "best": {"candidate_id", "fitness"} | null,
             "baseline_fitness", "candidates": [{"candidate_id", "status", "fitness"}],
             "reflection", "question", "answers": ["continue", "stop"]}
    answer  {"action": "continue" | "stop", "feedback": str | null}
    `feedback` is kept for the rest of the run: added to every later reflection and passed
    to the designer.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired, TypedDict

# a declared stage's name (graph.stages: review, revise, validate, debug, ready and any a role
# adds), or approved, trained, dropped
Stage = str


class Candidate(TypedDict, total=False):
    """One candidate of the current generation (see the module docstring for `stage`)."""

    candidate_id: str  # "<generation>-<index>"
    generation: int
    code: str | None
    origin: str  # which agent wrote the current code: designer, offline, debugger, human...
    kind: str  # exploit (refines `parents`) or explore (a new idea)
    parents: list[str]  # candidate ids of the elites it refines
    stage: Stage
    status: str | None  # final status once dropped, "ok" once validated
    review: dict[str, Any] | None  # {"verdict", "points", "text"} of the latest review
    reviews: list[dict[str, Any]]  # every review so far, with "by": critic | human (review.md)
    review_rounds: int  # revisions asked for by the critic so far
    llm_reviews: int  # LLM critic reviews so far (at most critic_rounds + 1)
    debug_attempts: int  # debugger repairs so far
    debug_history: list[list[str]]  # [[code, error], ...] fed back to the debugger
    error: str | None  # latest validation error text
    measured: list[dict[str, str]]  # rubric points its latest validation rollout showed (agents.evidence_rules)
    human: str | None  # the human's decision once given: approve / edit / comment
    human_comment: str | None
    previous: dict[str, Any] | None  # code, review, origin before a human edit (restored if the gate stops it)
    refused_edit: dict[str, str] | None  # {"code", "reason"}: the person's edit the gate stopped, until answered


class TrainTask(TypedDict):
    """What one parallel `train` branch receives through `Send`: one candidate, some of its
    seeds (`graph.schedule.seed_groups`), trained in one sandbox job."""

    candidate_id: str
    generation: int
    code: str | None  # None = baseline: native reward, raw observations
    seeds: NotRequired[list[int]]
    # a branch a checkpoint saved before the spec left the state also holds `spec` (unread)
    # graph.schedule: 0 (or the only rung) first, the baseline the last; absent in branches a
    # checkpoint saved before schedules existed (rung 0 of `full`)
    rung: NotRequired[int]
    # per seed: the previous rung's policy dir, whose learner state the job continues (None: fresh)
    resume_dirs: NotRequired[list[str | None]]
    # a branch a checkpoint saved before seed groups existed: one seed, one resume dir
    seed: NotRequired[int]
    resume_dir: NotRequired[str | None]


class RunInput(TypedDict, total=False):
    """What a request may give the graph as input: a new run's RunSpec as JSON, which a host
    without a runner reads once, at the edge (`graph.server`); else `configurable` says it.
    The runner passes none (its spec is spec.json). No node reads it: the spec reaches
    nodes as `RunContext.spec`. A checkpoint saved before this split holds the run's spec
    here; it stays unread."""

    spec: dict[str, Any]


class RunState(TypedDict, total=False):
    """What changes during one run; `results` is the only channel written by parallel
    branches. What does not change (the spec) is the runtime context's (`graph.context`)."""

    generation: int
    candidates: list[Candidate]
    results: Annotated[list[dict[str, Any]], operator.add]  # one per (candidate, seed) job
    evaluated: list[dict[str, Any]]  # aggregated result.json records, every generation
    elites: list[dict[str, Any]]  # best evaluated candidates so far (agents.Elite fields)
    reflection: str  # training feedback text for the next generation (human feedback apart)
    feedback: list[str]  # every piece of researcher feedback so far, oldest first
    stop_reason: str | None  # why the run ends early (llm budget, wall clock, human)
