"""A PettingZoo ``ParallelEnv`` over a one-slot ``BatchedEnv``.

Lets PettingZoo tooling (API tests, third-party trainers, manual inspection)
drive a lero environment: ``ParallelView(make_env("simple_spread", 1, N=3))``.
Episodes end by truncation after ``max_steps``; then ``agents`` is empty until
the next ``reset``. Observations returned on the last step are the episode's
final ones (the batched env's ``info["final_obs"]``), not the auto-reset's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from pettingzoo import ParallelEnv

from lero.training.envs.batched_env import BatchedEnv


class ParallelView(ParallelEnv):
    """PettingZoo parallel API for slot 0 of a ``BatchedEnv`` with ``n_envs == 1``."""

    def __init__(self, env: BatchedEnv) -> None:
        if env.n_envs != 1:
            raise ValueError(f"ParallelView needs an env with n_envs=1, got n_envs={env.n_envs}")
        self.env = env
        self.metadata = {"name": env.name, "render_modes": [], "is_parallelizable": True}
        self.render_mode = None
        self.possible_agents = list(env.agent_names)
        self.agents: list[str] = []
        self._dims = env.obs_dims
        n_actions = env.action_mask().sum(dim=1).tolist()
        self._observation_spaces = {
            agent: spaces.Box(-np.inf, np.inf, shape=(dim,), dtype=np.float32)
            for agent, dim in zip(self.possible_agents, self._dims, strict=True)
        }
        self._action_spaces = {
            agent: spaces.Discrete(int(n)) for agent, n in zip(self.possible_agents, n_actions, strict=True)
        }
        self.state_space = spaces.Box(-np.inf, np.inf, shape=(env.state_dim,), dtype=np.float32)

    def observation_space(self, agent: str) -> spaces.Box:
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._action_spaces[agent]

    def _per_agent(self, values: torch.Tensor) -> dict[str, np.ndarray]:
        """Split slot 0 of a [1, N, D] obs tensor into one unpadded numpy array per agent."""
        rows = values[0].cpu().numpy()
        return {agent: rows[i, : self._dims[i]].copy() for i, agent in enumerate(self.possible_agents)}

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
        obs = self.env.reset(seed)  # [1, N, D]
        self.agents = self.possible_agents[:]
        return self._per_agent(obs), {agent: {} for agent in self.agents}

    def step(self, actions: dict[str, int]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            raise ValueError("ParallelView.step: the episode is over; call reset() first")
        missing = [agent for agent in self.agents if agent not in actions]
        if missing:
            raise ValueError(f"ParallelView.step: no action for {', '.join(missing)}")
        joint = torch.tensor(
            [[int(actions[agent]) for agent in self.possible_agents]], dtype=torch.long
        )
        _, reward, done, info = self.env.step(joint.to(self.env.device))
        observations = self._per_agent(info["final_obs"])
        rewards = {
            agent: float(r)
            for agent, r in zip(self.possible_agents, reward[0].tolist(), strict=True)
        }
        finished = bool(done[0])
        terminations = dict.fromkeys(self.possible_agents, False)
        truncations = dict.fromkeys(self.possible_agents, finished)
        infos: dict[str, dict] = {agent: {} for agent in self.possible_agents}
        if finished:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def state(self) -> np.ndarray:
        """Global state of the slot, ``env.global_state()`` row 0 [state_dim]."""
        return self.env.global_state()[0].cpu().numpy().copy()
