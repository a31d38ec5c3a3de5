"""The model layer against a real local OpenAI-compatible HTTP server."""

import logging

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from lero.agents import BudgetExceeded, LLMConfig, LLMError, make_team
from lero.agents.budget import UsageLedger
from lero.agents.llm import ChatModel
from lero.agents.llm_config import _announce_offline_default
from tests.agents.conftest import llm_config, texts
from tests.agents.samples import markdown_reply
from tests.support.openai_server import OpenAIServer, Reply

QUESTION = [SystemMessage("You are the designer"), HumanMessage("write the module")]


def make_model(server: OpenAIServer, calls: list | None = None, **overrides: object) -> ChatModel:
    cfg = llm_config(server, **overrides)
    on_call = None if calls is None else (lambda role, info: calls.append(info))
    return ChatModel(cfg, UsageLedger(cfg.max_requests, cfg.max_tokens), on_call)


def test_reply_text_and_request_shape(openai_server):
    openai_server.push(markdown_reply())
    model = make_model(openai_server)
    assert texts(model, "designer", QUESTION) == [markdown_reply()]
    request = openai_server.requests[0]
    assert request["model"] == "test-model"
    assert request["messages"][0] == {"role": "system", "content": "You are the designer"}
    assert request["temperature"] == pytest.approx(0.8)


def test_n_choices_in_one_request(openai_server):
    openai_server.push(Reply(content=["a", "b", "c"]))
    assert texts(make_model(openai_server), "designer", QUESTION, n=3) == ["a", "b", "c"]
    assert len(openai_server.requests) == 1
    assert openai_server.requests[0]["n"] == 3


def test_server_ignoring_n_gets_one_request_per_reply():
    with OpenAIServer(honour_n=False) as server:
        server.push("one", "two", "three")
        model = make_model(server)
        assert texts(model, "designer", QUESTION, n=3) == ["one", "two", "three"]
        assert [r.get("n") for r in server.requests] == [3, 1, 1]


def test_server_refusing_n_falls_back_to_single_requests(openai_server):
    openai_server.push(Reply(status=400, error_message="n > 1 is not supported"), "x", "y")
    assert texts(make_model(openai_server), "designer", QUESTION, n=2) == ["x", "y"]
    assert [r.get("n") for r in openai_server.requests] == [2, 1, 1]


def test_429_honours_retry_after(openai_server):
    openai_server.push(Reply(status=429, headers={"Retry-After": "1"}), "done")
    calls: list = []
    model = make_model(openai_server, calls, retry_base_s=0.001)
    assert texts(model, "critic", QUESTION) == ["done"]
    assert len(openai_server.requests) == 2
    assert calls[-1]["attempts"] == 2
    assert calls[-1]["elapsed_s"] >= 0.9  # waited what the server asked, not the 1 ms backoff


def test_500_then_success(openai_server):
    openai_server.push(Reply(status=500), Reply(status=503), "recovered")
    assert texts(make_model(openai_server), "critic", QUESTION) == ["recovered"]
    assert len(openai_server.requests) == 3


def test_transient_failures_exhaust_retries(openai_server):
    openai_server.push(*[Reply(status=502) for _ in range(3)])
    with pytest.raises(LLMError, match=r"after 3 attempt\(s\): HTTP 502"):
        texts(make_model(openai_server, max_retries=2), "critic", QUESTION)


def test_a_timed_out_request_is_not_sent_again_to_a_server_that_cannot_say_it_is_idle(openai_server):
    openai_server.push(Reply(content="late", delay_s=3.0), "would be a second copy")
    calls: list = []
    with pytest.raises(LLMError, match=r"timed out after 0.5 s \(raise --llm-timeout"):
        texts(make_model(openai_server, calls, timeout_s=0.5), "designer", QUESTION)
    assert len(openai_server.requests) == 1  # the busy server got no second copy
    assert calls[-1]["status"] == "error" and calls[-1]["attempts"] == 1


def test_after_a_timeout_the_request_waits_until_the_slots_are_idle(openai_server):
    polls = iter([True, True, True, False])  # llama-server still computing the abandoned reply
    openai_server.slots = lambda: [{"id": 0, "is_processing": next(polls, False)}]
    openai_server.push(Reply(content="late", delay_s=3.0), "in time")
    waits: list[float] = []
    cfg = llm_config(openai_server, timeout_s=0.5)
    model = ChatModel(cfg, UsageLedger(), sleep=waits.append)
    assert texts(model, "designer", QUESTION) == ["in time"]
    assert len(openai_server.requests) == 2
    assert openai_server.slot_polls == 4 and len(waits) == 2  # resent only once a poll said idle


