"""Potential-based reward shaping (Ng, Harada & Russell 1999) around the candidate's `potential`.

lero, not the candidate, adds F = gamma * Phi(s') - Phi(s) to every agent's reward, so the
shaping provably leaves the task's optimal policies alone. Over an episode s_0 .. s_T the
discounted shaping sums to gamma^T Phi(s_T) - Phi(s_0), with Phi(s_T) = 0 when s_T is
terminal (the task ended it, ``info["terminated"]``). On a truncated step s' is the state
the step really reached (``info["world"]``, ``info["final_obs"]``), never the next
episode's first state that the auto-reset put in its place; the next step's Phi(s) is
then that fresh state's.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from lero.training.hooks import PotentialCheck


class PotentialShaping:
    """F for every step of a batch of episodes; keeps Phi of the states the slots are in."""

    def __init__(self, potential: PotentialCheck, gamma: float, world: Mapping[str, torch.Tensor],
                 obs: torch.Tensor) -> None:
        """WORLD / OBS [B, N, D]: the first states of the episodes (after `reset`)."""
        self.potential, self.gamma = potential, gamma
        self.current = potential(world, obs)  # [B, N] Phi(s) of each slot's state

    def __call__(self, info: dict, done: torch.Tensor, world: Mapping[str, torch.Tensor],
                 obs: torch.Tensor) -> torch.Tensor:
        """F [B, N] of the step that gave INFO and DONE [B]; WORLD / OBS [B, N, D]: the states
        after it, auto-reset slots already in their new episode (`env.world()`, the step's obs)."""
        reached = self.potential(info["world"], info["final_obs"])  # [B, N] Phi(s'), before any reset
        ended = info["terminated"][:, None]  # [B, 1]
        shaping = self.gamma * torch.where(ended, torch.zeros_like(reached), reached) - self.current
        if bool(done.any()):
            reached = torch.where(done[:, None], self.potential(world, obs), reached)
        self.current = reached
        return shaping
