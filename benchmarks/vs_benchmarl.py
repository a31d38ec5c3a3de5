"""lero's MAPPO against BenchMARL's MAPPO on one VMAS task, in one sitting.

    python -m benchmarks.vs_benchmarl --benchmarl-python /tmp/venv-benchmarl/bin/python \
        --task navigation --steps 3000000 --json vs_benchmarl.json

BenchMARL is no dependency of lero: it runs in its own interpreter (a venv with `benchmarl`,
its TorchRL and `vmas`) through benchmarks/benchmarl_driver.py. Both sides train on the same
VMAS task with BenchMARL's own task YAML (`--describe`: navigation has 3 agents, 100 steps,
shared_rew False) and the same PPO settings (`SHARED`, overridable by flags): envs per
batch, rollout length (their product is BenchMARL's frames per batch), minibatches, epochs
(BenchMARL's `on_policy_n_minibatch_iters` counts passes over the batch, each of all its
minibatches: `benchmarl_settings`), learning rate (constant on both sides), gamma, GAE
lambda, clip, entropy and value coefficients, gradient clip, and two hidden layers of
`--hidden` ReLU units for actor and critic (BenchMARL's default Tanh is replaced to match
lero's networks). MAPPO's critic sees every agent's observation on both. The driver reports
the minibatch steps BenchMARL took per batch; a count other than epochs x minibatches stops
the run.
Differences that remain: lero normalises advantages per batch and clips the value loss
only as far as `value_clip_eps` (set far out of reach here), BenchMARL does neither;
BenchMARL's MAPPO critic gives one value for all agents, lero's one per agent; lero's actor
sees an agent id, its critic the elapsed fraction of the episode. None of these moved the
60k-step navigation curve (docs/benchmarks.md); the epochs did.

Rows, each trained once per round at the same joint-step budget and seed, rounds in
alternating order so that drift in the machine's load hits every row alike:

    benchmarl-mappo      BenchMARL's Experiment (no evaluation, loggers or checkpoints)
    lero-mappo@benchmarl lero's MAPPO at the same settings on `vmas:<task>`
    lero-mappo           lero's own MAPPO defaults on `vmas:<task>`

Reported per row: training steps/s (lero: evaluation excluded; BenchMARL: `Experiment.run`,
its setup timed apart), the final training return per agent (the mean of the last
1/SMOOTH of the curve), lero's greedy evaluation return, the wall-clock until the smoothed
training return first reaches BenchMARL's final one, and the load average around the row.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.vs_jaxmarl import (
    alternating_rounds,
    final_return,
    load,
    run_lero_curve,
    time_to_return,
)
from lero.training.openmp import openmp_wait, settle_openmp_wait

settle_openmp_wait()

DRIVER = Path(__file__).with_name("benchmarl_driver.py")
PEER = "benchmarl-mappo"
LERO_ROWS = ("lero-mappo@benchmarl", "lero-mappo")
# The PPO settings both sides share: BenchMARL's on-policy defaults (60 envs x 100 steps =
# its 6000 frames per batch, minibatches of 400 = 15 per pass, on_policy_n_minibatch_iters
# 45 = 45 passes, i.e. 675 minibatch steps per batch; lr 5e-5, clip 0.2, lambda 0.9, no
# entropy bonus, gradient norm 5) and its 256-unit MLPs
SHARED = {"n_envs": 60, "rollout_len": 100, "minibatches": 15, "epochs": 45, "lr": 5e-5, "gamma": 0.99,
          "gae_lambda": 0.9, "clip_eps": 0.2, "ent_coef": 0.0, "vf_coef": 1.0, "max_grad_norm": 5.0,
          "hidden": 256}
NO_VALUE_CLIP = 1e9  # lero's value_clip_eps where BenchMARL clips no value loss


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchmarl-python", type=Path, required=True,
                        help="the interpreter BenchMARL (and vmas) is installed in")
    parser.add_argument("--task", default="navigation", help="a VMAS task BenchMARL names (VmasTask)")
    parser.add_argument("--steps", type=int, default=3_000_000, help="joint env steps per row")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--rows", nargs="+", choices=LERO_ROWS, default=list(LERO_ROWS), help="lero rows to run")
    for key, value in SHARED.items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--threads", type=int, help="torch threads on both sides (default: torch's own)")
    parser.add_argument("--json", type=Path, help="write every row and the summary here")
    args = parser.parse_args(argv)
    if not args.benchmarl_python.is_file():
        parser.error(f"no such file: {args.benchmarl_python}")
    if args.steps <= 0 or args.rounds <= 0:
        parser.error("--steps and --rounds must be positive")
    return args


def shared(args: argparse.Namespace) -> dict[str, Any]:
    return {key: getattr(args, key) for key in SHARED}


def benchmarl_settings(settings: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """SETTINGS (`SHARED`'s keys) as the fields the driver sets on BenchMARL's ExperimentConfig,
    MappoConfig and MlpConfig (actor and critic).

    Why `on_policy_n_minibatch_iters = epochs`: BenchMARL 1.5's on-policy loop
    (benchmarl/experiment/experiment.py) runs that many passes, each of
    ceil(frames / on_policy_minibatch_size) minibatches drawn without replacement, so the
    field counts epochs (`benchmarl_steps_per_batch`), not minibatch steps.
    """
    frames = settings["n_envs"] * settings["rollout_len"]
    return {
        "experiment": {
            "on_policy_collected_frames_per_batch": frames,
            "on_policy_n_envs_per_worker": settings["n_envs"],
            "on_policy_minibatch_size": math.ceil(frames / settings["minibatches"]),  # lero's size
            "on_policy_n_minibatch_iters": settings["epochs"],
            "lr": settings["lr"], "gamma": settings["gamma"], "clip_grad_val": settings["max_grad_norm"],
        },
        "algorithm": {"entropy_coef": settings["ent_coef"], "clip_epsilon": settings["clip_eps"],
                      "lmbda": settings["gae_lambda"], "critic_coef": settings["vf_coef"]},
        "model": {"num_cells": [settings["hidden"]] * 2, "activation": "ReLU"},
    }  # fmt: skip


def benchmarl_steps_per_batch(experiment: dict[str, Any]) -> int:
    """Minibatch gradient steps BenchMARL 1.5 takes per collected batch with these
    ExperimentConfig fields: passes x minibatches per pass (its on-policy loop)."""
    per_pass = -(-experiment["on_policy_collected_frames_per_batch"] // experiment["on_policy_minibatch_size"])
    return experiment["on_policy_n_minibatch_iters"] * per_pass


def check_steps_per_batch(reported: list[int], settings: dict[str, Any]) -> None:
    """Stop when BenchMARL took another number of minibatch steps per batch than lero's
    epochs x minibatches: the two sides would not train alike."""
    expected = settings["epochs"] * settings["minibatches"]
    if set(reported) != {expected}:
        raise SystemExit(f"vs_benchmarl: BenchMARL took {sorted(set(reported))} minibatch steps per batch, "
                         f"lero takes {expected} (epochs x minibatches)")


def peer(args: argparse.Namespace, *options: str) -> str:
    """Run the driver in BenchMARL's interpreter; its last stdout line."""
    done = subprocess.run([str(args.benchmarl_python), str(DRIVER), *options], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"vs_benchmarl: the BenchMARL driver failed: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def task_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """BenchMARL's YAML for the task: the scenario's keywords both sides run with."""
    return json.loads(peer(args, "--describe", args.task))


def run_peer(args: argparse.Namespace, kwargs: dict[str, Any]) -> dict[str, Any]:
    config = {"task": args.task, "task_kwargs": kwargs, "steps": args.steps, "seed": args.seed,
              "threads": args.threads, **benchmarl_settings(shared(args))}
    load_before = load()
    out = json.loads(peer(args, "--config", json.dumps(config)))
    check_steps_per_batch(out["steps_per_batch"], shared(args))
    times = [t for t, _ in out["curve"]]
    returns = [r for _, r in out["curve"]]
    return {"row": PEER, "steps": out["frames"], "steps_per_s": out["frames"] / out["run_s"],
            "train_s": out["run_s"], "setup_s": out["setup_s"],
            "final_return": final_return(returns), "eval_return": None,
            "load_before": load_before, "load_after": load(), "curve_times": times, "curve_returns": returns,
            "versions": out["versions"]}


def lero_hparams(row: str, args: argparse.Namespace) -> dict[str, Any]:
    if not row.endswith("@benchmarl"):
        return {}
    return {**shared(args), "anneal_lr": False, "value_clip_eps": NO_VALUE_CLIP}


def summarize(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One line per row and round: speed against BenchMARL's and time to its final return."""
    lines = []
    for index, rows in enumerate(rounds):
        reference = next(row for row in rows if row["row"] == PEER)
        for row in rows:
            lines.append({
                "round": index, "row": row["row"], "steps": row["steps"], "steps_per_s": row["steps_per_s"],
                "x_benchmarl": row["steps_per_s"] / reference["steps_per_s"],
                "train_return": row["final_return"], "eval_return": row["eval_return"],
                "s_to_benchmarl_return": time_to_return(row["curve_times"], row["curve_returns"],
                                                        reference["final_return"]),
                "wall_s": row["train_s"], "load": (row["load_before"] + row["load_after"]) / 2,
            })
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from lero.training.bench import format_table

    kwargs = task_kwargs(args)
    env = f"vmas:{args.task}"
    rounds = alternating_rounds(
        [PEER, *args.rows], args.rounds,
        lambda name: run_peer(args, kwargs) if name == PEER else run_lero_curve(
            name, "mappo", args.steps, args.seed, args.threads, lero_hparams(name, args), env=env, env_kwargs=kwargs),
    )  # fmt: skip
    summary = summarize(rounds)
    print(format_table(summary))
    if args.json:
        args.json.write_text(json.dumps({
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {"cpus": os.cpu_count(), "processor": platform.processor()},
            "omp_wait": openmp_wait(), "task_kwargs": kwargs,
            "args": {k: str(v) for k, v in vars(args).items()}, "summary": summary, "rounds": rounds,
        }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
