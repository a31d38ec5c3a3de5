"""The LLM debugger: repairs a candidate from its trimmed traceback or validation failure.

It sees its own earlier failed attempts on the same candidate (the last few), so it
does not propose the same fix twice; the graph bounds the number of attempts.
"""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage

from lero.agents.extract import draft_from_reply
from lero.agents.llm import ChatModel
from lero.agents.templates import format_history, render, trim_error
from lero.agents.types import Draft, Problem
from lero.training.contract import CONTRACT_TEXT

HISTORY_SHOWN = 2


class Debugger:
    def __init__(self, model: ChatModel, temperature: float):
        self.model = model
        self.temperature = temperature

    def repair(
        self, task: Problem, code: str, error: str, history: list[tuple[str, str]]
    ) -> Draft:
        """A repaired module; `history` holds earlier (code, error) attempts, oldest first."""
        user = render(
            "debugger_user",
            env_description=task.env_description,
            code=code.strip(),
            error=trim_error(error),
            history=format_history(history, HISTORY_SHOWN),
        )
        messages = [
            SystemMessage(render("debugger_system", contract=CONTRACT_TEXT)),
            HumanMessage(user),
        ]
        temperature = min(self.temperature, 0.2 + 0.2 * len(history))  # warmer when stuck
        return draft_from_reply(
            self.model.complete("debugger", messages, n=1, temperature=temperature)[0], "debugger"
        )
