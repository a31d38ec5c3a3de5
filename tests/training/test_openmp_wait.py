"""How torch's OpenMP threads wait (`training.openmp`): idle and busy machines get their
wait, the app settles it before torch is imported, a caller's own choice stands, and
`benchmarks.openmp_wait` gives every child the wait it names (behaviour only, never timings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from benchmarks import openmp_wait as bench
from lero.training.openmp import (
    BUSY,
    CHOICES,
    IDLE,
    SPIN_COUNT,
    machine_is_busy,
    openmp_wait,
    settle_openmp_wait,
)

# Records the OpenMP variables at the moment torch starts to load: libgomp reads them then.
AT_TORCH_IMPORT = textwrap.dedent(
    """
    import importlib.abc, json, os, sys

    class Watch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" and "seen" not in globals():
                globals()["seen"] = {k: os.environ[k] for k in {choices} if k in os.environ}
            return None

    sys.meta_path.insert(0, Watch())
    import {module}
    import torch  # noqa: F401  (a module that imports no torch itself: the first import is here)
    print(json.dumps(globals()["seen"]))
    """
)


def seen_at_torch_import(module: str, **environ: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CHOICES}
    script = AT_TORCH_IMPORT.replace("{module}", module).replace("{choices}", repr(CHOICES))
    out = subprocess.run(
        [sys.executable, "-c", script],
        env={**env, **environ}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.splitlines()[-1])


def test_an_idle_machine_spins_briefly_a_busy_one_trains_on_one_thread() -> None:
    for busy, wanted in ((False, IDLE), (True, BUSY)):
        environ: dict[str, str] = {"PATH": "/bin"}
        assert settle_openmp_wait(environ, busy=busy) == ("busy" if busy else "idle")
        assert environ == {"PATH": "/bin", **wanted}
    assert IDLE["GOMP_SPINCOUNT"] == str(SPIN_COUNT) and "OMP_WAIT_POLICY" not in IDLE  # spin, then sleep
    assert BUSY["OMP_NUM_THREADS"] == "1"  # and should a caller ask for more threads, they sleep:
    assert BUSY["OMP_WAIT_POLICY"] == "PASSIVE"


@pytest.mark.parametrize("chosen", [{"OMP_WAIT_POLICY": "PASSIVE"}, {"GOMP_SPINCOUNT": "5"}, {"OMP_NUM_THREADS": "2"}])
def test_a_callers_own_choice_stands(chosen: dict[str, str]) -> None:
    for busy in (False, True):
        environ = dict(chosen)
        assert settle_openmp_wait(environ, busy=busy) == "caller" and environ == chosen


@pytest.mark.parametrize(
    ("loadavg", "busy"),
    [
        ("0.10 0.20 0.30 1/300 42", False),  # nothing else runs
        ("2.90 2.50 2.00 1/300 42", False),  # lero's own last run still in the 1-min load
        ("0.20 0.20 0.20 3/300 42", False),  # a blip: two threads runnable this instant
        ("2.40 2.10 1.90 2/300 42", True),  # one other busy thread: half of 2 cores
        ("3.50 3.00 2.00 5/300 42", True),
        ("garbage", False),
    ],
)
def test_busy_means_other_work_holds_half_the_cores_by_load_and_by_snapshot(loadavg: str, busy: bool) -> None:
    assert machine_is_busy(loadavg, cores=2) is busy


def test_openmp_wait_names_the_wait_in_effect() -> None:
    assert openmp_wait({}) == "default"
    assert openmp_wait({"GOMP_SPINCOUNT": "7"}) == "spin=7"
    assert openmp_wait({"OMP_WAIT_POLICY": "passive", "GOMP_SPINCOUNT": "7"}) == "PASSIVE"
    assert openmp_wait(BUSY) == "PASSIVE, 1 thread(s)"


@pytest.mark.parametrize("module", ["lero.app.cli.main", "lero.app.cli.worker"])
def test_every_app_entry_settles_the_wait_before_torch_loads(module: str) -> None:
    """The `lero` command and the web UI's run workers: their first import of torch (deep in
    the graph's imports) already sees lero's wait for an idle or a busy machine (whichever
    this machine is now), and a caller's policy is left as it was."""
    assert seen_at_torch_import(module) in (IDLE, BUSY)
    assert seen_at_torch_import(module, OMP_WAIT_POLICY="PASSIVE") == {"OMP_WAIT_POLICY": "PASSIVE"}


def test_wait_env_replaces_the_callers_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    monkeypatch.setenv("GOMP_SPINCOUNT", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert openmp_wait(bench.wait_env("passive", 30)) == "PASSIVE"
    assert openmp_wait(bench.wait_env("idle", 30)) == "spin=30"
    assert openmp_wait(bench.wait_env("default", 30)) == "default"
    assert openmp_wait(bench.wait_env("busy", 30)) == "PASSIVE, 1 thread(s)"


def test_benchmark_children_train_under_the_wait_they_name(tmp_path) -> None:
    out = tmp_path / "wait.json"
    bench.main(["--steps", "2000", "--rounds", "1", "--algos", "mappo", "--waits", "passive", "idle", "busy",
                "--spin-count", "123", "--json", str(out)])  # fmt: skip
    (row,) = json.loads(out.read_text())["rows"]
    assert row["seen"] == {"passive": "PASSIVE", "idle": "spin=123", "busy": "PASSIVE, 1 thread(s)"}
    assert row["idle"] > 0 and row["idle / passive"] == row["idle"] / row["passive"]
    assert row["busy_loops"] == 0 and row["busy"] > 0
