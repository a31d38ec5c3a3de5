"""Throughput benchmarks: lero's batched env against mpe2, and end-to-end training.

The machine these run on is usually shared, so absolute numbers drift; what is
comparable is the ratio of two measurements taken in the same run. ``bench_env``
therefore alternates short rounds of both envs and reports their ratio.
A joint step is one step of all agents in one environment.

With more than one torch thread, how OpenMP's idle threads wait decides much of the
speed (`training.openmp`); rows report the wait in effect as ``omp_wait``.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import numpy as np
import torch

from lero.training.config import TrainConfig
from lero.training.defaults import DEFAULT_ALGO, DEFAULT_ENV
from lero.training.envs import make_env
from lero.training.openmp import openmp_wait
from lero.training.trainer import torch_threads, train


def _run_lero(env: Any, actions: torch.Tensor, seconds: float) -> tuple[int, float]:
    """Step ``env`` with a cycling bank of actions [K, B, N] for ``seconds``; (joint steps, wall s)."""
    steps, start = 0, time.perf_counter()
    with torch.inference_mode():
        while (elapsed := time.perf_counter() - start) < seconds:
            env.step(actions[steps % len(actions)])
            steps += 1
    return steps * env.n_envs, elapsed


def _run_mpe2(env: Any, actions: np.ndarray, seconds: float) -> tuple[int, float]:
    """Step one mpe2 parallel_env with random actions [K, N] for ``seconds``; (joint steps, wall s)."""
    names = env.possible_agents
    steps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        if not env.agents:
            env.reset()
        row = actions[steps % len(actions)]
        env.step({name: int(row[i]) for i, name in enumerate(names)})
        steps += 1
    return steps, elapsed


def bench_env(
    n_envs: int = 4096,
    seconds: float = 6.0,
    env_kwargs: dict[str, Any] | None = None,
    threads: int | None = 2,
    rounds: int = 3,
    seed: int = 0,
    env_name: str = DEFAULT_ENV,
) -> dict[str, Any]:
    """Joint steps/s of ``make_env(env_name, n_envs)`` and of its reference (mpe2) parallel_env.

    ``seconds`` is the total measuring time, split evenly between the two envs and
    over ``rounds`` alternations. Returns the two rates and ``ratio`` (lero / mpe2).
    Both take uniformly random valid actions (each agent's own action space).
    """
    if seconds <= 0 or rounds < 1:
        raise ValueError(f"bench_env: need seconds > 0 and rounds >= 1, got {seconds}, {rounds}")
    env_kwargs = dict(env_kwargs or {})
    env = make_env(env_name, n_envs, **env_kwargs)
    if env.task.reference is None:
        raise ValueError(f"bench_env: {env_name} has no reference implementation to compare with")
    reference = importlib.import_module(env.task.reference).parallel_env(
        **{k: v for k, v in env_kwargs.items() if k != "device"}
    )
    reference.reset(seed=seed)
    gen = torch.Generator().manual_seed(seed)
    lero_actions = torch.stack([env.random_actions(gen) for _ in range(64)]).to(env.device)
    per_agent = env.action_mask().sum(dim=1).numpy()  # [N] action counts
    mpe2_actions = np.random.default_rng(seed).integers(0, per_agent, (1024, env.n_agents))
    slice_s = seconds / (2 * rounds)
    totals = {"lero": [0, 0.0], "mpe2": [0, 0.0]}
    with torch_threads(threads):
        env.reset(seed)
        _run_lero(env, lero_actions, min(0.2, slice_s))  # warm-up: allocator, first-call overheads
        for _ in range(rounds):
            for name, (steps, wall) in (
                ("lero", _run_lero(env, lero_actions, slice_s)),
                ("mpe2", _run_mpe2(reference, mpe2_actions, slice_s)),
            ):
                totals[name][0] += steps
                totals[name][1] += wall
    reference.close()
    lero_rate = totals["lero"][0] / totals["lero"][1]
    mpe2_rate = totals["mpe2"][0] / totals["mpe2"][1]
    return {
        "bench": "env",
        "env": env_name,
        "env_kwargs": env_kwargs,
        "n_envs": n_envs,
        "threads": torch.get_num_threads() if threads is None else threads,
        "omp_wait": openmp_wait(),
        "lero_steps_per_s": lero_rate,
        "mpe2_steps_per_s": mpe2_rate,
        "ratio": lero_rate / mpe2_rate,
    }


def bench_train(
    algo: str = DEFAULT_ALGO,
    steps: int = 200_000,
    env_kwargs: dict[str, Any] | None = None,
    threads: int | None = 2,
    seed: int = 0,
    eval_episodes: int = 64,
    env_name: str = DEFAULT_ENV,
) -> dict[str, Any]:
    """End-to-end joint steps/s of ``training.train`` (rollouts + updates + final evaluation)."""
    cfg = TrainConfig(
        env=env_name,
        env_kwargs=dict(env_kwargs or {}),
        algo=algo,
        steps=steps,
        seed=seed,
        threads=threads,
        eval_episodes=eval_episodes,
    )
    start = time.perf_counter()
    result = train(cfg)
    wall = time.perf_counter() - start
    return {
        "bench": "train",
        "env": env_name,
        "env_kwargs": cfg.env_kwargs,
        "algo": algo,
        "threads": threads,
        "steps": result.steps,
        "wall_s": wall,
        "train_steps_per_s": result.steps_per_s,
        "end_to_end_steps_per_s": result.steps / wall,
        "return": result.eval.get("return"),
    }


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "-"
    return str(value)


def format_table(rows: list[dict[str, Any]]) -> str:
    """Plain-text table of benchmark rows; columns are the union of keys, in first-seen order."""
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    cells = [[_cell(row.get(col)) for col in columns] for row in rows]
    widths = [max([len(col)] + [len(line[i]) for line in cells]) for i, col in enumerate(columns)]
    lines = ["  ".join(col.ljust(w) for col, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in cells]
    return "\n".join(lines)
