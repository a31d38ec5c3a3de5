"""The critic's static checks, including adversarial code."""

import pytest

from lero.agents import check_candidate
from lero.agents.critic import Critic
from tests.agents.samples import GOOD_MODULE

OEF = "\n\ndef enhance_observation(obs):\n    return torch.cat([obs, obs[:, :1]], dim=-1)\n"
HRF = "\n\ndef hybrid_reward(ctx):\n    return ctx.env_reward, {}\n"


def rules(source: str) -> set[str]:
    return {v.rule for v in check_candidate(source)}


def test_good_module_passes():
    assert check_candidate(GOOD_MODULE) == []


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ("x = __import__('os')", "forbidden-name"),
        ("x = getattr(torch, '__class__')", "forbidden-name"),
        ("x = open('/etc/passwd').read()", "forbidden-name"),
        ("x = torch.os.system('id')", "denied-attribute"),
        ("x = torch.serialization.os.environ", "denied-attribute"),
        ("x = torch.load('weights.pt')", "denied-attribute"),
        ("x = torch._C", "private-attribute"),
        ("x = ().__class__.__bases__[0].__subclasses__()", "dunder"),
        ("x = eval('1 + 1')", "forbidden-name"),
    ],
)
def test_adversarial_code_in_the_reward_is_caught(body, rule):
    source = f"import torch\n\n\ndef hybrid_reward(ctx):\n    {body}\n    return ctx.env_reward, {{}}\n{OEF}"
    assert rule in rules(source)


def test_foreign_imports_are_caught():
    assert "import" in rules("import os\nimport torch" + HRF + OEF)
    assert "import" in rules("from subprocess import run\nimport torch" + HRF + OEF)


def test_oef_must_use_only_its_observation():
    leaky = (
        "import torch\n\nWORLD = (1.0, 2.0)\n"
        + HRF
        + "\n\ndef helper(x):\n    return x * SCALE\n\n\n"
        "def enhance_observation(obs):\n    return torch.cat([obs, helper(obs[:, :1])], dim=-1)\n"
    )
    assert "oef-globals" in rules(leaky)
    reads_ctx = (
        "import torch"
        + HRF
        + "\n\ndef enhance_observation(obs):\n    return torch.cat([obs, ctx.state['agent_pos'][0]], dim=-1)\n"
    )
    assert "oef-globals" in rules(reads_ctx)


def test_oef_may_use_constants_helpers_and_builtins():
    source = (
        "import torch\n\nRADIUS = 0.15\n"
        + HRF
        + "\n\ndef nearest(rel):\n    return torch.linalg.norm(rel, dim=-1).min(dim=-1, keepdim=True).values * RADIUS\n\n\n"
        "def enhance_observation(obs):\n    n = len(obs)\n    return torch.cat([obs, nearest(obs[:, 4:8].reshape(n, -1, 2))], dim=-1)\n"
    )
    assert check_candidate(source) == []


def test_oef_may_not_modify_obs_in_place():
    source = (
        "import torch"
        + HRF
        + "\n\ndef enhance_observation(obs):\n    obs[:, 0] = 0.0\n    return torch.cat([obs, obs[:, :1]], dim=-1)\n"
    )
    assert "oef-mutates-obs" in rules(source)
    source = (
        "import torch"
        + HRF
        + "\n\ndef enhance_observation(obs):\n    obs.clamp_(-1, 1)\n    return obs\n"
    )
    assert "oef-mutates-obs" in rules(source)


def test_module_level_mutable_state_is_caught():
    assert "module-state" in rules("import torch\nHISTORY = []" + HRF + OEF)
    assert "module-state" in rules("import torch\nCACHE = {'n': 0}" + HRF + OEF)


def test_reward_hacking_is_caught():
    reads_metrics = (
        "import torch\n\n\ndef hybrid_reward(ctx):\n    return ctx.metrics['return'] + ctx.env_reward, {}\n"
        + OEF
    )
    assert "reward-hacking" in rules(reads_metrics)
    evaluator = (
        "import torch\n\n\ndef hybrid_reward(ctx):\n    r = evaluate(ctx)\n    return r, {}\n" + OEF
    )
    assert "reward-hacking" in rules(evaluator)
    writes_ctx = (
        "import torch\n\n\ndef hybrid_reward(ctx):\n    ctx.env_reward.mul_(10)\n    return ctx.env_reward, {}\n"
        + OEF
    )
    assert "reward-hacking" in rules(writes_ctx)


def test_reward_scale_is_caught():
    huge = "import torch\n\n\ndef hybrid_reward(ctx):\n    return 1e6 * ctx.env_reward, {}\n" + OEF
    assert "reward-scale" in rules(huge)
    infinite = (
        "import torch\n\n\ndef hybrid_reward(ctx):\n    return ctx.env_reward.clamp(min=-float('inf')), {}\n"
        + OEF
    )
    assert "reward-scale" in rules(infinite)


def test_missing_function_and_syntax_errors():
    assert "missing-function" in rules("import torch" + HRF)
    assert rules("def hybrid_reward(ctx)\n    return 1\n") == {"syntax"}


def test_a_local_named_like_the_evaluator_is_fine():
    source = (
        "import torch\n\n\ndef hybrid_reward(ctx):\n    metrics = {'env': ctx.env_reward}\n    return ctx.env_reward, metrics\n"
        + OEF
    )
    assert check_candidate(source) == []
    assert "reward-hacking" in rules(
        source.replace(
            "ctx.env_reward, metrics", "ctx.env_reward + ctx.state['x'].fitness, metrics"
        )
    )


def test_a_hallucinated_ctx_field_is_named_with_the_fields_that_exist():
    source = GOOD_MODULE.replace('ctx.state["agent_pos"]', "ctx.agent_positions")
    [violation] = check_candidate(source)
    assert violation.rule == "ctx-field"
    assert "ctx.agent_positions does not exist" in violation.message
    assert "ctx.env_reward" in violation.message and "ctx.state" in violation.message


def test_a_state_key_the_env_does_not_have_is_named_with_its_keys():
    source = GOOD_MODULE.replace('ctx.state["landmark_pos"]', 'ctx.state["landmarks"]')
    assert check_candidate(source) == []  # without the env's fields, keys are not checked
    [violation] = check_candidate(source, ("agent_pos", "agent_vel", "landmark_pos"))
    assert violation.rule == "ctx-field"
    assert "ctx.state['landmarks'] does not exist" in violation.message
    assert "ctx.state['landmark_pos']" in violation.message


def test_the_critic_sends_a_hallucinated_field_back_for_revision_not_rejection(task):
    source = GOOD_MODULE.replace('ctx.state["agent_pos"]', "ctx.agent_pos")
    review = Critic(None).review(task, source)
    assert review.verdict == "revise" and review.rules == ("ctx-field",)
    assert "ctx.next_obs" in review.text  # the designer's revise prompt gets the valid fields
