"""`lero compare RUN...` (and the web UI's compare page): several runs side by side.

One table (markdown and CSV: each run's settings, its baseline and best fitness with their
spread over seeds, the improvement and the best candidate's task metrics) and one figure
(`app.reports.figures.plot_learning_curves`: each run's best candidate, its training curve over seeds
and its greedy evaluation). Runs are read through `graph.summary.load_run` like every
report: nothing of theirs is imported or used as a path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lero.app.cli.named_run import open_named_run
from lero.app.reports.numbers import fmt_number
from lero.app.reports.run_report import spread_text
from lero.app.reports.run_status import run_label, run_status
from lero.app.study.stats import MIN_INTERVAL_SEEDS
from lero.graph.configuration import RunError
from lero.graph.rundir import SPEC_FILE, RunDir
from lero.graph.safefs import write_atomic
from lero.graph.summary import (
    RunFiles,
    best_candidate,
    eval_of,
    load_run,
    metric_names,
    summarize,
)
from lero.training.validation import finite_number

MIN_RUNS, MAX_RUNS = 2, 12
COMPARISONS_DIR = "comparisons"  # in the runs dir: comparisons/<name>/ (no run holds a spec.json there)
COLUMNS = ("run", "name", "status", "env", "algo", "steps per candidate", "seeds", "generations", "confirmed", "baseline fitness",
           "best candidate", "best fitness", "improvement", "env steps", "wall s")  # fmt: skip
_NAME = re.compile(r"[^A-Za-z0-9_.+-]+")


def load_runs(runs_dir: str | Path, run_ids: list[str]) -> list[RunFiles]:
    """The runs named, each read and checked; RunError (one line) for a name that is not a
    run here, a repeated one, or fewer than MIN_RUNS / more than MAX_RUNS."""
    if len(set(run_ids)) != len(run_ids):
        raise RunError(f"a run is named twice: {' '.join(run_ids)}")
    if not MIN_RUNS <= len(run_ids) <= MAX_RUNS:
        raise RunError(f"compare takes {MIN_RUNS} to {MAX_RUNS} runs, got {len(run_ids)}")
    return [load_run(open_named_run(runs_dir, run_id).path) for run_id in run_ids]


def comparison_row(run: RunFiles) -> dict[str, Any]:
    """One run's line of the comparison (its numbers, unformatted; `cells` formats them)."""
    from lero.app.reports.confirmation_verdict import confirmed_return, short_verdict

    summary = summarize(run)
    shown = run_status(run, summary["status"])
    best = best_candidate(run)
    base, top = summary["baseline"]["fitness"], summary["best"]["fitness"]
    return {
        "run": run.run_id, "name": run_label(run.spec) or None, "status": shown["shown"],
        "env": run.spec.get("env"), "algo": run.spec.get("algo"), "steps per candidate": run.spec.get("steps"),
        "seeds": run.spec.get("seeds"), "generations": shown["progress"],
        "confirmed": short_verdict(confirmed_return(run, summary), means=True),
        "baseline fitness": base, "baseline spread": spread_text(run.baseline),
        "best candidate": best.candidate_id if best else None, "best fitness": top,
        "best spread": spread_text(best.result) if best else "—",
        "improvement": top - base if finite_number(base) and finite_number(top) else None,
        "env steps": summary["env_steps"], "wall s": summary["wall_s"],
        "metrics": eval_of(best.result) if best else {},
    }  # fmt: skip


