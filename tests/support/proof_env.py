"""A tiny PettingZoo env that records where its own code runs, for the custom-env tests.

Every instance the factory makes writes `env_proof.json` into the working directory (a
sandbox job's directory): its uid, whether it is in a container (`/.dockerenv`), and
whether a variable the test planted in the host's environment reached it; its metadata
name says the same (`where`), so lero's description of the env carries it. Tests copy this file
into a working directory, a package, or a variant that imports a dependency.
"""

from __future__ import annotations

import json
import os

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

SECRET_VARIABLE = "LERO_TEST_HOST_SECRET"
PROOF_FILE = "env_proof.json"
# What a test expects of every place this code runs (set by `proof_env_source(expect=...)`):
# a proof that differs fails the env's factory, so the job fails and the run shows it (a
# Docker job keeps no file of its own once it ends: sandbox.base.keep_outputs)
EXPECT: dict | None = None
MOVES = np.array([[0.0, 0.0], [-1.0, 0.0], [1.0, 0.0], [0.0, -1.0], [0.0, 1.0]], dtype=np.float32)


def where() -> str:
    """Where this code runs, in one line: the env's metadata name carries it into lero's
    description of the env, so a describe job's result proves where the factory ran."""
    return f"uid={os.getuid()} dockerenv={os.path.exists('/.dockerenv')} secret_seen={SECRET_VARIABLE in os.environ}"


def _record(extra: dict) -> None:
    proof = {
        "uid": os.getuid(),
        "cwd": os.getcwd(),
        "dockerenv": os.path.exists("/.dockerenv"),
        "secret_seen": SECRET_VARIABLE in os.environ,
        "env_keys": sorted(os.environ),
        **extra,
    }
    with open(PROOF_FILE, "w") as handle:
        json.dump(proof, handle)
    wrong = {key: proof.get(key) for key, value in (EXPECT or {}).items() if proof.get(key) != value}
    if wrong:
        raise RuntimeError(f"the proof env ran where the test did not expect it: {wrong}")


class Gather(ParallelEnv):
    """Gather: the agents must meet; each sees its own position and the others' offsets."""

    def __init__(self, n_agents: int = 2, max_cycles: int = 8) -> None:
        self.metadata = {"name": "gather_v0", "render_modes": []}
        self.n, self.max_cycles = n_agents, max_cycles
        self.possible_agents = [f"agent_{i}" for i in range(n_agents)]
        self.agents: list[str] = []
        self.np_random = np.random.default_rng()
        self._obs_space = spaces.Box(-np.inf, np.inf, (2 * n_agents,), np.float32)

    def observation_space(self, agent: str) -> spaces.Box:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(5)

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.agents = self.possible_agents[:]
        self.t = 0
        self.pos = self.np_random.uniform(-1, 1, (self.n, 2)).astype(np.float32)
        return self._observe(), {a: {} for a in self.agents}

    def _observe(self) -> dict[str, np.ndarray]:
        obs = {}
        for i, agent in enumerate(self.possible_agents):
            others = np.delete(self.pos, i, axis=0) - self.pos[i]  # [N-1, 2]
            obs[agent] = np.concatenate([self.pos[i], others.reshape(-1)]).astype(np.float32)
        return obs

    def state(self) -> np.ndarray:
        return self.pos.reshape(-1).copy()  # [N * 2]

    def step(self, actions: dict[str, int]):
        self.t += 1
        for i, agent in enumerate(self.possible_agents):
            self.pos[i] += 0.2 * MOVES[actions[agent]]
        spread = float(np.linalg.norm(self.pos - self.pos.mean(axis=0), axis=1).mean())
        over = self.t >= self.max_cycles
        obs = self._observe()
        self.agents = [] if over else self.agents
        return (obs, dict.fromkeys(obs, -spread), dict.fromkeys(obs, False),
                dict.fromkeys(obs, over), {a: {} for a in obs})  # fmt: skip


def make_env(**kwargs) -> Gather:
    """Gather: the agents must meet at one point as fast as they can (team reward)."""
    _record({})
    env = Gather(**kwargs)
    env.metadata = {**env.metadata, "name": f"gather_v0 {where()}"}
    return env
