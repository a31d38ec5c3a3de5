"""A candidate's seeds trained in one process (`train_seeds`) against one after another, in one sitting.

    python -m benchmarks.seeds_in_one_process --seeds 3 --steps 300000 --json seeds.json \
        [--jaxmarl-baseline ~/JaxMARL/baselines/IPPO/ippo_ff_mpe.py]

Rows: MAPPO, IPPO and QMIX at lero's defaults; with --jaxmarl-baseline also IPPO and
MAPPO at JaxMARL IPPO-FF's configuration (16 envs: a learner paying per-op dispatch,
where stacking the seeds' networks pays most). Each row trains the same S seeds both
ways, in alternating order over the rounds, on one thread (a sandbox job's), and checks
that every seed's weights and curves are bitwise the same both ways. Reported: training
seconds both ways and their ratio (one after another / one process). The container
starts a job of S seeds saves come on top (benchmarks.loop_compute measures those).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from benchmarks.alternation import add_rounds_option, timed_rounds, total_seconds
from benchmarks.vs_jaxmarl import peer_config_from_yaml, peer_hparams
from lero.training import TrainConfig, train
from lero.training.bench import format_table
from lero.training.trainer import train_seeds


def same_weights(first: Any, second: Any) -> bool:
    mine, theirs = first.policy.state_dict(), second.policy.state_dict()
    return first.curves == second.curves and all(torch.equal(mine[k], theirs[k]) for k in theirs)


def bench_row(name: str, cfg: TrainConfig, n_seeds: int, rounds: int) -> dict[str, Any]:
    """Train N_SEEDS seeds of CFG in one process and one after another, ROUNDS times each."""
    cfgs = [replace(cfg, seed=seed) for seed in range(n_seeds)]
    timed = timed_rounds({"one_process": lambda: train_seeds(cfgs, evaluation=False),
                          "one_after_another": lambda: [train(c, evaluation=False) for c in cfgs]}, rounds)  # fmt: skip
    seconds = total_seconds(timed)
    identical = all(all(map(same_weights, r["one_process"][0], r["one_after_another"][0])) for r in timed)
    steps = sum(result.steps for result in timed[-1]["one_process"][0])
    return {
        "row": name,
        "algo": cfg.algo,
        "n_envs": cfg.algo_hparams().n_envs,
        "seeds": n_seeds,
        "steps_per_seed": cfg.steps,
        "one_process_s": seconds["one_process"] / rounds,
        "one_after_another_s": seconds["one_after_another"] / rounds,
        "speedup": seconds["one_after_another"] / seconds["one_process"],
        "one_process_steps_per_s": steps * rounds / seconds["one_process"],
        "bitwise_identical": identical,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_rounds_option(parser, default=2)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300_000, help="env steps per seed")
    parser.add_argument("--jaxmarl-baseline", type=Path, help="JaxMARL's baselines/IPPO/ippo_ff_mpe.py")
    parser.add_argument("--json", type=Path, help="write the rows and the machine here")
    args = parser.parse_args(argv)
    rows = [("mappo", "mappo", {}), ("ippo", "ippo", {}), ("qmix", "qmix", {})]
    if args.jaxmarl_baseline is not None:
        peer = peer_hparams(peer_config_from_yaml(args.jaxmarl_baseline))
        rows += [("ippo@jaxmarl", "ippo", peer), ("mappo@jaxmarl", "mappo", peer)]
    results = []
    for name, algo, hparams in rows:
        cfg = TrainConfig(algo=algo, steps=args.steps, threads=1, hparams=hparams)
        results.append(bench_row(name, cfg, args.seeds, args.rounds))
        print(format_table(results[-1:]), flush=True)
    print(format_table(results))
    if args.json is not None:
        machine = {"cpus": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__,
                   "load_after": os.getloadavg(), "when": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
        args.json.write_text(json.dumps({"machine": machine, "rows": results}, indent=1))
    return 0 if all(r["bitwise_identical"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
