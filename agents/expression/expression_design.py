"""An expression design: its reward terms, its optional potential and its observation
features, each an expression; as the model writes it (one line each) and as lero keeps it.

    term <name>: <weight> <schedule> = <expression>     1 to MAX_TERMS, component = weight x schedule x value
    potential: <weight> = <expression>                  at most one: Φ, shaping F = γ·Φ(s') − Φ(s)
    feature <name> = <expression>                       0 to MAX_FEATURES, appended to the agent's observation

Weights and schedules are the genome's (`offline.genome`: 0..WEIGHT_MAX; constant, ramp_up,
ramp_down). A rendered module carries the design as its `HEADER` line, so an elite's design
can be shown, refined and repaired.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

from lero.agents.expression.parse import ExpressionError
from lero.agents.expression.readable import task_inputs
from lero.agents.expression.shape_check import Checker, Typed
from lero.agents.extract import without_thinking
from lero.agents.offline.genome import SCHEDULES, WEIGHT_MAX
from lero.agents.records import Problem

HEADER = "# lero-expressions: "
MAX_TERMS = 4
MAX_FEATURES = 3
NAME = r"[a-z][a-z0-9_]{0,23}"
NUMBER = r"\d+(?:\.\d+)?"
TERM_LINE = re.compile(rf"^term\s+({NAME})\s*:\s*({NUMBER})\s+(\w+)\s*=\s*(.+)$")
POTENTIAL_LINE = re.compile(rf"^potential\s*:\s*({NUMBER})\s*=\s*(.+)$")
FEATURE_LINE = re.compile(rf"^feature\s+({NAME})\s*=\s*(.+)$")
POTENTIAL = "potential"  # the potential's slot name


@dataclass(frozen=True)
class Slot:
    """One expression of a design: `kind` term, potential or feature; weight and schedule for a
    term (a potential has a weight, a feature neither)."""

    kind: str
    name: str
    expr: str
    weight: float = 1.0
    schedule: str = "constant"

    @property
    def label(self) -> str:
        """How the slot is named to people and models: `term near`, `potential`, `feature gap`."""
        return POTENTIAL if self.kind == POTENTIAL else f"{self.kind} {self.name}"

    def prefix(self) -> str:
        """The line up to its expression: `term near: 1 constant = `."""
        if self.kind == "term":
            return f"term {self.name}: {self.weight:g} {self.schedule} = "
        if self.kind == POTENTIAL:
            return f"potential: {self.weight:g} = "
        return f"feature {self.name} = "

    def line(self) -> str:
        """The slot as the model writes it."""
        return self.prefix() + self.expr


@dataclass(frozen=True)
class ExpressionDesign:
    slots: tuple[Slot, ...]

    def text(self) -> str:
        return "\n".join(slot.line() for slot in self.slots)

    def of(self, kind: str) -> list[Slot]:
        return [s for s in self.slots if s.kind == kind]

    def slot(self, label: str) -> Slot | None:
        return next((s for s in self.slots if s.label == label), None)

    def with_slot(self, new: Slot) -> ExpressionDesign:
        """The design with the slot of `new`'s label replaced by it."""
        return ExpressionDesign(tuple(new if s.label == new.label else s for s in self.slots))

    def to_json(self) -> str:
        return json.dumps([[s.kind, s.name, s.expr, s.weight, s.schedule] for s in self.slots])


def slot_scope(kind: str) -> str:
    """The scope (`types.SCOPES`) a slot's expression is checked in."""
    return "reward" if kind == "term" else kind


def parse_slot(line: str) -> Slot:
    """One line of a design; ExpressionError says why it is none."""
    line = line.strip().strip("`").strip()
    if match := TERM_LINE.match(line):
        name, weight, schedule, expr = match.groups()
        if schedule not in SCHEDULES:
            raise ExpressionError(f"term {name}: unknown schedule {schedule}; known: {', '.join(SCHEDULES)}")
        return Slot("term", name, expr.strip(), _weight(weight, f"term {name}"), schedule)
    if match := POTENTIAL_LINE.match(line):
        return Slot(POTENTIAL, POTENTIAL, match[2].strip(), _weight(match[1], POTENTIAL))
    if match := FEATURE_LINE.match(line):
        return Slot("feature", match[1], match[2].strip())
    raise ExpressionError(f"not a design line: {line[:60]!r}")


def _weight(text: str, label: str) -> float:
    weight = float(text)
    if not 0 <= weight <= WEIGHT_MAX:
        raise ExpressionError(f"{label}: weight {weight:g} is outside 0..{WEIGHT_MAX:g}")
    return weight


def parse_design(reply: str, metrics: tuple[str, ...] = ()) -> ExpressionDesign:
    """The design a reply writes (lines that are no design line are prose, and skipped);
    ExpressionError names the first line that starts like a slot but is none, or what is
    missing. A name used twice, or a term named like a task metric (`metrics`), gets a suffix;
    runs of `_` in a name become one."""
    slots: list[Slot] = []
    for raw in without_thinking(reply).splitlines():
        line = raw.strip().strip("`").strip()
        if re.match(r"^(term|potential|feature)\b", line):
            slot = parse_slot(line)
            slot = replace(slot, name=re.sub("_+", "_", slot.name))  # no dunder-like names in the module
            taken = {s.label for s in slots} | {f"term {m}" for m in metrics}
            while slot.label in taken:
                slot = replace(slot, name=f"{slot.name}_{len(slots) + 1}")
            slots.append(slot)
    design = ExpressionDesign(tuple(slots))
    if not design.of("term"):
        raise ExpressionError("the design has no reward term (`term <name>: <weight> <schedule> = <expression>`)")
    if len(design.of("term")) > MAX_TERMS or len(design.of("feature")) > MAX_FEATURES or len(design.of(POTENTIAL)) > 1:
        raise ExpressionError(f"at most {MAX_TERMS} terms, one potential and {MAX_FEATURES} features")
    return design


def checked(design: ExpressionDesign, task: Problem) -> dict[str, Typed]:
    """Each slot's checked value by label; ExpressionError names the first slot that fails."""
    inputs = task_inputs(task)
    values = {}
    for slot in design.slots:
        if slot.kind == "term" and slot.name in task.task_spec.metric_names:
            raise ExpressionError(f"{slot.label}: a term may not be named like the task metric {slot.name}")
        try:
            values[slot.label] = Checker(inputs, slot_scope(slot.kind), task.obs_dim).check(slot.expr)
        except ExpressionError as error:
            raise ExpressionError(f"{slot.label} = {slot.expr}: {error}") from None
    return values


def design_of(code: str) -> ExpressionDesign | None:
    """The design a rendered module carries in its header line; None for other code."""
    line = next((line for line in code.splitlines() if line.startswith(HEADER)), None)
    if line is None:
        return None
    try:
        rows = json.loads(line[len(HEADER):])
        return ExpressionDesign(tuple(replace(Slot(str(k), str(n), str(e)), weight=float(w), schedule=str(s))
                                      for k, n, e, w, s in rows))
    except (ValueError, TypeError):
        return None
