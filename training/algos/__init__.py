"""Learners (one file per algorithm family, each beside its hyper-parameters) and ``ALGORITHMS``.

``ALGORITHMS`` is the one table of algorithms: name -> learner and typed hyper-parameters.
``ALGOS``, ``TrainConfig``'s hyper-parameter lookup and ``train``'s learner read it; adding
an algorithm is one learner file and one row. The learners and the policy import nothing
from here, so the table sits above them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lero.training.algos.ppo import PPOHparams, train_ppo
from lero.training.algos.value_decomposition import (
    ValueDecompositionHparams,
    train_value_decomposition,
)
from lero.training.policy import Policy, PolicyMeta
from lero.training.seeds import SeedRun

Hparams = PPOHparams | ValueDecompositionHparams


@dataclass(frozen=True)
class Algorithm:
    """One row of the table."""

    # (meta, hparams, one SeedRun per seed: env, learner state to resume or None, random
    # stream) -> (policy, learner state) per seed
    learner: Callable[[PolicyMeta, Hparams, list[SeedRun]], list[tuple[Policy, dict[str, Any]]]]
    hparams: type[Hparams]


ALGORITHMS: dict[str, Algorithm] = {
    "mappo": Algorithm(train_ppo, PPOHparams),
    "ippo": Algorithm(train_ppo, PPOHparams),
    "vdn": Algorithm(train_value_decomposition, ValueDecompositionHparams),
    "qmix": Algorithm(train_value_decomposition, ValueDecompositionHparams),
}
ALGOS: tuple[str, ...] = tuple(ALGORITHMS)
