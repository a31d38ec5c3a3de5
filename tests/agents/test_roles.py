"""Designer, critic, debugger and assistant over HTTP against the scripted server."""

import pytest
from langchain_core.tools import tool

from lero.agents import BudgetExceeded, Elite, Review, make_team
from tests.agents.conftest import llm_config
from tests.agents.samples import GOOD_MODULE, markdown_reply
from tests.support.openai_server import OpenAIServer, Reply

OTHER_MODULE = """import torch


def hybrid_reward(ctx):
    collide = (torch.cdist(ctx.state["agent_pos"], ctx.state["agent_pos"]) < 0.3).float().sum(-1) - 1.0
    return ctx.env_reward - 0.2 * collide, {"collide": collide}


def enhance_observation(obs):
    speed = torch.linalg.norm(obs[:, 0:2], dim=-1, keepdim=True)
    return torch.cat([obs, speed, speed * speed], dim=-1)
"""


def test_designer_returns_k_drafts_and_routes_replies_without_code(openai_server, task):
    openai_server.push(
        Reply(content=[markdown_reply(), markdown_reply(OTHER_MODULE), "Sorry, I am not sure."])
    )
    team = make_team(llm_config(openai_server))
    drafts = team.designer.design(task, 3, elites=[], reflection="")
    assert [d.code for d in drafts[:2]] == [GOOD_MODULE, OTHER_MODULE]
    assert drafts[2].code is None and drafts[2].error
    request = openai_server.requests[0]
    assert request["n"] == 3
    system, user = request["messages"][0]["content"], request["messages"][1]["content"]
    assert system.startswith("You are the designer")
    assert "def enhance_observation" in system  # the contract
    assert task.env_description in user and task.task in user and "first generation" in user


def test_designer_drops_only_semantic_duplicates_and_asks_again(openai_server, task):
    renamed = GOOD_MODULE.replace("# [B, N, L]", "# distances").replace("dist", "gap")  # same AST
    refined = GOOD_MODULE.replace("0.5 * team", "0.4 * team")  # a refinement: kept
    openai_server.push(
        Reply(content=[markdown_reply(), markdown_reply(renamed), markdown_reply(refined)]),
        markdown_reply(OTHER_MODULE),
    )
    drafts = make_team(llm_config(openai_server)).designer.design(task, 3, elites=[], reflection="")
    assert [d.code for d in drafts] == [GOOD_MODULE, refined, OTHER_MODULE]
    assert openai_server.requests[1]["n"] == 1


def test_exploit_prompt_shows_the_elite_and_explore_prompt_a_summary_each_section_once(openai_server, task):
    openai_server.push(markdown_reply(OTHER_MODULE), markdown_reply(GOOD_MODULE.replace("0.5 * team", "0.3 * team")))
    elite = Elite("0-1", GOOD_MODULE, -40.5, {"coverage": 0.05}, {}, "team dominated own by 10x")
    drafts = make_team(llm_config(openai_server)).designer.design(
        task, 2, [elite], reflection="coverage stayed near 0", feedback="agents collide too much", exploit=1
    )
    assert [(d.kind, d.parents) for d in drafts] == [("exploit", ("0-1",)), ("explore", ())]
    exploit, explore = (r["messages"][1]["content"] for r in openai_server.requests)
    for text in (exploit, explore):
        for once in ("-40.5", "coverage stayed near 0", "agents collide too much", "# Tips",
                     "# Feedback from the researcher"):
            assert text.count(once) == 1, once
    assert "0.5 * team" in exploit and "team dominated own by 10x" in exploit and "Refine elite 0-1" in exploit
    assert "0.5 * team" not in explore and "team dominated own by 10x" not in explore
    assert "differs from the elites" in explore


def test_designer_revise_sends_the_review(openai_server, task):
    openai_server.push(markdown_reply(OTHER_MODULE))
    review = Review(
        "revise",
        ["the team term swamps the individual term"],
        "VERDICT: revise\n- the team term swamps the individual term",
    )
    draft = make_team(llm_config(openai_server)).designer.revise(task, GOOD_MODULE, review)
    assert draft.code == OTHER_MODULE and draft.origin == "designer:revise"
    assert "swamps" in openai_server.requests[0]["messages"][1]["content"]


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("VERDICT: accept\n- fine", "accept"),
        ("**VERDICT: Revise**\n1. scale the team term down\n2. drop the constant", "revise"),
        ("verdict: reject\n- rewards the metric directly", "reject"),
        ("Looks good to me.", "revise"),
    ],
)
def test_critic_parses_the_verdict(openai_server, task, reply, verdict):
    openai_server.push(reply)
    review = make_team(llm_config(openai_server)).critic.review(task, GOOD_MODULE)
    assert review.verdict == verdict
    assert review.points
    assert openai_server.requests[0]["messages"][0]["content"].startswith("You are the critic")


