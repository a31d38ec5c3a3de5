"""The design schema: a JSON Schema derived from a task's genome grammar, and the two ways
across it (genome -> object, object -> genome -> module).

A structured designer (agents/structured.py) answers one object of this schema; a server
that can constrain decoding to it cannot leave the grammar, and every object the schema
admits renders into a module (`render.py` / `generic.render`). The shape is chosen so
that the schema alone states every rule of a genome, with keywords every constrained
decoder knows (object, enum, number bounds, required, no extra keys):

    {"goal":     {"kind": <task term>, "weight": w, "schedule": s},   at least one task term
     "shaping":  {<kind>: {"weight": w, "schedule": s}, ...},          each kind once (keys)
     "features": {<feature>: true|false, ...},                         each feature once
     "assignment": "greedy" | "optimal"}                               task grammar only

A `shaping` entry of the goal's own kind is the same term: the goal's weight wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lero.agents.offline import generic
from lero.agents.offline.designer import fit_to_layout, on_generic_genome
from lero.agents.offline.generic import GenericGenome, Vocabulary
from lero.agents.offline.genome import (
    ASSIGNMENTS,
    FEATURE_KINDS,
    FEATURE_SLOTS,
    SCHEDULES,
    TASK_TERMS,
    TERM_KINDS,
    WEIGHT_MAX,
    Genome,
    Term,
    genome_of,
)
from lero.agents.offline.render import FEATURE_MEANING, TERM_MEANING, render
from lero.agents.records import Problem
from lero.training.validation import finite_number, in_float_range

GENERIC = "generic"


@dataclass(frozen=True)
class DesignSchema:
    """One task's schema (`schema`), the grammar it came from, and the task it renders for."""

    grammar: str  # a task grammar's name, or "generic"
    schema: dict[str, Any]
    task: Problem

    @property
    def generic_genome(self) -> bool:
        """Designs of the generic genome (the generic grammar or one of task_grammars.py)."""
        return on_generic_genome(self.task)

    def meanings(self) -> dict[str, str]:
        """What each term and feature of the schema means, in words (for prompts)."""
        return Vocabulary.of(self.task).meanings() if self.generic_genome else {**TERM_MEANING, **FEATURE_MEANING}

    def object_of(self, code: str) -> dict[str, Any] | None:
        """The design object of a module rendered from this grammar; None for other code."""
        if self.generic_genome:
            vocab = Vocabulary.of(self.task)
            found = GenericGenome.of_code(code, vocab)
            return None if found is None else _object(
                [(k, w, s) for k, w, s in found.terms], found.features, vocab.goals, None)
        genome = genome_of(code)
        return None if genome is None else genome_object(genome)

    def render(self, design: dict[str, Any]) -> str:
        """The module of a schema-valid object (`schema_errors` empty): ValueError otherwise."""
        errors = schema_errors(design, self.schema)
        if errors:
            raise ValueError("; ".join(errors[:3]))
        terms = _terms(design)
        features = [name for name, on in design["features"].items() if on]
        if self.generic_genome:
            vocab = Vocabulary.of(self.task)
            genome = GenericGenome.build({k: (w, s) for k, w, s in terms}, set(features))
            return generic.render(genome, vocab)
        built = Genome.build([Term(k, w, s) for k, w, s in terms], features, design["assignment"])
        return render(fit_to_layout(built, self.task), self.task)


def design_schema(task: Problem) -> DesignSchema:
    """The schema of `task`'s designs: its task grammar's, else the generic grammar's."""
    if on_generic_genome(task):
        vocab = Vocabulary.of(task)
        goals = [k for k in vocab.goals if k in vocab.terms]
        return DesignSchema(vocab.grammar or GENERIC, _schema(goals, vocab.terms, vocab.features, None), task)
    features = [f for f in FEATURE_KINDS if all(s in task.obs_layout for s in FEATURE_SLOTS[f])]
    return DesignSchema(task.task_spec.grammar, _schema(list(TASK_TERMS), TERM_KINDS, features, ASSIGNMENTS), task)


