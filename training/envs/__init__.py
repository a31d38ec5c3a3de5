"""Batched torch multi-agent environments (mpe2 semantics); see ``base`` for the step contract.

The public names below load their module on first access (`training.lazy`), so a module
that reads a task's data (``lero.training.envs.task``: the agents' prompts, the run's
summary) imports no torch.
"""

from lero.training.lazy import lazy_exports

_HOMES = {  # module -> the public names that live there
    "lero.training.envs.batched_env": ("BatchedEnv",),
    "lero.training.envs.registry": ("ENV_NAMES", "make_env", "task_spec"),
    "lero.training.envs.simple_reference": ("SimpleReference", "SimpleReferenceConfig"),
    "lero.training.envs.simple_spread": ("SimpleSpread", "SimpleSpreadConfig"),
}

__getattr__, __dir__, __all__ = lazy_exports(globals(), _HOMES)
