"""Learning-quality and throughput benchmark for the training engine (not a test).

Targets (simple_spread N=3, full observability, mean over 3 seeds):
MAPPO per-agent `return` >= -13 within 10M joint steps; MAPPO end to end >= 100k
joint steps/s on 2 cores. VDN / QMIX (PQN-style, value_decomposition.py) >= -11
within 2M and >= -10 within 5M, at >= 30k joint steps/s on 2 cores.
Measured (2M steps, seeds 0 1 2, --threads 1, machine shared): VDN -9.98 / -10.24 /
-9.28 (mean -9.83), QMIX -9.40 / -9.43 / -9.47 (mean -9.43), ~10k steps/s per process
with two running side by side at load 8-10. Throughput, 2 threads, one process, load 4-6
(`training.bench.bench_train(algo, 400_000)`): VDN 60-63k, QMIX 38k, MAPPO 73-92k joint
steps/s.

    python -m benchmarks.learning --algo mappo --steps 10000000 --seeds 0 1 2
    python -m benchmarks.learning --algo qmix --steps 3000000 --json out.json
    python -m benchmarks.learning --env simple_speaker_listener --steps 2000000 --seeds 0 1 2

Prints one line per seed and a summary; peak RSS comes from getrusage. On a
shared machine absolute speeds drift with load, so the summary also gives the
training speed as a ratio of the env-only speed (random actions, same batch)
measured in the same process right after training.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time

import torch

from lero.training import ALGOS, ENV_NAMES, TrainConfig, make_env, train
from lero.training.defaults import DEFAULT_ALGO, DEFAULT_ENV, EVAL_EPISODES, EVAL_SEED


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=ENV_NAMES, default=DEFAULT_ENV)
    parser.add_argument("--algo", choices=ALGOS, default=DEFAULT_ALGO)
    parser.add_argument("--steps", type=int, default=10_000_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--n-envs", type=int, default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env kwarg (JSON value)",
    )
    parser.add_argument(
        "--hparam",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="hparam override (JSON value)",
    )
    parser.add_argument(
        "--json", default=None, help="write per-seed results (eval, curves, speed) here"
    )
    return parser.parse_args(argv)


def parse_pairs(pairs: list[str]) -> dict:
    parsed = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"expected KEY=VALUE, got {pair!r}")
        parsed[key] = json.loads(value)
    return parsed


@torch.inference_mode()
def env_only_steps_per_s(env_name: str, n_envs: int, env_kwargs: dict, seconds: float = 3.0) -> float:
    """Joint steps/s of the bare batched env stepped with random actions."""
    env = make_env(env_name, n_envs, **env_kwargs)
    env.reset(seed=0)
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        env.step(env.random_actions())
        steps += n_envs
    return steps / (time.perf_counter() - started)


@torch.inference_mode()
def random_policy_return(env_name: str, env_kwargs: dict, episodes: int = EVAL_EPISODES) -> float:
    """Mean per-agent native episode return of uniformly random valid actions (the floor)."""
    env = make_env(env_name, episodes, **env_kwargs)
    env.reset(seed=EVAL_SEED)
    total = torch.zeros(episodes)
    for _ in range(env.max_steps):
        _, reward, _, _ = env.step(env.random_actions())
        total += reward.mean(dim=1)
    return float(total.mean())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    results = []
    for seed in args.seeds:
        cfg = TrainConfig(
            env=args.env,
            algo=args.algo,
            steps=args.steps,
            seed=seed,
            n_envs=args.n_envs,
            env_kwargs=parse_pairs(args.env_arg),
            hparams=parse_pairs(args.hparam),
            threads=args.threads,
        )
        started = time.perf_counter()
        result = train(
            cfg,
            progress=lambda done, total, info: print(f"  {done}/{total} {info}", file=sys.stderr),
        )
        peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{args.env} {args.algo} seed={seed} steps={result.steps} eval={result.eval} "
            f"train_steps_per_s={result.steps_per_s:.0f} wall_s={time.perf_counter() - started:.0f} "
            f"peak_rss_mb={peak_rss_mb:.0f}",
            flush=True,
        )
        results.append({**result.to_json(), "peak_rss_mb": peak_rss_mb})
    returns = [r["eval"]["return"] for r in results]
    speed = statistics.mean(r["steps_per_s"] for r in results)
    env_speed = env_only_steps_per_s(args.env, cfg.algo_hparams().n_envs, cfg.env_kwargs)
    floor = random_policy_return(args.env, cfg.env_kwargs)
    print(
        f"SUMMARY {args.env} {args.algo} steps={args.steps} seeds={args.seeds} "
        f"return mean={statistics.mean(returns):.2f} per-seed={[round(x, 2) for x in returns]} "
        f"random-policy return={floor:.2f} "
        f"train_steps_per_s mean={speed:.0f} env_only_steps_per_s={env_speed:.0f} "
        f"train/env={speed / env_speed:.3f}"
    )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
