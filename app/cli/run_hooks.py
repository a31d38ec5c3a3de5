"""The app's part of every run it drives: TensorBoard files per job, report.md and plots at
the end, and the run's `--logger` tracker (the engine calls these through
`graph.context.RunHooks`, never imports them)."""

from __future__ import annotations

from lero.app.reports.run_report import write_report_files
from lero.app.reports.run_tracking import RunTrackers
from lero.app.reports.tensorboard import write_job_scalars
from lero.graph.context import CancelScope, RunHooks
from lero.graph.rundir import RunDir
from lero.graph.runner import Front
from lero.graph.summary import load_run, summarize
from lero.sandbox import JobResult


def export_job(rundir: RunDir, candidate_id: str, seed: int, result: JobResult) -> None:
    """One train job's curves and evaluation as TensorBoard scalars."""
    write_job_scalars(rundir.tensorboard_dir(candidate_id, seed), result.curves, result.metrics)


def report_files(rundir: RunDir) -> None:
    """report.md and plots/ beside the report.json the engine has just written."""
    run = load_run(rundir.path)
    write_report_files(run, summarize(run))


def app_front(cancels: CancelScope | None = None) -> Front:
    """What every front-end of the app hands the runner."""
    trackers = RunTrackers()

    def job_result(rundir: RunDir, candidate_id: str, seed: int, result: JobResult) -> None:
        export_job(rundir, candidate_id, seed, result)
        trackers.job_result(rundir, candidate_id, seed, result)

    def run_end(rundir: RunDir) -> None:
        report_files(rundir)
        trackers.run_end(rundir)

    return Front(hooks=RunHooks(on_job_result=job_result, on_run_end=run_end,
                                on_generation_end=trackers.generation_end), cancels=cancels)
