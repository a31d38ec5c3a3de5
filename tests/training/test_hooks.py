"""Candidate hooks: every malformed output is a HookError naming the hook; ctx cannot corrupt the env."""

import pytest
import torch

from lero.training import HookError, Hooks, TrainConfig, train
from lero.training.hooks import ObservationEnhancer, RewardShaper

torch.set_num_threads(1)

B, N, D = 4, 3, 6


def reward_inputs() -> dict:
    return {
        "obs": torch.randn(B, N, D),
        "next_obs": torch.randn(B, N, D),
        "actions": torch.randint(5, (B, N)),
        "env_reward": torch.randn(B, N),
        "world": {"agent_pos": torch.randn(B, N, 2), "landmark_pos": torch.randn(B, N, 2)},
        "step": torch.zeros(B, dtype=torch.long),
        "progress": 0.5,
    }


BAD_REWARDS = {
    "not a tuple": (lambda ctx: ctx.env_reward, "must return a tuple"),
    "rewards [B]": (lambda ctx: (ctx.env_reward.sum(1), {}), "rewards must have shape"),
    "int rewards": (lambda ctx: (ctx.actions, {}), "rewards must have a float dtype"),
    "nan rewards": (lambda ctx: (ctx.env_reward * float("nan"), {}), "rewards contains NaN"),
    "numpy rewards": (lambda ctx: (ctx.env_reward.numpy(), {}), "rewards must be a torch.Tensor"),
    "components list": (
        lambda ctx: (ctx.env_reward, [ctx.env_reward]),
        "components must be a dict",
    ),
    "component shape": (
        lambda ctx: (ctx.env_reward, {"x": ctx.obs}),
        "component 'x' must have shape",
    ),
    "component float": (
        lambda ctx: (ctx.env_reward, {"x": 1.0}),
        "component 'x' must be a torch.Tensor",
    ),
    "component inf": (
        lambda ctx: (ctx.env_reward, {"x": ctx.env_reward / 0}),
        "component 'x' contains NaN or inf",
    ),
    "reserved name": (lambda ctx: (ctx.env_reward, {"return": ctx.env_reward}), "reserved"),
}


@pytest.mark.parametrize("case", sorted(BAD_REWARDS))
def test_bad_hybrid_reward_output_raises_hook_error(case: str) -> None:
    fn, message = BAD_REWARDS[case]
    with pytest.raises(HookError, match=message) as error:
        RewardShaper(fn)(**reward_inputs())
    assert error.value.hook == "hybrid_reward"
    assert str(error.value).startswith("hybrid_reward: ")


def test_component_names_must_stay_fixed() -> None:
    calls = []

    def hrf(ctx):
        calls.append(1)
        name = "a" if len(calls) == 1 else "b"
        return ctx.env_reward, {name: ctx.env_reward}

    shaper = RewardShaper(hrf)
    shaper(**reward_inputs())
    with pytest.raises(HookError, match="component names changed"):
        shaper(**reward_inputs())


def test_good_hybrid_reward_passes_rewards_and_components_through() -> None:
    inputs = reward_inputs()
    rewards, components = RewardShaper(
        lambda ctx: (ctx.env_reward * 2, {"team": ctx.env_reward.mean(1), "own": ctx.env_reward})
    )(**inputs)
    assert torch.equal(rewards, inputs["env_reward"] * 2)
    assert components["team"].shape == (B,) and components["own"].shape == (B, N)


BAD_OBSERVATIONS = {
    "drops columns": (lambda obs: obs[:, :-1], "output must have shape"),
    "3-d output": (lambda obs: obs.unsqueeze(0), "output must have shape"),
    "changes obs": (
        lambda obs: torch.cat([obs * 2, obs], dim=1),
        "first 6 output columns must equal",
    ),
    "numpy": (lambda obs: obs.numpy(), "must be a torch.Tensor"),
    "int": (lambda obs: obs.long(), "float dtype"),
    "inf": (lambda obs: torch.cat([obs, obs[:, :1] / 0], dim=1), "NaN or inf"),
}


@pytest.mark.parametrize("case", sorted(BAD_OBSERVATIONS))
def test_bad_enhance_observation_output_raises_hook_error(case: str) -> None:
    fn, message = BAD_OBSERVATIONS[case]
    with pytest.raises(HookError, match=message) as error:
        ObservationEnhancer(fn, D)(torch.randn(B, N, D))
    assert error.value.hook == "enhance_observation"


def test_enhancer_fixes_width_at_probe_and_keeps_agent_rows() -> None:
    widths = iter([2, 3])
    enhancer = ObservationEnhancer(lambda obs: torch.cat([obs, obs[:, : next(widths)]], dim=1), D)
    obs = torch.randn(B, N, D)
    assert enhancer.probe(obs) == D + 2
    with pytest.raises(HookError, match="width changed from 8 to 9"):
        enhancer(obs)
    row_sum = ObservationEnhancer(lambda o: torch.cat([o, o.sum(1, keepdim=True)], dim=1), D)(obs)
    assert row_sum.shape == (B, N, D + 1)
    assert torch.allclose(row_sum[..., -1], obs.sum(-1))


def tiny(algo: str = "mappo", **kwargs) -> TrainConfig:
    return TrainConfig(
        algo=algo, steps=600, n_envs=8, eval_episodes=8, threads=1, env_kwargs={"N": 2}, **kwargs
    )


@pytest.mark.parametrize("algo", ["mappo", "vdn"])
def test_train_raises_hook_error_from_either_hook(algo: str) -> None:
    with pytest.raises(HookError) as error:
        train(tiny(algo), Hooks(hybrid_reward=lambda ctx: (ctx.env_reward[:, :1], {})))
    assert error.value.hook == "hybrid_reward"
    with pytest.raises(HookError) as error:
        train(tiny(algo), Hooks(enhance_observation=lambda obs: obs[:, 1:]))
    assert error.value.hook == "enhance_observation"


def test_exceptions_inside_hooks_propagate_unchanged() -> None:
    def broken(ctx):
        return 1 / 0

    with pytest.raises(ZeroDivisionError):
        train(tiny(), Hooks(hybrid_reward=broken))


def test_hybrid_reward_cannot_corrupt_env_state_through_ctx() -> None:
    def vandal(ctx):
        for value in (ctx.obs, ctx.next_obs, ctx.env_reward, *ctx.state.values()):
            value.add_(100)
        ctx.actions.zero_()
        with pytest.raises(TypeError):
            ctx.state["agent_pos"] = None
        return ctx.env_reward - 100, {}

    clean = train(tiny(), Hooks(hybrid_reward=lambda ctx: (ctx.env_reward, {})))
    vandalised = train(tiny(), Hooks(hybrid_reward=vandal))
    assert vandalised.curves["return"] == clean.curves["return"]
    assert vandalised.curves["train_reward"] == pytest.approx(
        clean.curves["train_reward"], abs=1e-4
    )
