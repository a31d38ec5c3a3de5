"""Unit tests of the batched simple_spread: API, seeding, auto-reset, world round trip, errors."""

from __future__ import annotations

import pytest
import torch

from lero.training.envs import ENV_NAMES, BatchedEnv, make_env

torch.set_num_threads(1)

PARTIAL = dict(N=3, num_agent_neighbors=1, num_landmark_neighbors=2)


def random_actions(env: BatchedEnv, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(0, env.n_actions, (env.n_envs, env.n_agents), generator=gen)


def rollout(env: BatchedEnv, seed: int, steps: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    out = [env.reset(seed)]
    for _ in range(steps):
        obs, reward, _, _ = env.step(random_actions(env, gen))
        out += [obs, reward]
    return out


def test_registry_and_attributes() -> None:
    assert "simple_spread" in ENV_NAMES
    env = make_env("simple_spread", 7)
    assert (env.n_envs, env.n_agents, env.obs_dim, env.state_dim, env.n_actions, env.max_steps) == (
        7,
        3,
        18,
        18,
        5,
        25,
    )
    partial = make_env(
        "simple_spread", 2, N=5, max_cycles=40, num_agent_neighbors=2, num_landmark_neighbors=3
    )
    assert (partial.n_agents, partial.obs_dim, partial.state_dim, partial.max_steps) == (
        5,
        4 + 6 + 4 + 4,
        30,
        40,
    )
    obs = partial.reset(0)
    assert obs.shape == (2, 5, 18) and obs.dtype == torch.float32


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("simple_tag", {}),
        ("simple_spread", {"N": 0}),
        ("simple_spread", {"N": 2.0}),
        ("simple_spread", {"N": True}),
        ("simple_spread", {"local_ratio": 1.5}),
        ("simple_spread", {"local_ratio": -0.1}),
        ("simple_spread", {"local_ratio": "0.5"}),
        ("simple_spread", {"max_cycles": 0}),
        ("simple_spread", {"num_agent_neighbors": 0}),
        ("simple_spread", {"num_landmark_neighbors": -2}),
        ("simple_spread", {"num_landmark_neighbors": 1.5}),
        ("simple_spread", {"continuous_actions": True}),
        ("simple_spread", {"device": "nonsense"}),
        ("simple_spread", {"device": 3}),
    ],
)
def test_bad_arguments_raise_one_line_value_error(name: str, kwargs: dict) -> None:
    with pytest.raises(ValueError) as err:
        make_env(name, 4, **kwargs)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("n_envs", [0, -1, 2.5, "8"])
def test_bad_batch_size(n_envs: object) -> None:
    with pytest.raises(ValueError, match="n_envs"):
        make_env("simple_spread", n_envs)


def test_same_seed_same_trajectory_and_different_seed_differs() -> None:
    env = make_env("simple_spread", 16, **PARTIAL)
    first = rollout(env, seed=3, steps=40)  # crosses an auto-reset
    again = rollout(make_env("simple_spread", 16, **PARTIAL), seed=3, steps=40)
    for a, b in zip(first, again, strict=True):
        assert torch.equal(a, b)
    other = rollout(env, seed=4, steps=1)
    assert not torch.equal(first[0], other[0])


def test_reset_distribution() -> None:
    env = make_env("simple_spread", 2048, N=4)
    env.reset(0)
    world = env.world()
    for key in ("agent_pos", "landmark_pos"):
        values = world[key]
        assert values.min() >= -1 and values.max() <= 1
        assert abs(float(values.mean())) < 0.05 and values.min() < -0.99 and values.max() > 0.99
    assert not world["agent_vel"].any() and not world["step"].any()


