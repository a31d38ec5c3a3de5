"""The sampling `seed` of every request: drawn from the run's `--designer-seed`, the role, the
prompt and how often that prompt was sent before, so a run repeated with the same seed asks a
seeded server (llama.cpp, vLLM, ...) for the same replies and a prompt sent twice still gets
two draws.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from lero.agents.replies import message_text


def prompt_key(messages: Sequence[BaseMessage]) -> tuple:
    return tuple((m.type, message_text(m)) for m in messages)


def prompt_digest(role: str, messages: Sequence[BaseMessage]) -> str:
    """One role's prompt as a short stable key (the same in every process)."""
    return hashlib.sha256(json.dumps([role, prompt_key(messages)]).encode()).hexdigest()


def sampling_seed(seed: int, prompt: str, sent_before: int) -> int:
    """The `seed` of a request: stable across processes for the same run seed, prompt
    (`prompt_digest`) and count of earlier sends of that prompt, and different when any of
    them differs."""
    key = json.dumps([seed, prompt, sent_before])
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") >> 1  # 31 bits: any server's int