def test_stalled_every_time_fails_with_one_line(openai_server):
    openai_server.push(*[Reply(content="late", delay_s=2.0) for _ in range(2)])
    with pytest.raises(LLMError, match="timed out") as caught:
        texts(make_model(openai_server, timeout_s=0.5, max_retries=1), "designer", QUESTION)
    assert "\n" not in str(caught.value)


def test_401_fails_at_once_without_retry(openai_server):
    openai_server.push(Reply(status=401, error_message="invalid api key"), "never sent")
    with pytest.raises(LLMError, match=r"HTTP 401.*OPENAI_API_KEY") as caught:
        texts(make_model(openai_server), "designer", QUESTION)
    assert len(openai_server.requests) == 1
    assert "\n" not in str(caught.value)


def test_unknown_model_404_fails_at_once(openai_server):
    openai_server.push(Reply(status=404, error_message="model 'nope' does not exist"))
    with pytest.raises(LLMError, match="HTTP 404"):
        texts(make_model(openai_server), "designer", QUESTION)
    assert len(openai_server.requests) == 1


def test_token_accounting_per_role(openai_server):
    openai_server.push("one two three", Reply(content=["a b", "c d"]), "e")
    calls: list = []
    team = make_team(
        llm_config(openai_server), on_call=lambda role, info: calls.append((role, info))
    )
    model = team.critic.model
    texts(model, "designer", [HumanMessage("four words of prompt")])
    texts(model, "designer", [HumanMessage("two words")], n=2)
    texts(model, "critic", [HumanMessage("x")])
    usage = team.usage()
    assert usage["by_role"]["designer"] == {
        "requests": 2,
        "prompt_tokens": 6,
        "completion_tokens": 7,
    }
    assert usage["by_role"]["critic"] == {"requests": 1, "prompt_tokens": 1, "completion_tokens": 1}
    assert (usage["requests"], usage["prompt_tokens"], usage["completion_tokens"]) == (3, 7, 8)
    assert [role for role, _ in calls] == ["designer", "designer", "critic"]
    assert calls[0][1]["status"] == "ok" and calls[0][1]["prompt_tokens"] == 4


def test_request_budget_stops_generation(openai_server):
    openai_server.push("a", "b", "c")
    model = make_model(openai_server, max_requests=2)
    texts(model, "designer", QUESTION)
    texts(model, "designer", QUESTION)
    with pytest.raises(BudgetExceeded, match="request budget"):
        texts(model, "designer", QUESTION)
    assert len(openai_server.requests) == 2


def test_token_budget_stops_generation(openai_server):
    openai_server.push("many words in this reply", "more")
    model = make_model(openai_server, max_tokens=5)
    texts(model, "designer", QUESTION)
    with pytest.raises(BudgetExceeded, match="token budget"):
        texts(model, "designer", QUESTION)


def test_from_spec_reads_environment(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    cfg = LLMConfig.from_spec("openai:qwen2.5-coder")
    assert (cfg.backend, cfg.model, cfg.base_url) == (
        "openai",
        "qwen2.5-coder",
        "http://127.0.0.1:9/v1",
    )
    assert cfg.api_key is not None and cfg.api_key.get_secret_value()  # dummy key for local servers
    assert "sk-" not in repr(cfg)


def test_from_spec_rejects_bad_input(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="expected 'offline' or 'openai:MODEL'"):
        LLMConfig.from_spec("anthropic:claude")
    with pytest.raises(ValueError, match="needs OPENAI_API_KEY"):
        LLMConfig.from_spec("openai:gpt-4o")


def test_offline_is_the_default_without_credentials(monkeypatch, caplog):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    _announce_offline_default.cache_clear()
    with caplog.at_level(logging.WARNING, logger="lero.agents.llm_config"):
        assert LLMConfig.from_spec(None).backend == "offline"
        assert LLMConfig.from_spec(None).backend == "offline"
    assert sum("offline designer" in r.message for r in caplog.records) == 1


def test_reply_without_choices_is_an_error(openai_server):
    empty = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "test-model",
        "choices": [],
    }
    openai_server.push(Reply(body=empty))
    with pytest.raises(LLMError, match="no choices"):
        texts(make_model(openai_server), "designer", QUESTION)


def test_malformed_json_body_is_an_error(openai_server):
    openai_server.push(Reply(body={"unexpected": True}))
    with pytest.raises(LLMError, match="designer LLM request failed"):
        texts(make_model(openai_server), "designer", QUESTION)
