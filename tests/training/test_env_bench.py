"""The throughput benchmark helpers (tiny budgets: these check behaviour, never timings)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lero.training.bench import bench_env, bench_train, format_table
from lero.training.openmp import CHOICES


def test_bench_env_measures_both_envs() -> None:
    threads = torch.get_num_threads()
    row = bench_env(
        n_envs=64,
        seconds=0.3,
        env_kwargs={"N": 2, "num_landmark_neighbors": 1},
        threads=1,
        rounds=2,
    )
    assert torch.get_num_threads() == threads  # restored
    assert row["n_envs"] == 64 and row["threads"] == 1 and row["env_kwargs"]["N"] == 2
    assert row["lero_steps_per_s"] > 0 and row["mpe2_steps_per_s"] > 0
    assert row["ratio"] == pytest.approx(row["lero_steps_per_s"] / row["mpe2_steps_per_s"])


def test_bench_env_rejects_bad_budgets() -> None:
    with pytest.raises(ValueError, match="seconds"):
        bench_env(n_envs=8, seconds=0)
    with pytest.raises(ValueError, match="unknown"):
        bench_env(n_envs=8, seconds=0.1, env_kwargs={"colour": 1})


def test_bench_train_reports_end_to_end_rate() -> None:
    row = bench_train("ippo", steps=4096, threads=1, eval_episodes=8)
    assert row["algo"] == "ippo" and row["steps"] >= 4096
    assert row["end_to_end_steps_per_s"] == pytest.approx(row["steps"] / row["wall_s"])
    assert row["train_steps_per_s"] > 0


def test_format_table_aligns_union_of_columns() -> None:
    rows = [
        {"bench": "env", "n_envs": 4096, "lero_steps_per_s": 1_834_567.8, "ratio": 912.34},
        {"bench": "train", "algo": "mappo", "env_kwargs": {"N": 3}, "ratio": None},
    ]
    lines = format_table(rows).splitlines()
    assert lines[0].split() == [
        "bench",
        "n_envs",
        "lero_steps_per_s",
        "ratio",
        "algo",
        "env_kwargs",
    ]
    assert len(lines) == 4 and len({len(line) for line in lines}) == 1
    assert "1,834,568" in lines[2] and "912" in lines[2] and "4,096" in lines[2]
    assert "N=3" in lines[3] and "mappo" in lines[3]


def test_benchmark_script_prints_the_table() -> None:
    root = Path(__file__).resolve().parents[2]
    args = ["--n-envs", "32", "--threads", "1", "--obs", "partial", "--seconds", "0.2"]
    environ = {k: v for k, v in os.environ.items() if k not in CHOICES} | {"GOMP_SPINCOUNT": "777"}
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.env_throughput", *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=environ,
    )
    header = next(line for line in run.stdout.splitlines() if line.startswith("bench"))
    assert "ratio" in header and "spin=777" in run.stdout  # the caller's wait stands, and is recorded


@pytest.mark.parametrize("env_name", ["simple_reference", "simple_speaker_listener"])
def test_bench_env_compares_every_mpe_task_with_its_reference(env_name: str) -> None:
    row = bench_env(n_envs=32, seconds=0.2, threads=1, rounds=1, env_name=env_name)
    assert row["env"] == env_name
    assert row["lero_steps_per_s"] > 0 and row["mpe2_steps_per_s"] > 0
