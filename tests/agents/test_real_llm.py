"""The agents against real models: SmolLM2-135M (and, for structured and edit design, Gemma 3
270M too) behind llama-cpp-python's server (n_ctx 2048).

Each test caps the reply (`reply_tokens`) and counts the requests the server itself logged.
A 135M model writes poor code; these tests prove the plumbing (prompts that fit, replies
and tokens recorded, every reply turned into a draft or a stated failure), not quality.
"""

from __future__ import annotations

import httpx
import pytest
from langchain_core.messages import HumanMessage

from lero.agents import LLMConfig, check_candidate, make_team
from lero.agents.budget import UsageLedger
from lero.agents.checks import state_names
from lero.agents.designer import Designer
from lero.agents.extract import CUT_OFF
from lero.agents.llm import ChatModel
from lero.agents.offline.schema import design_schema
from lero.agents.probe import DEFAULT_CONTEXT_TOKENS, REFUSAL_SOURCE, count_tokens
from lero.agents.records import VERDICTS, Elite
from lero.agents.structured import OUTSIDE_SCHEMA, failure_kind
from lero.graph.configuration import RunSpec
from lero.graph.context import problem
from tests.agents.samples import GOOD_MODULE
from tests.support.llama_server import MODEL_ID

pytestmark = pytest.mark.real_llm

REPLY_TOKENS = 200  # a capped reply: about 7 s on 2 busy cores


def real_config(server, **overrides: object) -> LLMConfig:
    settings = {"model": MODEL_ID, "context_tokens": server.n_ctx, "reply_tokens": REPLY_TOKENS, "timeout_s": 600.0,
                "temperature": 0.2, "design": "code", **overrides}
    return LLMConfig(backend="openai", base_url=server.base_url, api_key="none", **settings)


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


def test_the_real_server_counts_a_prompts_tokens_before_it_is_sent(real_server):
    """llama-cpp-python's `/extras/tokenize/count` gives the count its chat completion then
    reports for the same text, less the chat template's tokens (SmolLM2's adds a default
    system message: 30 tokens)."""
    text = GOOD_MODULE
    counted = count_tokens(real_server.base_url, real_server.model_id, text)
    body = {"model": real_server.model_id, "messages": [{"role": "user", "content": text}], "max_tokens": 1}
    usage = httpx.post(real_server.base_url + "/chat/completions", json=body, timeout=600).json()["usage"]
    assert counted is not None and 0 <= usage["prompt_tokens"] - counted <= 40


# ---------------------------------------------------------------- structured and edit design, both models


def test_structured_design_on_the_real_server_decodes_inside_the_real_schema(real_server):
    """llama-cpp-python refuses `json_schema` (HTTP 500) and constrains `json_object` with
    the schema: the probe finds that once, and the designer's and critic's replies are
    objects of their schemas (each draft renders, or names how it failed)."""
    calls: list[dict] = []
    cfg = real_config(real_server, design="structured", model=real_server.model_id, reply_tokens=300)
    team = make_team(cfg, on_call=lambda role, info: calls.append(info))
    task = problem(RunSpec())
    before = real_server.requests()
    drafts = team.designer.design(task, 2, [], "")
    assert [(c["role"], c["status"], c["response_format"]) for c in calls[:2]] == [
        ("probe", "error", "json_schema"), ("probe", "ok", "json_object")]
    designer = [c for c in calls if c["role"] == "designer"]
    assert designer and all(c["response_format"] == "json_object" and c["status"] == "ok" for c in designer)
    for draft in drafts:
        assert draft.code is not None or failure_kind(draft.error) in (OUTSIDE_SCHEMA, CUT_OFF), draft
    assert any(d.code is not None for d in drafts), [d.reply for d in drafts]
    code = next(d.code for d in drafts if d.code is not None)
    assert check_candidate(code, state_names(task)) == []
    review = team.critic.review(task, code)
    assert review.by == "critic" and review.verdict in VERDICTS
    assert calls[-1]["role"] == "critic" and calls[-1]["response_format"] == "json_object"
    outside = [p for p in review.points if OUTSIDE_SCHEMA in p]  # llama-cpp-python's grammar leaves maxItems/maxLength out
    assert not outside or review.points[0] == outside[0]  # then said first, and the reply read as text
    assert real_server.requests() - before == len(calls)  # the server logged each, the refused probe too


