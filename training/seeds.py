"""Several seeds of one training plan in one process, each on its own random stream.

A sandbox job pays ~1.5 CPU-s to start (container and imports), and a learner at small
batches pays per-op dispatch rather than arithmetic: training a candidate's S seeds in one
job saves S - 1 starts, and a learner that stacks the seeds' networks (PPO) runs each op
once for all of them. Neither may change a result: every seed has its own env, its own
parameters and optimiser moments, and its own stream of torch's global generator, which
`RngStream` swaps in around the seed's work (network init, sampling, shuffles, the
candidate's hooks, which may draw from torch's generator too). A seed trained beside
others is then bitwise the seed trained alone (test), so results and cache entries stay
per seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from lero.training.hooked_env import HookedEnv


class RngStream:
    """One seed's state of torch's global generator; `with stream:` runs a block on it.

    Seeded like `torch.manual_seed(seed)`, so one seed alone draws exactly what a process
    that called `torch.manual_seed(seed)` would.
    """

    def __init__(self, seed: int) -> None:
        self.state = torch.Generator().manual_seed(seed).get_state()
        self.outer: torch.Tensor | None = None

    def __enter__(self) -> RngStream:
        if self.outer is not None:
            raise RuntimeError("an RngStream is not re-entrant")
        self.outer = torch.get_rng_state()
        torch.set_rng_state(self.state)
        return self

    def __exit__(self, *exc: object) -> None:
        self.state = torch.get_rng_state()
        torch.set_rng_state(self.outer)
        self.outer = None


@dataclass
class SeedRun:
    """What a learner gets per seed: its env, the learner state to resume (None: fresh), its stream."""

    env: HookedEnv
    resume: dict[str, Any] | None
    rng: RngStream
