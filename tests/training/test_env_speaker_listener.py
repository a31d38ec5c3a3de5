"""simple_speaker_listener: parity with mpe2, agents that differ (padding, masks, roles)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mpe2 import simple_speaker_listener_v4
from pettingzoo.test import parallel_api_test

from lero.training import TrainConfig, evaluate, load_policy, save_policy, train
from lero.training.envs import make_env
from lero.training.envs.pettingzoo_view import ParallelView
from tests.training.mpe2_reference import float32_exact, play

TOL = 1e-4
EPISODES = 60


def start_states(rng: np.random.Generator, episodes: int) -> dict[str, np.ndarray]:
    """Uniform starts, a third of the listeners moving and hearing a symbol; float32-exact."""
    moving = (np.arange(episodes) % 3 == 0)[:, None]
    vel = np.zeros((episodes, 2, 2))
    vel[:, 1] = rng.uniform(-0.5, 0.5, (episodes, 2)) * moving
    comm = np.zeros((episodes, 2, 3))
    comm[:, 0] = np.eye(3)[rng.integers(0, 3, episodes)] * moving
    return {
        "agent_pos": float32_exact(rng.uniform(-1, 1, (episodes, 2, 2))),
        "agent_vel": float32_exact(vel),
        "landmark_pos": float32_exact(rng.uniform(-1, 1, (episodes, 3, 2))),
        "comm": comm,
        "target": rng.integers(0, 3, episodes),
    }


def load_into(world: dict[str, np.ndarray]):
    def load(raw, e: int) -> None:
        agents, landmarks = raw.world.agents, raw.world.landmarks
        for i, agent in enumerate(agents):
            agent.state.p_pos = world["agent_pos"][e, i].copy()
            agent.state.p_vel = world["agent_vel"][e, i].copy()
            agent.state.c = world["comm"][e, i].copy()
        agents[0].goal_b = landmarks[int(world["target"][e])]  # mpe2: the speaker holds the goal
        for i, landmark in enumerate(landmarks):
            landmark.state.p_pos = world["landmark_pos"][e, i].copy()

    return load


def test_matches_mpe2() -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(4)
    world = start_states(rng, EPISODES)
    actions = np.stack(
        [rng.integers(0, 3, (EPISODES, 25)), rng.integers(0, 5, (EPISODES, 25))], axis=-1
    )
    ref = play(simple_speaker_listener_v4.parallel_env(), load_into(world), actions)
    env = make_env("simple_speaker_listener", EPISODES)
    obs = env.set_world({k: torch.from_numpy(v) for k, v in world.items()})
    dims = env.obs_dims
    for i in range(2):
        assert np.abs(obs[:, i, : dims[i]].numpy() - ref.obs[i][:, 0]).max() <= TOL
    assert not obs[:, 0, dims[0] :].any()  # the speaker's row is zero-padded
    for t in range(25):
        _, reward, done, info = env.step(torch.from_numpy(actions[:, t]))
        final = info["final_obs"]
        for i in range(2):
            assert np.abs(final[:, i, : dims[i]].numpy() - ref.obs[i][:, t + 1]).max() <= TOL, t
        assert not final[:, 0, dims[0] :].any()
        assert np.abs(reward.numpy() - ref.reward[:, t]).max() <= TOL, f"rewards differ at step {t}"
        np.testing.assert_array_equal(done.numpy(), ref.done[:, t])
    assert done.all()


def test_parallel_api_with_different_spaces() -> None:
    view = ParallelView(make_env("simple_speaker_listener", 1))
    parallel_api_test(view, num_cycles=60)
    assert view.possible_agents == ["speaker_0", "listener_0"]  # mpe2's names
    assert view.observation_space("speaker_0").shape == (3,)
    assert view.observation_space("listener_0").shape == (11,)
    assert (view.action_space("speaker_0").n, view.action_space("listener_0").n) == (3, 5)


def test_agents_that_differ() -> None:
    env = make_env("simple_speaker_listener", 16)
    assert env.roles == ("speaker", "listener") and env.obs_dims == (3, 11)
    assert (env.obs_dim, env.n_actions, env.state_dim) == (11, 5, 23)
    assert env.action_mask().tolist() == [[True, True, True, False, False], [True] * 5]
    for _ in range(20):
        assert (env.random_actions()[:, 0] < 3).all()
    with pytest.raises(ValueError, match="action_mask"):
        env.step(torch.tensor([[3, 0]] * 16))
    speaker_before = env.world()["agent_pos"][:, 0].clone()
    _, _, _, info = env.step(torch.tensor([[2, 4]] * 16))
    assert torch.equal(info["world"]["agent_pos"][:, 0], speaker_before)  # the speaker stays
    assert (info["world"]["comm"][:, 0].argmax(dim=1) == 2).all()
    assert (info["final_obs"][:, 1, 8:11].argmax(dim=1) == 2).all()  # the listener hears it
    assert not info["world"]["comm"][:, 1].any()
    assert "speaker" in env.describe() and "action_mask" in env.describe()


def test_policy_masks_invalid_actions_and_sees_roles(tmp_path) -> None:
    """A short MAPPO run: the saved policy keeps the mask and role ids, evaluation works."""
    cfg = TrainConfig(
        env="simple_speaker_listener", steps=4096, n_envs=64, eval_episodes=32, threads=1
    )
    result = train(cfg)
    policy = result.policy
    assert policy.meta.roles == ["speaker", "listener"]
    assert policy.net[0].in_features == 11 + 2 + 2  # obs + agent one-hot + role one-hot
    obs = make_env("simple_speaker_listener", 256).reset(seed=0)
    assert (policy(obs)[:, 0, 3:] < -1e8).all()
    sampled = policy.act(obs, greedy=False)
    assert (sampled[:, 0] < 3).all()
    assert set(result.eval) == {"return", "target_dist", "success"}
    assert set(result.curves) >= {"steps", "return", "target_dist", "success", "train_reward"}
    reloaded = load_policy(save_policy(policy, tmp_path))
    assert torch.equal(reloaded(obs), policy(obs))
    assert evaluate(reloaded, cfg.env, {}, episodes=32) == evaluate(policy, cfg.env, {}, episodes=32)


@pytest.mark.parametrize("algo", ["vdn", "qmix", "ippo"])
def test_other_algorithms_respect_the_mask(algo: str) -> None:
    cfg = TrainConfig(
        env="simple_speaker_listener",
        algo=algo,
        steps=2048,
        n_envs=64,
        eval_episodes=16,
        threads=1,
        hparams={"rollout_len": 4, "minibatches": 4} if algo != "ippo" else {},
    )
    policy = train(cfg).policy
    obs = make_env("simple_speaker_listener", 64).reset(seed=1)
    assert (policy.act(obs)[:, 0] < 3).all()
