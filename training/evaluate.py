"""Trusted evaluation: native reward, greedy actions, one episode in each of many parallel envs."""

from __future__ import annotations

from collections.abc import Callable

import torch
from lero.training.envs import make_env
from lero.training.hooks import ObservationEnhancer
from lero.training.policy import Policy


@torch.inference_mode()
def evaluate(
    policy: Policy,
    env: str,
    env_kwargs: dict,
    enhance_observation: Callable[[torch.Tensor], torch.Tensor] | None = None,
    episodes: int = 512,
    seed: int = 12345,
) -> dict[str, float]:
    """Task metrics over `episodes` episodes: `return`, `coverage`, `occupied`, `collisions`.

    Whatever reward the policy was trained on, this measures the environment's
    own reward; the OEF (the only candidate code involved) is output-checked.
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"episodes must be a positive int, got {episodes!r}")
    batch_env = make_env(env, episodes, **env_kwargs)
    enhance = ObservationEnhancer(enhance_observation, batch_env.obs_dim)
    raw_obs = batch_env.reset(seed=seed)  # [E, N, D]
    n_landmarks = batch_env.world()["landmark_pos"].shape[1]
    episode_return = torch.zeros(episodes)  # [E] per-agent mean native return
    collisions = torch.zeros(episodes)  # [E]
    occupied_end = torch.zeros(episodes)  # [E]
    running = torch.ones(episodes, dtype=torch.bool)  # [E] slot still in its first episode
    for _ in range(batch_env.max_steps):
        actions = policy.act(enhance(raw_obs), greedy=True)  # [E, N]
        raw_obs, reward, done, info = batch_env.step(actions)
        episode_return += reward.mean(dim=1) * running
        collisions += info["collisions"] * running
        finished = done & running
        occupied_end[finished] = info["occupied"][finished].float()
        running &= ~done
        if not bool(running.any()):
            break
    return {
        "return": float(episode_return.mean()),
        "coverage": float((occupied_end >= n_landmarks).float().mean()),
        "occupied": float(occupied_end.mean()),
        "collisions": float(collisions.mean()),
    }
