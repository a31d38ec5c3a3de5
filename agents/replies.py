"""What a model's reply is to lero: its text (`message_text`, whatever form the content came
back in), why the server stopped (`Reply`), and the bytes of it lero keeps (`reply_limit`,
`cut_replies`), so no reply a model writes can grow without bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage


def message_text(message: BaseMessage) -> str:
    """The reply as text, whether the content came back as a string or a list of parts."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(
        part.get("text", "") if isinstance(part, dict) else str(part) for part in content
    )


@dataclass(frozen=True)
class Reply:
    """One reply's text and why the server stopped writing it (`stop`, `length`, ...)."""

    text: str
    finish_reason: str | None = None
    used_tokens: int | None = None  # the request's prompt plus this reply, as the server counted them

    @property
    def cut_off(self) -> bool:
        return self.finish_reason == "length"


# What a model can make lero keep: one reply's bytes, at most REPLY_LIMIT_BYTES and at most
# REPLY_BYTES_PER_TOKEN per token asked for (no tokenizer's token is longer); the rest is cut
# before anything reads or stores the reply, and the record says so (`replies_cut`).
REPLY_LIMIT_BYTES = 1 << 20
REPLY_BYTES_PER_TOKEN = 64


def reply_limit(max_tokens: int | None) -> int:
    """The bytes kept of one reply to a request asking for `max_tokens` (None: not known)."""
    return min(REPLY_LIMIT_BYTES, REPLY_BYTES_PER_TOKEN * max_tokens) if max_tokens else REPLY_LIMIT_BYTES


def cut_replies(generated: list[AIMessage], limit: int) -> tuple[list[AIMessage], list[dict[str, int]]]:
    """GENERATED with each reply longer than `limit` UTF-8 bytes cut there (its content then
    one string), and what was cut: `{"choice": index, "bytes": its length as sent}`."""
    kept, cut = [], []
    for index, message in enumerate(generated):
        data = message_text(message).encode()
        if len(data) > limit:
            message = message.model_copy(update={"content": data[:limit].decode(errors="ignore")})
            cut.append({"choice": index, "bytes": len(data)})
        kept.append(message)
    return kept, cut
