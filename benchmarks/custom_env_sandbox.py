"""A custom env's adapter inside Docker (its own layer) against the process backend, as a ratio.

    python -m benchmarks.custom_env_sandbox [--repeats 5] [--cpus 1 2] [--n-envs 64] [--steps 400]

The tests' proof env (tests/support/proof_env.py, a module in a scratch directory) is
stepped through lero's PettingZoo adapter with random actions in one `run_script` per
measurement, with the adapter's workers following the job's CPU quota as in a train job
(`sandbox.jobs.env_kwargs`). Docker and process runs alternate, so a changing load hits
both; the median of the per-pair ratios is printed with the load average around it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

from lero.sandbox.backends import local_sandbox
from lero.sandbox.types import Limits

MODULE = "bench_gather_env"
SCRIPT = """import json, sys, time
sys.path.insert(0, {root!r})
import torch
torch.set_num_threads(1)
from lero.sandbox.jobs import env_kwargs
from lero.training import make_env
env = make_env({name!r}, {n_envs}, **env_kwargs({{"name": {name!r}, "import_root": {root!r}}}, {cpus}))
env.reset(seed=0)
for _ in range(20):
    env.step(env.random_actions())
started = time.perf_counter()
for _ in range({steps}):
    env.step(env.random_actions())
print(json.dumps({{"steps_per_s": {n_envs} * {steps} / (time.perf_counter() - started)}}))
env.close()
"""


def measure(sandbox, root: str, cpus: float, n_envs: int, steps: int) -> float:
    source = SCRIPT.format(root=root, name=f"{MODULE}:make_env", cpus=cpus, n_envs=n_envs, steps=steps)
    result = sandbox.run_script(source, Limits(wall_s=600, mem_mb=4096, cpus=cpus))
    if result.status != "ok":
        raise SystemExit(f"{sandbox.kind} run {result.status}: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])["steps_per_s"]


def main() -> None:
    from lero.sandbox.env_layer import ENV_ROOT

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpus", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--n-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    source = (Path(__file__).parents[1] / "tests" / "support" / "proof_env.py").read_text()
    with tempfile.TemporaryDirectory(prefix="lero-bench-env-") as scratch:
        (Path(scratch) / f"{MODULE}.py").write_text(source)
        env = {"name": f"{MODULE}:make_env", "import_root": scratch}
        docker = local_sandbox("docker", env=env, spares_per_limits=0)
        process = local_sandbox("process")
        try:
            for cpus in args.cpus:
                load_before = os.getloadavg()[0]
                ratios, rates = [], {"docker": [], "process": []}
                for _ in range(args.repeats):
                    inside = measure(docker, ENV_ROOT, cpus, args.n_envs, args.steps)
                    here = measure(process, scratch, cpus, args.n_envs, args.steps)
                    rates["docker"].append(inside)
                    rates["process"].append(here)
                    ratios.append(inside / here)
                print(json.dumps({
                    "cpus": cpus, "n_envs": args.n_envs, "repeats": args.repeats,
                    "docker_steps_per_s": round(statistics.median(rates["docker"])),
                    "process_steps_per_s": round(statistics.median(rates["process"])),
                    "median_ratio": round(statistics.median(ratios), 2),
                    "ratios": [round(r, 2) for r in ratios],
                    "load_before": round(load_before, 1), "load_after": round(os.getloadavg()[0], 1),
                }), flush=True)  # fmt: skip
        finally:
            docker.close()
            process.close()


if __name__ == "__main__":
    main()
