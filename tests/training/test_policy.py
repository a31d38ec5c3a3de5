"""Policy save / load (weights_only-safe) and load_candidate."""

import pytest
import torch

from lero.training import Hooks, Policy, PolicyMeta, load_candidate, load_policy, save_policy

torch.set_num_threads(1)


def test_save_load_round_trip(tmp_path) -> None:
    meta = PolicyMeta("qmix", 7, 3, 5, 16, "simple_spread", {"N": 3, "num_agent_neighbors": None})
    policy = Policy(meta)
    path = save_policy(policy, tmp_path)
    assert path.name == "policy.pt"
    saved = torch.load(path, weights_only=True)
    assert saved["meta"]["env_kwargs"] == {"N": 3, "num_agent_neighbors": None}
    loaded = load_policy(tmp_path)
    assert loaded.meta == meta
    obs = torch.randn(10, 3, 7)
    assert torch.equal(loaded(obs), policy(obs))
    actions = loaded.act(obs)
    assert actions.shape == (10, 3) and actions.dtype == torch.int64
    assert loaded.act(obs, greedy=False).shape == (10, 3)


def test_bad_policy_files_and_inputs(tmp_path) -> None:
    with pytest.raises(ValueError, match="no policy file"):
        load_policy(tmp_path / "missing.pt")
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="is not a lero policy file"):
        load_policy(garbage)
    policy = Policy(PolicyMeta("mappo", 4, 2, 5, 8, "simple_spread"))
    with pytest.raises(ValueError, match=r"expects obs \[B, 2, 4\]"):
        policy.act(torch.zeros(3, 2, 5))


def test_load_candidate() -> None:
    source = (
        "import torch\n"
        "def hybrid_reward(ctx):\n    return ctx.env_reward, {}\n"
        "def enhance_observation(obs):\n    return torch.cat([obs, obs[:, :1]], dim=1)\n"
    )
    hooks = load_candidate(source)
    assert hooks.enhance_observation(torch.ones(2, 3)).shape == (2, 4)
    assert callable(hooks.hybrid_reward)
    assert load_candidate("x = 1\n") == Hooks()
    with pytest.raises(ZeroDivisionError):
        load_candidate("1 / 0\n")
    with pytest.raises(ValueError, match="not callable"):
        load_candidate("hybrid_reward = 3\n")
