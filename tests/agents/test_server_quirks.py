"""What real servers do that a plain OpenAI reply does not, against the scripted HTTP server:
context windows they state, no `usage`, chat templates without a system role, replies cut
off at `max_tokens`, `<think>` sections, and the record kept of every request."""

import math
from string import Template

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from lero.agents import LLMError, make_team
from lero.agents.budget import UsageLedger
from lero.agents.debugger import UNCHANGED
from lero.agents.designer import Designer
from lero.agents.extract import CUT_OFF, extract_code
from lero.agents.fit import LEFT_OUT, MIN_REPLY_TOKENS, SHORTENED, PromptTooLarge, messages_tokens
from lero.agents.llm import CONTINUE, ChatModel, about
from lero.agents.probe import DEFAULT_CONTEXT_TOKENS, context_window
from lero.agents.templates import PROMPT_DIR
from tests.agents.conftest import llm_config, texts
from tests.agents.samples import GOOD_MODULE, markdown_reply
from tests.support.openai_server import OpenAIServer, Reply

QUESTION = [SystemMessage("You are the designer"), HumanMessage("write the module")]


def recorded(server: OpenAIServer, **overrides: object) -> tuple[ChatModel, list[dict]]:
    calls: list[dict] = []
    cfg = llm_config(server, **overrides)
    return ChatModel(cfg, UsageLedger(), lambda role, info: calls.append(info)), calls


def test_the_window_comes_from_llama_server_props(openai_server):
    openai_server.props = {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1}
    window = context_window(openai_server.base_url, "test-model", setting=8192)
    assert (window.tokens, window.source) == (2048, "llama-server /props")


def test_the_window_comes_from_vllm_max_model_len(openai_server):
    openai_server.model_fields = {"max_model_len": 4000}
    window = context_window(openai_server.base_url, "test-model", setting=None)
    assert (window.tokens, window.source) == (4000, "vLLM /v1/models")
    assert context_window(openai_server.base_url, "other-model", setting=None).source == "default"


def test_without_a_stated_window_the_setting_then_the_default_is_used(openai_server):
    assert context_window(openai_server.base_url, "test-model", setting=3000).tokens == 3000
    window = context_window(openai_server.base_url, "test-model", setting=None)
    assert (window.tokens, window.source) == (DEFAULT_CONTEXT_TOKENS, "default")


def test_max_tokens_leaves_the_window_room_and_is_recorded(openai_server):
    openai_server.props = {"default_generation_settings": {"n_ctx": 2048}}
    openai_server.push("ok")
    model, calls = recorded(openai_server, reply_tokens=1024)
    texts(model, "critic", QUESTION)
    assert openai_server.requests[0]["max_tokens"] == 512  # a quarter of 2048
    assert calls[0]["window"] == 2048 and calls[0]["window_source"] == "llama-server /props"


def test_tokens_are_estimated_and_marked_when_the_server_sends_no_usage(openai_server):
    openai_server.usage = False
    openai_server.push("a reply of some length")
    model, calls = recorded(openai_server)
    texts(model, "designer", QUESTION)
    assert calls[0]["tokens_estimated"] is True
    assert calls[0]["prompt_tokens"] == messages_tokens(QUESTION) > 0
    assert calls[0]["completion_tokens"] > 0
    assert model.ledger.summary()["prompt_tokens"] == calls[0]["prompt_tokens"]


@pytest.mark.parametrize("status", [400, 500])
def test_a_template_without_a_system_role_gets_it_as_the_first_user_turn(openai_server, status):
    openai_server.reject_system = status
    openai_server.push("first", "second")
    model, calls = recorded(openai_server)
    assert texts(model, "designer", QUESTION) == ["first"]
    assert texts(model, "critic", QUESTION) == ["second"]
    refused, resent, direct = openai_server.requests
    assert refused["messages"][0]["role"] == "system"
    for request in (resent, direct):  # once learnt, no system message is sent again
        assert [m["role"] for m in request["messages"]] == ["user"]
        assert request["messages"][0]["content"] == "You are the designer\n\nwrite the module"
    assert [c["status"] for c in calls] == ["error", "ok", "ok"]  # every attempt on record


