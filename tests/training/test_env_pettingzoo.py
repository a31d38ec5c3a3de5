"""The PettingZoo ParallelEnv view of one batch slot."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from pettingzoo.test import parallel_api_test

from lero.training.envs import make_env
from lero.training.envs.pettingzoo_view import ParallelView

torch.set_num_threads(1)


@pytest.mark.parametrize("kwargs", [{}, dict(N=4, num_agent_neighbors=1, num_landmark_neighbors=2)])
def test_parallel_api(kwargs: dict) -> None:
    parallel_api_test(ParallelView(make_env("simple_spread", 1, **kwargs)), num_cycles=60)


def test_episode_matches_the_batched_env() -> None:
    view = ParallelView(make_env("simple_spread", 1, max_cycles=4))
    batched = make_env("simple_spread", 1, max_cycles=4)
    obs, infos = view.reset(seed=9)
    assert set(obs) == set(infos) == {"agent_0", "agent_1", "agent_2"}
    np.testing.assert_array_equal(
        np.stack([obs[a] for a in view.possible_agents]), batched.reset(9)[0].numpy()
    )
    assert view.state().shape == view.state_space.shape
    for t in range(4):
        actions = {agent: (i + t) % 5 for i, agent in enumerate(view.agents)}
        obs, rewards, terms, truncs, _ = view.step(actions)
        _, reward, done, info = batched.step(
            torch.tensor([[actions[a] for a in view.possible_agents]])
        )
        np.testing.assert_array_equal(
            np.stack([obs[a] for a in view.possible_agents]), info["final_obs"][0].numpy()
        )
        assert [rewards[a] for a in view.possible_agents] == reward[0].tolist()
        assert not any(terms.values())
        assert all(truncs.values()) == bool(done[0]) == (t == 3)
    assert view.agents == []
    with pytest.raises(ValueError, match="reset"):
        view.step(dict.fromkeys(view.possible_agents, 0))


def test_view_checks_its_input() -> None:
    with pytest.raises(ValueError, match="n_envs=1"):
        ParallelView(make_env("simple_spread", 2))
    view = ParallelView(make_env("simple_spread", 1))
    view.reset(seed=0)
    with pytest.raises(ValueError, match="agent_2"):
        view.step({"agent_0": 0, "agent_1": 0})
