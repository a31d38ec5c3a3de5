"""Run report for people: report.md and plots/ beside the engine's report.json, and the
run listing shared by `lero runs` and the web UI."""

from __future__ import annotations

import difflib
import json
import statistics
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from lero.app.reports.numbers import fmt_number
from lero.app.reports.run_status import run_label, run_status
from lero.graph.configuration import RUN_ID
from lero.graph.lineage import lineage_markdown
from lero.graph.rundir import SPEC_FILE, STATE_FILE, RunDir, UnsafeFile
from lero.graph.summary import (
    RunFiles,
    best_candidate,
    eval_of,
    load_run,
    metric_names,
    seed_fitnesses,
    summarize,
)
from lero.sandbox.types import work_label
from lero.training.validation import finite_number

UNREADABLE = "unreadable"  # the status of a listed run whose files cannot be read


def spread_text(result: dict | None) -> str:
    """'mean ± std (n seeds: a, b, c)' for a baseline/candidate result; one seed has no
    spread to show, so it reads 'value (1 seed, no spread)'."""
    if not result or not finite_number(result.get("fitness")):
        return fmt_number(result.get("fitness")) if result else "—"  # nan, inf: shown as such
    seeds = seed_fitnesses(result)
    if len(seeds) <= 1:
        return fmt_number(result["fitness"]) + (" (1 seed, no spread)" if seeds else "")
    std = result.get("fitness_std")
    if not finite_number(std):
        std = statistics.pstdev(seeds)
    listed = ", ".join(fmt_number(s) for s in seeds)
    return f"{fmt_number(result['fitness'])} ± {fmt_number(std)} ({len(seeds)} seeds: {listed})"


DESIGNER_GROUP = "designer"  # requests about no candidate and no generation (a generation's designs)


def llm_request_row(record: dict[str, Any]) -> dict[str, str]:
    """One LLM record (RunDir.read_llm_records) as the cells people read, in the report and
    the web UI alike: tokens the server did not count are marked "(est.)"."""
    mark = " (est.)" if record.get("tokens_estimated") else ""

    def tokens(key: str) -> str:
        value = record.get(key)
        return f"{value}{mark}" if finite_number(value) else "—"

    status = str(record.get("status") or "?")
    if record.get("error"):
        status += f": {record['error']}"
    return {
        "role": str(record.get("role") or "?"),
        "status": status,
        "prompt_tokens": tokens("prompt_tokens"),
        "completion_tokens": tokens("completion_tokens"),
        "seconds": fmt_number(record.get("elapsed_s"), 1),
        "finish_reasons": ", ".join(str(r) for r in record.get("finish_reasons") or []) or "—",
        "shortened": ", ".join(str(part) for part in record.get("shortened") or []) or "—",
        "record": str(record.get("record") or ""),
    }


