"""lero's VMAS adapter against VMAS's own batched stepping: joint steps/s and their ratio.

    python -m benchmarks.vmas_throughput                          # navigation, B=4096, 1 thread
    python -m benchmarks.vmas_throughput --scenario balance transport --n-envs 1024 4096
    python -m benchmarks.vmas_throughput --seconds 2 --n-envs 64 --json vmas_throughput.json

The adapter (`training/envs/vmas_adapter.py`) wraps one `vmas.make_env` batch; what it adds
per step is the action checks, stacking the agents' observations and rewards, `world()` for
the reward context and the episode metrics. Both sides take the same random valid actions
and reset their slots at the horizon the same way (every slot done: one `reset()`); short
rounds alternate so that drift in the machine's load hits both alike. Compare the ratio
columns (`ratio` over all rounds, `ratio_median` the median of the rounds' own ratios); absolute
rates depend on the load, recorded in every row.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.alternation import add_rounds_option, timed_rounds, total_seconds
from lero.training.openmp import settle_openmp_wait

settle_openmp_wait()

HORIZON = 100  # the adapter's default max_steps


def run_adapter(env: Any, actions: Any, seconds: float) -> int:
    """Step lero's env with a cycling bank of actions [K, B, N] for SECONDS; joint steps."""
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        env.step(actions[steps % len(actions)])
        steps += 1
    return steps * env.n_envs


def run_vmas(env: Any, actions: list[list[Any]], seconds: float) -> int:
    """Step VMAS's own env with the same bank (per step: one [B] tensor per agent); joint steps."""
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, done, _ = env.step(actions[steps % len(actions)])
        if bool(done.all()):
            env.reset()
        elif bool(done.any()):
            for index in done.nonzero().flatten().tolist():
                env.reset_at(index, return_observations=False)
        steps += 1
    return steps * env.num_envs


def bench(scenario: str, n_envs: int, seconds: float, rounds: int, kwargs: dict[str, Any]) -> dict[str, Any]:
    """One row: both rates over ``rounds`` alternations of ``seconds / (2 * rounds)`` each."""
    import torch
    import vmas

    from lero.training.envs import make_env

    ours = make_env(f"vmas:{scenario}", n_envs, max_steps=HORIZON, **kwargs)
    theirs = vmas.make_env(scenario, num_envs=n_envs, continuous_actions=False, max_steps=HORIZON, **kwargs)
    generator = torch.Generator().manual_seed(0)
    bank = torch.stack([ours.random_actions(generator) for _ in range(64)])  # [K, B, N]
    vmas_bank = [list(joint.unbind(dim=1)) for joint in bank]
    ours.reset(seed=0)
    theirs.reset(seed=0)
    slice_s = seconds / (2 * rounds)
    load_before = os.getloadavg()[0]
    with torch.inference_mode():
        run_adapter(ours, bank, min(0.2, slice_s))  # warm-up
        run_vmas(theirs, vmas_bank, min(0.2, slice_s))
        timed = timed_rounds({"lero": lambda: run_adapter(ours, bank, slice_s),
                              "vmas": lambda: run_vmas(theirs, vmas_bank, slice_s)}, rounds)  # fmt: skip
    seconds_of = total_seconds(timed)
    lero_rate = sum(r["lero"][0] for r in timed) / seconds_of["lero"]
    vmas_rate = sum(r["vmas"][0] for r in timed) / seconds_of["vmas"]
    # lero / vmas per round: its median resists a burst of load in one round
    round_ratios = [(r["lero"][0] / r["lero"][1]) / (r["vmas"][0] / r["vmas"][1]) for r in timed]
    return {"scenario": scenario, "kwargs": kwargs, "n_envs": n_envs, "threads": torch.get_num_threads(),
            "lero_steps_per_s": lero_rate, "vmas_steps_per_s": vmas_rate, "ratio": lero_rate / vmas_rate,
            "ratio_median": statistics.median(round_ratios), "load": (load_before + os.getloadavg()[0]) / 2}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", nargs="+", default=["navigation"])
    parser.add_argument("--n-envs", type=int, nargs="+", default=[4096])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=10.0, help="measuring time per row, both sides")
    add_rounds_option(parser, default=4)
    parser.add_argument("--n-agents", type=int, help="the scenario's n_agents (default: its own)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or min(args.n_envs) < 1:
        parser.error("--seconds and --n-envs must be positive")
    import torch

    from lero.training.bench import format_table

    torch.set_num_threads(args.threads)
    kwargs = {} if args.n_agents is None else {"n_agents": args.n_agents}
    rows = []
    for scenario in args.scenario:
        for n_envs in args.n_envs:
            rows.append(bench(scenario, n_envs, args.seconds, args.rounds, kwargs))
            print(format_table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(format_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
