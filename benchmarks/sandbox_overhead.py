"""Sandbox overhead: per-job cost of a container (and of the process backend), and its share of training.

    python -m benchmarks.sandbox_overhead [--repeats 10] [--train-steps 51200]

1. `run_script("pass")` end to end (create, start, wait, remove + the in-sandbox interpreter)
   against a bare `python -c pass` on the host.
2. A small `train` job through the sandbox against the same training in a fresh host
   process (`python -c`, no isolation) and in this process (already warm); medians of
   --train-repeats; Docker jobs after the first find a warm container that already
   imported torch. The differences are the fixed per-job overheads; their share of a
   1M-step job uses the measured steps/s.
Ratios are measured in one run on the same machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from lero.sandbox import Job, Limits, get_sandbox
from lero.training import TrainConfig, train

ENV = {"name": "simple_spread", "N": 3, "num_agent_neighbors": 1, "num_landmark_neighbors": 2}


def timed(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--train-steps", type=int, default=51_200)
    parser.add_argument("--train-repeats", type=int, default=3)
    parser.add_argument("--backend", choices=("docker", "process"), default="docker")
    args = parser.parse_args()
    torch.set_num_threads(1)
    work_dir = tempfile.TemporaryDirectory(prefix="lero-bench-")  # kept train job dirs go here
    sandbox = get_sandbox(args.backend, work_dir=work_dir.name)
    limits = Limits(wall_s=60, mem_mb=512)
    bare = timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), args.repeats)
    script = timed(lambda: sandbox.run_script("pass", limits), args.repeats)

    cfg = TrainConfig(env=ENV["name"], env_kwargs={k: v for k, v in ENV.items() if k != "name"},
                      steps=args.train_steps, eval_episodes=64, threads=1)  # fmt: skip
    host_results = []

    def train_in_process() -> None:
        host_results.append(train(cfg))

    job = Job(kind="train", code=None, env=ENV, steps=args.train_steps, eval_episodes=64,
              limits=Limits(wall_s=3600, mem_mb=4096, cpus=1))  # fmt: skip

    def train_in_sandbox() -> None:
        result = sandbox.run_job(job)
        assert result.status == "ok", result.error

    fresh_script = (
        "import json\nfrom training import TrainConfig, train\n"
        f"train(TrainConfig.from_dict(json.loads({json.dumps(cfg.to_dict())!r})))\n"
    )
    fresh_s = statistics.median(
        timed(
            lambda: subprocess.run([sys.executable, "-c", fresh_script], check=True),
            args.train_repeats,
        )
    )
    host_s = statistics.median(timed(train_in_process, args.train_repeats))
    sandbox_each = timed(train_in_sandbox, args.train_repeats)  # the first may start cold
    sandbox_s = statistics.median(sandbox_each)
    host_result = host_results[-1]
    job_overhead_s = sandbox_s - fresh_s
    one_million_s = 1_000_000 / host_result.steps_per_s + (
        host_s - host_result.steps / host_result.steps_per_s
    )
    report = {
        "backend": args.backend,
        "bare_python_s_median": statistics.median(bare),
        "run_script_s_median": statistics.median(script),
        "run_script_s_max": max(script),
        "container_overhead_s_median": statistics.median(script) - statistics.median(bare),
        "train_steps": host_result.steps,
        "train_in_process_s": host_s,
        "train_fresh_host_process_s": fresh_s,
        "train_in_sandbox_s": sandbox_s,
        "train_in_sandbox_s_each": sandbox_each,
        "job_overhead_s": job_overhead_s,  # sandboxed vs the same job in a fresh host process
        "job_overhead_vs_in_process_s": sandbox_s - host_s,
        "train_steps_per_s": host_result.steps_per_s,
        "estimated_1M_step_job_s": one_million_s,
        "overhead_share_of_1M_step_job": job_overhead_s / one_million_s,
        "overhead_vs_in_process_share_of_1M_step_job": (sandbox_s - host_s) / one_million_s,
    }
    print(json.dumps(report, indent=2))
    work_dir.cleanup()


if __name__ == "__main__":
    main()
