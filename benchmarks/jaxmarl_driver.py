"""Runs JaxMARL's own IPPO-FF training file for benchmarks.vs_jaxmarl, in JaxMARL's interpreter.

    /path/to/jaxmarl-venv/bin/python benchmarks/jaxmarl_driver.py \
        --baseline ~/JaxMARL/baselines/IPPO/ippo_ff_mpe.py --steps 1000000 --seed 0

Imports nothing from lero (JaxMARL is no dependency of lero; this file only runs in the
peer's venv). It loads the user's checkout of the training file and its YAML config,
overrides TOTAL_TIMESTEPS and SEED, and trains one seed with the file's own ``make_train``
(its ``main`` vmaps NUM_SEEDS seeds; one seed is the like-for-like row). Compile and run
are timed apart (``jit(...).lower(rng).compile()``, then the compiled call, blocked).
Prints one JSON object on stdout's last line.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import time
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="JaxMARL's ippo_ff_mpe.py")
    parser.add_argument("--config", type=Path, help="its YAML (default: config/<stem>.yaml beside it)")
    parser.add_argument("--steps", type=int, required=True, help="TOTAL_TIMESTEPS (joint env steps)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def load_baseline(path: Path):
    spec = importlib.util.spec_from_file_location("jaxmarl_baseline", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"jaxmarl_driver: cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    config_path = args.config or args.baseline.parent / "config" / f"{args.baseline.stem}.yaml"
    for path in (args.baseline, config_path):
        if not path.is_file():
            raise SystemExit(f"jaxmarl_driver: no such file {path}")
    import jax
    import wandb
    import yaml

    config = yaml.safe_load(config_path.read_text())
    config.update(TOTAL_TIMESTEPS=args.steps, SEED=args.seed)
    baseline = load_baseline(args.baseline)
    wandb.init(mode="disabled")  # the file's update callback logs to wandb, as its main() sets up
    rng = jax.random.PRNGKey(args.seed)
    started = time.perf_counter()
    compiled = jax.jit(baseline.make_train(config)).lower(rng).compile()
    compile_s = time.perf_counter() - started
    started = time.perf_counter()
    out = jax.block_until_ready(compiled(rng))
    run_s = time.perf_counter() - started
    # [updates]: the file averages each update's finished episodes' per-agent returns
    curve = [float(x) for x in out["metrics"]["returned_episode_returns"]]
    steps = config["NUM_UPDATES"] * config["NUM_STEPS"] * config["NUM_ENVS"]
    print(
        json.dumps(
            {
                "steps": int(steps),
                "compile_s": compile_s,
                "run_s": run_s,
                "curve": curve,
                "config": {k: v for k, v in config.items() if k.isupper()},
                "jax": jax.__version__,
                "device": str(jax.devices()[0]),
                "xla_flags": os.environ.get("XLA_FLAGS", ""),
                "python": platform.python_version(),
            }
        )
    )


if __name__ == "__main__":
    main()
