"""lero's training engine: batched MPE envs, MAPPO / IPPO / VDN / QMIX, candidate hooks, evaluation.

The public names below load their module on first access (PEP 562), so importing a
torch-free module of this package (``lero.training.defaults``, ``lero.training.contract``)
does not import torch.
"""

from __future__ import annotations

from lero.training.lazy import lazy_exports
from lero.training.mkl import settle_mkl

settle_mkl()  # before anything of this package calls MKL (training/mkl.py)

_HOMES = {  # module -> the public names that live there
    "lero.training.algos": ("ALGORITHMS", "ALGOS", "Algorithm", "register_algorithm"),
    "lero.training.algos.ppo": ("PPOHparams",),
    "lero.training.algos.value_decomposition": ("ValueDecompositionHparams",),
    "lero.training.candidate": ("load_candidate",),
    "lero.training.config": ("TrainConfig",),
    "lero.training.envs": ("ENV_NAMES", "make_env", "task_spec"),
    "lero.training.evaluation": ("EpisodeTrace", "evaluate", "evaluate_episodes"),
    "lero.training.files": ("LEARNER_FILE",),
    "lero.training.hooks": ("HookError", "Hooks", "RewardContext"),
    "lero.training.policy": ("Policy", "PolicyMeta", "load_policy", "save_policy"),
    "lero.training.resume": ("save_learner",),
    "lero.training.trainer": ("TrainResult", "train", "train_seeds"),
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _HOMES)
