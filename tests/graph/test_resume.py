"""Crash safety: SIGKILL a run in the middle of a generation's training, then resume it.

The run must complete, no job that finished before the kill may be trained again (the
graph's pending writes skip it, or the sandbox's result cache answers it), and nothing
written before the kill may be lost.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lero.agents import BudgetExceeded
from lero.graph.configuration import RunSpec
from lero.graph.context import open_context
from lero.graph.rundir import RunDir
from lero.graph.runner import resume_run

REPO = Path(__file__).resolve().parents[2]
SPEC = {  # baseline + 2 candidates, one at a time, so the kill lands between two jobs
    "generations": 2, "population": 2, "steps": 3200, "seeds": 1, "eval_episodes": 8,
    "hparams": {"n_envs": 32, "rollout_len": 25, "epochs": 1}, "max_parallel": 1,
    "sandbox": "process", "run_id": "crash",
}


class QuietUI:
    def on_event(self, event: dict[str, Any]) -> None:
        """Events are checked in events.jsonl instead."""

    def ask(self, payload: dict[str, Any]) -> object | None:
        return None


def read_events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def wait_for(predicate, process: subprocess.Popen, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if process.poll() is not None:
            raise AssertionError(f"runner exited early:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the run to reach the kill point")
        time.sleep(0.05)


def kill_when(predicate: Callable[[], bool], spec_file: Path, log: Path) -> None:
    """Start the run of SPEC_FILE in a worker process and SIGKILL it once PREDICATE holds."""
    output = open(log, "w")  # noqa: SIM115 - a file, not a pipe that could fill up
    process = subprocess.Popen(
        [sys.executable, "-m", "lero.app.cli.worker", "start", "--spec", str(spec_file)],
        cwd=REPO, stdout=output, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        wait_for(predicate, process, log, timeout_s=600)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
        output.close()


@pytest.mark.slow
def test_sigkill_mid_training_then_resume_repeats_no_finished_job(tmp_path):
    runs = tmp_path / "runs"
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({**SPEC, "runs_dir": str(runs)}))
    run_dir = runs / "crash"

    def one_job_done_and_another_running() -> bool:
        log = read_events(run_dir)
        finished = [e for e in log if e["event"] == "train_finished" and e["generation"] == 0]
        started = [e for e in log if e["event"] == "train_started" and e["generation"] == 0]
        return len(finished) >= 1 and len(started) > len(finished)

    kill_when(one_job_done_and_another_running, spec_file, tmp_path / "runner.log")
    before_kill = (run_dir / "events.jsonl").read_text()
    files_before = {p: p.read_bytes() for p in (run_dir / "candidates").rglob("candidate.py")}
    seed_files_before = {p: p.read_bytes() for p in run_dir.rglob("seed-*.json")}
    finished_before = {(e["candidate_id"], e["seed"]) for e in read_events(run_dir)
                       if e["event"] == "train_finished" and e["status"] == "ok"}
    assert finished_before, "the kill must land after at least one finished training job"
    assert json.loads((run_dir / "state.json").read_text())["status"] == "running"

    outcome = resume_run("crash", runs, QuietUI())

    assert outcome.status == "completed"
    after = (run_dir / "events.jsonl").read_text()
    assert after.startswith(before_kill.rsplit("\n", 1)[0])  # nothing written before is lost
    for path, content in files_before.items():
        assert path.read_bytes() == content
    log = read_events(run_dir)
    trained = Counter((e["candidate_id"], e["generation"], e["seed"]) for e in log
                      if e["event"] == "train_finished" and not e["cached"])
    assert trained and max(trained.values()) == 1, trained  # no job trained twice
    sandbox_trained = Counter(e["candidate_id"] for e in log
                              if e["event"] == "job_finished" and e["kind"] == "train" and not e["cached"])
    assert max(sandbox_trained.values()) == SPEC["seeds"], sandbox_trained
    for candidate_id, seed in finished_before:  # the kill did not cost these results
        folder = run_dir / ("baseline" if candidate_id == "baseline" else f"candidates/{candidate_id}")
        assert seed_files_before[folder / f"seed-{seed}.json"] == (folder / f"seed-{seed}.json").read_bytes()
        assert json.loads((folder / "result.json").read_text())["status"] == "ok"
    assert [e["event"] for e in log].count("run_resumed") == 1
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "completed" and state["generation"] == 1


def test_a_resumed_process_keeps_spending_the_same_llm_budget(tmp_path):
    spec = RunSpec(run_id="budget", runs_dir=str(tmp_path), sandbox="process", max_llm_requests=3)
    rundir = RunDir.create(spec)
    for role in ("designer", "critic", "designer"):
        rundir.append_event("llm_call", role=role, status="ok", prompt_tokens=5, completion_tokens=7)
    rundir.append_event("llm_call", role="critic", status="error", error="timeout")  # not spent

    resumed = open_context(spec, RunDir.open(tmp_path, "budget"))

    assert resumed.llm_usage() == {"requests": 3, "prompt_tokens": 15, "completion_tokens": 21}
    with pytest.raises(BudgetExceeded):
        resumed.team.ledger.check_budget()


def test_a_seed_saved_before_the_crash_is_not_trained_again(tmp_path):
    """The window SIGKILL can hit: the seed's file is written, the graph's pending write is
    not. The re-run branch must take the file as it is (no job, no rewrite)."""
    from langgraph.runtime import Runtime

    from lero.graph.nodes.train import train
    from lero.graph.state import TrainTask

    spec = RunSpec.parse({**SPEC, "runs_dir": str(tmp_path), "run_id": "window"})
    rundir = RunDir.create(spec)
    saved = {"candidate_id": "baseline", "generation": 0, "seed": 0, "status": "ok", "fitness": -20.5,
             "metrics": {"return": -20.5}, "elapsed_s": 3.0, "cached": False, "policy_dir": "p"}
    rundir.write_seed_result("baseline", 0, saved)
    before = (rundir.candidate_dir("baseline") / "seed-0.json").read_bytes()
    context = open_context(spec, rundir)
    try:
        out = train(TrainTask(candidate_id="baseline", generation=0, code=None, seed=0), Runtime(context=context))
    finally:
        context.close()
    assert out == {"results": [saved]}
    assert (rundir.candidate_dir("baseline") / "seed-0.json").read_bytes() == before
    events = [e for e in rundir.read_events() if e.get("candidate_id") == "baseline"]
    assert [(e["event"], e.get("cached")) for e in events] == [("train_finished", True)]
    assert not (tmp_path / "window" / "cache" / "jobs").exists() or not any((tmp_path / "window" / "cache" / "jobs").iterdir())
