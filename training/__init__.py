"""lero's training engine: batched MPE envs, MAPPO / IPPO / VDN / QMIX, candidate hooks, evaluation."""

from training.candidate import load_candidate
from training.config import ALGOS, PPOHparams, TrainConfig, ValueDecompositionHparams
from training.envs import ENV_NAMES, make_env
from training.evaluate import evaluate
from training.hooks import HookError, Hooks, RewardContext
from training.policy import Policy, PolicyMeta, load_policy, save_policy
from training.train import TrainResult, train

__all__ = [
    "ALGOS",
    "ENV_NAMES",
    "HookError",
    "Hooks",
    "PPOHparams",
    "Policy",
    "PolicyMeta",
    "RewardContext",
    "TrainConfig",
    "TrainResult",
    "ValueDecompositionHparams",
    "evaluate",
    "load_candidate",
    "load_policy",
    "make_env",
    "save_policy",
    "train",
]
