"""Parity with mpe2's simple_spread_v3.parallel_env: same start states, same actions.

Reference episodes are played one by one through mpe2; ours run as one batch.
Start states are float32-representable so both sides start from the very same
state (rounding a float64 state would alone move close contacts by > 1e-4).
Half of the episodes start with all agents packed within 0.15 of a point, so
contact forces and collision penalties are exercised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
from mpe2 import simple_spread_v3

from lero.training.envs import make_env

TOL = 1e-4


@dataclass
class Reference:
    obs: np.ndarray  # [E, T + 1, N, D] float32
    reward: np.ndarray  # [E, T, N]
    done: np.ndarray  # [E, T] bool
    collisions: np.ndarray  # [E, T] colliding pairs
    occupied: np.ndarray  # [E, T] occupied landmarks


def start_states(
    rng: np.random.Generator, episodes: int, n: int, packed_every: int = 2
) -> dict[str, np.ndarray]:
    """Uniform starts, every ``packed_every``-th one packed; some moving; float32-exact."""
    pos = rng.uniform(-1, 1, (episodes, n, 2))
    packed = np.arange(episodes) % packed_every == 0
    pos[packed] = rng.uniform(-1, 1, (packed.sum(), 1, 2)) + rng.uniform(
        -0.15, 0.15, (packed.sum(), n, 2)
    )
    moving = (np.arange(episodes) % 4 < 2)[:, None, None]
    vel = rng.uniform(-0.5, 0.5, (episodes, n, 2)) * moving
    landmarks = rng.uniform(-1, 1, (episodes, n, 2))
    as_f32 = {"agent_pos": pos, "agent_vel": vel, "landmark_pos": landmarks}
    return {k: v.astype(np.float32).astype(np.float64) for k, v in as_f32.items()}


def run_mpe2(env_kwargs: dict, world: dict[str, np.ndarray], actions: np.ndarray) -> Reference:
    """Play every episode through one mpe2 parallel env after loading its start state."""
    episodes, steps, n = actions.shape
    penv = simple_spread_v3.parallel_env(benchmark_data=True, **env_kwargs)
    raw = penv.unwrapped
    names = penv.possible_agents
    obs = np.zeros((episodes, steps + 1, n, raw.observation_space(names[0]).shape[0]), np.float32)
    reward = np.zeros((episodes, steps, n), np.float32)
    done = np.zeros((episodes, steps), bool)
    collisions = np.zeros((episodes, steps))
    occupied = np.zeros((episodes, steps))
    for e in range(episodes):
        penv.reset(seed=e)
        for i, agent in enumerate(raw.world.agents):
            agent.state.p_pos = world["agent_pos"][e, i].copy()
            agent.state.p_vel = world["agent_vel"][e, i].copy()
        for i, landmark in enumerate(raw.world.landmarks):
            landmark.state.p_pos = world["landmark_pos"][e, i].copy()
        obs[e, 0] = [raw.observe(name) for name in names]
        for t in range(steps):
            step_obs, rew, term, trunc, info = penv.step(
                {name: int(actions[e, t, i]) for i, name in enumerate(names)}
            )
            obs[e, t + 1] = [step_obs[name] for name in names]
            reward[e, t] = [rew[name] for name in names]
            done[e, t] = term[names[0]] or trunc[names[0]]
            bench = [
                info[name]["benchmark_data"] for name in names
            ]  # (rew, collisions, min_dists, occupied)
            collisions[e, t] = sum(b[1] for b in bench) / 2
            occupied[e, t] = bench[0][3]
    penv.close()
    return Reference(obs, reward, done, collisions, occupied)


CONFIGS = [
    dict(N=3),
    dict(N=3, num_agent_neighbors=1, num_landmark_neighbors=2),
    dict(N=2, local_ratio=0.2),
    dict(N=5, num_agent_neighbors=2, num_landmark_neighbors=3, local_ratio=1.0),
    dict(
        N=4, num_agent_neighbors=5, num_landmark_neighbors=6, max_cycles=12
    ),  # more slots than entities
    dict(N=1, local_ratio=0.0),
]
EPISODES = 40  # per config: 240 episodes in all


@pytest.mark.parametrize(
    "env_kwargs", CONFIGS, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items())
)
def test_matches_mpe2(env_kwargs: dict) -> None:
    torch.set_num_threads(1)
    rng = np.random.default_rng(len(CONFIGS) * 7 + env_kwargs["N"])
    n, steps = env_kwargs["N"], env_kwargs.get("max_cycles", 25)
    world = start_states(rng, EPISODES, n)
    actions = rng.integers(0, 5, (EPISODES, steps, n))
    ref = run_mpe2(env_kwargs, world, actions)

    env = make_env("simple_spread", EPISODES, **env_kwargs)
    obs = env.set_world({k: torch.from_numpy(v) for k, v in world.items()})
    assert np.abs(obs.numpy() - ref.obs[:, 0]).max() <= TOL
    total_collisions = 0.0
    for t in range(steps):
        obs, reward, done, info = env.step(torch.from_numpy(actions[:, t]))
        assert np.abs(info["final_obs"].numpy() - ref.obs[:, t + 1]).max() <= TOL, (
            f"obs differ at step {t}"
        )
        assert np.abs(reward.numpy() - ref.reward[:, t]).max() <= TOL, f"rewards differ at step {t}"
        np.testing.assert_array_equal(done.numpy(), ref.done[:, t])
        np.testing.assert_array_equal(info["collisions"].numpy(), ref.collisions[:, t])
        np.testing.assert_array_equal(info["occupied"].numpy(), ref.occupied[:, t])
        total_collisions += float(info["collisions"].sum())
    assert done.all()
    if n > 1:
        assert total_collisions > 0, "the packed starts should produce collisions"


def test_partial_observability_ties_follow_mpe2_order() -> None:
    """Equidistant entities keep index order, as mpe2's argsort does."""
    kwargs = dict(N=3, num_agent_neighbors=1, num_landmark_neighbors=2)
    world = {
        "agent_pos": np.array([[[0.0, 0.0], [0.0, 0.5], [0.0, -0.5]]]),
        "agent_vel": np.zeros((1, 3, 2)),
        "landmark_pos": np.array([[[0.5, 0.0], [0.0, 0.5], [-0.5, 0.0]]]),
    }
    ref = run_mpe2(kwargs, world, np.zeros((1, 1, 3), dtype=np.int64))
    env = make_env("simple_spread", 1, **kwargs)
    obs = env.set_world({k: torch.from_numpy(v) for k, v in world.items()})
    np.testing.assert_allclose(obs.numpy(), ref.obs[:, 0], atol=1e-7)
    assert obs[0, 0, 4:6].tolist() == [0.5, 0.0]  # landmark 0 first among three at distance 0.5


@pytest.mark.slow
def test_matches_mpe2_when_every_episode_starts_packed() -> None:
    """400 episodes of five agents pushing each other apart from one spot (about 10 s)."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    world = start_states(rng, 400, 5, packed_every=1)
    actions = rng.integers(0, 5, (400, 25, 5))
    ref = run_mpe2({"N": 5}, world, actions)
    env = make_env("simple_spread", 400, N=5)
    env.set_world({k: torch.from_numpy(v) for k, v in world.items()})
    for t in range(25):
        _, reward, _, info = env.step(torch.from_numpy(actions[:, t]))
        assert np.abs(info["final_obs"].numpy() - ref.obs[:, t + 1]).max() <= TOL
        assert np.abs(reward.numpy() - ref.reward[:, t]).max() <= TOL
