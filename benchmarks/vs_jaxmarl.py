"""lero's IPPO and MAPPO against JaxMARL's IPPO-FF on MPE simple_spread, in one sitting.

    python -m benchmarks.vs_jaxmarl --jaxmarl-baseline ~/JaxMARL/baselines/IPPO/ippo_ff_mpe.py \
        --jaxmarl-python ~/venvs/jaxmarl/bin/python --steps 1000000 --json vs_jaxmarl.json

JaxMARL is no dependency of lero: it runs from the user's checkout of its training file
(and the YAML config beside it) in its own interpreter, through benchmarks/jaxmarl_driver.py.
Rows, each trained once per round at the same joint-step budget and seed, rounds in
alternating order (ABC.., ..CBA) so that drift in the machine's load hits every row alike:

    jaxmarl-ippo-ff     the peer's file and config, one seed (its own compile timed apart)
    lero-ippo@jaxmarl   lero's IPPO at the peer's configuration (envs, rollout length,
    lero-mappo@jaxmarl  epochs, minibatches, hidden size, lr, clipping, coefficients)
    lero-ippo, lero-mappo   lero's own defaults

Reported per row: training steps/s (lero: evaluation excluded; JaxMARL: without and with
its compile), the final training return per agent (JaxMARL logs N x the per-agent return,
"as per the on-policy codebase"; divided by N here), lero's greedy evaluation return, and
the wall-clock until the (smoothed) training return first reaches JaxMARL's own final one.
Ratios are against the JaxMARL row of the same round. Absolute speeds depend on the load of
the (shared) machine; the load average is recorded before and after every row.

lero's rows wait between torch ops the way the `lero` command does
(`training.openmp`), unless the caller chose an OpenMP wait; rows record it as `omp_wait`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lero.training.openmp import openmp_wait, settle_openmp_wait

settle_openmp_wait()

DRIVER = Path(__file__).with_name("jaxmarl_driver.py")
PEER = "jaxmarl-ippo-ff"
LERO_ROWS = ("lero-ippo@jaxmarl", "lero-mappo@jaxmarl", "lero-ippo", "lero-mappo")
HIDDEN = 64  # ippo_ff_mpe.py's ActorCritic hard-codes 64-unit layers
SMOOTH = 20  # returns are smoothed over 1/SMOOTH of a curve before the time-to-return search
# The peer's YAML keys -> lero's PPOHparams fields (the rest of the YAML is the env, seeds, logging)
PEER_HPARAMS = {
    "NUM_ENVS": "n_envs",
    "NUM_STEPS": "rollout_len",
    "UPDATE_EPOCHS": "epochs",
    "NUM_MINIBATCHES": "minibatches",
    "LR": "lr",
    "ANNEAL_LR": "anneal_lr",
    "GAMMA": "gamma",
    "GAE_LAMBDA": "gae_lambda",
    "CLIP_EPS": "clip_eps",
    "ENT_COEF": "ent_coef",
    "VF_COEF": "vf_coef",
    "MAX_GRAD_NORM": "max_grad_norm",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jaxmarl-baseline", type=Path, required=True, help="its ippo_ff_mpe.py")
    parser.add_argument(
        "--jaxmarl-python", type=Path, required=True, help="the interpreter JaxMARL is installed in"
    )
    parser.add_argument("--steps", type=int, default=1_000_000, help="joint env steps per row")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--rows", nargs="+", choices=LERO_ROWS, default=list(LERO_ROWS), help="lero rows to run"
    )
    parser.add_argument("--threads", type=int, help="lero's torch threads (default: torch's own)")
    parser.add_argument("--json", type=Path, help="write every row and the summary here")
    args = parser.parse_args(argv)
    for path in (args.jaxmarl_baseline, args.jaxmarl_python):
        if not path.is_file():
            parser.error(f"no such file: {path}")
    if args.steps <= 0 or args.rounds <= 0:
        parser.error("--steps and --rounds must be positive")
    return args


def peer_hparams(config: dict[str, Any]) -> dict[str, Any]:
    """lero PPO hparams equal to the peer's YAML config (its one clip serves policy and value)."""
    hparams = {lero: config[peer] for peer, lero in PEER_HPARAMS.items()}
    return {**hparams, "value_clip_eps": config["CLIP_EPS"], "hidden": HIDDEN}


