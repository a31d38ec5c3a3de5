"""The designer and the debugger of expression design (`--design expression`).

The designer asks for a whole design under the task's grammar (`grammar.design_grammar`),
where the server takes one; lero parses, checks and renders the reply, so a draft either
is a module or names the expression that failed. The debugger gets the expression a
validation failure points at (the traceback's line, `render.slot_at`) and answers a
replacement line under the same grammar, which is checked and rendered again; the graph
then sends the module through the gate and validation like any repair.
"""

from __future__ import annotations

from dataclasses import replace

from lero.agents.debugger import HISTORY_SHOWN, UNCHANGED, Debugger
from lero.agents.expression.expression_design import (
    POTENTIAL,
    ExpressionDesign,
    Slot,
    design_of,
    parse_design,
    parse_slot,
)
from lero.agents.expression.grammar import design_grammar, repair_grammar
from lero.agents.expression.parse import ExpressionError
from lero.agents.expression.readable import task_inputs
from lero.agents.expression.render import render_module, slot_at
from lero.agents.extract import CUT_OFF, without_thinking
from lero.agents.fit import PromptTooLarge
from lero.agents.llm import ChatModel
from lero.agents.records import Draft, Elite, Problem, Review, request_slots
from lero.agents.retry import LLMError
from lero.agents.similarity import is_duplicate
from lero.agents.structured import drafts_per_request, exploit_statistics, fresh_drafts
from lero.agents.templates import format_history, render, trim_error
from lero.training.contract import NAMED_COMPONENT

ORIGIN = "designer:expression"
REPAIR_ORIGIN = "debugger:expression"
INVALID = "invalid expression"  # a reply whose design does not parse or check (the start of Draft.error)
MAX_ELITES_IN_PROMPT = 2
CHECK_RETRIES = 1  # a replacement that does not check, or the failing one again, is asked for once more
SCOPE_WORDS = {"reward": "terms", "potential": "the potential", "feature": "features"}


def language_text(task: Problem) -> str:
    """The inputs with their dims and where they may be read, the operations, the pairings."""
    inputs = task_inputs(task)
    lines = ["Inputs (name (dims): meaning; where it may be read):"]
    for item in inputs.values():
        dims = f"({', '.join(item.dims)})" if item.dims else "()"
        lines.append(f"- {item.name} {dims}: {item.doc}; {', '.join(SCOPE_WORDS[s] for s in item.scopes)}")
    lines.append(f"- obs[i] (): column i of the agent's own observation (0 to {task.obs_dim - 1}); everywhere")
    lines += [f"- own({p.field}): {p.doc}" for p in task.task_spec.pairings if f"own({p.field})" in inputs]
    lines += [
        "Operations: numbers; a + b, a - b, a * b, a / b, -a; a < b, a > b, a <= b, a >= b (1 or 0);",
        "norm(x, dim), min(x, dim), max(x, dim), mean(x, dim), sum(x, dim) remove the named dim;",
        "exp(x); clamp(x, low, high); where(a < b, x, y).",
        "Dims combine from the right: (L, xy) with (xy) gives (L, xy). Every expression must end with no "
        "dims: one number per agent.",
        "A term may read every input; the potential reads the state and the observation (no env_reward, step "
        "or progress); a feature reads only the agent's own observation.",
        "Term: component = weight (0 to 100) x schedule x value; schedule constant (x 1), ramp_up (x training "
        "progress), ramp_down (x (1 - progress)). Potential: lero adds gamma x potential(next) - potential(now).",
    ]
    return "\n".join(lines)


def example_design(task: Problem) -> str:
    """A design of the task's own inputs that checks, to show the format."""
    inputs = task_inputs(task)
    lines = ["term task: 1 constant = env_reward"]
    own = next((i for i in inputs.values() if i.name.startswith("own(") and i.dims), None)
    others = sorted((i for i in inputs.values() if own and len(i.dims) == 2 and i.dims[1:] == own.dims),
                    key=lambda i: f"own({i.name})" in inputs)  # a field no agent owns (landmarks) first
    whole = others[0] if others else None
    if own is not None and whole is not None:
        lines.append(f"potential: 0.5 = -min(norm({whole.name} - {own.name}, {own.dims[0]}), {whole.dims[0]})")
    slot = next((i for i in inputs.values() if i.name.startswith("obs_") and i.dims), None)
    lines.append(f"feature size = norm({slot.name}, {slot.dims[0]})" if slot else "feature first = obs[0]")
    try:
        render_module(parse_design("\n".join(lines)), task)
    except ExpressionError:
        lines = [lines[0], "feature first = obs[0]"]
    return "\n".join(lines)


