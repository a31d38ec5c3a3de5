"""Learners (one file per algorithm family, each beside its hyper-parameters) and ``ALGORITHMS``.

``ALGORITHMS`` is the one table of algorithms: name -> learner, typed hyper-parameters and
what the algorithm declares (``centralised``: its training reads the global state).
``ALGOS``, ``TrainConfig``'s hyper-parameter lookup and ``train``'s learner read it, and the
learners read the declaration, never the name; adding an algorithm is one learner file and
one row, or, from outside lero (a plugin, a test module), one ``register_algorithm`` call.
The learners and the policy import nothing from here, so the table sits above them.
"""

from __future__ import annotations

import re
from collections import ChainMap
from collections.abc import Callable, KeysView
from dataclasses import dataclass
from typing import Any

from lero.training.algos.ppo import PPOHparams, train_ppo
from lero.training.algos.value_decomposition import (
    ValueDecompositionHparams,
    train_value_decomposition,
)
from lero.training.policy import Policy, PolicyMeta
from lero.training.seeds import SeedRun
from lero.training.validation import require

Hparams = PPOHparams | ValueDecompositionHparams
ALGO_NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")  # a name that is a CLI choice and a file name part


@dataclass(frozen=True)
class Algorithm:
    """One row of the table."""

    # (meta, hparams, one SeedRun per seed: env, learner state to resume or None, random
    # stream, centralised) -> (policy, learner state) per seed
    learner: Callable[[PolicyMeta, Hparams, list[SeedRun], bool], list[tuple[Policy, dict[str, Any]]]]
    hparams: type[Hparams]
    # the learner conditions on the env's global state (MAPPO's critic, QMIX's mixer), not
    # only on each agent's local obs (IPPO's critic, VDN's sum); either way the policy is local
    centralised: bool


# lero's own; a registered algorithm is written to the first map (a test puts a fresh map
# in front, with monkeypatch, and its registrations go when it ends)
ALGORITHMS: ChainMap[str, Algorithm] = ChainMap({
    "mappo": Algorithm(train_ppo, PPOHparams, centralised=True),
    "ippo": Algorithm(train_ppo, PPOHparams, centralised=False),
    "vdn": Algorithm(train_value_decomposition, ValueDecompositionHparams, centralised=False),
    "qmix": Algorithm(train_value_decomposition, ValueDecompositionHparams, centralised=True),
})
ALGOS: KeysView[str] = ALGORITHMS.keys()  # the names, live: lero's own first, then registered ones


def register_algorithm(name: str, algorithm: Algorithm) -> Algorithm:
    """Add ALGORITHM as NAME (`--algo NAME` everywhere from then on); returns it. ValueError
    for a taken name or one that is not `[a-z][a-z0-9_]*` (at most 40)."""
    require(ALGO_NAME.fullmatch(name) is not None, f"algorithm name {name!r} must match {ALGO_NAME.pattern}")
    require(name not in ALGORITHMS, f"algorithm {name!r} is registered already")
    require(isinstance(algorithm, Algorithm), f"register_algorithm takes an Algorithm, got {type(algorithm).__name__}")
    ALGORITHMS[name] = algorithm
    return algorithm
