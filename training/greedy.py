"""The greedy evaluation curve: every `TrainConfig.eval_every` updates the learning policy
acts greedily on a fixed set of episodes (the trusted evaluation's: `EVAL_SEED`,
`eval_episodes`), native reward, so a researcher sees the policy's own return rise, not
only the exploring one of the training curves. Measured with the trusted `evaluate`; in
the sandbox it runs beside the candidate, so like every training curve it is shown, never
selected on.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from lero.training.curves import GREEDY_PREFIX, GREEDY_STEPS
from lero.training.evaluation import evaluate
from lero.training.policy import Policy


class GreedyCurve:
    """Called after every update (`HookedEnv.end_iteration`); measures every EVERY-th."""

    def __init__(self, env: str, env_kwargs: dict, enhance_observation: Callable[[torch.Tensor], torch.Tensor] | None,
                 episodes: int, every: int) -> None:  # fmt: skip
        self.env, self.env_kwargs, self.enhance = env, env_kwargs, enhance_observation
        self.episodes, self.every, self.updates = episodes, every, 0
        self.curves: dict[str, list[float]] = {}

    def __call__(self, done_steps: int, policy: Policy) -> None:
        self.updates += 1
        if self.updates % self.every:
            return
        # the evaluation's draws (an OEF may take from torch's generator) leave training's
        # random stream as it was: a run with the curve trains bitwise as one without
        with torch.random.fork_rng(devices=[]):
            was_training = policy.training
            policy.eval()
            metrics = evaluate(policy, self.env, self.env_kwargs, self.enhance, self.episodes)
            policy.train(was_training)
        self.curves.setdefault(GREEDY_STEPS, []).append(float(done_steps))
        for name, value in metrics.items():
            self.curves.setdefault(f"{GREEDY_PREFIX}{name}", []).append(value)
