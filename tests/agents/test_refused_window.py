"""A server that states its context window only when it refuses a prompt too long for it
(llama-cpp-python's server): the window is learned from the refusal, the refused request
is fitted again and sent once more, and every later request fits the learned window."""

import math

import pytest

from lero.agents import LLMError, make_team
from lero.agents.offline.designer import OfflineDesigner
from lero.agents.probe import DEFAULT_CONTEXT_TOKENS, REFUSAL_SOURCE, Window, stated_window
from tests.agents.conftest import llm_config
from tests.agents.samples import GOOD_MODULE, markdown_reply
from tests.support.openai_server import OpenAIServer, Reply

SERVER_WINDOW = 2048
CHARS_PER_SERVER_TOKEN = 4.0


def llama_cpp_python_refusal(window: object, prompt_tokens: int, max_tokens: int) -> Reply:
    """The 400 llama-cpp-python 0.3.36's server sends (llama_cpp/server/errors.py,
    `context_length_exceeded`) for a chat prompt of `prompt_tokens` >= its window."""
    message = (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} in the "
        "completion). Please reduce the length of the messages or completion."
    )
    return Reply(status=400, error_message=message)


def refusing_server(server: OpenAIServer, stated: object = SERVER_WINDOW) -> None:
    """Refuses any prompt of SERVER_WINDOW tokens or more, as llama-cpp-python does (it
    counts the prompt only), stating `stated` as its window; answers the rest with distinct modules."""
    server.tokenizer_chars = CHARS_PER_SERVER_TOKEN

    def answer(request: dict) -> Reply:
        tokens = prompt_tokens(request)
        if tokens >= SERVER_WINDOW:
            return llama_cpp_python_refusal(stated, tokens, request["max_tokens"])
        return Reply(content=[markdown_reply(f"{GOOD_MODULE}\nVARIANT = {i}\n") for i in range(request.get("n") or 1)])

    server.script = answer


def prompt_tokens(request: dict) -> int:
    return math.ceil(sum(len(m["content"]) for m in request["messages"]) / CHARS_PER_SERVER_TOKEN)


@pytest.fixture
def long_task(task):
    return task.__class__(**{**vars(task), "env_description": "landmark distances " * 800})


def test_the_window_a_refusal_states_is_learned_and_the_request_sent_again(openai_server, task, long_task):
    refusing_server(openai_server)
    team = make_team(llm_config(openai_server))
    drafts = team.designer.design(long_task, 2, [], "")
    assert len(drafts) == 2 and all(d.code for d in drafts)  # the role went on
    refused, resent = openai_server.requests
    assert prompt_tokens(refused) >= SERVER_WINDOW > prompt_tokens(resent) + resent["max_tokens"]
    assert resent["n"] == 2 and team.designer.model.supports_n  # not taken for a refusal of n
    assert team.designer.model.window() == Window(SERVER_WINDOW, REFUSAL_SOURCE)
    team.critic.review(task, drafts[0].code)  # a later request of another role fits the learned window
    team.designer.design(long_task, 1, [], "")
    later = openai_server.requests[2:]
    assert len(later) == 2 and all(prompt_tokens(r) + r["max_tokens"] <= SERVER_WINDOW for r in later)


def test_a_refusal_without_a_stated_window_stops_as_before(openai_server, long_task):
    openai_server.script = lambda request: Reply(status=400, error_message="prompt too long")
    team = make_team(llm_config(openai_server))
    with pytest.raises(LLMError, match="prompt too long"):
        team.designer.design(long_task, 1, [], "")
    assert len(openai_server.requests) == 1
    assert team.designer.model.window().source == "default"


@pytest.mark.parametrize("stated", [0, 99, 10**30, "2048abc", "many", -2048])
def test_a_hostile_stated_window_is_not_believed(openai_server, long_task, stated):
    refusing_server(openai_server, stated)
    team = make_team(llm_config(openai_server))
    with pytest.raises(LLMError, match="maximum context length"):
        team.designer.design(long_task, 1, [], "")
    assert len(openai_server.requests) == 1
    assert team.designer.model.window() == Window(DEFAULT_CONTEXT_TOKENS, "default")


