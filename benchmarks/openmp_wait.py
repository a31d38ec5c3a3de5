"""How OpenMP's idle threads wait, against training speed, on an idle and on a busy machine.

    python -m benchmarks.openmp_wait --busy 0 2 --steps 300000 --rounds 2 --json wait.json \
        [--jaxmarl-baseline ~/JaxMARL/baselines/IPPO/ippo_ff_mpe.py]

Each row trains the same config (MAPPO and IPPO at lero's defaults; with --jaxmarl-baseline
also both at JaxMARL IPPO-FF's 16 envs) on torch's own thread count, in a fresh process per
wait (libgomp reads its environment once, at load), rounds in alternating order:

    passive   OMP_WAIT_POLICY=PASSIVE: sleep at once (lero's choice before)
    idle      what lero picks on an idle machine (`training.openmp.IDLE`: a short spin;
              --spin-count N tries another)
    default   libgomp's own (about 300k spins)
    busy      what lero picks on a busy machine (`training.openmp.BUSY`: one thread)

`--busy K` runs K busy-looping processes during a sitting: another user's jobs on a shared
machine. Reported: training steps/s per wait and its ratio to `passive` in the same sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lero.training.openmp import BUSY, CHOICES, IDLE, SPIN_COUNT, openmp_wait

WAITS = {"passive": {"OMP_WAIT_POLICY": "PASSIVE"}, "idle": IDLE, "default": {}, "busy": BUSY}
BUSY_LOOP = "while True: pass"


def wait_env(wait: str, spin_count: int) -> dict[str, str]:
    """The child's environment for WAIT: the caller's own choice removed first."""
    env = {name: value for name, value in os.environ.items() if name not in CHOICES}
    overrides = {**WAITS[wait], "GOMP_SPINCOUNT": str(spin_count)} if wait == "idle" else WAITS[wait]
    return {**env, **overrides}


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """Train SPEC's config once in this process; its steps/s."""
    from lero.training import TrainConfig, train

    cfg = TrainConfig(algo=spec["algo"], steps=spec["steps"], hparams=spec["hparams"])
    result = train(cfg, evaluation=False)
    return {"steps_per_s": result.steps_per_s, "train_s": result.train_s, "omp_wait": openmp_wait()}


def run_child(spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.openmp_wait", "--child", json.dumps(spec)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.splitlines()[-1])


def sitting(rows: list[tuple[str, str, dict]], args: argparse.Namespace, busy: int) -> list[dict[str, Any]]:
    """Every row under every wait, ROUNDS times in alternating order, with BUSY loops running."""
    hogs = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(busy)]
    try:
        results = []
        for name, algo, hparams in rows:
            rates: dict[str, list[float]] = {wait: [] for wait in args.waits}
            seen: dict[str, str] = {}  # the wait each child saw in its environment
            for round_ in range(args.rounds):
                order = args.waits if round_ % 2 == 0 else args.waits[::-1]
                for wait in order:
                    spec = {"algo": algo, "steps": args.steps, "hparams": hparams}
                    measured = run_child(spec, wait_env(wait, args.spin_count))
                    rates[wait].append(measured["steps_per_s"])
                    seen[wait] = measured["omp_wait"]
            mean = {wait: sum(r) / len(r) for wait, r in rates.items()}
            row = {"row": name, "busy_loops": busy, "load": os.getloadavg()[0]}
            for wait in args.waits:
                row[wait] = mean[wait]
                if "passive" in mean and wait != "passive":
                    row[f"{wait} / passive"] = mean[wait] / mean["passive"]
            row["rounds"], row["seen"] = rates, seen
            results.append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in ("rounds", "seen")}), flush=True)
        return results
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=300_000, help="joint env steps per training")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--busy", type=int, nargs="+", default=[0], help="busy loops per sitting")
    parser.add_argument("--waits", nargs="+", choices=list(WAITS), default=list(WAITS))
    parser.add_argument("--spin-count", type=int, default=SPIN_COUNT, help="the idle row's spin")
    parser.add_argument("--algos", nargs="+", default=["mappo", "ippo"], choices=["mappo", "ippo"])
    parser.add_argument("--jaxmarl-baseline", type=Path, help="JaxMARL's baselines/IPPO/ippo_ff_mpe.py")
    parser.add_argument("--json", type=Path, help="write the rows and the machine here")
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    rows = [(algo, algo, {}) for algo in args.algos]
    if args.jaxmarl_baseline is not None:
        from benchmarks.vs_jaxmarl import peer_config_from_yaml, peer_hparams

        peer = peer_hparams(peer_config_from_yaml(args.jaxmarl_baseline))
        rows += [(f"{algo}@jaxmarl", algo, peer) for algo in args.algos]
    results = [row for busy in args.busy for row in sitting(rows, args, busy)]
    if args.json is not None:
        machine = {"cpus": os.cpu_count(), "platform": platform.platform(),
                   "when": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
        args.json.write_text(json.dumps({"machine": machine, "args": vars(args) | {"json": str(args.json),
                                         "jaxmarl_baseline": str(args.jaxmarl_baseline)}, "rows": results}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