def test_auto_reset_after_max_cycles() -> None:
    env = make_env("simple_spread", 8, max_cycles=5)
    env.reset(0)
    gen = torch.Generator().manual_seed(0)
    for t in range(5):
        before = env.world()
        obs, _, done, info = env.step(random_actions(env, gen))
        assert torch.equal(info["step"], torch.full((8,), t))
        assert done.all() == (t == 4) and (done.any() == done.all())
        assert info["world"]["step"].eq(t + 1).all()
        moved = not torch.equal(info["world"]["agent_pos"], before["agent_pos"])
        assert moved == (t > 0)  # positions integrate the velocity before the step
    # the finished episodes restarted: new positions, zero velocity, step 0, new-episode obs
    world = env.world()
    assert not world["agent_vel"].any() and not world["step"].any()
    assert not torch.equal(world["agent_pos"], info["world"]["agent_pos"])
    assert torch.equal(obs, make_env("simple_spread", 8).set_world(world))
    assert torch.equal(
        info["final_obs"],
        make_env("simple_spread", 8).set_world(
            {k: v for k, v in info["world"].items() if k != "step"}
        ),
    )


def test_auto_reset_only_touches_finished_slots() -> None:
    env = make_env("simple_spread", 3, max_cycles=10)
    env.reset(0)
    world = dict(env.world(), step=torch.tensor([9, 0, 5]))
    env.set_world(world)
    obs, _, done, info = env.step(torch.zeros(3, 3, dtype=torch.long))
    assert done.tolist() == [True, False, False]
    assert env.world()["step"].tolist() == [0, 1, 6]
    assert torch.equal(obs[1:], info["final_obs"][1:])
    assert not torch.equal(obs[0], info["final_obs"][0])
    after = env.world()
    assert torch.equal(after["agent_pos"][1:], info["world"]["agent_pos"][1:])
    assert torch.equal(after["landmark_pos"][1:], world["landmark_pos"][1:])
    assert not torch.equal(after["landmark_pos"][0], world["landmark_pos"][0])


def test_world_round_trip_reproduces_the_trajectory() -> None:
    gen = torch.Generator().manual_seed(0)
    source = make_env("simple_spread", 6, **PARTIAL)
    source.reset(5)
    for _ in range(7):
        obs, *_ = source.step(random_actions(source, gen))
    copy = make_env("simple_spread", 6, **PARTIAL)
    assert torch.equal(copy.set_world(source.world()), obs)
    for k, v in source.world().items():
        assert torch.equal(copy.world()[k], v)
    assert torch.equal(copy.global_state(), source.global_state())
    for _ in range(5):
        actions = random_actions(source, gen)
        a, b = source.step(actions), copy.step(actions)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_global_state_layout() -> None:
    env = make_env("simple_spread", 4, N=2)
    env.reset(0)
    env.step(torch.ones(4, 2, dtype=torch.long))
    w = env.world()
    expected = torch.cat(
        [w["agent_pos"].flatten(1), w["agent_vel"].flatten(1), w["landmark_pos"].flatten(1)], 1
    )
    assert env.global_state().shape == (4, env.state_dim)
    assert torch.equal(env.global_state(), expected)


def test_rewards_collisions_and_occupancy_by_hand() -> None:
    """Agents 0,1 overlap (distance 0.1); agent 2 sits on landmark 2; zero velocity so no move this step."""
    env = make_env("simple_spread", 1, local_ratio=0.25)
    world = {
        "agent_pos": torch.tensor([[[0.0, 0.0], [0.1, 0.0], [1.0, 1.0]]]),
        "agent_vel": torch.zeros(1, 3, 2),
        "landmark_pos": torch.tensor([[[0.0, 0.5], [-0.3, -0.4], [1.0, 1.0]]]),
    }
    obs = env.set_world(world)
    assert obs[0, 0].tolist() == pytest.approx(
        [0, 0, 0, 0, 0, 0.5, -0.3, -0.4, 1, 1, 0.1, 0, 1, 1, 0, 0, 0, 0], abs=1e-6
    )
    _, reward, _, info = env.step(torch.zeros(1, 3, dtype=torch.long))
    global_reward = -(0.5 + 0.5 + 0.0)
    expected = [0.75 * global_reward - 0.25, 0.75 * global_reward - 0.25, 0.75 * global_reward]
    assert reward[0].tolist() == pytest.approx(expected, abs=1e-6)
    assert info["collisions"].tolist() == [1.0]
    assert info["occupied"].tolist() == [1.0]
    # the contact force pushed agents 0 and 1 apart along x
    vel = env.world()["agent_vel"][0]
    assert vel[0, 0] < 0 < vel[1, 0] and vel[2].abs().max() == 0


