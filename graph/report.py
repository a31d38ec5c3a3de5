"""Run report: report.json, report.md and plots/ rebuilt from a run directory alone.

Only the files the engine leaves on disk are read (spec.json, state.json, events.jsonl,
baseline/result.json, candidates/<gen>-<idx>/...), so a report can be rebuilt for any
run, finished or not, without the checkpoint database or a live graph.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lero.graph.configuration import _RUN_ID as RUN_ID  # the run id rule, also a safe path part
from lero.graph.lineage import lineage, lineage_markdown
from lero.graph.rundir import BASELINE_ID, SPEC_FILE, STATE_FILE, RunDir, UnsafeFile

RUN_STATUSES = ("completed", "running", "interrupted", "stopped", "failed")
UNREADABLE = "unreadable"  # the status of a listed run whose files cannot be read
# stop reasons after which the designer could not go on; `lero resume` continues the run
RESUMABLE_STOPS = ("llm_budget", "llm_error", "wall_clock")
# job statuses that say the sandbox or the engine failed, not the candidate's code
INFRASTRUCTURE_STATUSES = frozenset({"crashed"})


@dataclass
class CandidateRecord:
    """One candidate directory: its result (if trained/judged) and where its code is."""

    candidate_id: str
    generation: int
    index: int
    result: dict
    code_path: Path | None
    folder: str = ""  # its directory under candidates/ (where its files are read)

    @property
    def fitness(self) -> float | None:
        value = self.result.get("fitness")
        return float(value) if _is_number(value) else None

    @property
    def status(self) -> str:
        return str(self.result.get("status", "pending"))


@dataclass
class RunFiles:
    """Everything read from one run directory."""

    run_dir: Path
    spec: dict
    state: dict
    events: list[dict]
    baseline: dict | None
    candidates: list[CandidateRecord] = field(default_factory=list)
    rundir: RunDir | None = None

    def __post_init__(self) -> None:
        self.rundir = self.rundir or RunDir(self.run_dir)

    @property
    def run_id(self) -> str:
        return str(self.spec.get("run_id") or self.run_dir.name)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _parse_candidate_dir(name: str) -> tuple[int, int] | None:
    gen, sep, idx = name.partition("-")
    if not sep or not gen.isdigit() or not idx.isdigit():
        return None
    return int(gen), int(idx)


def load_run(run_dir: str | Path) -> RunFiles:
    """Read a run directory through RunDir; ValueError (one line) if it is not one or
    cannot be read (a planted symlink, a FIFO, a corrupt or oversized file)."""
    rundir = RunDir(Path(run_dir))
    spec = rundir.read_json(SPEC_FILE)
    state = rundir.read_json(STATE_FILE)
    if spec is None and state is None:
        raise ValueError(f"not a lero run directory (no spec.json or state.json): {run_dir}")
    candidates = []
    for name in rundir.candidate_names():
        parsed = _parse_candidate_dir(name)
        if parsed is None:
            continue
        result = rundir.read_result(name) or {}
        candidates.append(
            CandidateRecord(
                candidate_id=str(result.get("candidate_id", name)),
                generation=int(result.get("generation", parsed[0])),
                index=parsed[1],
                result=result,
                code_path=rundir.code_path(name) if rundir.has_code(name) else None,
                folder=name,
            )
        )
    candidates.sort(key=lambda c: (c.generation, c.index))
    return RunFiles(
        run_dir=rundir.path,
        spec=spec or {},
        state=state or {},
        events=rundir.read_events(),
        baseline=rundir.read_result(BASELINE_ID),
        candidates=candidates,
        rundir=rundir,
    )


def _eval_of(result: dict | None) -> dict[str, float]:
    if not result:
        return {}
    metrics = result.get("eval") or {}
    return {k: float(v) for k, v in metrics.items() if _is_number(v)}


def metric_names(*evaluations: dict) -> list[str]:
    """The task metrics a run measured (its env's own), `return` first, then as first seen."""
    return list(dict.fromkeys(["return", *(key for e in evaluations for key in e)]))


def best_candidate(run: RunFiles) -> CandidateRecord | None:
    """Highest fitness among candidates that were trained and evaluated."""
    scored = [c for c in run.candidates if c.fitness is not None]
    return max(scored, key=lambda c: c.fitness) if scored else None


def _generation_rows(run: RunFiles) -> list[dict]:
    rows = []
    for gen in sorted({c.generation for c in run.candidates}):
        members = [c for c in run.candidates if c.generation == gen]
        scores = [c.fitness for c in members if c.fitness is not None]
        rows.append(
            {
                "generation": gen,
                "candidates": len(members),
                "valid": len(scores),
                "best_fitness": max(scores) if scores else None,
                "mean_fitness": statistics.fmean(scores) if scores else None,
            }
        )
    return rows


def _llm_usage(run: RunFiles) -> dict[str, int]:
    """state.json's counters; the llm_call events are the fallback for older/crashed runs."""
    usage = run.state.get("llm")
    if isinstance(usage, dict):
        return {
            k: int(usage.get(k) or 0) for k in ("requests", "prompt_tokens", "completion_tokens")
        }
    calls = [e for e in run.events if e.get("event") == "llm_call"]
    return {
        "requests": len(calls),
        "prompt_tokens": sum(int(e.get("prompt_tokens") or 0) for e in calls),
        "completion_tokens": sum(int(e.get("completion_tokens") or 0) for e in calls),
    }


def _wall_s(run: RunFiles) -> float | None:
    if _is_number(run.state.get("wall_s")):
        return float(run.state["wall_s"])
    stamps = [e["ts"] for e in run.events if _is_number(e.get("ts"))]
    return float(max(stamps) - min(stamps)) if stamps else None


def _status(run: RunFiles) -> str:
    status = run.state.get("status")
    return status if status in RUN_STATUSES else "running"


def is_resumable_stop(stop_reason: str | None) -> bool:
    """The designer stopped for a reason more budget or a working server fixes."""
    return bool(stop_reason) and stop_reason.split(":", 1)[0] in RESUMABLE_STOPS


def _failure_text(result: dict) -> str:
    """The first error message of a result.json (aggregated or one seed's)."""
    errors = [result.get("error"), *((r or {}).get("error") for r in result.get("per_seed") or [])]
    for error in errors:
        if isinstance(error, dict) and error.get("message"):
            return f"{error.get('type', 'error')}: {' '.join(str(error['message']).split())}"[:300]
        if isinstance(error, str) and error.strip():
            return " ".join(error.split())[:300]
    return f"status {result.get('status', '?')}"


def run_ending(run: RunFiles, stop_reason: str | None) -> tuple[str, str | None]:
    """(status, stop_reason) of a run whose graph reached its end.

    `failed` when the baseline did not train or every candidate failed in the sandbox
    rather than in its code (nothing the run shows can be trusted); `stopped` when the
    designer could not go on (resumable); else `completed` (a human stop included).
    """
    if run.baseline is not None and run.baseline.get("status") != "ok":
        return "failed", f"the baseline did not train ({_failure_text(run.baseline)})"
    broken = [c for c in run.candidates if c.status in INFRASTRUCTURE_STATUSES]
    if broken and len(broken) == len(run.candidates):
        return "failed", (
            f"all {len(broken)} candidates failed in the sandbox, not in their code "
            f"({_failure_text(broken[0].result)})"
        )
    if is_resumable_stop(stop_reason):
        return "stopped", stop_reason
    return "completed", stop_reason


def summarize(run: RunFiles) -> dict:
    """The report.json document (DESIGN.md keys)."""
    best = best_candidate(run)
    env_steps = run.state.get("env_steps")
    return {
        "run_id": run.run_id,
        "status": _status(run),
        "stop_reason": run.state.get("stop_reason"),
        "baseline": {
            "fitness": (run.baseline or {}).get("fitness"),
            "eval": _eval_of(run.baseline),
        },
        "best": {
            "candidate_id": best.candidate_id if best else None,
            "generation": best.generation if best else None,
            "fitness": best.fitness if best else None,
            "eval": _eval_of(best.result) if best else {},
            "code_path": str(best.code_path.relative_to(run.run_dir))
            if best and best.code_path
            else None,
        },
        "generations": _generation_rows(run),
        "lineage": _elite_lineage(run),
        "llm": _llm_usage(run),
        "env_steps": int(env_steps) if _is_number(env_steps) else None,
        "wall_s": _wall_s(run),
    }


def _elite_lineage(run: RunFiles) -> list[dict]:
    fitness = {c.candidate_id: c.fitness for c in run.candidates}
    return lineage(run.events, fitness, int(run.spec.get("n_elites") or 2))


def fmt_number(value: object, digits: int = 3) -> str:
    """Fixed digits, or an em dash for a missing / non-finite value."""
    return f"{value:.{digits}f}" if _is_number(value) else "—"


def _seed_fitnesses(result: dict | None) -> list[float]:
    per_seed = (result or {}).get("per_seed") or []
    return [float(r["fitness"]) for r in per_seed if _is_number(r.get("fitness"))]


def _spread(result: dict | None) -> str:
    """'mean ± std (n seeds: a, b, c)' for a baseline/candidate result."""
    if not result or not _is_number(result.get("fitness")):
        return "—"
    seeds = _seed_fitnesses(result)
    std = result.get("fitness_std")
    if not _is_number(std):
        std = statistics.pstdev(seeds) if len(seeds) > 1 else 0.0
    listed = ", ".join(fmt_number(s) for s in seeds)
    plural = "seed" if len(seeds) == 1 else "seeds"
    return f"{fmt_number(result['fitness'])} ± {fmt_number(std)} ({len(seeds)} {plural}: {listed})"


def render_markdown(run: RunFiles, summary: dict, plots: dict[str, Path]) -> str:
    """Human-readable report: comparison, generations, candidates, the best code."""
    spec, best = run.spec, best_candidate(run)
    lines = [f"# lero run `{summary['run_id']}`", ""]
    status = f"- status: **{summary['status']}**"
    if summary["stop_reason"]:
        status += f" ({summary['stop_reason']})"
    if summary["status"] == "stopped":
        status += f"; continue with `lero resume {summary['run_id']}`"
    lines += [
        status,
        f"- env: `{spec.get('env', '?')}` {json.dumps(spec.get('env_kwargs', {}))}",
        f"- algo: `{spec.get('algo', '?')}`, steps per candidate: {spec.get('steps', '?')}, "
        f"seeds: {spec.get('seeds', '?')}",
        f"- generations: {spec.get('generations', '?')} x population {spec.get('population', '?')}"
        f", llm: `{spec.get('llm', '?')}`",
        f"- env steps: {summary['env_steps'] if summary['env_steps'] is not None else '—'}, "
        f"wall clock: {fmt_number(summary['wall_s'], 1)} s",
        f"- LLM: {summary['llm']['requests']} requests, {summary['llm']['prompt_tokens']} prompt + "
        f"{summary['llm']['completion_tokens']} completion tokens",
        "",
        "## Best candidate vs baseline",
        "",
    ]
    rows = [("baseline (native reward, raw obs)", run.baseline)]
    if best:
        rows.append((f"best: `{best.candidate_id}`", best.result))
    names = metric_names(*(_eval_of(result) for _, result in rows))
    lines += [
        "| | fitness (mean ± std over seeds) | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for label, result in rows:
        metrics = _eval_of(result)
        cells = " | ".join(fmt_number(metrics.get(m)) for m in names)
        lines.append(f"| {label} | {_spread(result)} | {cells} |")
    base_fit, best_fit = summary["baseline"]["fitness"], summary["best"]["fitness"]
    if _is_number(base_fit) and _is_number(best_fit):
        lines += ["", f"Improvement over the baseline: {best_fit - base_fit:+.3f} return."]
    lines += [
        "",
        "## Generations",
        "",
        "| generation | candidates | valid | best fitness | mean fitness |",
        "|---|---|---|---|---|",
    ]
    for g in summary["generations"]:
        lines.append(
            f"| {g['generation']} | {g['candidates']} | {g['valid']} | "
            f"{fmt_number(g['best_fitness'])} | {fmt_number(g['mean_fitness'])} |"
        )
    lines += ["", "## Candidates", "", "| candidate | status | fitness |", "|---|---|---|"]
    for c in run.candidates:
        lines.append(f"| `{c.candidate_id}` | {c.status} | {_spread(c.result)} |")
    lines += lineage_markdown(summary.get("lineage") or [])
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{name}]({path.relative_to(run.run_dir)})" for name, path in plots.items()]
    if best and best.code_path:
        lines += [
            "",
            f"## Best candidate code (`{summary['best']['code_path']}`)",
            "",
            "```python",
            (run.rundir.read_code(best.folder) or "").rstrip(),
            "```",
        ]
    return "\n".join(lines) + "\n"


def write_report(run_dir: str | Path) -> dict:
    """Build report.json, report.md and plots/*.png in run_dir; returns the report.json dict."""
    from lero.graph.plots import (  # matplotlib: only when plotting
        plot_fitness,
        plot_learning_curves,
    )

    run = load_run(run_dir)
    summary = summarize(run)
    plots = {"fitness": run.rundir.write_plot(
        "fitness.png", plot_fitness(summary["generations"], summary["baseline"]["fitness"]))}
    best = best_candidate(run)
    curves = {}
    if run.baseline and run.baseline.get("curves"):
        curves["baseline"] = run.baseline["curves"]
    if best and best.result.get("curves"):
        curves[f"best ({best.candidate_id})"] = best.result["curves"]
    if curves:
        plots["learning_curves"] = run.rundir.write_plot("learning_curves.png", plot_learning_curves(curves))
    run.rundir.write_report(summary, render_markdown(run, summary, plots))
    return summary


def _reason(error: Exception) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if isinstance(error, ValueError) else f"{type(error).__name__}: {text}"


def run_rows(runs_dir: str | Path, row: Callable[[RunFiles], dict]) -> list[dict]:
    """`row(run)` for every run under runs_dir (by name). A run that cannot be read is one
    `{"run_id", "status": "unreadable", "error"}` row: one bad directory (a symlink, a FIFO,
    torn JSON, odd types) is neither hidden nor fatal to the listing."""
    root = Path(runs_dir)
    rows = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if not RUN_ID.match(path.name) or not (path.is_dir() or path.is_symlink()):
            continue
        rundir = RunDir(path)
        try:
            if path.is_symlink():
                raise UnsafeFile(f"refusing {path}: the run directory is a symlink")
            if rundir.files.kind(SPEC_FILE) is None and rundir.files.kind(STATE_FILE) is None:
                continue  # not a run (a study scratch folder, a stray directory)
            rows.append(row(load_run(path)))
        except Exception as error:  # whatever a hostile directory triggers: that row only
            rows.append({"run_id": path.name, "status": UNREADABLE, "error": _reason(error)[:300]})
    return rows


def run_row(run_dir: str | Path | RunFiles) -> dict:
    """One line of `lero runs`: cheap (no plots, nothing written)."""
    run = run_dir if isinstance(run_dir, RunFiles) else load_run(run_dir)
    summary = summarize(run)
    return {
        "run_id": summary["run_id"],
        "status": summary["status"],
        "generations_done": len({c.generation for c in run.candidates if c.result}),
        "best_fitness": summary["best"]["fitness"],
        "baseline_fitness": summary["baseline"]["fitness"],
        "started_ts": run.state.get("started_ts"),
    }
