"""Trusted evaluation: metric semantics, OEF applied, native reward whatever was trained."""

import pytest
import torch

from lero.training import Policy, PolicyMeta, evaluate, make_env

torch.set_num_threads(1)


def constant_policy(action: int, obs_dim: int, n_agents: int = 3) -> Policy:
    policy = Policy(PolicyMeta("mappo", obs_dim, n_agents, 5, 8, "simple_spread"))
    last = policy.net[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.zero_()
        last.bias[action] = 1.0
    return policy


def test_noop_policy_never_covers_from_random_starts() -> None:
    obs_dim = make_env("simple_spread", 1).obs_dim
    metrics = evaluate(constant_policy(0, obs_dim), "simple_spread", {}, episodes=512)
    assert set(metrics) == {"return", "coverage", "occupied", "collisions"}
    assert metrics["coverage"] == 0.0
    assert 0.0 <= metrics["occupied"] < 0.2
    assert metrics["collisions"] >= 0.0
    assert -60.0 < metrics["return"] < -10.0


def test_moving_away_is_worse_than_standing_still() -> None:
    obs_dim = make_env("simple_spread", 1).obs_dim
    still = evaluate(constant_policy(0, obs_dim), "simple_spread", {}, episodes=256)
    drifting = evaluate(constant_policy(1, obs_dim), "simple_spread", {}, episodes=256)
    assert drifting["return"] < still["return"] - 5


def test_oef_is_applied_per_agent_row_at_evaluation() -> None:
    env_kwargs = {"N": 2, "num_landmark_neighbors": 1}
    obs_dim = make_env("simple_spread", 1, **env_kwargs).obs_dim
    seen_rows = []

    def oef(obs):
        seen_rows.append(obs.shape[0])
        return torch.cat([obs, torch.ones(obs.shape[0], 2)], dim=1)

    policy = constant_policy(0, obs_dim + 2, n_agents=2)
    metrics = evaluate(policy, "simple_spread", env_kwargs, enhance_observation=oef, episodes=64)
    assert seen_rows and set(seen_rows) == {64 * 2}
    assert metrics["coverage"] == 0.0
    with pytest.raises(ValueError, match=r"Policy\.act expects obs"):
        evaluate(policy, "simple_spread", env_kwargs, episodes=64)


def test_same_seed_same_metrics_and_bad_episodes_rejected() -> None:
    obs_dim = make_env("simple_spread", 1).obs_dim
    policy = constant_policy(2, obs_dim)
    assert evaluate(policy, "simple_spread", {}, episodes=32) == evaluate(
        policy, "simple_spread", {}, episodes=32
    )
    with pytest.raises(ValueError, match="episodes must be a positive int"):
        evaluate(policy, "simple_spread", {}, episodes=0)