def genome_object(genome: Genome) -> dict[str, Any]:
    """A task-grammar genome as a design object (the first task term is the goal)."""
    terms = [(t.kind, t.weight, t.schedule) for t in genome.terms]
    return _object(terms, genome.features, TASK_TERMS, genome.assignment)


def _object(terms: list[tuple[str, float, str]], features: tuple[str, ...], goals: tuple[str, ...],
            assignment: str | None) -> dict[str, Any]:
    goal = next(t for t in terms if t[0] in goals)
    design: dict[str, Any] = {
        "goal": {"kind": goal[0], "weight": goal[1], "schedule": goal[2]},
        "shaping": {k: {"weight": w, "schedule": s} for k, w, s in terms if k != goal[0]},
        "features": {f: True for f in features},
    }
    if assignment is not None:
        design["assignment"] = assignment
    return design


def _terms(design: dict[str, Any]) -> list[tuple[str, float, str]]:
    goal = design["goal"]
    terms = {goal["kind"]: (float(goal["weight"]), goal["schedule"])}
    for kind, term in design["shaping"].items():
        terms.setdefault(kind, (float(term["weight"]), term["schedule"]))
    return [(k, w, s) for k, (w, s) in terms.items()]


def _schema(goals: list[str], kinds: tuple[str, ...] | list[str], features: tuple[str, ...] | list[str],
            assignments: tuple[str, ...] | None) -> dict[str, Any]:
    weight = {"type": "number", "minimum": 0, "maximum": WEIGHT_MAX}
    schedule = {"type": "string", "enum": list(SCHEDULES)}
    term = {"type": "object", "properties": {"weight": weight, "schedule": schedule},
            "required": ["weight", "schedule"], "additionalProperties": False}
    properties: dict[str, Any] = {
        "goal": {"type": "object",
                 "properties": {"kind": {"type": "string", "enum": goals}, "weight": weight, "schedule": schedule},
                 "required": ["kind", "weight", "schedule"], "additionalProperties": False},
        "shaping": {"type": "object", "properties": {k: term for k in kinds}, "additionalProperties": False},
        "features": {"type": "object", "properties": {f: {"type": "boolean"} for f in features},
                     "additionalProperties": False},
    }
    if assignments is not None:
        properties["assignment"] = {"type": "string", "enum": list(assignments)}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def schema_errors(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    """What in `value` breaks `schema` (empty when nothing does), for the keywords the design
    schemas and the chat's spec fill use: type (integer included), enum, properties, required, additionalProperties, minimum, maximum,
    items, maxItems, maxLength. lero validates every reply itself, whether or not the
    server constrained it."""
    kind = schema.get("type")
    if kind is not None and not _is_type(value, kind):
        if _is_type(value, "integer") and not in_float_range(value):
            return [f"{where}: a {len(str(abs(value)))}-digit number, out of range"]
        return [f"{where}: expected {kind}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} is not one of {', '.join(map(str, schema['enum']))}"]
    errors: list[str] = []
    if kind in ("number", "integer"):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: {value} is below {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where}: {value} is above {schema['maximum']}")
    if kind == "string" and "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{where}: longer than {schema['maxLength']} characters")
    if kind == "array":
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{where}: more than {schema['maxItems']} items")
        for index, item in enumerate(value):
            errors += schema_errors(item, schema.get("items", {}), f"{where}[{index}]")
    if kind == "object":
        properties = schema.get("properties", {})
        errors += [f"{where}: missing {key!r}" for key in schema.get("required", []) if key not in value]
        if schema.get("additionalProperties") is False:
            errors += [f"{where}: unknown key {key!r}" for key in value if key not in properties]
        for key, item in value.items():
            if key in properties:
                errors += schema_errors(item, properties[key], f"{where}.{key}")
    return errors


def _is_type(value: Any, kind: str) -> bool:
    if kind == "number":
        return finite_number(value)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, {"object": dict, "array": list, "string": str, "boolean": bool}[kind])
