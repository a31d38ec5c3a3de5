"""Prompts that fit the model: estimate their tokens, and shorten parts in a stated priority.

What a role's prompt keeps longest, first to last: the contract (the system prompt, never
shortened), the task, the elites' code, the refined elite's statistics, the reflection, the
environment description. So the environment description is shortened first, then the
reflection, then the statistics, then the elites, then the task. A part is halved (its head kept, a marker saying so) until the prompt fits, and
left out once it is short; a prompt that still does not fit leaves its reply less room, down
to MIN_REPLY_TOKENS (`ChatModel.fit`), and beyond that is an `LLMError` naming the window,
not a request the server would refuse.

Tokens are estimated from characters: BPE tokenizers give about 4 characters per token
of English and 3 of code; 3.2 errs towards the smaller count of characters per token,
so an estimate is rarely below the server's own count. Once the server has counted a
prompt (`usage`), `ChatModel` passes the ratio it measured instead (SmolLM2's tokenizer:
about 4.9 on lero's designer prompt), less a margin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from lero.agents.templates import render

CHARS_PER_TOKEN = 3.2
MESSAGE_OVERHEAD_TOKENS = 8  # chat-template tags around each message
# Parts in the order they are shortened (the first goes first); names are template values.
SHORTEN_ORDER = ("env_description", "history", "reflection", "statistics", "review", "elites", "task")
SHORTENED = "\n[... shortened to fit the model's context window]"
LEFT_OUT = "(left out to fit the model's context window)"
MIN_PART_CHARS = 240  # below this a part is left out rather than halved again
MIN_REPLY_TOKENS = 128


class PromptTooLarge(ValueError):
    """Even with every shortenable part left out, the prompt does not fit the window
    (`ChatModel.fit` turns it into an LLMError, which stops a run with that reason).
    `fitted`: that prompt, as short as it gets (None where no such prompt was made)."""

    def __init__(self, message: str, fitted: Fitted | None = None) -> None:
        super().__init__(message)
        self.fitted = fitted


class PromptOutgrown(PromptTooLarge):
    """A prompt `fit` made for the window then known no longer fits the smaller one a
    refusal has since stated, even shortened (`ChatModel.replies`): its maker can make it
    again for that window (`made_for_the_window`)."""


def estimate_tokens(text: str, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    return math.ceil(len(text) / chars_per_token)


def messages_tokens(messages: Sequence[BaseMessage], chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """The estimated prompt tokens of a chat request."""
    return sum(estimate_tokens(str(m.content), chars_per_token) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def reply_room(window_tokens: int, wanted: int) -> int:
    """Tokens kept free for the reply: what is wanted, at most a quarter of the window."""
    return max(MIN_REPLY_TOKENS, min(wanted, window_tokens // 4))


@dataclass(frozen=True)
class Fitted:
    """A role's messages, with the parts that were shortened or left out to fit."""

    messages: list[BaseMessage]
    shortened: tuple[str, ...]
    prompt_tokens: int  # estimated


def _shorten(text: str) -> str:
    """The head half of a part (cut at a line end) with the marker, or LEFT_OUT when short;
    the part's trailing blank lines are kept, so the prompt's layout stays."""
    body = text.rstrip()
    trail = text[len(body) :]
    body = body.removesuffix(SHORTENED)
    if len(body) <= MIN_PART_CHARS:
        return LEFT_OUT + trail
    head = body[: len(body) // 2]
    head = head[: head.rfind("\n")] if "\n" in head else head
    return head + SHORTENED + trail


def fit(
    role: str,
    system: str,
    template: str,
    values: dict[str, object],
    budget: int | None,
    chars_per_token: float = CHARS_PER_TOKEN,
) -> Fitted:
    """`[system, user]` with the user template filled so that both fit `budget` tokens.

    `budget` None means no limit (a model that only renders prompts, as in the golden test).
    """
    values = {key: str(value) for key, value in values.items()}
    shortened: list[str] = []

    def build() -> list[BaseMessage]:
        return [SystemMessage(system), HumanMessage(render(template, **values))]

    messages = build()
    if budget is None:
        return Fitted(messages, (), messages_tokens(messages))
    for name in (n for n in SHORTEN_ORDER if n in values):
        while messages_tokens(messages, chars_per_token) > budget and values[name].strip() not in (LEFT_OUT, ""):
            values[name] = _shorten(values[name])
            if name not in shortened:
                shortened.append(name)
            messages = build()
    needed = messages_tokens(messages, chars_per_token)
    if needed > budget:
        raise PromptTooLarge(
            f"the {role} prompt needs about {needed} tokens even shortened, but the context window "
            f"leaves {budget} for it (use a model with a larger window or raise --context-tokens)",
            Fitted(messages, tuple(shortened), needed),
        )
    return Fitted(messages, tuple(shortened), needed)


def fit_conversation(
    role: str, messages: Sequence[BaseMessage], budget: int, chars_per_token: float = CHARS_PER_TOKEN
) -> Fitted:
    """A conversation (the experiment assistant's) with its oldest turns left out until it
    fits `budget` tokens. The system prompt (the contract) and the latest turn stay; a turn
    (a user message and the replies and tool results after it) goes whole, so no tool
    result loses the call it answers. `shortened` is `("history",)` when turns were left out."""
    head = list(messages[:1]) if messages and isinstance(messages[0], SystemMessage) else []
    rest = list(messages[len(head) :])
    turn_starts = [i for i, message in enumerate(rest) if isinstance(message, HumanMessage)]
    first = 0
    for start in turn_starts[1:]:
        if messages_tokens(head + rest[first:], chars_per_token) <= budget:
            break
        first = start
    kept = head + rest[first:]
    needed = messages_tokens(kept, chars_per_token)
    if needed > budget:
        raise PromptTooLarge(
            f"the {role} conversation needs about {needed} tokens even with only its last turn, but the "
            f"context window leaves {budget} for it (start a new chat, or raise --context-tokens)"
        )
    return Fitted(kept, ("history",) if first else (), needed)


R = TypeVar("R")  # what a `made_for_the_window` request returns


def made_for_the_window(ask: Callable[[], R]) -> R:
    """`ask()`, which makes its prompt with `ChatModel.fit` and sends it; asked once more
    when a refusal stated a window the prompt no longer fits (`PromptOutgrown`), so the
    prompt is made again for that window by the role's own means (the critic's design JSON
    alone, an edit slot's other starting module), as it would have been with the window known."""
    try:
        return ask()
    except PromptOutgrown:
        return ask()
