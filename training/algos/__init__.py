"""Learners (one file per algorithm family), the pieces they share, and ``ALGORITHMS``.

``ALGORITHMS`` is the one table of algorithms: name -> learner, typed hyper-parameters
and policy kind. ``ALGOS``, ``TrainConfig``'s hyper-parameter lookup, ``train``'s learner
and ``Policy``'s rebuild all read it; adding an algorithm is one learner file and one row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from lero.training.algos.ppo import train_ppo
from lero.training.algos.value_decomposition import train_value_decomposition
from lero.training.config import Hparams, PPOHparams, ValueDecompositionHparams

PolicyKind = Literal["actor", "q"]  # actor: logits, sampled in training; q: utilities, argmax


@dataclass(frozen=True)
class Algorithm:
    """One row of the table."""

    learner: Callable  # (TrainConfig, hparams, HookedEnv) -> Policy
    hparams: type[Hparams]
    policy_kind: PolicyKind


ALGORITHMS: dict[str, Algorithm] = {
    "mappo": Algorithm(train_ppo, PPOHparams, "actor"),
    "ippo": Algorithm(train_ppo, PPOHparams, "actor"),
    "vdn": Algorithm(train_value_decomposition, ValueDecompositionHparams, "q"),
    "qmix": Algorithm(train_value_decomposition, ValueDecompositionHparams, "q"),
}
ALGOS: tuple[str, ...] = tuple(ALGORITHMS)