def test_the_stated_window_is_read_from_either_wording():
    assert stated_window("Requested tokens (2345) exceed context window of 2048") == 2048
    assert stated_window("This model's maximum context length is 8192 tokens. However, ...") == 8192
    assert stated_window("maximum context length is 255 tokens") is None
    assert stated_window("maximum context length is 10000001 tokens") is None
    assert stated_window("Requested tokens (2345) exceed context window of 2048x") is None
    assert stated_window("context window exceeded") is None


def rendered_design(task) -> str:
    """A module lero renders from a grammar draw, with comments that make it about 2,200
    server tokens: too long for a 2048-token window beside any role's instructions."""
    code = OfflineDesigner(seed=0, prior=False).design(task, 1, [], "")[0].code
    return code + "".join(f"# a researcher's note on the design, line {i}\n" for i in range(60))


def verdicts_server(server: OpenAIServer) -> None:
    """`refusing_server`, answering every request it takes with an accepting verdict object."""
    server.tokenizer_chars = CHARS_PER_SERVER_TOKEN

    def answer(request: dict) -> Reply:
        tokens = prompt_tokens(request)
        if tokens >= SERVER_WINDOW:
            return llama_cpp_python_refusal(SERVER_WINDOW, tokens, request["max_tokens"])
        return Reply('{"verdict": "accept", "points": ["covers the landmarks"]}')

    server.script = answer


def test_a_critic_prompt_the_learned_window_cannot_hold_is_made_again_with_the_design_alone(openai_server, task):
    """The refused review's code does not fit the stated window even shortened: the critic
    asks again with the design's JSON alone, as it would have with the window known (the
    run's LLM work goes on; the funnel's first real run without --context-tokens stopped here)."""
    verdicts_server(openai_server)
    calls: list[dict] = []
    team = make_team(llm_config(openai_server, design="structured", context_tokens=8192),
                     on_call=lambda role, info: calls.append(info))
    code = rendered_design(task)
    review = team.critic.review(task, code)
    assert review.verdict == "accept" and review.points == ["covers the landmarks"]
    critic = [call for call in calls if call["role"] == "critic"]
    refused, asked = critic
    assert refused["status"] == "error" and "```python" in refused["prompt"][-1]["content"]
    assert asked["status"] == "ok" and "```python" not in asked["prompt"][-1]["content"]
    assert "Design (JSON)" in asked["prompt"][-1]["content"]
    assert prompt_tokens({"messages": asked["prompt"]}) + asked["max_tokens"] <= SERVER_WINDOW


def test_a_debugger_prompt_the_learned_window_cannot_hold_is_a_failed_repair(openai_server, task):
    verdicts_server(openai_server)
    team = make_team(llm_config(openai_server, context_tokens=8192))
    fix = team.debugger.repair(task, rendered_design(task), "NameError: boom", [])
    assert fix.code is None and "debugger prompt needs about" in fix.error
    assert len(openai_server.requests) == 1  # the refused one: nothing sent that cannot fit


def test_an_edit_prompt_the_learned_window_cannot_hold_is_made_again_for_it(openai_server, long_task):
    """An explore slot's starting module fitted the assumed window, not the 1,600 tokens the
    refusal states: the slot's prompt is made again for that window (another grammar draw,
    else the free-form prompt) instead of the run's LLM work ending."""
    refusing_server(openai_server, stated=1600)
    calls: list[dict] = []
    team = make_team(llm_config(openai_server, design="auto", context_tokens=8192),
                     on_call=lambda role, info: calls.append(info))
    drafts = team.designer.design(long_task, 1, [], "")
    assert drafts and drafts[0].code
    refused, asked = calls
    assert refused["status"] == "error" and "def hybrid_reward(ctx):" in refused["prompt"][-1]["content"]
    assert asked["status"] == "ok" and asked["window"] == 1600
    assert prompt_tokens({"messages": asked["prompt"]}) + asked["max_tokens"] <= 1600
