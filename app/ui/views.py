"""What the pages show, read from run directories through graph.report's reader.

Pure functions from files to plain dicts and strings; the templates escape every
string they are given (LLM-written code and text included), and the few HTML fragments
built here (highlighted code, rendered markdown) come from libraries that escape their
input (Pygments, markdown-it with raw HTML off).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from lero.agents.records import code_digest
from lero.app.console.approval_view import candidate_card
from lero.app.reports.run_report import llm_request_row, run_rows
from lero.app.reports.run_status import run_label, run_status, unanswered_question
from lero.app.reports.shaping_notes import hollow_note, shaping_kind, success_metric_of
from lero.app.ui.charts import chart
from lero.app.ui.page_cache import RunCache
from lero.graph.configuration import RUN_ID
from lero.graph.rundir import BASELINE_ID, PLOT_LIMIT, REPORT_MD, STUDIES_DIR, RunDir
from lero.graph.summary import CandidateRecord, RunFiles, best_candidate, metric_names, summarize
from lero.sandbox import VALIDATE
from lero.training.curves import split_greedy

PLOT_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}\.png$")
STUDY_ID = re.compile(r"^[A-Za-z0-9_+][A-Za-z0-9_.+-]{0,199}$")  # app.study's folder names: no path, no dot first
STUDY_MD, STUDY_JSON = "study.md", "study.json"
# A page reads only the last 16 MiB of events.jsonl: a run page or the list never parses a
# file of up to EVENTS_LIMIT (256 MiB) on each load; code rides in files, so 16 MiB holds
# tens of thousands of events (graph.runner keeps approval code by reference).
EVENTS_PAGE_TAIL = 16 << 20

_markdown = MarkdownIt("commonmark", {"html": False}).enable("table")
_formatter = HtmlFormatter(nowrap=False, cssclass="code", linenos="inline")


def render_markdown(text: str, image_base: str = "") -> Markup:
    """Markdown to HTML; raw HTML in the text is escaped, relative images point at image_base."""
    html = _markdown.render(text)
    if image_base:
        html = html.replace('<img src="plots/', f'<img src="{image_base}plots/')
    return Markup(html)


def highlight_python(code: str) -> Markup:
    """Python source as escaped, highlighted HTML with line numbers."""
    return Markup(highlight(code, PythonLexer(), _formatter))


def highlight_css() -> str:
    return _formatter.get_style_defs(".code")


def _row(run: RunFiles) -> dict[str, Any]:
    from lero.app.reports.confirmation_verdict import confirmed_return, short_verdict

    summary = summarize(run)
    shown = run_status(run, summary["status"])
    return {
        "confirmed": short_verdict(confirmed_return(run, summary)), "label": run_label(run.spec),
        "run_id": run.run_dir.name, "status": summary["status"], "shown": shown,
        "env": run.spec.get("env"), "algo": run.spec.get("algo"), "steps": run.spec.get("steps"),
        "best": summary["best"]["fitness"], "baseline": summary["baseline"]["fitness"],
        "wall_s": summary["wall_s"], "approve": run.spec.get("approve"),
    }


def list_runs(runs_dir: Path, cache: RunCache | None = None) -> list[dict[str, Any]]:
    """One row per run directory, newest name first: status, generation, best, baseline,
    wall-clock; a run that cannot be read is a row with its `error`. CACHE: rows kept while
    their run is unchanged; each row returned is the caller's own copy."""
    memo = partial(_kept_row, cache) if cache else None
    return [dict(row) for row in reversed(run_rows(runs_dir, _row, EVENTS_PAGE_TAIL, memo))]


