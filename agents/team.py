"""The team of agents for one run, built from an LLMConfig: LLM-backed or offline."""

from __future__ import annotations

from dataclasses import dataclass

from lero.agents.assistant import Assistant
from lero.agents.config import LLMConfig
from lero.agents.critic import Critic
from lero.agents.debugger import Debugger
from lero.agents.designer import Designer
from lero.agents.llm import ChatModel, OnCall, UsageLedger
from lero.agents.offline.designer import OfflineDebugger, OfflineDesigner
from lero.agents.structured import StructuredDesigner


@dataclass
class Team:
    """The roles the graph calls. `assistant` is None offline: chat needs a real model."""

    designer: Designer | StructuredDesigner | OfflineDesigner
    critic: Critic
    debugger: Debugger | OfflineDebugger
    assistant: Assistant | None
    ledger: UsageLedger
    # `--design auto`: drafts a slot whose code stayed invalid (None in the other modes)
    structured: StructuredDesigner | None = None

    def usage(self) -> dict:
        """`requests`, `prompt_tokens`, `completion_tokens` and the same `by_role`."""
        return self.ledger.summary()


def make_team(cfg: LLMConfig, on_call: OnCall | None = None) -> Team:
    """`on_call(role, info)` is told about every LLM request (for events.jsonl `llm_call`)."""
    ledger = UsageLedger(max_requests=cfg.max_requests, max_tokens=cfg.max_tokens)
    if cfg.backend == "offline":
        designer = OfflineDesigner(seed=cfg.seed, prior=cfg.offline_prior)
        return Team(designer, Critic(None), OfflineDebugger(designer), None, ledger)
    model = ChatModel(cfg, ledger, on_call)
    structured = StructuredDesigner(model, cfg.temperature, cfg.seed)
    designer = structured if cfg.design == "structured" else Designer(model, cfg.temperature, edit=cfg.design == "auto", seed=cfg.seed)
    return Team(
        designer=designer,
        critic=Critic(model, structured=cfg.design != "code"),
        debugger=Debugger(model, cfg.temperature),
        assistant=Assistant(model),
        ledger=ledger,
        structured=structured if cfg.design == "auto" else None,
    )
