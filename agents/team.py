"""The team of agents for one run, built from an LLMConfig: LLM-backed or offline.

`ROLES` is the registry of roles: one row per `Team` field says how `make_team` builds it
with the run's model and how offline (`None`: the role has no offline stand-in and is None
in an offline run, as the chat's assistant). A new role is one field and one row here
(docs/internals.md, "A new LLM role").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from lero.agents.assistant import Assistant
from lero.agents.budget import UsageLedger
from lero.agents.critic import Critic
from lero.agents.debugger import Debugger
from lero.agents.designer import Designer
from lero.agents.expression.roles import ExpressionDebugger, ExpressionDesigner
from lero.agents.llm import ChatModel, OnCall
from lero.agents.llm_config import LLMConfig
from lero.agents.offline.designer import OfflineDebugger, OfflineDesigner
from lero.agents.structured import StructuredDesigner


@dataclass
class Team:
    """The roles the graph calls. `assistant` is None offline: chat needs a real model."""

    designer: Designer | StructuredDesigner | ExpressionDesigner | OfflineDesigner
    critic: Critic
    debugger: Debugger | ExpressionDebugger | OfflineDebugger
    assistant: Assistant | None
    ledger: UsageLedger
    # `--design auto`: drafts a slot whose code stayed invalid (None in the other modes), an
    # expression draft first where the server takes a grammar
    structured: StructuredDesigner | None = None
    expression: ExpressionDesigner | None = None

    def usage(self) -> dict:
        """`requests`, `prompt_tokens`, `completion_tokens` and the same `by_role`."""
        return self.ledger.summary()


@dataclass(frozen=True)
class Role:
    """How `make_team` builds one role: `online(model, cfg)`; `offline(cfg, built)` from the
    config and the roles built before it (None: no offline stand-in)."""

    online: Callable[[ChatModel, LLMConfig], Any]
    offline: Callable[[LLMConfig, dict[str, Any]], Any] | None = None


def _designer(model: ChatModel, cfg: LLMConfig) -> Designer | StructuredDesigner | ExpressionDesigner:
    if cfg.design == "structured":
        return StructuredDesigner(model, cfg.temperature, cfg.seed)
    if cfg.design == "expression":
        return ExpressionDesigner(model, cfg.temperature)
    return Designer(model, cfg.temperature, edit=cfg.design == "auto", seed=cfg.seed)


def _debugger(model: ChatModel, cfg: LLMConfig) -> Debugger | ExpressionDebugger:
    """Where designs may be expressions, the debugger replaces a failing expression."""
    if cfg.design in ("expression", "auto"):
        return ExpressionDebugger(model, cfg.temperature)
    return Debugger(model, cfg.temperature)


ROLES: dict[str, Role] = {  # Team's fields but the ledger, in the order they are built
    "designer": Role(_designer, lambda cfg, built: OfflineDesigner(seed=cfg.seed, prior=cfg.offline_prior)),
    "critic": Role(lambda model, cfg: Critic(model, structured=cfg.design != "code"), lambda cfg, built: Critic(None)),
    "debugger": Role(_debugger, lambda cfg, built: OfflineDebugger(built["designer"])),
    "assistant": Role(lambda model, cfg: Assistant(model)),
    "structured": Role(lambda model, cfg: StructuredDesigner(model, cfg.temperature, cfg.seed)
                       if cfg.design == "auto" else None),
    "expression": Role(lambda model, cfg: ExpressionDesigner(model, cfg.temperature) if cfg.design == "auto" else None),
}
if set(ROLES) != {f.name for f in fields(Team)} - {"ledger"}:  # a field without a row, or a row without one
    raise ImportError(f"agents.team.ROLES names {sorted(ROLES)}, Team's roles differ")


def make_team(cfg: LLMConfig, on_call: OnCall | None = None) -> Team:
    """`on_call(role, info)` is told about every LLM request (for events.jsonl `llm_call`)."""
    ledger = UsageLedger(max_requests=cfg.max_requests, max_tokens=cfg.max_tokens)
    built: dict[str, Any] = {}
    if cfg.backend == "offline":
        for name, role in ROLES.items():
            built[name] = role.offline(cfg, built) if role.offline is not None else None
    else:
        model = ChatModel(cfg, ledger, on_call)
        for name, role in ROLES.items():
            built[name] = role.online(model, cfg)
    return Team(**built, ledger=ledger)
