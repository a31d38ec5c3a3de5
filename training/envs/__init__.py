"""Batched torch multi-agent environments (mpe2 semantics); see ``base`` for the step contract."""

from training.envs.base import BatchedEnv
from training.envs.registry import ENV_NAMES, make_env
from training.envs.simple_spread import SimpleSpread, SimpleSpreadConfig

__all__ = ["ENV_NAMES", "BatchedEnv", "SimpleSpread", "SimpleSpreadConfig", "make_env"]
