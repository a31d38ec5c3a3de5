"""Batched torch multi-agent environments (mpe2 semantics); see ``base`` for the step contract."""

from lero.training.envs.batched_env import BatchedEnv
from lero.training.envs.registry import ENV_NAMES, make_env, task_spec
from lero.training.envs.simple_reference import SimpleReference, SimpleReferenceConfig
from lero.training.envs.simple_spread import SimpleSpread, SimpleSpreadConfig

__all__ = [
    "ENV_NAMES",
    "BatchedEnv",
    "SimpleReference",
    "SimpleReferenceConfig",
    "SimpleSpread",
    "SimpleSpreadConfig",
    "make_env",
    "task_spec",
]