def test_critic_points_are_the_listed_lines(openai_server, task):
    openai_server.push("VERDICT: revise\n- scale the team term down\n- drop the constant")
    review = make_team(llm_config(openai_server)).critic.review(task, GOOD_MODULE)
    assert review.points == ["scale the team term down", "drop the constant"]


def test_critic_static_checks_spend_no_request(openai_server, task):
    team = make_team(llm_config(openai_server))
    hostile = GOOD_MODULE.replace("team = -dist", "team = torch.os.system('id') - dist")
    assert team.critic.review(task, hostile).verdict == "reject"
    clumsy = "import random\n" + GOOD_MODULE
    review = team.critic.review(task, clumsy)
    assert review.verdict == "revise" and any("random" in p for p in review.points)
    assert openai_server.requests == []


def test_debugger_sees_trimmed_error_and_its_history(openai_server, task):
    openai_server.push(markdown_reply(GOOD_MODULE))
    traceback = (
        "Traceback (most recent call last):\n"
        + "".join(f'  File "torch.py", line {i}\n' for i in range(200))
        + "RuntimeError: shape mismatch [4, 3] vs [4]"
    )
    history = [(OTHER_MODULE, "HookError: enhance_observation changed the first D columns")]
    draft = make_team(llm_config(openai_server)).debugger.repair(
        task, OTHER_MODULE, traceback, history
    )
    assert draft.code == GOOD_MODULE and draft.origin == "debugger"
    request = openai_server.requests[0]
    user = request["messages"][1]["content"]
    assert request["messages"][0]["content"].startswith("You are the debugger")
    assert "has the following error" in user and "shape mismatch [4, 3] vs [4]" in user
    assert "line 5\n" not in user  # the middle of the traceback was trimmed
    assert "changed the first D columns" in user  # the earlier failed attempt


@tool
def start_run(generations: int) -> str:
    """Start a lero run with this many generations."""
    return f"started {generations}"


def test_assistant_tool_calls(openai_server):
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "start_run", "arguments": '{"generations": 3}'},
    }
    openai_server.push(Reply(content="", tool_calls=[call]))
    message = make_team(llm_config(openai_server)).assistant.chat(
        [{"role": "user", "content": "run 3 generations"}], [start_run]
    )
    assert message.tool_calls[0]["name"] == "start_run" and message.tool_calls[0]["args"] == {
        "generations": 3
    }
    request = openai_server.requests[0]
    assert request["tools"][0]["function"]["name"] == "start_run"
    assert request["messages"][0]["content"].startswith("You are the experiment assistant")


def test_assistant_falls_back_to_plain_text_without_tool_support(openai_server):
    openai_server.push(
        Reply(status=400, error_message="tools are not supported by this model"),
        "Run lero run --generations 3.",
    )
    team = make_team(llm_config(openai_server))
    message = team.assistant.chat([{"role": "user", "content": "run 3 generations"}], [start_run])
    assert message.content == "Run lero run --generations 3." and not message.tool_calls
    assert "tools" not in openai_server.requests[1]


def test_offline_team_has_no_assistant_and_no_requests(task):
    from lero.agents import LLMConfig

    team = make_team(LLMConfig())
    assert team.assistant is None
    drafts = team.designer.design(task, 2, [], "")
    assert all(team.critic.review(task, d.code).verdict == "accept" for d in drafts)
    assert team.usage()["requests"] == 0


def test_server_models_endpoint_lists_models():
    import httpx

    with OpenAIServer(model_ids=("a", "b")) as server:
        body = httpx.get(f"{server.base_url}/models").json()
    assert [m["id"] for m in body["data"]] == ["a", "b"]


def test_designer_keeps_drafts_when_the_budget_runs_out_mid_call(openai_server, task):
    openai_server.push(Reply(content=[markdown_reply(), markdown_reply()]))
    team = make_team(llm_config(openai_server, max_requests=1))
    drafts = team.designer.design(task, 2, elites=[], reflection="")
    assert [d.code for d in drafts] == [
        GOOD_MODULE
    ]  # the duplicate was dropped, no budget to ask again
    with pytest.raises(BudgetExceeded):
        team.designer.design(task, 2, elites=[], reflection="")
