"""The LLM debugger: repairs a candidate from its trimmed traceback or validation failure.

It sees its own earlier failed attempts on the same candidate (the last few), so it
does not propose the same fix twice; the graph bounds the number of attempts.
"""

from __future__ import annotations

from dataclasses import replace

from lero.agents.checks import ctx_fields_text, state_names
from lero.agents.extract import draft_from_reply
from lero.agents.fit import Fitted, PromptTooLarge
from lero.agents.llm import ChatModel
from lero.agents.records import Draft, Problem
from lero.agents.similarity import is_duplicate
from lero.agents.templates import format_history, render, trim_error
from lero.training.contract import CONTRACT_TEXT

HISTORY_SHOWN = 2
UNCHANGED = "the debugger returned the failing code unchanged"


class Debugger:
    def __init__(self, model: ChatModel, temperature: float):
        self.model = model
        self.temperature = temperature

    def repair(
        self, task: Problem, code: str, error: str, history: list[tuple[str, str]]
    ) -> Draft:
        """A repaired module; `history` holds earlier (code, error) attempts, oldest first."""
        temperature = min(self.temperature, 0.2 + 0.2 * len(history))  # warmer when stuck
        try:
            prompt = self._prompt(task, code, error, history)
            reply = self.model.replies(
                "debugger", prompt.messages, n=1, temperature=temperature, shortened=prompt.shortened
            )[0]
        except PromptTooLarge as too_large:  # this candidate's code is too long for the window
            return Draft(code=None, reply="", error=str(too_large), origin="debugger")
        draft = draft_from_reply(reply.text, "debugger", reply.cut_off)
        if draft.code is not None and is_duplicate(draft.code, [code]):  # small models echo their input
            return replace(draft, code=None, error=UNCHANGED)
        return draft

    def _prompt(self, task: Problem, code: str, error: str, history: list[tuple[str, str]]) -> Fitted:
        return self.model.fit(
            "debugger",
            render("debugger_system", contract=CONTRACT_TEXT),
            "debugger_user",
            {
                "env_description": task.env_description,
                "ctx_fields": ctx_fields_text(state_names(task)),
                "code": code.strip(),
                "error": trim_error(error),
                "history": format_history(history, HISTORY_SHOWN),
            },
        )