def comparison_rows(runs: list[RunFiles]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every run's row and the task metrics any best candidate measured (`return` first)."""
    rows = [comparison_row(run) for run in runs]
    return rows, metric_names(*(row["metrics"] for row in rows))


def cells(row: dict[str, Any], metrics: list[str]) -> list[str]:
    """A row as the table's text cells: COLUMNS, then the best candidate's metrics."""
    shown = {**row, "baseline fitness": row["baseline spread"], "best fitness": row["best spread"],
             "improvement": "—" if row["improvement"] is None else f"{row['improvement']:+.3f}", "wall s": fmt_number(row["wall s"], 1)}  # fmt: skip
    return [str(shown[c]) if shown[c] is not None else "—" for c in COLUMNS] + \
        [fmt_number(row["metrics"].get(m)) for m in metrics]  # fmt: skip


def comparison_markdown(rows: list[dict[str, Any]], metrics: list[str], figure: str | None) -> str:
    """compare.md: the table, what its columns hold, and the figure."""
    header = [*COLUMNS, *(f"best {m}" for m in metrics)]
    lines = ["# lero compare", "", "Confirmed: the run's winner against native at the confirmation budget on "
             "held-out episodes (its verdict on return, and both means; * fewer than 5 seeds per arm, a pilot). "
             "Fitness: the loop's, the greedy policy's mean return on the selection episodes (the winner was "
             "picked on them), mean ± std over seeds (each seed listed); the metrics are the best candidate's "
             "there, averaged over seeds. `lero eval RUN` measures a policy again on held-out episodes.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]  # fmt: skip
    for row in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells(row, metrics)) + " |")
    if figure:
        lines += ["", f"![learning curves]({figure})", "", "**Figure.** Each run's best candidate, named by the "
                  "run's name and tags (`run k`: the table's k-th row, unnamed): the training episodes' return "
                  f"(sampled actions; mean over seeds, shaded: a 95% band from {MIN_INTERVAL_SEEDS} seeds, else "
                  "the seeds' range with each seed thin) and the greedy evaluation after training (diamond: "
                  "mean; dots: seeds)."]  # fmt: skip
    return "\n".join(lines) + "\n"


def comparison_csv(rows: list[dict[str, Any]], metrics: list[str]) -> bytes:
    """compare.csv: the table's numbers, unformatted (one run per line)."""
    from lero.app.reports.figures import Table

    columns = ("run", "name", "status", "env", "algo", "steps_per_candidate", "seeds", "generations", "confirmed", "baseline_fitness",
               "best_candidate", "best_fitness", "improvement", "env_steps", "wall_s", *(f"best_{m}" for m in metrics))  # fmt: skip
    table = Table(columns)
    table.rows = [(*(row[c] for c in COLUMNS), *(row["metrics"].get(m) for m in metrics)) for row in rows]
    return table.csv_bytes()


def legend_label(run: RunFiles, row: int) -> str:
    """A run in the compare figure's legend: its name and tags, else `run ROW` (its row in the
    table, from 1): a run id is a timestamp no reader of a paper should see."""
    return run_label(run.spec) or f"run {row}"


def comparison_figure(runs: list[RunFiles]) -> dict[str, bytes] | None:
    """The best candidates' learning curves (`app.reports.figures.figure_files`), one colour per run,
    None when none has one."""
    from lero.app.reports.figures import plot_learning_curves
    from lero.app.reports.run_figures import curve_series
    from lero.app.study.arm_colors import arm_color

    series = []
    for row, run in enumerate(runs, 1):
        best = best_candidate(run)
        legend = f"{legend_label(run, row)} ({best.candidate_id})" if best is not None else ""
        if best is not None and (s := curve_series(legend, best.result, arm_color("", row - 1))) is not None:
            series.append(s)
    return plot_learning_curves(series) if series else None


def default_out(runs_dir: str | Path, run_ids: list[str]) -> Path:
    """`<runs_dir>/comparisons/<a>+<b>...`; refused when a run is named `comparisons`."""
    root = Path(runs_dir) / COMPARISONS_DIR
    if RunDir(root).files.kind(SPEC_FILE) is not None:
        raise RunError(f"{root} is a run; give the comparison a folder with --out")
    return root / _NAME.sub("-", "+".join(run_ids))[:96]


def write_comparison(runs: list[RunFiles], out: Path) -> dict[str, Path]:
    """compare.md, compare.csv and learning_curves.{png,pdf,svg,csv} in OUT; their paths."""
    rows, metrics = comparison_rows(runs)
    if out.exists() and not out.is_dir():
        raise RunError(f"--out {out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    figure = comparison_figure(runs)
    for ext, data in (figure or {}).items():
        write_atomic(out / f"learning_curves.{ext}", data)
    if figure:
        written["figure"] = out / "learning_curves.png"
    write_atomic(out / "compare.csv", comparison_csv(rows, metrics))
    write_atomic(out / "compare.md", comparison_markdown(rows, metrics, "learning_curves.png" if figure else None))
    return {"markdown": out / "compare.md", "csv": out / "compare.csv", **written}