def expression_draft(reply: str, cut_off: bool, task: Problem, origin: str) -> Draft:
    """The module a reply's design renders, or a Draft whose error names what failed. A reply
    cut off at max_tokens keeps its whole lines (each is a slot under the grammar)."""
    text = reply[: reply.rfind("\n") + 1] if cut_off else reply
    try:
        design = parse_design(text, task.task_spec.metric_names)
        return Draft(code=render_module(design, task), reply=reply, error=None, origin=origin)
    except ExpressionError as error:
        return Draft(code=None, reply=reply, error=CUT_OFF if cut_off else f"{INVALID}: {error}", origin=origin)


def design_lines(code: str) -> str | None:
    """A rendered module's design as the model wrote it (None for other code)."""
    design = design_of(code)
    return None if design is None else design.text()


class ExpressionDesigner:
    """Designs by writing expressions; same interface as `Designer` and `StructuredDesigner`."""

    def __init__(self, model: ChatModel, temperature: float):
        self.model = model
        self.temperature = temperature

    def design(self, task: Problem, k: int, elites: list[Elite], reflection: str,
               feedback: str | None = None, exploit: int = 0) -> list[Draft]:
        """Up to `k` drafts, the first `exploit` refining elites; one equal to an elite or an
        earlier draft is dropped."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        known = {text for e in elites if (text := design_lines(e.code))}
        return drafts_per_request(request_slots(elites, k, exploit, MAX_ELITES_IN_PROMPT), lambda refine, wanted:
                                  self.sample(task, elites, reflection, feedback, refine, wanted, known))

    def sample(self, task: Problem, elites: list[Elite], reflection: str, feedback: str | None,
               refine: Elite | None, wanted: int, known: set[str]) -> list[Draft]:
        try:
            prompt = self.model.fit("designer", render("designer_expression_system"), "designer_expression_user",
                                    self.values(task, elites, reflection, feedback, refine))
            replies = self.model.replies("designer", prompt.messages, n=wanted, temperature=self.temperature,
                                         shortened=prompt.shortened, grammar=design_grammar(task))
        except PromptTooLarge as error:
            raise LLMError(str(error)) from None
        return fresh_drafts([expression_draft(r.text, r.cut_off, task, ORIGIN) for r in replies],
                            lambda code: design_lines(code) or "", known, refine)

    def values(self, task: Problem, elites: list[Elite], reflection: str, feedback: str | None,
               refine: Elite | None) -> dict[str, object]:
        """The prompt's parts; each elite shown is its design lines with its statistics."""
        shown = []
        for elite in sorted(elites, key=lambda e: e.fitness, reverse=True)[:MAX_ELITES_IN_PROMPT]:
            if text := design_lines(elite.code):
                metrics = "".join(f", {m} {v:.3g}" for m, v in sorted(elite.metrics.items()))
                shown.append(f"## {elite.candidate_id} (fitness {elite.fitness:.4g}{metrics})\n\n{text}")
        refined = refine if refine is not None and design_lines(refine.code) else None
        if refined is not None:
            instruction = render("designer_expression_exploit", elite_id=refined.candidate_id)
        else:
            instruction = render("designer_expression_explore")
        return {
            "task": task.task, "algo": task.algo, "n_agents": task.n_agents,
            "env_description": task.env_description, "language": language_text(task),
            "reflection": f"# Reflection\n\n{reflection.strip()}\n" if reflection.strip() else "",
            "elites": "# Designs trained so far (best first)\n\n" + "\n\n".join(shown) + "\n" if shown else "",
            "feedback": f"# Feedback from the researcher\n\n{feedback.strip()}\n" if feedback else "",
            "instruction": instruction, "statistics": exploit_statistics(refined), "example": example_design(task),
        }

    def revise(self, task: Problem, code: str, review: Review) -> Draft:
        """The design changed as the review asks, under the same grammar."""
        current = design_lines(code)
        if current is None:
            return Draft(code=None, reply="", error="the reviewed code is not a rendered design", origin=ORIGIN + "-revise")
        try:
            prompt = self.model.fit("designer", render("designer_expression_system"), "designer_expression_revise",
                                    {"task": task.task, "env_description": task.env_description,
                                     "language": language_text(task), "design": current,
                                     "review": review.text.strip() or "\n".join(f"- {p}" for p in review.points)})
            reply = self.model.replies("designer", prompt.messages, n=1, temperature=self.temperature,
                                       shortened=prompt.shortened, grammar=design_grammar(task))[0]
        except PromptTooLarge as error:
            return Draft(code=None, reply="", error=str(error), origin=ORIGIN + "-revise")
        return expression_draft(reply.text, reply.cut_off, task, ORIGIN + "-revise")


