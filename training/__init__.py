"""lero's training engine: batched MPE envs, MAPPO / IPPO / VDN / QMIX, candidate hooks, evaluation.

The public names below load their module on first access (PEP 562), so importing a
torch-free module of this package (``lero.training.defaults``, ``lero.training.contract``)
does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from lero.training.mkl import settle_mkl

settle_mkl()  # before anything of this package calls MKL (training/mkl.py)

_HOMES = {
    "ALGORITHMS": "lero.training.algos",
    "ALGOS": "lero.training.algos",
    "Algorithm": "lero.training.algos",
    "register_algorithm": "lero.training.algos",
    "ENV_NAMES": "lero.training.envs",
    "EpisodeTrace": "lero.training.evaluation",
    "HookError": "lero.training.hooks",
    "LEARNER_FILE": "lero.training.resume",
    "Hooks": "lero.training.hooks",
    "PPOHparams": "lero.training.algos.ppo",
    "Policy": "lero.training.policy",
    "PolicyMeta": "lero.training.policy",
    "RewardContext": "lero.training.hooks",
    "TrainConfig": "lero.training.config",
    "TrainResult": "lero.training.trainer",
    "ValueDecompositionHparams": "lero.training.algos.value_decomposition",
    "evaluate": "lero.training.evaluation",
    "evaluate_episodes": "lero.training.evaluation",
    "load_candidate": "lero.training.candidate",
    "load_policy": "lero.training.policy",
    "make_env": "lero.training.envs",
    "save_learner": "lero.training.resume",
    "save_policy": "lero.training.policy",
    "task_spec": "lero.training.envs",
    "train": "lero.training.trainer",
    "train_seeds": "lero.training.trainer",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    """Resolve a public name to its module's attribute on first access, then cache it."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