def _kept_row(cache: RunCache, path: Path, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    return cache.get(path, "row", build)


def pending_question(run: RunFiles) -> dict[str, Any] | None:
    """The approval the run waits for (`run_status.unanswered_question`), each asked candidate
    with its code read back (events.jsonl holds it by reference, graph.runner) and the code of
    the parent it refines, for its diff."""
    payload = unanswered_question(run)
    if payload is not None and isinstance(payload.get("candidates"), list):
        payload["candidates"] = [_with_code(run, c) for c in payload["candidates"] if isinstance(c, dict)]
    return payload


def _with_code(run: RunFiles, candidate: dict[str, Any]) -> dict[str, Any]:
    """An asked candidate with its code from its candidate.py, when that file still holds the
    code it was asked about (`code_sha`); else without code (the form shows none). Its parent's
    code comes from the parent's candidate.py."""
    if not isinstance(candidate.get("candidate_id"), str):
        return candidate
    if "parent_code" not in candidate and (parent := parent_of(run, candidate["candidate_id"])):
        candidate = {**candidate, "parent_code": parent[1]}
    if "code" in candidate:
        return candidate
    try:
        code = run.rundir.read_code(candidate["candidate_id"])
    except ValueError:
        code = None
    return {**candidate, "code": code} if code is not None and code_digest(code) == candidate.get("code_sha") else candidate


def run_view(run: RunFiles) -> dict[str, Any]:
    """Everything the run page shows besides the live stream."""
    summary = summarize(run)
    best = best_candidate(run)
    success = success_metric_of(run.spec)
    return {
        "run_id": run.run_id, "label": run_label(run.spec), "summary": summary, "spec": run.spec, "state": run.state,
        "status": summary["status"], "shown": run_status(run, summary["status"]), "best": best,
        "candidates": [{"id": c.candidate_id, "generation": c.generation, "status": c.status,
                        "fitness": c.fitness, "stopped_at": c.stopped_at, "shaping": shaping_kind(c.result),
                        "hollow": hollow_note(c.result, success),
                        "measured": summary["measured"].get(c.candidate_id, [])}
                       for c in run.candidates],
        "pending": (pending := pending_question(run)),
        "cards": decision_cards(pending),
        "has_report": run.rundir.is_file(REPORT_MD),
        "plots": [name for name in run.rundir.plot_names() if PLOT_NAME.match(name)],
        "studies": study_ids(run.rundir),
        "metrics": metric_names(summary["baseline"]["eval"], summary["best"]["eval"]),
        **confirmation_view(run, summary),
    }


def confirmation_view(run: RunFiles, summary: dict[str, Any]) -> dict[str, Any]:
    """The confirmation's statistics, verdict lines and table rows (app.reports.confirmation_verdict: each
    value with its CI or its seeds' range, P(better) in the metric's own direction and the
    verdict with the raw direction beside it), for the run page."""
    from lero.app.reports.confirmation_verdict import (
        confirmation_rows,
        confirmation_verdict,
        headline,
        verdict_sentences,
    )

    confirmation = confirmation_verdict(run, summary["confirmation"])
    return {"confirmation": confirmation, "confirmation_lines": verdict_sentences(confirmation),
            "confirmation_rows": confirmation_rows(confirmation), "headline": headline(confirmation)}  # fmt: skip


def find_candidate(run: RunFiles, candidate_id: str) -> tuple[dict[str, Any], CandidateRecord | None]:
    """(result.json, record) of a candidate or the baseline; ValueError when absent."""
    if candidate_id == BASELINE_ID:
        if run.baseline is None:
            raise ValueError(f"run {run.run_id} has no baseline result yet")
        return run.baseline, None
    for record in run.candidates:
        if record.candidate_id == candidate_id:
            return record.result, record
    raise ValueError(f"no candidate {candidate_id!r} in run {run.run_id}")


def parent_of(run: RunFiles, candidate_id: str) -> tuple[str, str] | None:
    """(candidate id, code) of the elite this candidate refines, as its `candidate` event
    records it (`parents[0]`); None for an explore draft, which refines nothing."""
    parents = next((e.get("parents") or [] for e in reversed(run.events)
                    if e.get("event") == "candidate" and e.get("candidate_id") == candidate_id and e.get("parents")), [])
    sources = {c.candidate_id: c.folder for c in run.candidates if c.code_path}
    if not parents or parents[0] not in sources:
        return None
    return parents[0], run.rundir.read_code(sources[parents[0]]) or ""


def diff_classes(lines: list[str]) -> list[tuple[str, str]]:
    """Unified diff lines as (css class, line) pairs."""
    return [("hunk" if line.startswith("@@") else "add" if line.startswith("+") else
             "del" if line.startswith("-") else "ctx", line) for line in lines]  # fmt: skip


def diff_lines(parent: str, code: str, parent_id: str, candidate_id: str) -> list[tuple[str, str]]:
    """Unified diff as (css class, line) pairs."""
    return diff_classes(list(difflib.unified_diff(parent.splitlines(), code.splitlines(), parent_id,
                                                  candidate_id, lineterm="")))  # fmt: skip


def decision_cards(pending: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A pending `candidates` question's cards (app.console.approval_view), diffs with css classes."""
    if not pending or pending.get("kind") != "candidates":
        return []
    asked = pending.get("candidates") or []
    cards = [candidate_card(c, i, len(asked)) for i, c in enumerate(asked, start=1)]
    return [{**card, "diff": diff_classes(card["diff"]), "refused_diff": diff_classes(card["refused_diff"]),
             "code": c.get("code") or ""} for card, c in zip(cards, asked, strict=True)]  # fmt: skip


def candidate_view(run: RunFiles, candidate_id: str) -> dict[str, Any]:
    """Code, diff to the parent, reviews, validation, per-seed results, curves, traceback."""
    result, record = find_candidate(run, candidate_id)
    folder = BASELINE_ID if record is None else record.folder
    code = run.rundir.read_code(folder) if record and record.code_path else result.get("code")
    parent = parent_of(run, candidate_id) if record and code else None
    review = run.rundir.read_review(folder)
    curves = result.get("curves") or {}
    per_seed = result.get("per_seed") or []
    metrics = metric_names(*(s.get("metrics") or {} for s in per_seed), result.get("eval") or {})
    components = [k for k in split_greedy(curves)[0] if k not in ("steps", "train_reward", *metrics)]
    validations = [e for e in run.events if e.get("candidate_id") == candidate_id and e.get("kind") == VALIDATE.name
                   and e.get("event") == "job_finished"]
    history = [e for e in run.events if e.get("event") == "candidate" and e.get("candidate_id") == candidate_id]
    tracebacks = [(s.get("seed"), (s.get("error") or {}).get("traceback") or (s.get("error") or {}).get("message"))
                  for s in result.get("per_seed") or [] if s.get("error")]
    return {
        "run_id": run.run_id, "candidate_id": candidate_id, "result": result,
        "code": highlight_python(code) if code else None,
        "parent_id": parent[0] if parent else None,
        "diff": diff_lines(parent[1], code, parent[0], candidate_id) if parent else [],
        "review": render_markdown(review) if review is not None else None,
        "validations": validations, "history": history,
        "error": result.get("error"), "tracebacks": [t for t in tracebacks if t[1]],
        "per_seed": per_seed, "metrics": metrics,
        "component_chart": chart(curves, components, "episode sum per agent"),
        "task_chart": chart(curves, ["return", "train_reward"], "episode return per agent"),
        "components": components, "llm_requests": llm_requests(run.rundir, candidate_id),
    }


def llm_requests(rundir: RunDir, candidate_id: str) -> list[dict[str, Any]]:
    """The LLM requests about a candidate: the report's cells, and the prompt and replies
    (model text: the template escapes it like everything else)."""
    return [
        {**llm_request_row(record), "prompt": record.get("prompt") or [], "replies": record.get("replies") or []}
        for record in rundir.read_llm_records(candidate_id)
    ]


def report_html(run: RunFiles) -> Markup | None:
    text = run.rundir.read_report_md()
    return None if text is None else render_markdown(text, image_base=f"/runs/{run.run_dir.name}/")


def stream_snapshot(rundir: RunDir) -> dict[str, Any]:
    """The cheap part of the live state (state.json), for the SSE stream; a state that
    cannot be read (yet, or at all) shows as `starting` with its `error`."""
    error = None
    try:
        state = rundir.read_state()
    except ValueError as exc:  # torn, hostile or not a regular file: refused, never waited on
        state, error = {}, str(exc)
    return {"status": state.get("status", "starting"), "generation": state.get("generation", 0),
            "wall_s": state.get("wall_s"), "env_steps": state.get("env_steps"),
            "llm": state.get("llm") or {}, "best": state.get("best"),
            "report": rundir.is_file(REPORT_MD), "error": error}


# ---------------------------------------------------------------- studies (`lero study`'s folders)


def study_ids(rundir: RunDir) -> list[str]:
    """The run's study folders (`runs/<id>/studies/<study_id>/`); a symlink or odd name is none."""
    return [name for name in rundir.files.names(STUDIES_DIR, "dir") if STUDY_ID.match(name)]


def list_studies(runs_dir: Path) -> list[dict[str, Any]]:
    """One row per study of every run, newest run first: its status (study.json) and where
    study.md is; a study or run that cannot be read is a row with its `error`."""
    rows = []
    root = Path(runs_dir)
    for path in sorted(root.iterdir(), reverse=True) if root.is_dir() else []:
        if not RUN_ID.match(path.name) or path.is_symlink() or not path.is_dir():
            continue
        rundir = RunDir(path)
        try:
            names = study_ids(rundir)
        except ValueError as error:
            rows.append({"run_id": path.name, "study_id": None, "error": str(error)[:300]})
            continue
        for name in names:
            try:
                study = rundir.read_json(f"{STUDIES_DIR}/{name}/{STUDY_JSON}") or {}
                config = study.get("config") if isinstance(study.get("config"), dict) else {}
                rows.append({"run_id": path.name, "study_id": name, "status": study.get("status", "no study.json"),
                             "algos": config.get("algos"), "variants": config.get("variants"),
                             "steps": f"{config['steps']:,}" if isinstance(config.get("steps"), int) else "",
                             "error": None})
            except ValueError as error:
                rows.append({"run_id": path.name, "study_id": name, "error": str(error)[:300]})
    return rows


def study_view(rundir: RunDir, study_id: str) -> dict[str, Any]:
    """A study's page: study.md (its tables and figures) rendered, figures served from the
    study's own plots/; ValueError when there is no such study or its files are refused."""
    if study_id not in study_ids(rundir):
        raise ValueError(f"no study {study_id!r} in run {rundir.path.name}")
    text = rundir.read_text(f"{STUDIES_DIR}/{study_id}/{STUDY_MD}")
    study = rundir.read_json(f"{STUDIES_DIR}/{study_id}/{STUDY_JSON}") or {}
    base = f"/runs/{rundir.path.name}/studies/{study_id}/"
    return {"run_id": rundir.path.name, "study_id": study_id, "status": study.get("status"),
            "study_md": None if text is None else render_markdown(text, image_base=base)}


def study_plot(rundir: RunDir, study_id: str, name: str) -> bytes | None:
    """A figure of the study (PLOT_NAME checked by the route); None when absent."""
    if study_id not in study_ids(rundir):
        return None
    return rundir.files.read(f"{STUDIES_DIR}/{study_id}/plots/{name}", PLOT_LIMIT)
