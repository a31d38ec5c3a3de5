"""`train(cfg, hooks, progress)`: one seeded run of one learner, then trusted evaluation;
`train_seeds`: several seeds of one plan in one process."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from lero.training.algos import ALGORITHMS
from lero.training.config import TrainConfig
from lero.training.envs import make_env
from lero.training.evaluation import evaluate
from lero.training.greedy import GreedyCurve
from lero.training.hooked_env import HookedEnv
from lero.training.hooks import Hooks
from lero.training.policy import Policy, policy_meta
from lero.training.resume import load_learner
from lero.training.seeds import RngStream, SeedRun


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
    curves: dict[str, list[float]]  # "steps" + task metrics + "train_reward" + HRF components; greedy/* (training.curves)
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
    checkpoints = None if checkpoint is None else [checkpoint]
    return train_seeds([cfg], [hooks], progress, checkpoints, evaluation)[0]


def train_seeds(
    cfgs: list[TrainConfig],
    hooks: list[Hooks | None] | None = None,
    progress: Callable[[int, int, dict], None] | None = None,
    checkpoints: list[Callable[[int, Policy], None]] | None = None,
    evaluation: bool = True,
) -> list[TrainResult]:
    """`train` for several seeds of one plan in one process: CFGS differ only in `seed` and
    `resume`, HOOKS and CHECKPOINTS (when given) hold one per seed.

    Each seed runs on its own env and random stream (`training.seeds`), so its result is
    bitwise what `train` gives it alone. `progress` sees the seeds' steps summed. The
    seconds of the job are shared: each seed's `train_s` and `wall_s` are 1/S of them.
    """
    check_seed_configs(cfgs)
    hooks = [None] * len(cfgs) if hooks is None else hooks
    checkpoints = [None] * len(cfgs) if checkpoints is None else checkpoints
    if len(hooks) != len(cfgs) or len(checkpoints) != len(cfgs):
        raise ValueError(f"train_seeds needs one hooks and one checkpoint entry per seed ({len(cfgs)})")
    for entry in hooks:
        if entry is not None and not isinstance(entry, Hooks):
            raise ValueError(f"hooks must be a training.Hooks or None, got {type(entry).__name__}")
    hooks = [entry or Hooks() for entry in hooks]  # None: the baseline
    if progress is not None and not callable(progress):
        raise ValueError("progress must be callable(done_steps, total_steps, info) or None")
    cfg, n_seeds = cfgs[0], len(cfgs)
    hparams = cfg.algo_hparams()
    loaded = [load_learner(c) if c.resume is not None else (0, None) for c in cfgs]
    starts = {start for start, _ in loaded}
    if len(starts) != 1:
        raise ValueError(f"the seeds of one job must continue from the same step, got {sorted(starts)}")
    start = starts.pop()
    joint = JointProgress(progress, n_seeds)
    greedy = [None if c.eval_every is None else GreedyCurve(c.env, c.env_kwargs, h.enhance_observation, c.eval_episodes,
                                                            c.eval_every) for c, h in zip(cfgs, hooks, strict=True)]  # fmt: skip
    with torch_threads(cfg.threads):
        started = time.perf_counter()
        runs = []
        for k, (c, seed_hooks, seed_checkpoint) in enumerate(zip(cfgs, hooks, checkpoints, strict=True)):
            rng = RngStream(c.seed + start)
            with rng:  # the OEF meets its first obs here, and may draw from torch's generator
                env = HookedEnv(
                    make_env(c.env, hparams.n_envs, **c.env_kwargs),
                    seed_hooks,
                    c.steps,
                    c.seed,
                    joint.of_seed(k),
                    checkpoint=seed_checkpoint,
                    checkpoint_every=c.checkpoint_every,
                    start_steps=start,
                    stop_steps=c.stop_at,
                    gamma=hparams.gamma,
                    after_update=greedy[k],
                )
            runs.append(SeedRun(env, loaded[k][1], rng))
        if len({run.env.obs_dim for run in runs}) != 1:
            raise ValueError("the seeds' enhanced observations differ in width; the OEF must not depend on the seed")
        meta = policy_meta(cfg.algo, runs[0].env, hparams.hidden, cfg.env, cfg.env_kwargs)
        algorithm = ALGORITHMS[cfg.algo]
        trained = algorithm.learner(meta, hparams, runs, algorithm.centralised)
        for run in runs:
            run.env.finish()
        train_s = (time.perf_counter() - started) / n_seeds
        metrics = []
        for run, (policy, _), seed_hooks in zip(runs, trained, hooks, strict=True):
            policy.eval()
            with run.rng:
                metrics.append(
                    evaluate(policy, cfg.env, cfg.env_kwargs, seed_hooks.enhance_observation, cfg.eval_episodes)
                    if evaluation
                    else {}
                )  # fmt: skip
    wall_s = (time.perf_counter() - started) / n_seeds
    return [
        TrainResult(
            config=c,
            eval=seed_metrics,
            curves={**run.env.log.curves, **(curve.curves if curve is not None else {})},
            reflection_stats=run.env.log.reflection_stats(),
            policy=policy,
            learner=learner,
            start_steps=start,
            steps=run.env.done_steps - start,
            wall_s=wall_s,
            train_s=train_s,
            steps_per_s=(run.env.done_steps - start) / max(train_s, 1e-9),
        )
        for c, run, (policy, learner), seed_metrics, curve in zip(cfgs, runs, trained, metrics, greedy, strict=True)
    ]


def check_seed_configs(cfgs: list[TrainConfig]) -> None:
    """ValueError unless CFGS are TrainConfigs of one plan with distinct seeds."""
    if not cfgs or not all(isinstance(c, TrainConfig) for c in cfgs):
        raise ValueError("train_seeds expects a non-empty list of TrainConfig")
    plan = {**cfgs[0].to_dict(), "seed": None, "resume": None}
    for c in cfgs[1:]:
        if {**c.to_dict(), "seed": None, "resume": None} != plan:
            raise ValueError("the seeds of one job must share every setting but seed and resume")
    seeds = [c.seed for c in cfgs]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"the seeds of one job must differ, got {seeds}")


class JointProgress:
    """Folds the seeds' progress reports into one: steps summed over the seeds."""

    def __init__(self, progress: Callable[[int, int, dict], None] | None, n_seeds: int) -> None:
        self.progress = progress
        self.done, self.total = [0] * n_seeds, [0] * n_seeds

    def of_seed(self, seed: int) -> Callable[[int, int, dict], None] | None:
        if self.progress is None:
            return None

        def report(done: int, total: int, info: dict) -> None:
            self.done[seed], self.total[seed] = done, total
            self.progress(sum(self.done), sum(self.total), info)

        return report
