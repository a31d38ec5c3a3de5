"""The agents against a real model: SmolLM2-135M behind llama-cpp-python's server (n_ctx 2048).

Each test caps the reply (`reply_tokens`) and counts the requests the server itself logged.
A 135M model writes poor code; these tests prove the plumbing (prompts that fit, replies
and tokens recorded, every reply turned into a draft or a stated failure), not quality.
"""

from __future__ import annotations

import httpx
import pytest

from lero.agents import LLMConfig, make_team
from lero.agents.designer import Designer
from lero.agents.types import Elite
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from tests.agents.samples import GOOD_MODULE
from tests.support.llama_server import MODEL_ID

pytestmark = pytest.mark.real_llm

REPLY_TOKENS = 200  # a capped reply: about 7 s on 2 busy cores


def real_config(server, **overrides: object) -> LLMConfig:
    settings = {"context_tokens": server.n_ctx, "reply_tokens": REPLY_TOKENS, "timeout_s": 600.0,
                "temperature": 0.2, **overrides}
    return LLMConfig(backend="openai", model=MODEL_ID, base_url=server.base_url, api_key="none", **settings)


def test_a_real_designer_reply_is_a_draft_with_the_servers_own_token_counts(llama_server):
    calls: list[dict] = []
    team = make_team(real_config(llama_server), on_call=lambda role, info: calls.append(info))
    before = llama_server.requests()
    [draft] = team.designer.design(problem(RunSpec()), 1, [], "")
    assert draft.reply.strip()
    assert (draft.code is None) == (draft.error is not None)  # code, or a stated reason
    assert 1 <= llama_server.requests() - before == len(calls) <= 2  # at most one continuation
    first = calls[0]
    assert first["status"] == "ok" and first["tokens_estimated"] is False  # llama.cpp sends usage
    assert first["prompt_tokens"] + first["max_tokens"] <= llama_server.n_ctx
    assert first["finish_reasons"][0] in ("stop", "length") and first["elapsed_s"] > 0


def long_generation_two(task_text_repeats: int = 3):
    """A generation-2 explore prompt whose environment text alone overflows 2048 tokens."""
    task = problem(RunSpec())
    task = task.__class__(**{**vars(task), "env_description": task.env_description * task_text_repeats})
    elites = [Elite("1-0", GOOD_MODULE, -20.0, {"return": -20.0, "coverage": 0.1}),
              Elite("0-2", GOOD_MODULE, -24.0, {"return": -24.0})]
    reflection = "# Reflection after generation 1\n\n" + "- 1-1 reached return -30; collisions 3.0\n" * 40
    return task, elites, reflection


def test_a_prompt_the_real_server_refuses_is_shortened_until_it_fits(llama_server):
    task, elites, reflection = long_generation_two()
    renderer = Designer(model=None, temperature=0.2)  # type: ignore[arg-type]  # renders, unfitted
    unfitted = renderer.design_prompt(task, elites, reflection, None, None, 1).messages
    body = {"model": MODEL_ID, "max_tokens": 8,
            "messages": [{"role": "system" if m.type == "system" else "user", "content": m.content}
                         for m in unfitted]}
    refused = httpx.post(llama_server.base_url + "/chat/completions", json=body, timeout=600)
    assert refused.status_code == 400 and "context" in refused.text.lower()  # the server's own limit
    calls: list[dict] = []
    team = make_team(real_config(llama_server, reply_tokens=64), on_call=lambda role, info: calls.append(info))
    team.designer.design(task, 1, elites, reflection)
    first = calls[0]
    assert first["status"] == "ok" and first["shortened"][0] == "env_description"
    assert first["prompt_tokens"] + first["max_tokens"] <= llama_server.n_ctx  # counted by the server
    assert "Only `math`, `numpy` and" in first["prompt"][0]["content"]  # the contract stays whole
