"""Ray executor overhead: per-job cost against the local executor, and a generation's job
throughput on 1 Ray node against 2.

    python -m benchmarks.ray_overhead [--repeats 3] [--jobs 4] [--steps 1600]

1. The same small `train` job, one at a time: the local Docker sandbox (default, with a
   warm spare container; and without spares, as every Ray task runs), and the Ray
   executor on a 1-node loopback cluster. Medians; the ratios are the overhead.
2. A generation: --jobs train jobs submitted at once (as the graph's parallel branches
   do) to a cluster of 1 node (1 CPU) and of 2 nodes (1 CPU each); jobs per minute.
   All nodes are processes on this machine: on a 2-core machine shared with other work,
   the 2-node figure measures Ray's and Docker's overhead more than added compute.
Ratios are measured in one run on the same machine; every address stays on 127.0.0.1.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # loopback only

import argparse
import json
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import ray
from ray.cluster_utils import Cluster

from lero.sandbox import TRAIN, Job, get_sandbox

NODE = {"num_cpus": 1, "memory": 5 * 2**30, "object_store_memory": 100 * 2**20}
HPARAMS = {"n_envs": 32, "rollout_len": 25, "epochs": 1}


def train_job(steps: int, seed: int) -> Job:
    return Job(kind=TRAIN.name, code=None, steps=steps, seed=seed, eval_episodes=8, hparams=HPARAMS)


def one_at_a_time(sandbox, steps: int, repeats: int) -> list[float]:
    times = []
    for seed in range(repeats + 1):  # the first job warms up (worker start, imports): dropped
        started = time.perf_counter()
        result = sandbox.run_job(train_job(steps, seed))
        assert result.status == "ok", result.error
        times.append(time.perf_counter() - started)
    return times[1:]


def generation(sandbox, steps: int, jobs: int) -> float:
    """Jobs per minute for JOBS concurrent train jobs (after one warm-up job)."""
    sandbox.run_job(train_job(steps, 10_000))
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(sandbox.run_job, [train_job(steps, s) for s in range(jobs)]))
    assert all(r.status == "ok" for r in results), [r.error for r in results]
    return jobs / (time.perf_counter() - started) * 60


def on_cluster(nodes: int, work_dir: str):
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    for _ in range(nodes - 1):
        cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    sandbox = get_sandbox("docker", work_dir=work_dir, executor="ray", ray_address=cluster.address)
    return cluster, sandbox


def shut(cluster, sandbox) -> None:
    sandbox.close()
    ray.shutdown()
    cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1600)
    args = parser.parse_args()
    work = tempfile.TemporaryDirectory(prefix="lero-ray-bench-")

    local = get_sandbox("docker", work_dir=work.name)
    cold = get_sandbox("docker", work_dir=work.name, spares_per_limits=0)
    local_s = statistics.median(one_at_a_time(local, args.steps, args.repeats))
    cold_s = statistics.median(one_at_a_time(cold, args.steps, args.repeats))
    local.close()
    cold.close()

    cluster, sandbox = on_cluster(1, work.name)
    ray_s = statistics.median(one_at_a_time(sandbox, args.steps, args.repeats))
    one_node = generation(sandbox, args.steps, args.jobs)
    shut(cluster, sandbox)
    cluster, sandbox = on_cluster(2, work.name)
    two_nodes = generation(sandbox, args.steps, args.jobs)
    shut(cluster, sandbox)

    report = {
        "steps_per_job": args.steps,
        "local_warm_s": round(local_s, 2),
        "local_cold_s": round(cold_s, 2),
        "ray_s": round(ray_s, 2),
        "ray_vs_local_warm": round(ray_s / local_s, 2),
        "ray_vs_local_cold": round(ray_s / cold_s, 2),
        "jobs_per_min_1_node": round(one_node, 2),
        "jobs_per_min_2_nodes": round(two_nodes, 2),
        "2_nodes_vs_1": round(two_nodes / one_node, 2),
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg(),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