def test_a_cut_off_reply_is_asked_once_to_continue(openai_server):
    head, tail = markdown_reply()[:120], markdown_reply()[120:]
    openai_server.push(Reply(content=head, finish_reason="length"), tail)
    model, calls = recorded(openai_server)
    [reply] = model.replies("designer", QUESTION)
    assert reply.text == head + tail and not reply.cut_off
    follow_up = openai_server.requests[1]["messages"]
    assert follow_up[-2] == {"role": "assistant", "content": head}
    assert follow_up[-1] == {"role": "user", "content": CONTINUE}
    assert [c["finish_reasons"] for c in calls] == [["length"], ["stop"]]


def test_a_reply_cut_off_twice_is_a_draft_that_says_so(openai_server, task):
    cut = Reply(content="```python\nimport torch\n\ndef hybrid_reward(ctx):\n    d = (", finish_reason="length")
    openai_server.push(cut, Reply(content="ctx.obs", finish_reason="length"))
    [draft] = make_team(llm_config(openai_server)).designer.design(task, 1, [], "")
    assert draft.code is None and draft.error == CUT_OFF
    assert len(openai_server.requests) == 2  # one continuation, no more


def test_think_sections_are_not_the_answer(openai_server, task):
    thinking = "<think>maybe\n```python\ndef hybrid_reward(ctx):\n    return 0\n```\n</think>\n"
    assert extract_code(thinking + markdown_reply()) == GOOD_MODULE
    assert extract_code("<think>cut off while thinking ```python\ndef hybrid_reward(ctx):") is None
    openai_server.push("<think>VERDICT: reject it?</think>\nVERDICT: accept\n- fine")
    review = make_team(llm_config(openai_server)).critic.review(task, GOOD_MODULE)
    assert review.verdict == "accept" and review.points == ["fine"]


def test_every_request_is_recorded_with_prompt_reply_tokens_and_candidate(openai_server):
    openai_server.push(Reply(content=["a b", "c"]))
    model, calls = recorded(openai_server)
    with about("0-1"):
        texts(model, "designer", QUESTION, 2)
    [call] = calls
    assert call["candidate_id"] == "0-1" and call["role"] == "designer" and call["status"] == "ok"
    assert call["prompt"] == [{"role": "system", "content": "You are the designer"},
                              {"role": "user", "content": "write the module"}]
    assert call["replies"] == ["a b", "c"] and call["finish_reasons"] == ["stop", "stop"]
    assert (call["prompt_tokens"], call["completion_tokens"], call["tokens_estimated"]) == (7, 3, False)  # words, as the scripted server counts
    assert call["elapsed_s"] >= 0 and call["max_tokens"] > 0


def test_designer_prompt_is_shortened_env_first_and_keeps_the_contract(openai_server, task):
    long_task = task.__class__(**{**vars(task), "env_description": "env line\n" * 2000})
    openai_server.props = {"default_generation_settings": {"n_ctx": 2048}}
    openai_server.push(markdown_reply())
    team = make_team(llm_config(openai_server))
    [draft] = team.designer.design(long_task, 1, [], "")
    assert draft.code == GOOD_MODULE
    system, user = openai_server.requests[0]["messages"]
    assert "Only `math`, `numpy` and" in system["content"]  # the contract, whole
    assert SHORTENED.strip() in user["content"] and task.task in user["content"]
    sent = [SystemMessage(system["content"]), HumanMessage(user["content"])]
    assert messages_tokens(sent) <= 2048 - openai_server.requests[0]["max_tokens"]


def test_code_too_long_for_the_window_fails_that_candidate_not_the_run(openai_server, task):
    openai_server.props = {"default_generation_settings": {"n_ctx": 1024}}
    team = make_team(llm_config(openai_server))
    huge = GOOD_MODULE + "\n\nTABLE = (" + "0.5, " * 1500 + ")\n"  # the code itself cannot be shortened
    review = team.critic.review(task, huge)
    assert review.verdict == "accept" and review.by == "gate"  # the static checks decide, and say why
    assert any("no LLM review" in p and "--context-tokens" in p for p in review.points)
    revised = team.designer.revise(task, huge, review)
    repaired = team.debugger.repair(task, huge, "RuntimeError: x", [])
    for draft in (revised, repaired):
        assert draft.code is None and "--context-tokens" in draft.error
    assert openai_server.requests == []  # nothing the server would refuse was sent
    openai_server.props = None
    tiny = make_team(llm_config(openai_server, context_tokens=256))
    with pytest.raises(LLMError, match="larger window"):  # not even the contract fits: the run stops
        tiny.designer.design(task, 1, [], "")


