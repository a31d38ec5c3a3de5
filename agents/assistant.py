"""The experiment assistant's model access: chat with tool calling where the server has it.

The app builds the chat (`app.chat.dialogues`, on the front-ends `app.chat.terminal` and `app.ui.chat`)
and the tools (`app.chat.desk`); this is only the model side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, convert_to_messages

from lero.agents.llm import ChatModel
from lero.agents.templates import render


class Assistant:
    def __init__(self, model: ChatModel):
        self.model = model

    def chat(self, messages: Sequence[BaseMessage | dict], tools: Sequence[Any] = ()) -> AIMessage:
        """The next assistant message; `tools` are langchain tools, functions or OpenAI tool dicts.

        Servers that refuse tool calling get the same conversation without tools, and
        the reply comes back as plain text (no `tool_calls`).
        """
        history = convert_to_messages(list(messages))
        if not history or not isinstance(history[0], SystemMessage):
            history = [SystemMessage(render("assistant_system")), *history]
        return self.model.chat("assistant", history, tools)
