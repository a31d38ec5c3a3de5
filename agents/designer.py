"""The LLM designer: K candidate modules per call (exploit and explore slots), and revisions.

Exploit slots refine an elite: the prompt shows its code, its component statistics and
what to change (Eureka refines its best candidate; LERO's elites guide the next
generation). Explore slots ask for a new idea. A draft semantically identical to an
elite or to another draft (same normalised AST) is a duplicate and is asked for again.

Its twin is agents/offline/designer.py: the same role, played by a program synthesiser.
"""

from __future__ import annotations

import random
from dataclasses import replace
from functools import partial

from lero.agents.budget import BudgetExceeded
from lero.agents.extract import draft_from_reply
from lero.agents.fit import Fitted, PromptTooLarge, fit, made_for_the_window
from lero.agents.llm import ChatModel
from lero.agents.offline.designer import sampled_module, without_genome
from lero.agents.records import Draft, Elite, Problem, Review, request_slots
from lero.agents.retry import LLMError
from lero.agents.similarity import is_duplicate
from lero.agents.templates import format_evolution, format_feedback, render
from lero.training.contract import contract_text

MAX_ELITES_IN_PROMPT = 2  # Markovian context: the best few, not the whole history
EXTRA_ROUNDS = 1  # how often to ask again for candidates lost as duplicates
EDIT_DRAWS = 16  # grammar draws tried as an edit request's starting module before free-form


class Designer:
    """Writes candidates from the task, the environment, the elites and the reflection.

    `edit`: every request starts from a complete, valid module and asks for a changed one
    (an exploit slot's elite; for an explore slot, a module rendered from a grammar draw),
    which small models do far better than writing a module from nothing. A reply that
    returns the starting module unchanged is dropped as a duplicate of it."""

    def __init__(self, model: ChatModel, temperature: float, edit: bool = False, seed: int = 0):
        self.model = model
        self.temperature = temperature
        self.edit = edit
        self.draws = random.Random(seed)  # the explore slots' starting modules

    def design(
        self,
        task: Problem,
        k: int,
        elites: list[Elite],
        reflection: str,
        feedback: str | None = None,
        exploit: int = 0,
    ) -> list[Draft]:
        """Up to `k` drafts, the first `exploit` of them refining elites; duplicates dropped.

        One request per refined elite and one for the explore slots. When the budget runs
        out after some drafts came back, those drafts are returned; `BudgetExceeded`
        propagates only when there is nothing to show for the call.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        slots = request_slots(elites, k, exploit, MAX_ELITES_IN_PROMPT)
        known = [e.code for e in elites]
        drafts: list[Draft] = []
        for refine, wanted in slots:
            try:
                drafts += made_for_the_window(partial(self._slot, task, elites, reflection, feedback, refine, wanted, known))
            except PromptTooLarge as error:  # only the contract and the task are left: no design fits
                raise LLMError(str(error)) from None
            except BudgetExceeded:
                if drafts:
                    break
                raise
        return drafts

    def _slot(self, task: Problem, elites: list[Elite], reflection: str, feedback: str | None,
              refine: Elite | None, wanted: int, known: list[str]) -> list[Draft]:
        """One request's drafts: its prompt (and starting module, now known) made for the window."""
        prompt, start = self._prompt_for(task, elites, reflection, feedback, refine, wanted)
        known.extend([start] if start else [])
        return self._sample(prompt, wanted, known, refine)

    def _prompt_for(self, task: Problem, elites: list[Elite], reflection: str, feedback: str | None,
                    refine: Elite | None, k: int) -> tuple[Fitted, str | None]:
        """The request's prompt and, for an explore slot in edit mode, the module it starts
        from: the first of EDIT_DRAWS grammar draws whose prompt fits the window (modules
        differ in length by 2x), else the free-form prompt."""
        if self.edit and refine is None:
            for _ in range(EDIT_DRAWS):
                start = sampled_module(task, self.draws)
                try:
                    return self.design_prompt(task, elites, reflection, feedback, None, k, start), start
                except PromptTooLarge:
                    continue
        return self.design_prompt(task, elites, reflection, feedback, refine, k), None

    def _sample(self, prompt: Fitted, wanted: int, known: list[str], refine: Elite | None) -> list[Draft]:
        """`wanted` non-duplicate drafts from one prompt (fewer when the retries run out)."""
        kind, parents = ("exploit", (refine.candidate_id,)) if refine else ("explore", ())
        drafts: list[Draft] = []
        for _ in range(1 + EXTRA_ROUNDS):
            missing = wanted - len(drafts)
            if missing == 0:
                break
            try:
                replies = self.model.replies(
                    "designer", prompt.messages, n=missing, temperature=self.temperature, shortened=prompt.shortened
                )
            except BudgetExceeded:
                if drafts:
                    break
                raise
            for reply in replies:
                draft = replace(draft_from_reply(reply.text, self.origin, reply.cut_off), kind=kind, parents=parents)
                if draft.code is not None:
                    draft = replace(draft, code=without_genome(draft.code))
                    if is_duplicate(draft.code, known):
                        continue
                    known.append(draft.code)
                drafts.append(draft)
        return drafts

    @property
    def origin(self) -> str:
        return "designer:edit" if self.edit else "designer"

    def revise(self, task: Problem, code: str, review: Review) -> Draft:
        """The candidate rewritten to address the critic's points."""
        try:
            prompt = self.model.fit(
                "designer",
                render("designer_system", contract=contract_text(task.task_spec.sparse)),
                "designer_revise",
                {
                    "task": task.task,
                    "env_description": task.env_description,
                    "code": code.strip(),
                    "review": review.text.strip() or "\n".join(f"- {p}" for p in review.points),
                },
            )
            reply = self.model.replies(
                "designer", prompt.messages, n=1, temperature=self.temperature, shortened=prompt.shortened
            )[0]
        except PromptTooLarge as error:  # this candidate's code is too long for the window
            return Draft(code=None, reply="", error=str(error), origin="designer:revise")
        return draft_from_reply(reply.text, "designer:revise", reply.cut_off)

    def design_prompt(
        self,
        task: Problem,
        elites: list[Elite],
        reflection: str,
        feedback: str | None,
        refine: Elite | None,
        k: int,
        start: str | None = None,
    ) -> Fitted:
        """The prompt of one exploit (`refine` set) or explore request for `k` drafts, fitted
        to the model's window (unfitted without a model: a designer that only renders).
        `start`: the complete module an edit request changes (explore slots in edit mode)."""
        if refine is not None:
            instruction = render("designer_exploit", elite_id=refine.candidate_id)
        elif start is not None:
            instruction = render("designer_edit_explore", module=start.strip())
        else:
            distinct = " that differs from the elites listed above" if elites else ""
            if k > 1:
                distinct += f" ({k} candidates are sampled from this prompt; make yours a distinct idea)"
            instruction = render("designer_explore", distinct=distinct)
        values = {
            "task": task.task,
            "algo": task.algo,
            "n_agents": task.n_agents,
            "obs_dim": task.obs_dim,
            "env_description": task.env_description,
            **format_evolution(elites, reflection, refine, MAX_ELITES_IN_PROMPT),
            "feedback": format_feedback(feedback),
            "instruction": instruction,
        }
        system = render("designer_system", contract=contract_text(task.task_spec.sparse))
        if self.model is None:
            return fit("designer", system, "designer_user", values, None)
        return self.model.fit("designer", system, "designer_user", values)
