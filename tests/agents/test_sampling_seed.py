"""`--designer-seed` seeds the model's sampling too: every request carries a `seed` drawn from
the run's seed, the role, the prompt and how often that prompt went out before, so a run
repeated with the same seed asks for the same replies (tests against the scripted server;
the real server's determinism is in test_real_llm.py)."""

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from lero.agents import LLMError
from lero.agents.budget import UsageLedger
from lero.agents.llm import ChatModel
from lero.agents.sampling import prompt_digest, sampling_seed
from tests.agents.conftest import llm_config, texts
from tests.support.openai_server import OpenAIServer, Reply

QUESTION = [SystemMessage("You are the designer"), HumanMessage("write the module")]
OTHER = [SystemMessage("You are the designer"), HumanMessage("write another module")]


def model_for(server: OpenAIServer, seed: int, calls: list[dict] | None = None) -> ChatModel:
    record = None if calls is None else (lambda role, info: calls.append(info))
    return ChatModel(llm_config(server, seed=seed), UsageLedger(), record)


def sent_seeds(server: OpenAIServer) -> list[int | None]:
    return [request.get("seed") for request in server.requests]


def test_a_repeated_run_sends_the_same_seeds_and_another_run_seed_other_ones(openai_server):
    openai_server.script = lambda request: Reply("ok")
    for seed in (0, 0, 7):
        model = model_for(openai_server, seed)
        texts(model, "designer", QUESTION)
        texts(model, "designer", QUESTION)  # the same prompt again: another draw
        texts(model, "critic", QUESTION)  # the same prompt from another role
        texts(model, "designer", OTHER)
    first, again, other = (sent_seeds(openai_server)[i:i + 4] for i in (0, 4, 8))
    assert first == again  # same run seed, same roles and prompts: the same sampling
    assert len(set(first)) == 4  # each send of the run is its own draw
    assert not set(other) & set(first)  # --designer-seed 7 draws other replies
    assert all(isinstance(seed, int) and 0 <= seed < 2**31 for seed in first + other)
    assert first[0] == sampling_seed(0, prompt_digest("designer", QUESTION), 0)
    assert first[1] == sampling_seed(0, prompt_digest("designer", QUESTION), 1)


def test_replies_asked_one_request_each_get_one_seed_each(openai_server):
    openai_server.honour_n = False
    openai_server.script = lambda request: Reply("one")
    calls: list[dict] = []
    model = model_for(openai_server, 3, calls)
    assert texts(model, "designer", QUESTION, n=3) == ["one", "one", "one"]
    seeds = sent_seeds(openai_server)
    assert len(seeds) == 3 and len(set(seeds)) == 3
    assert [call["seed"] for call in calls] == seeds  # the record names each request's seed


def test_a_retried_request_keeps_its_seed(openai_server):
    openai_server.push(Reply(status=503), Reply("after the retry"))
    model = model_for(openai_server, 5)
    assert texts(model, "designer", QUESTION) == ["after the retry"]
    refused, retried = sent_seeds(openai_server)
    assert refused == retried == sampling_seed(5, prompt_digest("designer", QUESTION), 0)


def test_a_server_that_refuses_a_seed_is_asked_without_one_from_then_on(openai_server):
    def refuse_seeds(request: dict) -> Reply:
        if "seed" in request:
            return Reply(status=400, error_message="Unrecognized request argument supplied: seed")
        return Reply("unseeded")

    openai_server.script = refuse_seeds
    calls: list[dict] = []
    model = model_for(openai_server, 1, calls)
    assert texts(model, "designer", QUESTION) == ["unseeded"]
    assert texts(model, "critic", OTHER) == ["unseeded"]
    assert ["seed" in request for request in openai_server.requests] == [True, False, False]
    assert [call["status"] for call in calls] == ["error", "ok", "ok"]


def test_another_refusal_is_not_taken_for_a_refused_seed(openai_server):
    openai_server.push(Reply(status=400, error_message="max_tokens is too large"))
    model = model_for(openai_server, 1)
    with pytest.raises(LLMError, match="max_tokens is too large"):
        texts(model, "designer", QUESTION)
    assert len(openai_server.requests) == 1 and model.sends_seed
