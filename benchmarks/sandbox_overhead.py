"""Sandbox overhead: per-job cost of a container (and of the process backend), and its share of training.

    python -m benchmarks.sandbox_overhead [--repeats 10] [--train-steps 51200]

1. `run_script("pass")` end to end (create, start, wait, remove + the in-sandbox interpreter)
   against a bare `python -c pass` on the host.
2. A small `train` job through the sandbox against the same training in a fresh host
   process (`python -c`, no isolation) and in this process (already warm); medians of
   --train-repeats; Docker jobs after the first find a warm container that already
   imported torch. The differences are the fixed per-job overheads; their share of a
   1M-step job uses the measured steps/s.
3. The CPU-seconds one container start costs the machine (Docker's daemon, runc, the
   interpreter, and the imports a warm runner makes before a job arrives), counted over all
   cores from /proc/stat: `benchmarks.loop_compute` turns it into the loop's ceiling.
Ratios are measured in one run on the same machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from lero.sandbox import TRAIN, Job, Limits, get_sandbox
from lero.sandbox.base import Sandbox
from lero.training import TrainConfig, train

ENV = {"name": "simple_spread", "N": 3, "num_agent_neighbors": 1, "num_landmark_neighbors": 2}
WARM_RUNNER_IMPORTS = "from lero.sandbox.harness import preload\npreload()\n"  # what a job's container imports
IDLE_FIELDS = (3, 4)  # /proc/stat's cpu line: idle and iowait; every other field is work


def busy_cpu_s(stat: Path = Path("/proc/stat")) -> float:
    """CPU-seconds the whole machine has worked since boot (all cores, every process:
    a container's work runs under Docker's daemons, not as this process's children)."""
    fields = stat.read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(value) for value in fields[:8]]  # user nice system idle iowait irq softirq steal
    busy = sum(value for index, value in enumerate(ticks) if index not in IDLE_FIELDS)
    return busy / os.sysconf("SC_CLK_TCK")


def container_start_cpu_s(sandbox: Sandbox, repeats: int) -> dict[str, float]:
    """Median machine CPU-seconds per contained script, one after another: `pass` (the
    sandbox alone) and the imports a job's runner makes before its work starts (`engine`)."""
    limits = Limits(wall_s=120, mem_mb=2048)
    costs: dict[str, float] = {}
    for name, source in (("pass", "pass\n"), ("engine", WARM_RUNNER_IMPORTS)):
        each = []
        for _ in range(repeats):
            before = busy_cpu_s()
            result = sandbox.run_script(source, limits)
            if result.status != "ok":
                raise SystemExit(f"sandbox_overhead: the {name} script failed: {result.stderr[-300:]}")
            each.append(busy_cpu_s() - before)
        costs[name] = statistics.median(each)
    return costs


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

    job = Job(kind=TRAIN.name, code=None, env=ENV, steps=args.train_steps, eval_episodes=64,
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
    start_cpu = container_start_cpu_s(sandbox, args.repeats)
    report = {
        "backend": args.backend,
        "start_cpu_s_pass": start_cpu["pass"],  # machine CPU-seconds per start, all cores
        "start_cpu_s_engine": start_cpu["engine"],
        "load": os.getloadavg()[0],
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
