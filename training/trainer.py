"""`train(cfg, hooks, progress)`: one seeded run of one learner, then trusted evaluation."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from lero.training.algos import ALGORITHMS
from lero.training.algos.hooked_env import HookedEnv
from lero.training.config import TrainConfig
from lero.training.envs import make_env
from lero.training.evaluation import evaluate
from lero.training.hooks import Hooks
from lero.training.policy import Policy, policy_meta
from lero.training.resume import load_learner


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` intra-op threads (None: leave as is)."""
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@dataclass
class TrainResult:
    config: TrainConfig
    eval: dict[str, float]  # the task metrics (env.task.metric_names; native reward, greedy); {} unevaluated
    curves: dict[str, list[float]]  # "steps" + task metrics + "train_reward" + HRF components
    reflection_stats: dict[str, dict]  # name -> {"snapshots", "max", "mean", "min"}
    policy: Policy
    learner: dict  # the learner's state at the end (training.resume.save_learner keeps it)
    start_steps: int  # env steps of the plan done before this job (a continuation's start)
    steps: int  # joint env steps this job took (whole iterations)
    wall_s: float  # training + evaluation
    train_s: float  # training alone (rollouts + updates)
    steps_per_s: float  # training throughput (env + updates), evaluation excluded

    def to_json(self) -> dict:
        """Everything but the policy, JSON-able."""
        return {
            "config": self.config.to_dict(),
            "eval": self.eval,
            "curves": self.curves,
            "reflection_stats": self.reflection_stats,
            "start_steps": self.start_steps,
            "steps": self.steps,
            "wall_s": self.wall_s,
            "train_s": self.train_s,
            "steps_per_s": self.steps_per_s,
        }


def train(
    cfg: TrainConfig,
    hooks: Hooks | None = None,
    progress: Callable[[int, int, dict], None] | None = None,
    checkpoint: Callable[[int, Policy], None] | None = None,
    evaluation: bool = True,
) -> TrainResult:
    """Train `cfg.algo` with the candidate hooks (None = baseline) and evaluate it.

    Same config and hooks give the same curves and weights on CPU.
    `progress(done_steps, total_steps, {"return": latest})` is throttled to ~2 Hz.
    `checkpoint(done_steps, policy)` gets the learning policy once every `cfg.checkpoint_every`
    steps (at the end of the iteration that reaches it); it must copy, not keep, the policy.
    `evaluation=False` skips the greedy evaluation (`eval` is then empty): the sandbox's
    train job does, since only its separate, trusted evaluate job's metrics count.
    With `cfg.resume` the learner continues its saved state, on fresh episodes and a fresh
    random stream seeded by (seed, start): a continued plan is not bitwise an uninterrupted one.
    """
    if not isinstance(cfg, TrainConfig):
        raise ValueError(f"train expects a TrainConfig, got {type(cfg).__name__}")
    if hooks is not None and not isinstance(hooks, Hooks):
        raise ValueError(f"hooks must be a training.Hooks or None, got {type(hooks).__name__}")
    if progress is not None and not callable(progress):
        raise ValueError("progress must be callable(done_steps, total_steps, info) or None")
    hooks = hooks or Hooks()
    hparams = cfg.algo_hparams()
    start, resume = load_learner(cfg) if cfg.resume is not None else (0, None)
    with torch_threads(cfg.threads):
        torch.manual_seed(cfg.seed + start)
        started = time.perf_counter()
        env = HookedEnv(
            make_env(cfg.env, hparams.n_envs, **cfg.env_kwargs),
            hooks,
            cfg.steps,
            cfg.seed,
            progress,
            checkpoint=checkpoint,
            checkpoint_every=cfg.checkpoint_every,
            start_steps=start,
            stop_steps=cfg.stop_at,
        )
        meta = policy_meta(cfg.algo, env, hparams.hidden, cfg.env, cfg.env_kwargs)
        policy, learner = ALGORITHMS[cfg.algo].learner(meta, hparams, env, resume)
        env.finish()
        train_s = time.perf_counter() - started
        policy.eval()
        metrics = (
            evaluate(policy, cfg.env, cfg.env_kwargs, hooks.enhance_observation, cfg.eval_episodes)
            if evaluation
            else {}
        )
    return TrainResult(
        config=cfg,
        eval=metrics,
        curves=env.log.curves,
        reflection_stats=env.log.reflection_stats(),
        policy=policy,
        learner=learner,
        start_steps=start,
        steps=env.done_steps - start,
        wall_s=time.perf_counter() - started,
        train_s=train_s,
        steps_per_s=(env.done_steps - start) / max(train_s, 1e-9),
    )
