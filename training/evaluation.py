"""Trusted evaluation: native reward, greedy actions, one episode in each of many parallel envs."""

from __future__ import annotations

from collections.abc import Callable

import torch

from lero.training.defaults import EVAL_EPISODES
from lero.training.envs import make_env
from lero.training.envs.task import RETURN
from lero.training.hooks import ObservationEnhancer
from lero.training.policy import Policy


@torch.inference_mode()
def evaluate_episodes(
    policy: Policy,
    env: str,
    env_kwargs: dict,
    enhance_observation: Callable[[torch.Tensor], torch.Tensor] | None = None,
    episodes: int = EVAL_EPISODES,
    seed: int = 12345,
) -> dict[str, torch.Tensor]:
    """The task's metrics (``env.task.metric_names``) of each of `episodes` episodes: [E] each.

    `return` is each episode's per-agent mean native return; every other metric is the
    env's own `info["episode_metrics"]` at episode end. Whatever reward the policy was
    trained on, this measures the environment's own reward; the OEF (the only candidate
    code involved) is output-checked. Per episode, because the MARL protocol shares
    results as episode values (marl-eval), not only their mean.
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"episodes must be a positive int, got {episodes!r}")
    batch_env = make_env(env, episodes, **env_kwargs)
    enhance = ObservationEnhancer(enhance_observation, batch_env.obs_dim)
    raw_obs = batch_env.reset(seed=seed)  # [E, N, D]
    names = [name for name in batch_env.task.metric_names if name != RETURN]
    episode_return = torch.zeros(episodes)  # [E] per-agent mean native return
    at_end = {name: torch.zeros(episodes) for name in names}  # [E] each
    running = torch.ones(episodes, dtype=torch.bool)  # [E] slot still in its first episode
    for _ in range(batch_env.max_steps):
        actions = policy.act(enhance(raw_obs), greedy=True)  # [E, N]
        raw_obs, reward, done, info = batch_env.step(actions)
        episode_return += reward.mean(dim=1) * running
        finished = done & running
        for name in names:
            at_end[name][finished] = info["episode_metrics"][name][finished].float()
        running &= ~done
        if not bool(running.any()):
            break
    return {RETURN: episode_return} | at_end


def evaluate(
    policy: Policy,
    env: str,
    env_kwargs: dict,
    enhance_observation: Callable[[torch.Tensor], torch.Tensor] | None = None,
    episodes: int = EVAL_EPISODES,
    seed: int = 12345,
) -> dict[str, float]:
    """The task's metrics averaged over `episodes` episodes (`evaluate_episodes`' means)."""
    values = evaluate_episodes(policy, env, env_kwargs, enhance_observation, episodes, seed)
    return {name: float(episode.mean()) for name, episode in values.items()}
