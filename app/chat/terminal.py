"""`lero chat`: design an experiment in a conversation in the terminal, confirm it, run it
with approvals (the desk and its dialogues: `app.chat.desk`)."""

from __future__ import annotations

from typing import IO, Any

from rich.console import Console

from lero.app.chat.desk import ExperimentDesk, chat_run_fields
from lero.app.chat.dialogues import assistant_chat, offline_chat
from lero.app.console.approvals import Asker
from lero.graph.configuration import DEFAULT_RUNS_DIR, llm_settings


def run_chat(
    llm: str | None = None,
    base_url: str | None = None,
    runs_dir: str = DEFAULT_RUNS_DIR,
    console: Console | None = None,
    stdin: IO[str] | None = None,
    settings: dict[str, Any] | None = None,
) -> int:
    """`lero chat`: the experiment assistant with the given LLM, or the offline dialogue.

    `settings`: RunSpec's LLM_SETTINGS the command line gave (`llm_timeout_s`,
    `context_tokens`); the assistant asks its model with them, and the run it starts keeps them."""
    from lero.agents import LLMConfig

    settings = settings or {}
    cfg = LLMConfig.from_spec(llm, base_url=base_url, **llm_settings(settings))
    io = Asker(console, stdin)
    desk = ExperimentDesk(io, base=chat_run_fields(cfg, runs_dir, settings))
    if cfg.backend == "offline":
        return offline_chat(desk)
    return assistant_chat(desk, cfg)
