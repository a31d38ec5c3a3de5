"""What a run with `--logger` sends its tracker (app.reports.tracking), through the engine's RunHooks.

Each train job's curves and held-out evaluation as it finishes (`<candidate>/seed-<n>/...`
against that job's env steps), the loop's numbers as each generation ends (`loop/...`
against `generation`), and at the run's end the configuration (the stored spec), the
baseline's, the best candidate's and the confirmation's held-out metrics, and report.md /
report.json as artifacts. A run without a logger costs nothing here.
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lero.app.reports.tracking import (
    Identity,
    Tracker,
    finite,
    log_curves,
    metric_key,
    open_tracker,
)
from lero.graph.configuration import RunSpec
from lero.graph.rundir import REPORT_JSON, RunDir
from lero.graph.summary import load_run, summarize
from lero.sandbox import JobResult

GENERATION_AXIS = "generation"
LOOP_KEYS = ("candidates", "valid", "best_fitness", "mean_fitness")  # report.json's generation rows


def run_identity(spec: RunSpec) -> Identity:
    return Identity(run_id=str(spec.run_id), name=spec.name, tags=spec.tags)


def log_job(tracker: Tracker, candidate_id: str, seed: int, result: JobResult) -> None:
    """One train job: its curves against its env steps, its held-out metrics at its last step."""
    prefix = metric_key(candidate_id, f"seed-{seed}")
    log_curves(tracker, prefix, result.curves)
    steps = result.curves.get("steps") or [0]
    held_out = finite({metric_key(prefix, "eval", k): v for k, v in (result.metrics or {}).items()})
    if held_out:
        tracker.metrics(held_out, metric_key(prefix, "env_steps"), int(steps[-1]))


def summary_metrics(report: dict[str, Any]) -> dict[str, float]:
    """report.json's headline numbers: baseline and best (fitness and held-out metrics), each
    confirmation arm's mean per metric, the run's env steps and seconds."""
    values: dict[str, Any] = {"env_steps": report.get("env_steps"), "wall_s": report.get("wall_s")}
    for part in ("baseline", "best"):
        block = report.get(part) or {}
        values[f"{part}/fitness"] = block.get("fitness")
        values |= {f"{part}/eval/{k}": v for k, v in (block.get("eval") or {}).items()}
    for arm in ((report.get("confirmation") or {}).get("arms") or []):
        for name, seeds in (arm.get("per_seed") or {}).items():
            numbers = finite(dict(enumerate(seeds)))
            if numbers:
                values[metric_key("confirmation", str(arm.get("arm")), name)] = statistics.fmean(numbers.values())
    return finite(values)


@dataclass
class RunTrackers:
    """The open tracker of each run this process drives (keyed by run dir), opened at its
    first job and closed at its end. The hooks come from the run's parallel job threads:
    `lock` makes the first job's opening the only one (two threads opening at once made two
    MLflow runs, one without the configuration) and keeps one call at a time on a tracker."""

    open: dict[Path, Tracker] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def tracker(self, rundir: RunDir) -> Tracker | None:
        with self.lock:
            if rundir.path not in self.open:
                spec = rundir.read_spec()
                if spec.logger is None:
                    return None
                self.open[rundir.path] = open_tracker(spec.logger, Path(spec.runs_dir), run_identity(spec))
            return self.open[rundir.path]

    def job_result(self, rundir: RunDir, candidate_id: str, seed: int, result: JobResult) -> None:
        with self.lock:
            tracker = self.tracker(rundir)
            if tracker is not None:
                log_job(tracker, candidate_id, seed, result)

    def generation_end(self, rundir: RunDir, generation: int) -> None:
        """The loop's numbers of GENERATION as they stand (report.json's row for it), live."""
        with self.lock:
            tracker = self.tracker(rundir)
            if tracker is None:
                return
            for row in summarize(load_run(rundir.path))["generations"]:
                loop = finite({metric_key("loop", k): row.get(k) for k in LOOP_KEYS})
                if loop and row.get("generation") == generation:
                    tracker.metrics(loop, GENERATION_AXIS, generation)

    def run_end(self, rundir: RunDir) -> None:
        with self.lock:
            self._run_end(rundir)

    def _run_end(self, rundir: RunDir) -> None:
        tracker = self.tracker(rundir)
        if tracker is None:
            return
        try:
            tracker.config(rundir.read_spec().model_dump(mode="json"))
            report = rundir.read_summary() or {}
            if headline := summary_metrics(report):
                tracker.metrics(headline, GENERATION_AXIS, len(report.get("generations") or []))
            for path in (rundir.report_md_path, rundir.path / REPORT_JSON):
                if path.is_file():
                    tracker.artifact(path)
        finally:
            self.open.pop(rundir.path).close()
