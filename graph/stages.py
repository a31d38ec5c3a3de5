"""Candidate stages as declarations: which node serves a stage, where the stage sits, how
often its node may run. The graph's wiring (`graph.graph`) and the nodes' hand-offs read
this table, so a role that handles candidates registers its stage here and edits no node.

The main line is the order a candidate passes when every check says yes:
`review -> validate -> ready`; a stage declared `after=S` is inserted right after S, so the
stage that used to follow S now follows it, and the node passing S hands on to it
(`onward(S)`). A side stage (`beside=S`: revise beside review, debug beside validate) is
entered only by its main stage's decision and leaves through `with_code` (back to review).
The router serves the earliest waiting stage in `ordered()`: each main stage, then its
side stages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# what `rounds` takes: the run's RunSpec (graph.configuration imports this module to check
# `RunSpec.bounds`, so the type is not imported here)
RunSpec = Any

END_STAGES = ("approved", "trained", "dropped")  # after approval: no stage node serves them


def once(spec: RunSpec) -> int:
    return 1


@dataclass(frozen=True)
class Bound:
    """A stage's own bound on its rounds, set per run as `RunSpec.bounds[name]` (`lero run
    --bound NAME=N`), from 0 to `maximum`; `default` where the run sets none."""

    name: str
    default: int
    maximum: int
    help: str

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or not 0 <= self.default <= self.maximum:
            raise ValueError(f"bound {self.name!r}: a Python name and 0 <= default <= maximum")


@dataclass(frozen=True)
class CandidateStage:
    """One stage: `node(state, runtime)` serves every candidate waiting in it (its __name__
    names the node); `rounds(spec)`: how often the node may run per pass through the gate
    (the recursion limit sums them); `bound`: its own bound, if it has one (read it with
    `spec.bound(name)`)."""

    name: str
    node: Callable[..., Any]
    after: str | None = None
    beside: str | None = None
    rounds: Callable[[RunSpec], int] = once
    bound: Bound | None = None

    def __post_init__(self) -> None:
        if self.after is not None and self.beside is not None:
            raise ValueError(f"stage {self.name!r}: a stage is on the main line (after) or beside one, not both")


STAGES: list[CandidateStage] = []  # the main line in order, each main stage followed by its side stages


def register_stage(stage: CandidateStage) -> None:
    """Add `stage` (the first registered one without `after` or `beside` is the entry,
    `review`); ValueError for a taken name or an unknown anchor."""
    names = [s.name for s in STAGES]
    if stage.name in names or stage.name in END_STAGES:
        raise ValueError(f"stage {stage.name!r} is declared already")
    if stage.bound is not None and stage.bound.name in bounds():
        raise ValueError(f"bound {stage.bound.name!r} is declared already")
    anchor = stage.after or stage.beside
    if anchor is None:
        if STAGES:
            raise ValueError(f"stage {stage.name!r} names no stage it follows")
        STAGES.append(stage)
        return
    if anchor not in names:
        raise ValueError(f"stage {stage.name!r} follows {anchor!r}, which is not declared")
    at = names.index(anchor) + 1
    while at < len(STAGES) and STAGES[at].beside is not None:  # past the anchor's side stages
        at += 1
    STAGES.insert(at, stage)


def bounds() -> dict[str, Bound]:
    """The declared stages' own bounds, by name."""
    return {stage.bound.name: stage.bound for stage in STAGES if stage.bound is not None}


def ordered() -> tuple[CandidateStage, ...]:
    """The stages in the order the router serves them."""
    return tuple(STAGES)


def onward(stage: str) -> str:
    """The main-line stage a candidate goes to once `stage` passes it."""
    main = [s.name for s in STAGES if s.beside is None]
    at = main.index(stage)
    if at + 1 == len(main):
        raise ValueError(f"stage {stage!r} is the last of the main line: its node decides what follows")
    return main[at + 1]
