"""benchmarks.lero_table's pieces that need no training: a task's runs share finished jobs."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.lero_table import budgets, share_results
from lero.sandbox.cache import ResultCache, cache_key
from lero.sandbox.types import JobResult


def test_a_tasks_runs_share_their_finished_jobs_and_keep_their_own(tmp_path: Path) -> None:
    caches = {run: ResultCache(tmp_path / run / "cache") for run in ("a", "b")}
    native = cache_key(None, {"kind": "train_and_evaluate", "algo": "mappo"}, 1000)  # no candidate code
    mine = cache_key("def hybrid_reward(ctx): ...", {"kind": "train_and_evaluate"}, 1000)
    caches["a"].put(native, JobResult(status="ok", fitness=-15.0))
    caches["b"].put(mine, JobResult(status="ok", fitness=-12.0))
    caches["b"].put(native, JobResult(status="ok", fitness=-99.0))  # b's own answer is never overwritten
    caches["a"].put(cache_key(None, {"kind": "x"}, 1), JobResult(status="ok", fitness=-1.0))
    assert share_results(str(tmp_path), ["a", "b"]) == 2  # a's extra entry to b, b's candidate entry to a
    assert caches["a"].get(mine).fitness == -12.0 and caches["b"].get(native).fitness == -99.0
    assert share_results(str(tmp_path), ["a", "b"]) == 0
    assert {p.name for p in (tmp_path / "a" / "cache").glob("*.json")} == {
        p.name for p in (tmp_path / "b" / "cache").glob("*.json")}
    assert json.loads((tmp_path / "b" / "cache" / f"{mine}.json").read_text())["result"]["fitness"] == -12.0


def test_step_budgets_per_algorithm() -> None:
    assert budgets("mappo=300000, qmix=1000000") == {"mappo": 300000, "qmix": 1000000}


def test_the_grid_has_a_row_per_study_and_a_column_per_arm() -> None:
    from benchmarks.lero_table import grid

    def row(arm: str, iqm: float | None, poi: float | None) -> dict:
        return {"task": "t", "loop_algo": "mappo", "algo": "vdn", "arm": arm, "seeds": [1, 2, 3],
                "return": [iqm] * 3 if iqm is not None else [], "iqm": iqm, "iqm_ci_low": -13.0, "iqm_ci_high": -11.0,
                "poi_vs_native": {"value": poi, "ci_low": 0.0, "ci_high": 1.0} if poi is not None else None}  # fmt: skip

    text = grid([row("native", -15.0, None), row("hrf+oef", -12.0, 1.0)], ["native", "hrf+oef", "native@10x"])
    assert text.splitlines()[0] == "| task | evolved with | algo | native | hrf+oef | native@10x |"
    assert text.splitlines()[2] == "| t | mappo | vdn | -15.00 [-13.00, -11.00] | -12.00 [-13.00, -11.00] (1.00) | - |"
    few = {**row("native", -15.0, None), "iqm_ci_low": None, "iqm_ci_high": None, "n": 3, "min": -16.0, "max": -14.0}
    assert "| -15.00 (range of 3 seeds [-16.00, -14.00]) |" in grid([few], ["native"])  # 3 seeds: never a CI


def test_the_verdicts_say_the_gain_at_both_budgets_on_every_metric_nulls_included() -> None:
    from benchmarks.lero_table import ARMS, verdicts

    assert "hrf+oef@10x" in ARMS and "native@10x" in ARMS

    def row(arm: str, versus: str | None, metrics: dict[str, tuple[float, float, float]]) -> dict:
        return {"task": "simple_spread", "loop_algo": "mappo", "algo": "mappo", "arm": arm, "seeds": [1, 2, 3],
                "versus": versus, "metrics": {m: {"mean": mean, "ci_low": mean, "ci_high": mean,
                                                  "better": "lower" if m == "collisions" else "higher",
                                                  "poi": {"value": p, "ci_low": low, "ci_high": low + 0.3}}
                                              for m, (mean, p, low) in metrics.items()}}  # fmt: skip

    rows = [row("hrf+oef", "native", {"return": (-12.0, 0.95, 0.8), "collisions": (2.0, 0.1, 0.0)}),
            row("hrf+oef@10x", "native@10x", {"return": (-11.4, 0.33, 0.3), "coverage": (0.65, 1.0, 0.9)})]
    (line,) = verdicts(rows)
    assert line == ("- simple_spread, evolved with mappo, mappo: at the loop's budget (hrf+oef vs native): "
                    "return -12.00 better (return higher) (P(better) 0.95), collisions 2.00 worse (collisions "
                    "higher) (P(better) 0.10); at 10x (hrf+oef@10x vs native@10x): return -11.40 no difference "
                    "(P(better) 0.33), coverage 0.65 better (coverage higher) (P(better) 1.00).")
    (only_loop,) = verdicts(rows[:1])
    assert only_loop.endswith("at 10x: not measured.")


def test_a_vmas_task_with_env_args_is_its_own_run() -> None:
    from benchmarks.lero_table import table_run_id
    from lero.graph.configuration import check_run_id

    plain = table_run_id("vmas:navigation", "mappo", {})
    assert plain == "lero-table-vmas-navigation-mappo"  # the runs of earlier sittings resume
    three, four = (table_run_id("vmas:balance", "mappo", {"n_agents": n}) for n in (3, 4))
    assert three != four and three.startswith("lero-table-vmas-balance-mappo-")
    assert table_run_id("vmas:balance", "mappo", {"n_agents": 3, "max_steps": 50}) == table_run_id(
        "vmas:balance", "mappo", {"max_steps": 50, "n_agents": 3})
    assert all(check_run_id(r) for r in (plain, three, four))


def test_the_table_starts_a_vmas_run_with_its_env_args(tmp_path: Path, monkeypatch) -> None:
    import argparse
    import types

    from benchmarks import lero_table

    started = []
    monkeypatch.setattr(lero_table, "start_run", lambda spec, ui, front: started.append(spec) or types.SimpleNamespace(status="completed"))  # fmt: skip
    args = argparse.Namespace(env_args=[("n_agents", 3)], runs_dir=str(tmp_path), sandbox="process",
                              max_parallel=1, eval_episodes=16)  # fmt: skip
    run_id = lero_table.ensure_run("vmas:navigation", "mappo", 1000, args)
    (spec,) = started
    assert spec.run_id == run_id == lero_table.table_run_id("vmas:navigation", "mappo", {"n_agents": 3})
    assert spec.env == "vmas:navigation" and spec.env_kwargs["n_agents"] == 3
    assert (spec.max_parallel, spec.eval_episodes, spec.steps) == (1, 16, 1000)


def test_sigterm_during_the_tables_run_kills_its_jobs_and_exits_as_ctrl_c(tmp_path: Path, monkeypatch, capsys) -> None:
    """SIGTERM (a scheduler's limit, `kill`) reaches the table as Ctrl-C: the run in flight
    gets the stop scope, whose cancel kills its sandbox's jobs, and the command exits 130
    saying the same command continues (before, SIGTERM ended it with its containers left)."""
    import os
    import signal
    import threading
    import types

    import pytest

    from benchmarks import lero_table

    cancelled = threading.Event()
    context = types.SimpleNamespace(sandbox=types.SimpleNamespace(cancel_all=cancelled.set))

    def run_until_stopped(spec, ui, front):  # a run whose jobs are in flight when SIGTERM comes
        front.cancels.add(context)
        os.kill(os.getpid(), signal.SIGTERM)
        assert cancelled.wait(timeout=60)  # never reached: the signal interrupts this wait
        raise AssertionError("SIGTERM did not stop the run")

    def unhandled(signum: int, frame: object) -> None:  # what the table must replace while it runs
        raise AssertionError("the table left SIGTERM to its caller's handler")

    monkeypatch.setattr(lero_table, "start_run", run_until_stopped)
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        with pytest.raises(SystemExit) as stopped:
            lero_table.main(["--tasks", "simple_spread", "--loop-algos", "mappo", "--algos", "mappo",
                             "--runs-dir", str(tmp_path / "runs"), "--out", str(tmp_path / "table.json")])  # fmt: skip
        assert signal.getsignal(signal.SIGTERM) is unhandled  # put back when the table ends
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert stopped.value.code == 130
    assert cancelled.is_set()  # the run's sandbox was told to kill its jobs
    assert "interrupted; finished runs and cells are kept: the same command continues the table" in capsys.readouterr().err