class ExpressionDebugger:
    """Repairs a rendered design by replacing the expression that failed; other code goes to
    the code debugger (`fallback`)."""

    def __init__(self, model: ChatModel, temperature: float):
        self.model = model
        self.temperature = temperature
        self.fallback = Debugger(model, temperature)

    def repair(self, task: Problem, code: str, error: str, history: list[tuple[str, str]]) -> Draft:
        design = design_of(code)
        if design is None:
            return self.fallback.repair(task, code, error, history)
        failing = failing_slots(design, code, error)
        shown = failing[0]
        tried = list(history)
        for _ in range(1 + CHECK_RETRIES):
            values = {"language": language_text(task), "design": design.text(), "slot": shown.label,
                      "expression": shown.expr, "error": trim_error(error), "prefix": shown.prefix(),
                      "history": format_history(tried, HISTORY_SHOWN)}
            try:
                prompt = self.model.fit("debugger", render("debugger_expression_system"), "debugger_expression_user",
                                        values)
                reply = self.model.replies("debugger", prompt.messages, n=1,
                                           temperature=min(self.temperature, 0.2 + 0.2 * len(tried)),
                                           shortened=prompt.shortened, grammar=repair_grammar(task, failing, self.model.reply_room_for(prompt.messages)))[0]
            except PromptTooLarge as too_large:
                return Draft(code=None, reply="", error=str(too_large), origin=REPAIR_ORIGIN)
            draft = repaired(design, reply.text, task, {s.label for s in failing}, code)
            if draft.code is not None or not (draft.error or "").startswith((INVALID, UNCHANGED)):
                return draft
            tried.append((reply.text.strip(), draft.error or ""))  # its check failed: shown on the next ask
        return draft


HOOK_KINDS = {"hybrid_reward": "term", "potential": POTENTIAL, "enhance_observation": "feature"}  # function -> slots


def failing_slots(design: ExpressionDesign, code: str, error: str) -> list[Slot]:
    """The slots the error may be about: the one on the traceback's line, else the term whose
    component it names (a non-finite term has no line, validation names it), else those of
    the function it names, else all of them."""
    label = slot_at(code, error)
    if label is not None and (slot := design.slot(label)) is not None:
        return [slot]
    named = {m[1] for m in NAMED_COMPONENT.finditer(error)}
    if terms := [slot for slot in design.of("term") if slot.name in named]:
        return terms
    for function, kind in HOOK_KINDS.items():
        if function in error and (slots := design.of(kind)):
            return slots
    return list(design.slots)


def repaired(design: ExpressionDesign, reply: str, task: Problem, labels: set[str], failed: str) -> Draft:
    """The design with the reply's replacement line in, checked and rendered; a Draft naming
    what failed otherwise (a line for another slot, an expression that does not check, the
    `failed` module again). The same expression is a repair when its module differs from
    `failed` (code that no longer matches its design, rendered anew)."""
    line = next((ln for ln in without_thinking(reply).splitlines() if ln.strip()), "")
    try:
        slot = parse_slot(line)
        old = design.slot(slot.label)
        if slot.label not in labels or old is None:
            raise ExpressionError(f"the reply replaces {slot.label}, not {' or '.join(sorted(labels))}")
        code = render_module(design.with_slot(replace(slot, weight=old.weight, schedule=old.schedule)), task)
        if is_duplicate(code, [failed]):  # small models echo the failing expression
            return Draft(code=None, reply=reply, error=UNCHANGED, origin=REPAIR_ORIGIN)
        return Draft(code=code, reply=reply, error=None, origin=REPAIR_ORIGIN)
    except ExpressionError as error:
        return Draft(code=None, reply=reply, error=f"{INVALID}: {error}", origin=REPAIR_ORIGIN)

