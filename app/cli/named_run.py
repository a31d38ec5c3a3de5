"""The run a person named on the command line (`lero eval`, `lero compare`, `lero study`).

Its own module so that every command, the study included, checks a typed run id the same
way without importing the report.
"""

from __future__ import annotations

from pathlib import Path

from lero.graph.configuration import RUN_ID, RunError
from lero.graph.rundir import RunDir


def open_named_run(runs_dir: str | Path, run_id: str) -> RunDir:
    """RunError, one line, for a name that is no run id or no run in RUNS_DIR."""
    if not RUN_ID.match(run_id or ""):
        raise RunError(f"not a run id: {run_id!r} (see `lero runs`)")
    try:
        return RunDir.open(runs_dir, run_id)
    except RunError:
        raise RunError(f"unknown run id {run_id!r} in {runs_dir}/ (see `lero runs`)") from None
