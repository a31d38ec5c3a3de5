"""Tiny real runs made once per test module through the CLI, the way the README gives it:
a working directory of their own and the default relative `runs/` (offline designer,
process sandbox, a few thousand env steps)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

from rich.console import Console

from lero.app.cli.main import main

TINY = {"hparams": {"n_envs": 8, "rollout_len": 25}, "eval_episodes": 16}


def make_runs(workdir: Path, runs: dict[str, list[str]]) -> Path:
    """`lero run` once per RUN ID -> extra flags, in WORKDIR (runs under WORKDIR/runs); WORKDIR."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "tiny.json").write_text(json.dumps(TINY))
    before = os.getcwd()
    os.chdir(workdir)
    try:
        for run_id, flags in runs.items():
            argv = ["run", "--config", "tiny.json", "--generations", "1", "--population", "2", "--steps", "800",
                    "--llm", "offline", "--sandbox", "process", "--approve", "none", "--confirm-steps", "0",
                    "--run-id", run_id, *flags]  # fmt: skip
            code = main(argv, console=Console(file=io.StringIO(), width=200))
            assert code == 0, f"lero run {run_id} exited {code}"
    finally:
        os.chdir(before)
    return workdir
