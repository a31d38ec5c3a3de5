"""simple_reference: parity with mpe2's simple_reference_v3, the PettingZoo view, the task."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mpe2 import simple_reference_v3
from pettingzoo.test import parallel_api_test

from lero.training.envs import make_env
from lero.training.envs.pettingzoo_view import ParallelView
from tests.training.mpe2_reference import float32_exact, play

TOL = 1e-4
EPISODES = 40


def start_states(rng: np.random.Generator, episodes: int) -> dict[str, np.ndarray]:
    """Uniform starts, half of them moving and talking, random targets; float32-exact."""
    moving = (np.arange(episodes) % 2 == 0)[:, None, None]
    words = rng.integers(0, 10, (episodes, 2))
    return {
        "agent_pos": float32_exact(rng.uniform(-1, 1, (episodes, 2, 2))),
        "agent_vel": float32_exact(rng.uniform(-0.5, 0.5, (episodes, 2, 2)) * moving),
        "landmark_pos": float32_exact(rng.uniform(-1, 1, (episodes, 3, 2))),
        "comm": np.eye(10)[words] * moving,
        "target": rng.integers(0, 3, (episodes, 2)),
    }


def load_into(world: dict[str, np.ndarray]):
    def load(raw, e: int) -> None:
        agents, landmarks = raw.world.agents, raw.world.landmarks
        for i, agent in enumerate(agents):
            agent.state.p_pos = world["agent_pos"][e, i].copy()
            agent.state.p_vel = world["agent_vel"][e, i].copy()
            agent.state.c = world["comm"][e, i].copy()
            # mpe2: agent i holds (goal_a, goal_b) = (partner, the partner's target)
            agent.goal_b = landmarks[int(world["target"][e, 1 - i])]
        for i, landmark in enumerate(landmarks):
            landmark.state.p_pos = world["landmark_pos"][e, i].copy()

    return load


@pytest.mark.parametrize("local_ratio", [0.5, 0.0, 0.8])
def test_matches_mpe2(local_ratio: float) -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(int(local_ratio * 10))
    world = start_states(rng, EPISODES)
    actions = rng.integers(0, 50, (EPISODES, 25, 2))
    ref = play(
        simple_reference_v3.parallel_env(local_ratio=local_ratio), load_into(world), actions
    )
    env = make_env("simple_reference", EPISODES, local_ratio=local_ratio)
    obs = env.set_world({k: torch.from_numpy(v) for k, v in world.items()})
    for i in range(2):
        assert np.abs(obs[:, i].numpy() - ref.obs[i][:, 0]).max() <= TOL
    for t in range(25):
        _, reward, done, info = env.step(torch.from_numpy(actions[:, t]))
        for i in range(2):
            assert np.abs(info["final_obs"][:, i].numpy() - ref.obs[i][:, t + 1]).max() <= TOL, t
        assert np.abs(reward.numpy() - ref.reward[:, t]).max() <= TOL, f"rewards differ at step {t}"
        np.testing.assert_array_equal(done.numpy(), ref.done[:, t])
    assert done.all()


def test_parallel_api() -> None:
    parallel_api_test(ParallelView(make_env("simple_reference", 1)), num_cycles=60)


def test_action_encoding_moves_and_speaks() -> None:
    """a = move + 5 * say: agent 0 moves right and says 7; agent 1 stays and says 0."""
    env = make_env("simple_reference", 1)
    env.reset(seed=0)
    before = env.world()["agent_pos"].clone()
    _, _, _, info = env.step(torch.tensor([[2 + 5 * 7, 0]]))
    world = info["world"]
    assert world["comm"][0, 0].argmax() == 7 and world["comm"][0, 0].sum() == 1
    assert world["comm"][0, 1].argmax() == 0
    assert world["agent_vel"][0, 0].tolist() == pytest.approx([0.5, 0.0])
    assert torch.equal(world["agent_pos"], before)  # positions move by the old velocity (0)
    obs = info["final_obs"]
    assert obs[0, 1, 11:].argmax() == 7  # agent 1 hears agent 0's symbol


def test_task_metrics_and_shapes() -> None:
    env = make_env("simple_reference", 8, max_cycles=3)
    assert (env.n_agents, env.obs_dim, env.n_actions, env.state_dim) == (2, 21, 50, 40)
    assert env.roles == ("agent", "agent") and env.action_mask().all()
    assert env.global_state().shape == (8, 40)
    env.reset(seed=1)
    for _ in range(3):
        _, _, done, info = env.step(env.random_actions())
    assert done.all()
    metrics = info["episode_metrics"]
    assert set(metrics) == set(env.task.metric_names) - {"return"}
    dist = (info["world"]["agent_pos"] - info["world"]["landmark_pos"].gather(
        1, info["world"]["target"][..., None].expand(-1, -1, 2))).norm(dim=-1)  # [B, N]
    assert torch.allclose(metrics["target_dist"], dist.mean(dim=1), atol=1e-6)
    assert torch.equal(metrics["success"], (dist < 0.1).all(dim=1).float())
    assert "colour" in env.describe() and "a = move + 5 * say" in env.describe()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="local_ratio"):
        make_env("simple_reference", 1, local_ratio=2)
    with pytest.raises(ValueError, match="unknown"):
        make_env("simple_reference", 1, N=3)
    env = make_env("simple_reference", 2)
    world = {k: v.clone() for k, v in env.world().items()}
    world["target"] = torch.full((2, 2), 3)
    with pytest.raises(ValueError, match="target"):
        env.set_world(world)
