"""lero's own job kinds, declared (`sandbox.types.JobKind`) and put in the kinds table.

Their handlers are `sandbox.jobs`' functions, run by the runner inside the sandbox; what
the host copies in and keeps, what it trusts of the result (each result field with its
check: `sandbox.result_checks`, `training.rollout_evidence`) and what the cache key holds
are read from these declarations alone. `sandbox/__init__.py` imports this module, so the
table holds them wherever a `Job` is made.
"""

from __future__ import annotations

from lero.sandbox.jobs import CHECKPOINT_PREFIX, POLICY_SUBDIR
from lero.sandbox.result_checks import (
    checked_episodes,
    checked_evidence,
    checked_fitness,
    checked_info,
    checked_trajectories,
)
from lero.sandbox.types import Input, JobKind, Outputs, ResultField, register_kind
from lero.training.files import LEARNER_FILE, POLICY_FILE

HANDLERS_MODULE = "lero.sandbox.jobs"

# what the host reads of a custom env (registry.describe_env), built in the sandbox
DESCRIBE = register_kind(JobKind("describe", f"{HANDLERS_MODULE}:describe",
                                 result_fields=(ResultField("info", checked_info),), label="description"))
# both hooks on real env batches; near the LLM loop, so never on a cluster node
# and what they did on that rollout, measured: the critic's evidence (training.rollout_evidence)
VALIDATE = register_kind(JobKind("validate", f"{HANDLERS_MODULE}:validate", on_cluster=False,
                                 result_fields=(ResultField("evidence", checked_evidence),), label="validation"))
TRAIN = register_kind(JobKind(
    "train", f"{HANDLERS_MODULE}:train",
    # eval_seed: carried for the evaluation that follows (graph.protocol's combined key)
    fields=frozenset({"checkpoint_every", "stop_at", "resume_dir", "eval_seed", "group"}),
    required=("steps",),
    inputs=(Input("resume_dir", "input_learner", LEARNER_FILE),),  # a resumed job's learner state
    outputs=Outputs(POLICY_SUBDIR, (POLICY_FILE, LEARNER_FILE), also=(f"{CHECKPOINT_PREFIX}*/{POLICY_FILE}",)),
    cache_if_set=("checkpoint_every", "stop_at"),
    progress=True,
    label="training",
))  # fmt: skip
# the trusted measurement: weights loaded before any candidate code, OEF in a worker
EVALUATE = register_kind(JobKind(
    "evaluate", f"{HANDLERS_MODULE}:evaluate",
    fields=frozenset({"policy_dir", "eval_seed", "record_episodes", "group"}),
    inputs=(Input("policy_dir", "input_policy", POLICY_FILE, required=True),),
    sealed=True,
    result_fields=(ResultField("fitness", checked_fitness), ResultField("episodes", checked_episodes),
                   ResultField("trajectories", checked_trajectories)),
    cache_if_set=("eval_seed", "record_episodes"),
    label="evaluation",
))  # fmt: skip
