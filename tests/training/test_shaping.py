"""Potential-based shaping: on recorded episodes, each agent's shaped minus native return
telescopes to gamma^T Phi(s_T) - Phi(s_0), with Phi(s_T) = 0 where the task ended the
episode; truncated episodes use their true last state, not the auto-reset's first one."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from lero.training import make_env
from lero.training.hooked_env import HookedEnv
from lero.training.hooks import HookError, Hooks, PotentialCheck

pytest.importorskip("vmas")

GAMMA = 0.9


def phi(state: dict[str, torch.Tensor], obs: torch.Tensor) -> torch.Tensor:
    """Minus each agent's distance to its own goal, plus a term of its own obs: [B, N]."""
    return -torch.linalg.vector_norm(state["agent_pos"] - state["goal_pos"], dim=-1) + 0.1 * obs[..., 0]


class Recorder:
    """The env, with every step's info, done and the states the slots are in after it kept."""

    def __init__(self, env: Any) -> None:
        self.env, self.steps = env, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        self.env.reset(seed=seed)
        for agent in self.env.env.agents:  # slot 0 starts on the goals: done() at its first step
            agent.set_pos(agent.goal.state.pos[0], batch_index=0)
        self.first = (self.env.world(), self.env.env.get_from_scenario(
            get_observations=True, get_rewards=False, get_infos=False, get_dones=False,
            dict_agent_names=False)[0])
        return self.env._pad(self.first[1])

    def step(self, actions: torch.Tensor) -> tuple:
        obs, reward, done, info = self.env.step(actions)
        self.steps.append({"native": reward, "done": done, "info": info, "world": self.env.world(), "obs": obs})
        return obs, reward, done, info


def test_shaped_minus_native_return_telescopes_with_terminal_and_reset_corrections() -> None:
    torch.manual_seed(0)
    env = Recorder(make_env("vmas:navigation", 4, n_agents=2, pos_shaping_factor=0, max_steps=6))
    hooked = HookedEnv(env, Hooks(hybrid_reward=lambda ctx: (ctx.env_reward, {}), potential=phi),
                       total_steps=10_000, seed=0, gamma=GAMMA)
    first_obs = hooked.raw_obs
    shaped = []
    for t in range(20):
        actions = env.random_actions()
        if t == 0:
            actions[0] = 0  # slot 0 stays on its goals: terminated after one step
        shaped.append(hooked.step(actions)[1])
    start_phi = phi(env.first[0], first_obs)  # [B, N] Phi(s_0) of the first episodes
    B, N = 4, 2
    diff, discount = torch.zeros(B, N), torch.ones(B)
    checked = {"terminated": 0, "truncated": 0}
    for t, step in enumerate(env.steps):
        diff += discount[:, None] * (shaped[t] - step["native"])
        discount = discount * GAMMA
        done, terminated = step["done"], step["info"]["terminated"]
        if not bool(done.any()):
            continue
        last_phi = phi(step["info"]["world"], step["info"]["final_obs"])  # the true last state
        for b in done.nonzero().flatten().tolist():
            final = 0.0 if terminated[b] else discount[b] * last_phi[b]
            torch.testing.assert_close(diff[b], final - start_phi[b], atol=1e-5, rtol=1e-5)
            checked["terminated" if terminated[b] else "truncated"] += 1
        fresh = phi(step["world"], step["obs"])  # the next episodes' Phi(s_0), after the auto-reset
        start_phi = torch.where(done[:, None], fresh, start_phi)
        diff = torch.where(done[:, None], 0.0, diff)
        discount = torch.where(done, 1.0, discount)
    assert checked["terminated"] == 1 and checked["truncated"] >= 6
    assert not torch.equal(torch.stack(shaped), torch.stack([s["native"] for s in env.steps]))
    hooked.finish()
    stats = hooked.log.reflection_stats()  # the HRF kept the native reward: policy-invariant shaping
    assert stats["potential_shaping"]["max"] != 0 and stats["hrf_change"]["max"] == 0.0


def test_truncated_step_uses_the_last_state_not_the_reset_one() -> None:
    """One step per episode (max_steps=1): every F is gamma Phi(true s_1) - Phi(s_0)."""
    env = Recorder(make_env("vmas:navigation", 3, n_agents=2, pos_shaping_factor=0, max_steps=1))
    hooked = HookedEnv(env, Hooks(potential=phi), total_steps=1000, seed=1, gamma=GAMMA)
    start = phi(env.first[0], hooked.raw_obs)
    actions = env.random_actions()
    actions[0] = 0
    _, reward, _ = hooked.step(actions)
    step = env.steps[0]
    reached = phi(step["info"]["world"], step["info"]["final_obs"])
    kept = torch.where(step["info"]["terminated"][:, None], 0.0, reached)
    torch.testing.assert_close(reward - step["native"], GAMMA * kept - start)
    assert step["info"]["terminated"].tolist() == [True, False, False]
    assert not torch.allclose(reached[1:], phi(step["world"], step["obs"])[1:])  # the reset moved them


@pytest.mark.parametrize(("potential", "problem"), [
    (lambda state, obs: obs[..., 0].sum(dim=1), "Phi must have shape [B, N] = [4, 3] (one value per agent), got [4]"),
    (lambda state, obs: obs[..., 0] / 0.0, "Phi contains NaN or inf"),
    (lambda state, obs: obs[..., :1].long()[..., 0], "Phi must have a float dtype"),
])
def test_potential_of_the_wrong_shape_or_not_finite_is_a_named_hook_error(potential: Any, problem: str) -> None:
    env = make_env("simple_spread", 4)
    obs = env.reset(seed=0)
    with pytest.raises(HookError) as caught:
        PotentialCheck(potential)(env.world(), obs)
    assert caught.value.hook == "potential" and problem in caught.value.problem
    assert math.isfinite(float(PotentialCheck(lambda s, o: o[..., 0])(env.world(), obs).sum()))