def test_a_continuation_is_sized_from_the_servers_own_counts(openai_server):
    openai_server.props = {"default_generation_settings": {"n_ctx": 2048}}
    # the scripted server counts words: 7 prompt + 1500 reply words leave 2048 - 1507 - the request to continue
    openai_server.push(Reply(content="x " * 1500, finish_reason="length"), "done")
    model, _ = recorded(openai_server)
    [reply] = model.replies("designer", QUESTION)
    assert reply.text.endswith("done")
    continue_tokens = messages_tokens([HumanMessage(CONTINUE)])  # 7 prompt tokens are too few to calibrate
    assert openai_server.requests[1]["max_tokens"] == 2048 - 1507 - continue_tokens - 8


def test_the_debugger_prompt_names_the_ctx_fields_even_when_the_env_is_left_out(openai_server, task):
    spread = task.__class__(**{**vars(task), "env_description": "x\n" * 4000})
    openai_server.props = {"default_generation_settings": {"n_ctx": 2048}}
    openai_server.push(markdown_reply())
    make_team(llm_config(openai_server)).debugger.repair(spread, GOOD_MODULE, "KeyError: 'landmarks'", [])
    user = openai_server.requests[0]["messages"][1]["content"]
    assert LEFT_OUT in user or SHORTENED.strip() in user
    assert "ctx.state['agent_pos']" in user and "ctx.state['landmark_pos']" in user and "ctx.env_reward" in user


def test_the_characters_per_token_are_learnt_from_the_servers_count(openai_server, task):
    openai_server.props = {"default_generation_settings": {"n_ctx": 4096}}
    openai_server.push("VERDICT: accept", markdown_reply())
    team = make_team(llm_config(openai_server))
    long_task = task.__class__(**{**vars(task), "env_description": "landmark distances " * 800})
    team.critic.review(task, GOOD_MODULE)  # the scripted server counts words: ~6 characters each
    model = team.designer.model
    sent = openai_server.requests[0]["messages"]
    chars = sum(len(m["content"]) for m in sent)
    words = sum(len(m["content"].split()) for m in sent)
    assert model.chars_per_token == pytest.approx(0.9 * chars / words)
    uncalibrated = Designer(model=None, temperature=0.0).design_prompt(long_task, [], "", None, None, 1).messages
    budget = 4096 - model.reply_tokens()
    assert messages_tokens(uncalibrated) > budget >= messages_tokens(uncalibrated, model.chars_per_token)
    team.designer.design(long_task, 1, [], "")
    assert SHORTENED.strip() not in openai_server.requests[1]["messages"][1]["content"]


def test_a_server_with_a_tokenizer_counts_the_first_prompt_before_it_is_sent(openai_server, task):
    """llama-cpp-python's `/extras/tokenize/count`: the first prompt is fitted with the
    server's own count (so a long one is not shortened on the 3.2 estimate); without the
    route the estimate stands until a reply's usage counts one."""
    openai_server.props = {"default_generation_settings": {"n_ctx": 4096}}
    long_task = task.__class__(**{**vars(task), "env_description": "landmark distances " * 600})
    uncalibrated = Designer(model=None, temperature=0.0).design_prompt(long_task, [], "", None, None, 1).messages
    openai_server.push(markdown_reply(), markdown_reply())
    without = make_team(llm_config(openai_server)).designer
    without.design(long_task, 1, [], "")
    assert SHORTENED.strip() in openai_server.requests[0]["messages"][1]["content"]  # the estimate: too long
    openai_server.tokenizer_chars = 6.0
    team = make_team(llm_config(openai_server))
    team.designer.design(long_task, 1, [], "")
    chars = sum(len(str(m.content)) for m in uncalibrated)
    assert team.designer.model.chars_per_token == pytest.approx(0.9 * chars / math.ceil(chars / 6.0))
    assert openai_server.requests[1]["messages"][1]["content"] == uncalibrated[1].content  # sent whole