def llm_request_groups(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Records by what they were about, in request order: a candidate id; else the
    generation the record names (`generation N`); else DESIGNER_GROUP."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record.get("candidate_id"):
            key = str(record["candidate_id"])
        elif isinstance(record.get("generation"), int):
            key = f"generation {record['generation']}"
        else:
            key = DESIGNER_GROUP
        groups.setdefault(key, []).append(record)
    return groups


def _cell(text: str) -> str:
    """Text from a server inside a Markdown table cell: one line, no column breaks."""
    return " ".join(text.split()).replace("|", "\\|")


def llm_requests_markdown(records: list[dict[str, Any]]) -> list[str]:
    """The "LLM requests" section: one table per candidate (nothing for an offline run)."""
    if not records:
        return []
    lines = ["", "## LLM requests", "", "Every request is kept whole (prompt, replies) in `llm/<record>`."]
    columns = ("role", "status", "prompt_tokens", "completion_tokens", "seconds", "finish_reasons",
               "shortened", "record")  # fmt: skip
    header = "| role | status | prompt tokens | completion tokens | seconds | finish reasons | shortened | record |"
    for group, members in llm_request_groups(records).items():
        title = f"`{group}`" if group != DESIGNER_GROUP and not group.startswith("generation") else group
        lines += ["", f"### {title}", "", header, "|" + "---|" * len(columns)]
        for record in members:
            row = llm_request_row(record)
            row["record"] = f"`llm/{row['record']}`"
            lines.append("| " + " | ".join(_cell(row[c]) for c in columns) + " |")
    return lines


def schedule_markdown(summary: dict) -> list[str]:
    """Successive halving's rungs and what they saved (nothing for a `full` run)."""
    schedule = summary.get("schedule") or {}
    if schedule.get("name") != "halving":
        return []
    rungs = " / ".join(f"{r['steps']:,}" for r in schedule["rungs"])
    reached = " / ".join(str(r["candidates"]) for r in schedule["rungs"])
    spent, full = summary.get("env_steps"), schedule.get("full_env_steps")
    share = f" = {spent / full:.0%} of the {full:,} a full schedule spends" if spent and full else ""
    return [f"- schedule: successive halving, rungs to {rungs} env steps, reached by {reached} "
            f"candidates; env steps spent: {spent if spent is not None else '—'}{share}"]  # fmt: skip


def time_markdown(summary: dict) -> list[str]:
    """The "Where the time went" section from report.json's `time` (graph.summary.time_breakdown)."""
    time = summary.get("time") or {}
    jobs, loop = time.get("jobs") or {}, time.get("loop") or {}
    if not jobs and not loop:
        return []
    lines = ["", "## Where the time went", "",
             f"Wall clock {fmt_number(summary.get('wall_s'), 1)} s. Job seconds add up over jobs "
             "running side by side; a job's seconds are its wait for a free slot, the sandbox's "
             "start and imports, and the work itself.", "",
             "| job kind | jobs (cached) | sandboxes | job seconds | waiting for a slot | sandbox start + imports | work |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for kind, row in jobs.items():
        lines.append(
            f"| {kind} | {row['jobs']} ({row['cached']}) | {row.get('sandboxes', '—')} | {fmt_number(row['elapsed_s'], 1)} | "
            f"{fmt_number(row['wait_s'], 1)} | {fmt_number(row['start_s'], 1)} | "
            f"{fmt_number(row['run_s'], 1)} ({work_label(kind)}) |"
        )
    if loop:
        lines += ["", "The loop's own steps (wall seconds per graph node; `validate` includes its "
                  "validation jobs):", "", "| node | seconds |", "|---|---|"]  # fmt: skip
        lines += [f"| {node} | {fmt_number(seconds, 1)} |" for node, seconds in loop.items()]
    return lines


def _changed_lines(before: str, after: str) -> str:
    added = removed = 0
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm=""):
        if not line.startswith(("+++", "---")):
            added += line.startswith("+")
            removed += line.startswith("-")
    return f"+{added} / -{removed} lines"


def human_decisions(events: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Every answer a person gave about candidates and generations, from events.jsonl (the
    `interrupt` questions and their `interrupt_answered` answers), and every edit the gate
    refused: {"generation", "candidate" ("" for a generation), "decision", "detail"} rows in order."""
    rows: list[dict[str, str]] = []
    asked: dict[str, Any] = {}
    for event in events:
        if event.get("event") == "interrupt" and isinstance(event.get("payload"), dict):
            asked = event["payload"]
            for cand in asked.get("candidates") or []:
                if isinstance(refused := cand.get("refused_edit"), dict):
                    reason = " ".join(str(refused.get("reason", "")).split())
                    rows.append({"generation": str(asked.get("generation")), "candidate": str(cand.get("candidate_id")),
                                 "decision": "edit refused by the gate (not trained)", "detail": reason})  # fmt: skip
        elif event.get("event") == "interrupt_answered" and isinstance(answer := event.get("answer"), dict):
            generation = str(asked.get("generation"))
            if event.get("kind") == "generation" and answer.get("feedback"):
                rows.append({"generation": generation, "candidate": "", "decision": f"{answer.get('action')} with feedback",
                             "detail": str(answer["feedback"])})  # fmt: skip
            if event.get("kind") != "candidates":
                continue
            code = {c.get("candidate_id"): c["code"] for c in asked.get("candidates") or [] if isinstance(c.get("code"), str)}
            for cid, decision in (answer.get("decisions") or {}).items():
                action, edited = decision.get("action"), str(decision.get("code", ""))
                # events.jsonl holds asked code by reference (graph.runner): then the edit's size alone
                change = _changed_lines(code[cid], edited) if cid in code else f"{len(edited.splitlines())} lines"
                detail = {"comment": str(decision.get("comment", "")), "edit": change}.get(action, "")
                rows.append({"generation": generation, "candidate": str(cid), "decision": str(action), "detail": detail})
    return rows


def human_markdown(events: list[dict[str, Any]]) -> list[str]:
    """The "Your decisions" section (nothing when nobody was asked)."""
    rows = [r for r in human_decisions(events) if r["decision"] != "approve"]
    if not rows:
        return []
    lines = ["", "## Your decisions", "", "Comments, edits and refused edits (approvals are not listed; "
             "`events.jsonl` holds every answer).", "", "| generation | candidate | decision | detail |", "|---|---|---|---|"]  # fmt: skip
    for row in rows:
        candidate = f"`{row['candidate']}`" if row["candidate"] else "—"
        lines.append(f"| {row['generation']} | {candidate} | {row['decision']} | {_cell(row['detail'])} |")
    return lines


def measured_markdown(measured: dict[str, list[dict]]) -> list[str]:
    """The "Measured evidence" section: the rubric points candidates' validation rollouts
    showed (nothing when none did)."""
    if not measured:
        return []
    lines = ["", "## Measured evidence", "", "Rubric points read off each candidate's validation rollout "
             "(`agents.evidence_rules`); `revised`: they sent it back to the designer.", "",
             "| candidate | target | rubric item | why | revised |", "|---|---|---|---|---|"]
    lines += [f"| `{cid}` | {_cell(p['target'])} | {_cell(p['rubric_item'])} | {_cell(p['why'])} | {'yes' if p['revised'] else 'no'} |"
              for cid, points in measured.items() for p in points]
    return lines


def verdicts_markdown(verdicts: dict[str, dict[str, int]]) -> list[str]:
    """The "Critic verdicts" section: each model's LLM verdicts (nothing when no LLM reviewed)."""
    if not verdicts:
        return []
    names = list(next(iter(verdicts.values())))
    lines = ["", "## Critic verdicts", "", "A `no judgement` is a revise or reject that named no evidence (a target "
             "in the candidate and an item of the critic's rubric): the candidate went on.", "",
             f"| model | {' | '.join(names)} |", "|---" * (len(names) + 1) + "|"]
    lines += [f"| `{model}` | {' | '.join(str(row.get(n, 0)) for n in names)} |" for model, row in verdicts.items()]
    return lines


def render_markdown(run: RunFiles, summary: dict, plots: dict[str, tuple[Path, str]],
                    under_verdict: tuple[str, ...] = ()) -> str:
    """Human-readable report: comparison, generations, candidates, the best code; the figures
    named in UNDER_VERDICT under the confirmation's verdict, the rest under Plots."""
    from lero.app.reports.confirmation_verdict import (  # app.study's statistics load with it
        confirmation_markdown,
        headline,
    )
    from lero.app.reports.provenance import provenance_markdown
    from lero.app.reports.shaping_notes import shaping_markdown
    from lero.graph.summary import native_task

    spec, best = run.spec, best_candidate(run)
    task = native_task(spec.get("env"), spec.get("env_kwargs", {}))
    success = task.success_metric if task else "success metric"  # the task's own (lero's envs)
    lines = [f"# lero run `{summary['run_id']}`", "", f"**{headline(summary.get('confirmation'))}**", "",
             *confirmation_markdown(summary.get("confirmation"))]  # fmt: skip
    numbered = {name: (number, *shown) for number, (name, shown) in enumerate(plots.items(), 1)}
    evidence = [line for name in under_verdict if name in numbered
                for line in figure_lines(run, name, *numbered.pop(name))]  # the verdict's evidence, under it
    if evidence:
        lines += [*evidence[1:], ""]  # confirmation_markdown ends blank
    shown = run_status(run, summary["status"])
    status = f"- status: **{shown['shown']}**"
    if summary["stop_reason"]:
        status += f" ({summary['stop_reason']})"
    status += f"; generations done: {shown['progress']}"
    if summary["status"] == "stopped":
        status += f"; continue with `lero resume {summary['run_id']}`"
    lines += [
        status,
        f"- env: `{spec.get('env', '?')}` {json.dumps(spec.get('env_kwargs', {}))}",
        f"- algo: `{spec.get('algo', '?')}`, steps per candidate: {spec.get('steps', '?')}, "
        f"seeds: {spec.get('seeds', '?')}"
        + (", fitness: auc (held-out return averaged over the learning curve's checkpoints)"
           if spec.get("fitness") == "auc" else "")
        + (f", fitness: success (the task's {success} on the held-out episodes, return breaking ties)"
           if spec.get("fitness") == "success" else ""),
        f"- generations: {spec.get('generations', '?')} x population {spec.get('population', '?')}"
        f", llm: `{spec.get('llm', '?')}`",
        f"- env steps: {summary['env_steps'] if summary['env_steps'] is not None else '—'}, "
        f"wall clock: {fmt_number(summary['wall_s'], 1)} s",
        f"- LLM: {summary['llm']['requests']} requests, {summary['llm']['prompt_tokens']} prompt + "
        f"{summary['llm']['completion_tokens']} completion tokens",
        *schedule_markdown(summary),
        "",
        "## Best candidate vs baseline (the loop, on the selection episodes)",
        "",
    ]
    rows = [("baseline (native reward, raw obs)", run.baseline)]
    if best:
        rows.append((f"best: `{best.candidate_id}`", best.result))
    names = metric_names(*(eval_of(result) for _, result in rows))
    lines += [
        "| | fitness (mean ± std over seeds) | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for label, result in rows:
        metrics = eval_of(result)
        cells = " | ".join(fmt_number(metrics.get(m)) for m in names)
        lines.append(f"| {label} | {spread_text(result)} | {cells} |")
    base_fit, best_fit = summary["baseline"]["fitness"], summary["best"]["fitness"]
    if finite_number(base_fit) and finite_number(best_fit):
        lines += ["", f"Improvement over the baseline on the selection episodes: {best_fit - base_fit:+.3f} "
                      f"{success if spec.get('fitness') == 'success' else 'return'}."]
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
    lines += ["", "## Candidates", "", "| candidate | designed as | status | fitness | env steps trained |",
              "|---|---|---|---|---|"]
    modes = summary.get("design") or {}
    for c in run.candidates:
        trained = (c.result.get("trained_steps") or spec.get("steps")) if c.result.get("per_seed") else None
        shown = "—" if trained is None else f"{trained:,}" + (" (stopped by halving)" if c.stopped_at else "")
        lines.append(f"| `{c.candidate_id}` | {modes.get(c.candidate_id, '—')} | {c.status} | {spread_text(c.result)} | {shown} |")
    lines += shaping_markdown(run, success)
    lines += verdicts_markdown(summary.get("verdicts") or {})
    lines += measured_markdown(summary.get("measured") or {})
    lines += human_markdown(run.events)
    lines += time_markdown(summary)
    lines += lineage_markdown(summary.get("lineage") or [])
    lines += llm_requests_markdown(run.rundir.read_llm_records())
    if plots:
        lines += ["", "## Plots", "", PLOTS_NOTE]
        for name, shown in numbered.items():
            lines += figure_lines(run, name, *shown)
    lines += provenance_markdown(run.rundir, run.rundir.read_spec())
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
    """Rebuild report.json, report.md and plots/*.png in run_dir (`lero report`); returns the
    report.json dict."""
    run = load_run(run_dir)
    return write_report_files(run, summarize(run))


def figure_lines(run: RunFiles, name: str, number: int, path: Path, caption: str) -> list[str]:
    """A figure in report.md: the image, then its numbered caption."""
    return ["", f"![{name}]({path.relative_to(run.run_dir)})", "", f"**Figure {number}.** {caption}"]


PLOTS_NOTE = ("Every plot is also in plots/ as PDF and SVG (a paper column wide, no title: the captions "
              "below are for your paper) with its numbers as CSV.")


def write_plot_files(rundir: RunDir, stem: str, files: dict[str, bytes]) -> Path:
    """A figure's files (`app.reports.figures.figure_files`) as plots/STEM.<ext>; the PNG's path."""
    for ext, data in files.items():
        rundir.write_plot(f"{stem}.{ext}", data)
    return rundir.plot_path(f"{stem}.png")


def write_report_files(run: RunFiles, summary: dict) -> dict:
    """report.md and plots/ for a run whose report.json is `summary` (the engine writes
    report.json itself at the end of a run; this adds what people read), and report.json
    again with the confirmation's statistics (`app.reports.confirmation_verdict`); returns report.json."""
    from lero.app.reports.confirmation_verdict import confirmation_verdict
    from lero.app.reports.run_figures import run_figures  # matplotlib: only when plotting

    summary = {**summary, "confirmation": confirmation_verdict(run, summary.get("confirmation"))}
    run.rundir.write_summary(summary)
    figures = run_figures(run, summary)
    plots = {f.stem: (write_plot_files(run.rundir, f.stem, f.files), f.caption) for f in figures}
    run.rundir.write_report_md(render_markdown(run, summary, plots, tuple(f.stem for f in figures if f.under_verdict)))
    return summary


def _reason(error: Exception) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if isinstance(error, ValueError) else f"{type(error).__name__}: {text}"


def run_rows(
    runs_dir: str | Path, row: Callable[[RunFiles], dict], events_tail: int | None = None,
    memo: Callable[[Path, Callable[[], dict]], dict] | None = None,
) -> list[dict]:
    """`row(run)` for every run under runs_dir (by name). A run that cannot be read is one
    `{"run_id", "status": "unreadable", "error"}` row: one bad directory (a symlink, a FIFO,
    torn JSON, odd types) is neither hidden nor fatal to the listing. EVENTS_TAIL: as
    `load_run`'s. MEMO(path, build): a row kept while its run is unchanged (the web UI's)."""
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
            build = partial(_read_row, row, path, events_tail)
            rows.append(memo(path, build) if memo else build())
        except Exception as error:  # whatever a hostile directory triggers: that row only
            rows.append({"run_id": path.name, "status": UNREADABLE, "error": _reason(error)[:300]})
    return rows


def _read_row(row: Callable[[RunFiles], dict], path: Path, events_tail: int | None) -> dict:
    return row(load_run(path, events_tail))


def run_row(run_dir: str | Path | RunFiles) -> dict:
    """One line of `lero runs`: cheap (no plots, nothing written); `confirmed` is the
    confirmation's verdict on return (`app.reports.confirmation_verdict.short_verdict`)."""
    from lero.app.reports.confirmation_verdict import confirmed_return, short_verdict

    run = run_dir if isinstance(run_dir, RunFiles) else load_run(run_dir)
    summary = summarize(run)
    shown = run_status(run, summary["status"])
    return {
        "run_id": summary["run_id"],
        "status": summary["status"],
        "shown_status": shown["shown"],
        "needs_answer": shown["needs_answer"],
        "generations_done": shown["generations_done"],
        "generations": shown["progress"],
        "env": run.spec.get("env"),
        "algo": run.spec.get("algo"),
        "steps": run.spec.get("steps"),
        "best_fitness": summary["best"]["fitness"],
        "baseline_fitness": summary["baseline"]["fitness"],
        "confirmed": short_verdict(confirmed_return(run, summary)),
        "label": run_label(run.spec),
        "started_ts": run.state.get("started_ts"),
    }


def run_headline(run_dir: str | Path) -> str:
    """The run's confirmed verdict in one line (`app.reports.confirmation_verdict.headline`), from its files."""
    from lero.app.reports.confirmation_verdict import confirmed_return, headline

    run = load_run(run_dir)
    return headline(confirmed_return(run, summarize(run)))