def smoothed(values: list[float]) -> list[float]:
    """Trailing mean over 1/SMOOTH of the curve (at least one point)."""
    window = max(1, len(values) // SMOOTH)
    return [statistics.fmean(values[max(0, i + 1 - window) : i + 1]) for i in range(len(values))]


def time_to_return(times: list[float], returns: list[float], target: float | None) -> float | None:
    """Seconds until the smoothed return first reaches ``target``; None if it never does (or
    there is no target: the reference finished no episode)."""
    if target is None:
        return None
    return next((t for t, r in zip(times, smoothed(returns), strict=True) if r >= target), None)


def final_return(curve: list[float]) -> float | None:
    """The mean of a curve's last 1/SMOOTH; None when no episode ended (a budget shorter than
    one episode logs no return)."""
    return statistics.fmean(curve[-max(1, len(curve) // SMOOTH) :]) if curve else None


def load() -> float:
    return os.getloadavg()[0]


def run_peer(args: argparse.Namespace) -> dict[str, Any]:
    """Train the peer once in its own interpreter; its curve is per agent, timed per update."""
    command = [
        str(args.jaxmarl_python),
        str(DRIVER),
        "--baseline",
        str(args.jaxmarl_baseline),
        "--steps",
        str(args.steps),
        "--seed",
        str(args.seed),
    ]
    env = dict(os.environ)
    if args.threads == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    load_before = load()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"vs_jaxmarl: the JaxMARL driver failed: {done.stderr.strip()[-2000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    n_agents = out["config"]["NUM_ACTORS"] // out["config"]["NUM_ENVS"]
    per_update = out["run_s"] / len(out["curve"])
    # per-agent, as lero reports it; the first update's mean counts steps before any episode
    # ended (logged as 0), so it is left out
    curve = [value / n_agents for value in out["curve"][1:]]
    return {
        "row": PEER,
        "steps": out["steps"],
        "steps_per_s": out["steps"] / out["run_s"],
        "steps_per_s_with_compile": out["steps"] / (out["run_s"] + out["compile_s"]),
        "compile_s": out["compile_s"],
        "train_s": out["run_s"],
        "final_return": final_return(curve),
        "eval_return": None,
        "load_before": load_before,
        "load_after": load(),
        "curve_times": [out["compile_s"] + per_update * (i + 2) for i in range(len(curve))],
        "curve_returns": curve,
        "config": out["config"],
        "jax": out["jax"],
    }


def run_lero(row: str, steps: int, seed: int, threads: int | None, peer_config: dict) -> dict[str, Any]:
    """Train one lero row on simple_spread (at the peer's configuration for ``@jaxmarl`` rows)."""
    algo = row.removeprefix("lero-").removesuffix("@jaxmarl")
    hparams = peer_hparams(peer_config) if row.endswith("@jaxmarl") else {}
    return run_lero_curve(row, algo, steps, seed, threads, hparams)


def run_lero_curve(row: str, algo: str, steps: int, seed: int, threads: int | None, hparams: dict[str, Any],
                   env: str | None = None, env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train ALGO once on ENV (default: lero's); progress points (wall s, return) make its
    time-to-return curve. Shared by the peer benchmarks (vs_benchmarl)."""
    from lero.training import TrainConfig, train

    where = {} if env is None else {"env": env, "env_kwargs": dict(env_kwargs or {})}
    cfg = TrainConfig(algo=algo, steps=steps, seed=seed, hparams=hparams, threads=threads, **where)
    times: list[float] = []
    returns: list[float] = []

    def progress(done: int, total: int, info: dict) -> None:
        if info.get("return") is not None:
            times.append(time.perf_counter() - started)
            returns.append(info["return"])

    load_before = load()
    started = time.perf_counter()
    result = train(cfg, progress=progress)
    curve = result.curves.get("return", [])  # empty when no episode ended within the steps
    return {
        "row": row,
        "steps": result.steps,
        "steps_per_s": result.steps_per_s,
        "train_s": result.train_s,
        "final_return": final_return(curve),
        "eval_return": result.eval.get("return"),
        "load_before": load_before,
        "load_after": load(),
        "curve_times": times,
        "curve_returns": returns,
        "hparams": dataclasses.asdict(cfg.algo_hparams()),
    }


def summarize(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One line per row and round: speed ratios and time to the peer's final return."""
    lines = []
    for index, rows in enumerate(rounds):
        peer = next(row for row in rows if row["row"] == PEER)
        target = peer["final_return"]
        for row in rows:
            reach = time_to_return(row["curve_times"], row["curve_returns"], target)
            lines.append(
                {
                    "round": index,
                    "row": row["row"],
                    "steps": row["steps"],
                    "steps_per_s": row["steps_per_s"],
                    "x_jaxmarl": row["steps_per_s"] / peer["steps_per_s"],
                    "x_jaxmarl_with_compile": row["steps_per_s"] / peer["steps_per_s_with_compile"],
                    "train_return": row["final_return"],
                    "eval_return": row["eval_return"],
                    "s_to_jaxmarl_return": reach,
                    "load": (row["load_before"] + row["load_after"]) / 2,
                }
            )
    return lines


def alternating_rounds(order: list[str], n_rounds: int, run_row: Callable[[str], dict[str, Any]]) -> list[list[dict]]:
    """`run_row(name)` for every row of ORDER, N_ROUNDS times, every other round in reverse (so
    neither side always runs first on a warming machine); each round's rows in ORDER."""
    rounds = []
    for index in range(n_rounds):
        rows: dict[str, dict[str, Any]] = {}
        for name in order if index % 2 == 0 else order[::-1]:
            rows[name] = run_row(name)
            final = rows[name]["final_return"]
            print(f"round {index} {name}: {rows[name]['steps_per_s']:,.0f} steps/s, return "
                  f"{final if final is None else f'{final:.2f}'}, load {rows[name]['load_after']:.1f}",
                  file=sys.stderr, flush=True)  # fmt: skip
        rounds.append([rows[name] for name in order])
    return rounds


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from lero.training.bench import format_table

    peer_config = peer_config_from_yaml(args.jaxmarl_baseline)
    rounds = alternating_rounds(
        [PEER, *args.rows], args.rounds,
        lambda name: run_peer(args) if name == PEER else run_lero(name, args.steps, args.seed, args.threads, peer_config),
    )  # fmt: skip
    summary = summarize(rounds)
    print(format_table(summary))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "date": datetime.now(UTC).isoformat(timespec="seconds"),
                    "machine": {"cpus": os.cpu_count(), "processor": platform.processor()},
                    "omp_wait": openmp_wait(),
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "summary": summary,
                    "rounds": rounds,
                },
                indent=1,
            )
        )
    return 0


def peer_config_from_yaml(baseline: Path) -> dict[str, Any]:
    """The peer's YAML config beside its training file, as the driver reads it."""
    import yaml

    return yaml.safe_load((baseline.parent / "config" / f"{baseline.stem}.yaml").read_text())


if __name__ == "__main__":
    sys.exit(main())