def test_a_debugger_that_echoes_the_failing_code_is_a_stated_failure(openai_server, task):
    openai_server.push(markdown_reply(GOOD_MODULE.replace("0.5 * team", "0.5  *  team")))  # layout only
    draft = make_team(llm_config(openai_server)).debugger.repair(task, GOOD_MODULE, "RuntimeError: x", [])
    assert draft.code is None and draft.error == UNCHANGED


def test_the_assistants_conversation_drops_its_oldest_turns_to_fit_the_window(openai_server):
    """Ten long turns overflow a 1024-token window: the oldest go whole (a tool result never
    loses its call), the system prompt and the latest turn stay; the record says `history`."""
    openai_server.props = {"default_generation_settings": {"n_ctx": 1024}}
    records = []
    team = make_team(llm_config(openai_server), on_call=lambda role, info: records.append(info))
    call = {"name": "show_spec", "args": {}, "id": "call_0"}
    history = []
    for turn in range(10):
        history += [HumanMessage(f"turn {turn}: " + "tell me more " * 60),
                    AIMessage("", tool_calls=[{**call, "id": f"call_{turn}"}]),
                    ToolMessage("spec " * 40, tool_call_id=f"call_{turn}"), AIMessage(f"answer {turn}")]
    history.append(HumanMessage("the last question"))
    openai_server.push("fine")
    assert team.assistant.chat(history).content == "fine"
    sent = openai_server.requests[0]["messages"]
    assert sent[0]["role"] == "system" and sent[0]["content"].startswith("You are the experiment assistant")
    assert sent[-1] == {"role": "user", "content": "the last question"}
    assert sent[1]["role"] == "user" and "turn 0" not in str(sent)  # whole turns, oldest first
    assert len(sent) < 1 + len(history)
    assert records[-1]["shortened"] == ["history"] and records[-1]["prompt_estimate"] <= 1024 - 256
    short = [HumanMessage("hello")]
    openai_server.push("hi")
    team.assistant.chat(short)
    assert len(openai_server.requests[1]["messages"]) == 2 and records[-1]["shortened"] == []
    openai_server.push("never sent")
    with pytest.raises(LLMError, match="--context-tokens"):  # one turn larger than the window
        team.assistant.chat([HumanMessage("x " * 5000)])
    assert len(openai_server.requests) == 2


def test_a_prompt_too_long_for_a_full_reply_takes_room_from_the_reply_down_to_its_floor(openai_server):
    """A prompt that does not fit beside a quarter-window reply even shortened is sent with
    a smaller max_tokens (the room left, at least MIN_REPLY_TOKENS) instead of failing; one
    that leaves less than that floor still fails, naming the window."""
    openai_server.props = {"default_generation_settings": {"n_ctx": 1024}}
    openai_server.push("ok")
    model, calls = recorded(openai_server, reply_tokens=1024)
    contract = "Write the module. " * 130  # the system prompt is never shortened: ~730 tokens here
    names = Template((PROMPT_DIR / "designer_user.md").read_text()).get_identifiers()
    values = {**dict.fromkeys(names, "x"), "env_description": "env line\n" * 400}
    fitted = model.fit("designer", contract, "designer_user", values)
    assert 1024 - 256 < fitted.prompt_tokens <= 1024 - MIN_REPLY_TOKENS  # a quarter-window reply would not fit
    assert "env_description" in fitted.shortened and LEFT_OUT in str(fitted.messages[-1].content)
    assert texts(model, "designer", fitted.messages) == ["ok"]
    assert openai_server.requests[0]["max_tokens"] == calls[0]["max_tokens"] == 1024 - fitted.prompt_tokens
    with pytest.raises(PromptTooLarge, match="leaves 768 for it"):
        model.fit("designer", contract * 2, "designer_user", values)
