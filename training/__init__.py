"""lero's training engine: batched MPE envs, MAPPO / IPPO / VDN / QMIX, candidate hooks, evaluation."""

from lero.training.algos import ALGORITHMS, ALGOS, Algorithm
from lero.training.candidate import load_candidate
from lero.training.config import PPOHparams, TrainConfig, ValueDecompositionHparams
from lero.training.envs import ENV_NAMES, make_env, task_spec
from lero.training.evaluate import evaluate
from lero.training.hooks import HookError, Hooks, RewardContext
from lero.training.policy import Policy, PolicyMeta, load_policy, save_policy
from lero.training.train import TrainResult, train

__all__ = [
    "ALGORITHMS",
    "ALGOS",
    "ENV_NAMES",
    "Algorithm",
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
    "task_spec",
    "train",
]
