"""Sparse-reward tasks: simple_spread's `reward=sparse` against mpe2 step for step, and VMAS
scenarios with their shaping off (the sparse flag, success from the scenario's own done(),
each agent's own goal)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mpe2 import simple_spread_v3

from lero.training.envs import make_env, task_spec

pytest.importorskip("vmas")

TOL = 1e-4


def mpe2_sparse_episodes(kwargs: dict, world: dict[str, np.ndarray], actions: np.ndarray) -> dict:
    """mpe2's obs, done and occupied landmarks per step, and the reward the sparse variant
    documents: (1 - r) * occupied + r * mpe2's own local (collision) reward of each agent."""
    episodes, steps, n = actions.shape
    r = kwargs.get("local_ratio", 0.5)
    penv = simple_spread_v3.parallel_env(benchmark_data=True, **kwargs)
    raw, names = penv.unwrapped, penv.possible_agents
    out = {"obs": np.zeros((episodes, steps, n, raw.observation_space(names[0]).shape[0]), np.float32),
           "reward": np.zeros((episodes, steps, n)), "done": np.zeros((episodes, steps), bool),
           "occupied": np.zeros((episodes, steps))}
    for e in range(episodes):
        penv.reset(seed=e)
        for i, agent in enumerate(raw.world.agents):
            agent.state.p_pos, agent.state.p_vel = world["agent_pos"][e, i].copy(), world["agent_vel"][e, i].copy()
        for i, landmark in enumerate(raw.world.landmarks):
            landmark.state.p_pos = world["landmark_pos"][e, i].copy()
        for t in range(steps):
            obs, _, term, trunc, info = penv.step({name: int(actions[e, t, i]) for i, name in enumerate(names)})
            occupied = info[names[0]]["benchmark_data"][3]
            local = [raw.scenario.reward(agent, raw.world) for agent in raw.world.agents]
            out["obs"][e, t] = [obs[name] for name in names]
            out["reward"][e, t] = [(1 - r) * occupied + r * value for value in local]
            out["done"][e, t] = term[names[0]] or trunc[names[0]]
            out["occupied"][e, t] = occupied
    penv.close()
    return out


@pytest.mark.parametrize("kwargs", [dict(N=3), dict(N=3, num_agent_neighbors=1, num_landmark_neighbors=2,
                                                          local_ratio=0.3)], ids=["full", "partial"])
def test_sparse_simple_spread_has_mpe2_dynamics_and_the_documented_reward(kwargs: dict) -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(3)
    episodes, n, steps = 16, 3, 25
    pos = rng.uniform(-1, 1, (episodes, n, 2))
    pos[::2] = rng.uniform(-1, 1, (episodes // 2, 1, 2)) + rng.uniform(-0.15, 0.15, (episodes // 2, n, 2))
    landmarks = rng.uniform(-1, 1, (episodes, n, 2))
    landmarks[1::2, :2] = pos[1::2, :2] + 0.03  # two landmarks start occupied in every other episode
    world = {"agent_pos": pos, "agent_vel": np.zeros((episodes, n, 2)), "landmark_pos": landmarks}
    world = {k: v.astype(np.float32).astype(np.float64) for k, v in world.items()}
    actions = rng.integers(0, 5, (episodes, steps, n))
    actions[1::2, :, :2] = 0  # the agents on landmarks stay (drifting only by contact)
    ref = mpe2_sparse_episodes(kwargs, world, actions)

    env = make_env("simple_spread", episodes, reward="sparse", **kwargs)
    assert env.task.sparse and env.task.success_metric == "coverage"
    assert not make_env("simple_spread", 1, **kwargs).task.sparse
    env.set_world({k: torch.from_numpy(v) for k, v in world.items()})
    for t in range(steps):
        _, reward, done, info = env.step(torch.from_numpy(actions[:, t]))
        assert np.abs(info["final_obs"].numpy() - ref["obs"][:, t]).max() <= TOL, f"obs differ at step {t}"
        np.testing.assert_array_equal(done.numpy(), ref["done"][:, t])
        np.testing.assert_array_equal(info["occupied"].numpy(), ref["occupied"][:, t])
        assert np.abs(reward.numpy() - ref["reward"][:, t]).max() <= TOL, f"rewards differ at step {t}"
        assert not info["terminated"].any()  # MPE episodes only end at the time limit
    assert ref["occupied"].max() >= 1 and ref["occupied"].min() == 0  # the reward really varied


def test_sparse_simple_spread_is_named_in_its_task_and_checked() -> None:
    spec = task_spec("simple_spread", reward="sparse")
    assert spec.sparse and "sparse" in spec.text
    assert "number of landmarks" in make_env("simple_spread", 1, reward="sparse").describe()
    with pytest.raises(ValueError, match="reward must be one of dense, sparse"):
        make_env("simple_spread", 1, reward="shaped")


@pytest.mark.parametrize("scenario, kwargs", [
    ("navigation", {"n_agents": 3, "pos_shaping_factor": 0}),
    ("give_way", {"pos_shaping_factor": 0, "done_on_completion": True}),
])
def test_vmas_task_is_sparse_without_shaping_and_pairs_each_agent_with_its_goal(scenario: str, kwargs: dict) -> None:
    env = make_env(f"vmas:{scenario}", 4, **kwargs)
    task = env.task
    assert task.sparse and task.success_metric == "success" and "sparse" in task.text
    assert not make_env(f"vmas:{scenario}", 1, **{k: v for k, v in kwargs.items() if k != "pos_shaping_factor"}
                        ).task.sparse
    assert [p.field for p in task.pairings] == ["goal_pos"]
    assert "- `goal_pos`[:, i] belongs to agent i: agent i's own goal" in env.describe()  # a designer can say "my goal"
    env.reset(seed=0)
    goals = torch.stack([agent.goal.state.pos for agent in env.env.agents], dim=1)  # [B, N, 2]
    assert torch.equal(env.world()["goal_pos"], goals)


def test_a_scenario_is_sparse_only_with_every_shaping_argument_off() -> None:
    assert make_env("vmas:joint_passage", 1, pos_shaping_factor=0, rot_shaping_factor=0).task.sparse
    assert not make_env("vmas:joint_passage", 1, pos_shaping_factor=0).task.sparse  # rotation still shaped
    assert not make_env("vmas:balance", 1).task.sparse  # no shaping arguments declared: not marked


def test_vmas_success_is_the_scenario_ending_the_episode_before_its_limit() -> None:
    env = make_env("vmas:navigation", 2, n_agents=2, pos_shaping_factor=0, max_steps=5)
    env.reset(seed=1)
    for agent in env.env.agents:  # every agent on its goal in slot 0 only: done() there
        agent.set_pos(agent.goal.state.pos[0], batch_index=0)
    stay = torch.zeros(2, 2, dtype=torch.long)
    _, _, done, info = env.step(stay)
    assert done.tolist() == [True, False] and info["terminated"].tolist() == [True, False]
    assert info["episode_metrics"]["success"][0] == 1.0 and info["episode_metrics"]["episode_length"][0] == 1
    for _ in range(4):
        _, _, done, info = env.step(stay)
    assert bool(done[1]) and not bool(info["terminated"][1])  # the time limit: truncated, no success
    assert info["episode_metrics"]["success"][1] == 0.0
