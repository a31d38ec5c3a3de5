"""Researcher comments and feedback -> deterministic genome edits (table in offline_grammar.md).

The text is split into clauses (at `.`, `,`, `;`, new lines and "and"); each clause names
an action (`stronger`, `weaker`, `drop`, `add`, `ramp up`, `ramp down`, `constant`,
`optimal`/`greedy` assignment) and the terms or features it applies to, by kind name
(`team_occupancy` or `team occupancy`) or by an intent word (`collisions`, `cover`,
`spread`, `overshoot`, `faster`, ...). A clause with an intent word and no action
strengthens that word's term ("too many collisions"). The same text always gives the
same edits, and each edit says in words what it changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lero.agents.offline.evolve import scaled, strengthened
from lero.agents.offline.genome import FEATURE_KINDS, TASK_TERMS, TERM_KINDS, Genome, Term

WEAKEN = 2 / 3
INTENT_WORDS = {  # word stem in a comment -> the reward term it is about
    "collision": "collision",
    "collide": "collision",
    "crash": "collision",
    "cover": "team_occupancy",
    "occup": "team_occupancy",
    "spread": "spread",
    "slow": "settle",
    "overshoot": "settle",
    "faster": "approach",
    "penalt": "collision",  # the grammar's one penalty term
}
ACTIONS = (  # (pattern, action); the first pattern found in a clause wins
    (r"\bramp(?:ing)?[ _-]?up\b", "ramp_up"),
    (r"\bramp(?:ing)?[ _-]?down\b", "ramp_down"),
    (r"\bconstant\b", "constant"),
    (r"\b(?:drop|remove|without)\b", "drop"),
    (r"\b(?:weaker|weaken|decrease|reduce|lower|less|smaller)\b", "weaker"),
    (r"\b(?:stronger|strengthen|increase|raise|more|higher|bigger|larger)\b", "stronger"),
    (r"\b(?:add|use|include)\b", "add"),
)
ASSIGNMENT_WORDS = (("optimal", r"\boptimal\b"), ("greedy", r"\bgreedy\b"))


@dataclass(frozen=True)
class Edit:
    action: str  # stronger | weaker | drop | add | ramp_up | ramp_down | constant | assignment
    target: str  # a term kind, a feature name, or the assignment method

    @property
    def key(self) -> str:
        return f"{self.action} {self.target}"


def parse_edits(text: str) -> list[Edit]:
    """The edits a comment asks for, in order, each once."""
    edits: list[Edit] = []
    for clause in re.split(r"[.,;:!?\n]+|\band\b", text.lower()):
        action = next((name for pattern, name in ACTIONS if re.search(pattern, clause)), None)
        if re.search(r"\bassign", clause):
            edits += [Edit("assignment", name) for name, pattern in ASSIGNMENT_WORDS if re.search(pattern, clause)]
        named = [kind for kind in (*TERM_KINDS, *FEATURE_KINDS) if _names(clause, kind)]
        intents = [term for word, term in INTENT_WORDS.items() if word in clause]
        if action is None:
            edits += [Edit("stronger", term) for term in intents]
        else:
            edits += [Edit(action, target) for target in (named or intents)]
    return list(dict.fromkeys(edits))


def _names(clause: str, kind: str) -> bool:
    spelled = kind.replace("_", "[ _]")
    return re.search(rf"\b{spelled}\b", clause) is not None


def apply_edits(genome: Genome, edits: list[Edit]) -> tuple[Genome, list[str]]:
    """`genome` with every applicable edit, and one note per edit saying what changed."""
    notes: list[str] = []
    for edit in edits:
        changed, note = _apply(genome, edit)
        if changed is not None and changed != genome:
            genome = changed
        notes.append(note)
    return genome, notes


def apply_once(genome: Genome, edits: list[Edit]) -> tuple[Genome, list[str]]:
    """Generation feedback: each edit once per lineage, relative to the elite it refines.

    A genome records the feedback edits already in it, so the same feedback given again
    (or carried over to the next generation) never compounds.
    """
    fresh = [edit for edit in edits if edit.key not in genome.applied]
    changed, notes = apply_edits(genome, fresh)
    return changed.with_applied(edit.key for edit in fresh), [f"feedback: {note}" for note in notes]


def _apply(genome: Genome, edit: Edit) -> tuple[Genome | None, str]:
    if edit.action == "assignment":
        return genome.with_assignment(edit.target), f"assignment -> {edit.target}"
    if edit.target in FEATURE_KINDS:
        return _feature_edit(genome, edit)
    term = genome.term(edit.target)
    others = [t for t in genome.terms if t.kind != edit.target]
    if term is None and edit.action not in ("stronger", "add"):
        return None, f"{edit.action} {edit.target}: not in the design"
    if edit.action == "drop":
        if edit.target in TASK_TERMS and not any(t.kind in TASK_TERMS for t in others):
            return None, f"drop {edit.target}: kept (the last task term)"
        return genome.with_terms(others), f"dropped {edit.target}"
    if edit.action == "add" and term is not None:
        return None, f"add {edit.target}: already in the design"
    if edit.action in ("stronger", "add"):
        new = strengthened(term, edit.target)
        before = "absent" if term is None else f"{term.weight:.3g}"
        return genome.with_terms([*others, new]), f"stronger {edit.target}: weight {before} -> {new.weight:.3g}"
    if edit.action == "weaker":
        new = scaled(term, WEAKEN)
        return genome.with_terms([*others, new]), f"weaker {edit.target}: weight {term.weight:.3g} -> {new.weight:.3g}"
    return genome.with_terms([*others, Term(term.kind, term.weight, edit.action)]), f"{edit.target} schedule -> {edit.action}"


def _feature_edit(genome: Genome, edit: Edit) -> tuple[Genome | None, str]:
    present = edit.target in genome.features
    if edit.action == "drop" and present and len(genome.features) > 1:
        return genome.with_features(set(genome.features) - {edit.target}), f"dropped feature {edit.target}"
    if edit.action in ("add", "stronger") and not present:
        return genome.with_features({*genome.features, edit.target}), f"added feature {edit.target}"
    return None, f"{edit.action} feature {edit.target}: nothing to change"
