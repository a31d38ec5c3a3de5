"""Play episodes through an mpe2 parallel env from given start states (the parity reference).

Start states are float32-representable so both sides start from the very same state.
``load`` puts one episode's start into mpe2's world (positions, velocities, scenario
fields such as targets); every episode is then stepped with the same discrete actions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class Reference:
    obs: list[np.ndarray]  # per agent [E, T + 1, D_i] float32
    reward: np.ndarray  # [E, T, N]
    done: np.ndarray  # [E, T] bool


def float32_exact(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float32).astype(np.float64)


def play(
    penv: Any, load: Callable[[Any, int], None], actions: np.ndarray
) -> Reference:
    """Step ``penv`` through every episode: ``load(raw_env, e)`` sets episode e's start."""
    episodes, steps, n = actions.shape
    raw = penv.unwrapped
    names = penv.possible_agents
    dims = [raw.observation_space(name).shape[0] for name in names]
    obs = [np.zeros((episodes, steps + 1, d), np.float32) for d in dims]
    reward = np.zeros((episodes, steps, n), np.float32)
    done = np.zeros((episodes, steps), bool)
    for e in range(episodes):
        penv.reset(seed=e)
        load(raw, e)
        for i, name in enumerate(names):
            obs[i][e, 0] = raw.observe(name)
        for t in range(steps):
            step_obs, rew, term, trunc, _ = penv.step(
                {name: int(actions[e, t, i]) for i, name in enumerate(names)}
            )
            for i, name in enumerate(names):
                obs[i][e, t + 1] = step_obs[name]
            reward[e, t] = [rew[name] for name in names]
            done[e, t] = term[names[0]] or trunc[names[0]]
    penv.close()
    return Reference(obs, reward, done)
