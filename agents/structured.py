"""Structured design: the model picks a design from the task's grammar as one JSON object
(`offline.schema`), and lero renders the module. Small models cannot write a valid module
from scratch, but can fill in a schema that a server constrains their decoding to.

The reply is checked whether or not the server constrained it, and each way it can fail
has a name the funnel counts: `NOT_JSON` (prose, or broken JSON), `OUTSIDE_SCHEMA` (JSON
the schema does not admit), `CUT_OFF` (the reply ran out of tokens). A valid object renders
with the offline renderer and goes through the same gate, validation and training as any
other candidate.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from lero.agents import bounded_json
from lero.agents.budget import BudgetExceeded
from lero.agents.extract import CUT_OFF, without_thinking
from lero.agents.fit import PromptTooLarge
from lero.agents.llm import ChatModel
from lero.agents.offline.designer import OfflineDesigner
from lero.agents.offline.schema import DesignSchema, design_schema, schema_errors
from lero.agents.records import MUTATED, Draft, Elite, Problem, Review, request_slots
from lero.agents.retry import LLMError
from lero.agents.templates import render

NOT_JSON = "not JSON"  # failure kinds of a structured reply (the start of Draft.error)
OUTSIDE_SCHEMA = "outside the schema"
ORIGIN = "designer:structured"
REPEAT_ASKS = 1  # more requests for a slot whose replies only repeated a known design
MUTATION_ORIGIN = ORIGIN + MUTATED  # a repeated design, mutated by the offline designer
MAX_ELITES_IN_PROMPT = 2
FENCED_JSON = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


def failure_kind(error: str | None) -> str | None:
    """The named kind of a failed structured draft (`Draft.error`), None for other errors."""
    for kind in (NOT_JSON, OUTSIDE_SCHEMA, CUT_OFF):
        if error and error.startswith(kind):
            return kind
    return None


def parse_object(reply: str) -> dict[str, Any] | None:
    """The JSON object a reply holds: the whole reply, a fenced ```json block, or the span
    from its first `{` to its last `}`; None when there is none. Control characters inside
    strings are read as they are (llama-cpp-python's JSON grammar lets a raw newline through).
    Each is read with `bounded_json`'s bounds: a hostile reply (huge, deeply nested) is none."""
    text = without_thinking(reply).strip()
    fenced = FENCED_JSON.search(text)
    for candidate in (text, fenced[1] if fenced else "", text[text.find("{") : text.rfind("}") + 1]):
        try:
            body = bounded_json.loads(candidate)
        except ValueError:
            continue
        if isinstance(body, dict):
            return body
    return None


def design_draft(reply: str, cut_off: bool, schema: DesignSchema, origin: str) -> Draft:
    """The module a structured reply picks, or a Draft whose error names how it failed."""
    body = parse_object(reply)
    if body is None:
        error = CUT_OFF if cut_off else f"{NOT_JSON}: the reply holds no JSON object"
        return Draft(code=None, reply=reply, error=error, origin=origin)
    errors = schema_errors(body, schema.schema)
    if errors:
        return Draft(code=None, reply=reply, error=f"{OUTSIDE_SCHEMA}: {'; '.join(errors[:3])}", origin=origin)
    return Draft(code=schema.render(body), reply=reply, error=None, origin=origin)


def grammar_text(schema: DesignSchema) -> str:
    """The choices the schema offers, each with what it means (for the prompt)."""
    properties = schema.schema["properties"]
    meanings = schema.meanings()
    goals = properties["goal"]["properties"]["kind"]["enum"]
    lines = ["Goal terms (`goal.kind`, one of them is required; they measure the task itself):",
             *(f"- {k}: {meanings[k]}" for k in goals),
             "Shaping terms (`shaping`, optional, each at most once):",
             *(f"- {k}: {meanings[k]}" for k in properties["shaping"]["properties"] if k not in goals),
             "Each term: component = weight (0 to 100, near 1 is usual) x schedule x value; schedule "
             "`constant` (x 1), `ramp_up` (x training progress), `ramp_down` (x (1 - progress)).",
             "Observation features (`features`, true to append it to the agent's observation):",
             *(f"- {f}: {meanings[f]}" for f in properties["features"]["properties"])]
    if "assignment" in properties:
        lines.append("`assignment`: `greedy` or `optimal`, how each agent is given its own landmark.")
    return "\n".join(lines)


def exploit_statistics(refine: Elite | None) -> str:
    """The refined elite's statistics as their own prompt part (`$statistics`), so a window
    too small for them shortens them (`fit.SHORTEN_ORDER`) rather than refusing the request;
    "" in an explore slot."""
    if refine is None:
        return ""
    return f"\nIts statistics:\n\n{refine.reflection.strip() or 'No statistics recorded.'}\n"


def drafts_per_request(slots: list[tuple[Elite | None, int]],
                       sample: Callable[[Elite | None, int], list[Draft]]) -> list[Draft]:
    """The drafts of each request (`request_slots`); when the budget runs out midway, the
    drafts already made (none made: the run stops)."""
    drafts: list[Draft] = []
    for refine, wanted in slots:
        try:
            drafts += sample(refine, wanted)
        except BudgetExceeded:
            if drafts:
                break
            raise
    return drafts


def fresh_drafts(drafts: list[Draft], design: Callable[[str], str], known: set[str], refine: Elite | None) -> list[Draft]:
    """`drafts` as children of `refine` (explore ones without it), less those whose `design`
    (of the code) is in `known`, which the kept ones join."""
    kind, parents = ("exploit", (refine.candidate_id,)) if refine else ("explore", ())
    kept = []
    for draft in drafts:
        if draft.code is not None:
            if design(draft.code) in known:
                continue
            known.add(design(draft.code))
        kept.append(replace(draft, kind=kind, parents=parents))
    return kept


class StructuredDesigner:
    """Designs by filling in the task's design schema; same interface as `Designer`."""

    def __init__(self, model: ChatModel, temperature: float, seed: int = 0):
        self.model = model
        self.temperature = temperature
        self.examples = OfflineDesigner(seed=seed, prior=False)  # explore slots' example shape

    def design(self, task: Problem, k: int, elites: list[Elite], reflection: str,
               feedback: str | None = None, exploit: int = 0) -> list[Draft]:
        """Up to `k` drafts, the first `exploit` refining elites (one request per slot group);
        a draft equal to an elite or to another draft is dropped."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        schema = design_schema(task)
        known = {_design_line(e.code) for e in elites}
        return drafts_per_request(request_slots(elites, k, exploit, MAX_ELITES_IN_PROMPT), lambda refine, wanted:
                                  self.sample(task, schema, elites, reflection, feedback, refine, wanted, known))

    def sample(self, task: Problem, schema: DesignSchema, elites: list[Elite], reflection: str,
               feedback: str | None, refine: Elite | None, wanted: int, known: set[str]) -> list[Draft]:
        """`wanted` structured drafts from one prompt (designs in `known` dropped).

        A small model copies what it is shown (SmolLM2-135M answered 2 of a default run's 4
        generation-1 slots with the elite or with its other reply, and both slots stayed
        empty). So replies that only repeat a known design are asked for again once, naming
        them, and a slot still short then gets a grammar mutation of the repeated design
        (origin `MUTATION_ORIGIN`: the model's choice, changed by the offline designer)."""
        values = self.values(task, schema, elites, reflection, feedback, refine)
        drafts: list[Draft] = []
        repeated: list[str] = []  # the modules the replies repeated, in order
        for _ in range(1 + REPEAT_ASKS):
            try:
                prompt = self.model.fit("designer", render("designer_structured_system"), "designer_structured_user",
                                        values)
                replies = self.model.replies("designer", prompt.messages, n=wanted - len(drafts),
                                             temperature=self.temperature, shortened=prompt.shortened,
                                             schema=schema.schema)
            except PromptTooLarge as error:  # nothing of the design request can be left out
                raise LLMError(str(error)) from None
            made = [design_draft(r.text, r.cut_off, schema, ORIGIN) for r in replies]
            kept = fresh_drafts(made, _design_line, known, refine)
            repeats = [d.code for d in made if d.code is not None]  # less the kept: the dropped ones
            for draft in kept:
                if draft.code is not None:
                    repeats.remove(draft.code)
            drafts += kept
            if not repeats or len(drafts) >= wanted:
                break
            repeated = list(dict.fromkeys(repeated + repeats))
            objects = "\n".join(json.dumps(schema.object_of(code)) for code in repeated)
            values = {**values, "instruction": values["instruction"] + "\n\n"
                      + render("designer_structured_repeat", designs=objects)}
        else:
            drafts += self.mutations(task, repeated, wanted - len(drafts), known, refine)
        return drafts

    def mutations(self, task: Problem, repeated: list[str], wanted: int, known: set[str],
                  refine: Elite | None) -> list[Draft]:
        """Up to `wanted` new designs, each the offline designer's mutation of a repeated one."""
        parents = [Elite(f"repeat-{i}", code, 0.0) for i, code in enumerate(repeated)]
        children = self.examples.design(task, wanted, parents, "", exploit=wanted)
        return fresh_drafts([replace(c, origin=MUTATION_ORIGIN, error=None) for c in children if c.code],
                            _design_line, known, refine)

    def values(self, task: Problem, schema: DesignSchema, elites: list[Elite], reflection: str,
               feedback: str | None, refine: Elite | None) -> dict[str, object]:
        """The prompt's parts: the task, the grammar, the designs so far, what to answer."""
        shown = [e for e in sorted(elites, key=lambda e: e.fitness, reverse=True)[:MAX_ELITES_IN_PROMPT]
                 if schema.object_of(e.code) is not None]
        designs = "\n".join(f"- {e.candidate_id} (fitness {e.fitness:.4g}"
                            + "".join(f", {m} {v:.3g}" for m, v in sorted(e.metrics.items()))
                            + f"): {json.dumps(schema.object_of(e.code))}" for e in shown)
        example = schema.object_of(refine.code) if refine is not None else None
        refined = refine if example is not None else None  # an elite outside the schema: an explore slot
        if refined is not None:
            instruction = render("designer_structured_exploit", elite_id=refined.candidate_id)
        else:
            drawn = self.examples.design(task, 1, [], "")[0].code or ""
            example = schema.object_of(drawn)
            instruction = render("designer_structured_explore")
        return {
            "task": task.task, "algo": task.algo, "n_agents": task.n_agents,
            "env_description": task.env_description, "grammar": grammar_text(schema),
            "reflection": f"# Reflection\n\n{reflection.strip()}\n" if reflection.strip() else "",
            "elites": f"# Designs trained so far (best first)\n\n{designs}\n" if designs else "",
            "feedback": f"# Feedback from the researcher\n\n{feedback.strip()}\n" if feedback else "",
            "instruction": instruction, "statistics": exploit_statistics(refined), "example": json.dumps(example),
        }

    def revise(self, task: Problem, code: str, review: Review) -> Draft:
        """The design changed as the review asks: a structured edit of its object."""
        schema = design_schema(task)
        current = schema.object_of(code)
        if current is None:
            return Draft(code=None, reply="", error="the reviewed code is not a rendered design",
                         origin=ORIGIN + "-revise")
        points = review.text.strip() or "\n".join(f"- {p}" for p in review.points)
        try:
            prompt = self.model.fit("designer", render("designer_structured_system"), "designer_structured_revise",
                                    {"task": task.task, "env_description": task.env_description,
                                     "grammar": grammar_text(schema), "design": json.dumps(current),
                                     "review": points})
            reply = self.model.replies("designer", prompt.messages, n=1, temperature=self.temperature,
                                       shortened=prompt.shortened, schema=schema.schema)[0]
        except PromptTooLarge as error:
            return Draft(code=None, reply="", error=str(error), origin=ORIGIN + "-revise")
        return design_draft(reply.text, reply.cut_off, schema, ORIGIN + "-revise")


def _design_line(code: str) -> str:
    """The embedded genome line, which is what makes two rendered designs the same."""
    return next((line for line in code.splitlines() if line.startswith("# lero-")), code)