@pytest.mark.parametrize("env", ["simple_reference", "simple_speaker_listener"])
def test_structured_design_on_the_real_server_picks_from_the_task_grammars_of_the_talking_tasks(real_server, env):
    """The real schema of each communication task (its own goal and message terms) constrains
    the real model: the design renders under that grammar and passes the gate."""
    calls: list[dict] = []
    cfg = real_config(real_server, design="structured", model=real_server.model_id, reply_tokens=300)
    task = problem(RunSpec(env=env))
    [draft] = make_team(cfg, on_call=lambda role, info: calls.append(info)).designer.design(task, 1, [], "") or [None]
    designer = [c for c in calls if c["role"] == "designer"]
    assert designer and designer[0]["status"] == "ok" and design_schema(task).grammar == env
    assert "names_" in designer[0]["prompt"][-1]["content"]  # the grammar's message terms are offered
    assert draft is not None and draft.code is not None, [c["replies"] for c in designer]
    assert f"({env} grammar)" in draft.code and check_candidate(draft.code, state_names(task)) == []


def test_edit_design_on_the_real_server_starts_from_a_complete_module(real_server):
    calls: list[dict] = []
    # 200 reply tokens: the 2048 window then leaves a starting module room under the
    # server-counted characters per token less ChatModel's 10% margin (Gemma's prompt did not fit with 300)
    cfg = real_config(real_server, design="auto", model=real_server.model_id, reply_tokens=200)
    team = make_team(cfg, on_call=lambda role, info: calls.append(info))
    [draft] = team.designer.design(problem(RunSpec()), 1, [], "") or [None]
    first = calls[0]
    assert first["role"] == "designer" and first["status"] == "ok" and first["response_format"] is None
    assert "def hybrid_reward(ctx):" in first["prompt"][-1]["content"]  # the starting module is in the prompt
    assert first["prompt_tokens"] + first["max_tokens"] <= real_server.n_ctx
    if draft is not None:  # None: every reply returned the starting module unchanged (a duplicate)
        assert draft.origin == "designer:edit" and (draft.code is None) == (draft.error is not None)


def test_a_window_the_real_server_states_only_in_its_refusal_is_learned(llama_server):
    """llama-cpp-python's server does not state its window (n_ctx 2048): with no
    `context_tokens` lero assumes DEFAULT_CONTEXT_TOKENS, the server refuses the long
    structured design request, and the same request is fitted to the window it stated and
    sent again: the design goes on."""
    task, _, reflection = long_generation_two()
    calls: list[dict] = []
    cfg = real_config(llama_server, design="structured", context_tokens=None, reply_tokens=300)
    team = make_team(cfg, on_call=lambda role, info: calls.append(info))
    drafts = team.designer.design(task, 1, [], reflection)
    designer = [c for c in calls if c["role"] == "designer"]
    refused, resent = designer[0], designer[-1]
    assert refused["status"] == "error" and "maximum context length is 2048 tokens" in refused["error"]
    assert refused["window_source"] == "default" and refused["window"] == DEFAULT_CONTEXT_TOKENS
    assert resent["status"] == "ok" and (resent["window"], resent["window_source"]) == (2048, REFUSAL_SOURCE)
    assert resent["prompt_tokens"] + resent["max_tokens"] <= llama_server.n_ctx  # counted by the server
    assert len(designer) == 2 and drafts


def test_the_same_designer_seed_draws_the_same_replies_from_the_real_server(llama_server):
    """Sampling at temperature 1: a run repeated with `--designer-seed 0` gets the same two
    replies to a prompt it sends twice (two draws, not one), and seed 1 gets other ones.
    llama-cpp-python reuses the prompt it evaluated last, and a prompt evaluated afresh can
    sample another reply from the same seed: each run starts after the same prompt."""
    question = [HumanMessage("Name three colours of a landmark in a particle world.")]

    def two_replies(seed: int) -> list[str]:
        ChatModel(real_config(llama_server, temperature=0.0), UsageLedger()).replies("critic", question)
        model = ChatModel(real_config(llama_server, temperature=1.0, seed=seed), UsageLedger())
        return [reply.text for _ in range(2) for reply in model.replies("designer", question)]

    first = two_replies(0)
    assert two_replies(0) == first
    assert first[0] != first[1]  # the prompt's second send is its own draw
    assert two_replies(1) != first