def test_action_forces() -> None:
    env = make_env("simple_spread", 1, N=5)
    env.reset(0)
    world = dict(env.world(), agent_pos=torch.tensor([[[3.0 * i, 0.0] for i in range(5)]]))
    env.set_world(world)
    env.step(torch.arange(5).view(1, 5))
    vel = env.world()["agent_vel"][0]
    expected = torch.tensor([[0.0, 0.0], [-0.5, 0.0], [0.5, 0.0], [0.0, -0.5], [0.0, 0.5]])
    assert torch.allclose(vel, expected, atol=1e-6)


def test_returned_tensors_are_not_modified_by_later_steps() -> None:
    env = make_env("simple_spread", 4, max_cycles=3)
    obs = env.reset(0)
    kept = [obs, *env.world().values()]
    snapshot = [t.clone() for t in kept]
    for _ in range(4):
        _, _, _, info = env.step(torch.full((4, 3), 2))
        kept += [info["final_obs"], *info["world"].values()]
        snapshot += [t.clone() for t in kept[len(snapshot) :]]
    env.step(torch.full((4, 3), 1))
    for a, b in zip(kept, snapshot, strict=True):
        assert torch.equal(a, b)


def test_step_under_inference_mode() -> None:
    env = make_env("simple_spread", 4, **PARTIAL)
    with torch.inference_mode():
        env.reset(0)
        for _ in range(30):
            obs, reward, done, _ = env.step(torch.zeros(4, 3, dtype=torch.long))
    assert obs.shape == (4, 3, 12) and reward.dtype == torch.float32 and done.dtype == torch.bool


@pytest.mark.parametrize(
    "actions",
    [
        torch.zeros(4, 2, dtype=torch.long),
        torch.zeros(4, 3),
        torch.full((4, 3), 5),
        torch.full((4, 3), -1),
        [[0, 0, 0]] * 4,
    ],
)
def test_bad_actions(actions: object) -> None:
    env = make_env("simple_spread", 4)
    with pytest.raises(ValueError, match="actions"):
        env.step(actions)


def test_bad_worlds() -> None:
    env = make_env("simple_spread", 2)
    world = env.world()
    with pytest.raises(ValueError, match="agent_pos"):
        env.set_world({**world, "agent_pos": torch.zeros(2, 4, 2)})
    with pytest.raises(ValueError, match="landmark_pos"):
        env.set_world({k: v for k, v in world.items() if k != "landmark_pos"})
    with pytest.raises(ValueError, match="unknown"):
        env.set_world({**world, "colour": torch.zeros(2)})
    with pytest.raises(ValueError, match="non-finite"):
        env.set_world({**world, "agent_vel": torch.full((2, 3, 2), float("nan"))})
    with pytest.raises(ValueError, match="step"):
        env.set_world({**world, "step": torch.tensor([0, 25])})
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed="1")


def test_describe_full_observability() -> None:
    text = make_env("simple_spread", 1, local_ratio=0.3).describe()
    for needle in (
        "D=18",
        "[0:2]",
        "[2:4]",
        "[4:10]",
        "[10:14]",
        "[14:18]",
        "landmarks in fixed order",
        "reward_i = (1 - r) * global + r * local_i = 0.7 * global + 0.3 * local_i",
        "agent_pos [B, 3, 2]",
        "agent_vel [B, 3, 2]",
        "landmark_pos [B, 3, 2]",
        "0 = no-op",
        "4 = move up (+y)",
        "25 steps",
    ):
        assert needle in text, needle


def test_describe_partial_observability() -> None:
    text = make_env(
        "simple_spread", 1, N=4, max_cycles=30, **{k: v for k, v in PARTIAL.items() if k != "N"}
    ).describe()
    for needle in (
        "partial observability",
        "D=12",
        "[4:8]",
        "2 nearest landmarks",
        "[8:10]",
        "1 nearest other agents",
        "[10:12]",
        "nearest first",
        "30 steps",
    ):
        assert needle in text, needle
