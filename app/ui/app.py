"""`lero ui`: the Starlette application (pages, forms, the live SSE stream).

App code around the engine: runs are read from their directories (graph.report's
reader), started and resumed by background workers along the CLI's own path
(graph.runner through `python -m lero.app.cli.worker`), and answers are checked with the
engine's `normalize_answer` before a worker resumes the run — nothing here touches
LangGraph. Every page is rendered server-side by autoescaping Jinja templates; the one
script (static/run.js) follows the SSE stream and writes text nodes only.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path
from typing import Any, get_args

from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from lero.app.chat.desk import chat_run_fields
from lero.app.reports.numbers import fmt_number
from lero.app.ui import views
from lero.app.ui.auth import CSRF_FIELD, TokenGate, checked_form, cookie_name, csrf_token
from lero.app.ui.chat import ChatSession
from lero.app.ui.compare import routes as compare_routes
from lero.app.ui.page_cache import Batched, BatchPage, RunCache
from lero.app.ui.workers import Workers
from lero.graph.configuration import APPROVE_MODES, CANDIDATE_ID, RUN_ID, RunError, RunSpec
from lero.graph.rundir import SPEC_FILE, RunDir, parse_events
from lero.graph.summary import load_run

HERE = Path(__file__).parent
STREAM_POLL_S = 0.25  # how often the SSE stream looks at the run directory
STREAM_CHUNK = 1 << 20  # bytes of events.jsonl one look reads; a longer line is skipped
START_FIELDS = ("env", "algo", "generations", "population", "steps", "seeds", "llm", "base_url", "llm_timeout_s",
                "context_tokens", "sandbox", "approve", "run_id")
FLAG = {"llm_timeout_s": "--llm-timeout"}  # the start fields whose flag is not the field's name
DRIVEN_ELSEWHERE = "another process (lero resume or lero run) is driving this run now; wait for it to stop"
TERMINAL_STATUSES = ("completed", "failed", "interrupted", "stopped")

templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.filters["num"] = fmt_number


def page(request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> Response:
    context = {"csrf": request.app.state.csrf, "csrf_field": CSRF_FIELD, **context}
    return templates.TemplateResponse(request, name, context, status_code=status_code)


def _run_dir(request: Request, run_id: str) -> RunDir:
    if not RUN_ID.match(run_id):
        raise HTTPException(404, f"no run {run_id!r}")
    return RunDir(Path(request.app.state.runs_dir) / run_id)


def _load(request: Request, run_id: str):
    """The run's files; 404 with the reason when it is absent or cannot be read (blocking: a threadpool call)."""
    try:
        return load_run(_run_dir(request, run_id).path, views.EVENTS_PAGE_TAIL)
    except ValueError as error:
        raise HTTPException(404, f"run {run_id!r} in {request.app.state.runs_dir}/ cannot be read: "
                                 f"{' '.join(str(error).split())[:300]}") from None


def _has_spec(rundir: RunDir) -> bool:
    try:
        return rundir.is_file(SPEC_FILE)
    except ValueError:  # the run directory is refused (a symlink): the run page says why
        return True


# ---------------------------------------------------------------- runs list and start form


async def runs_page(request: Request, error: str | None = None, form: dict | None = None,
                    status_code: int = 200) -> Response:
    """The runs list and the start form. A plain GET is the page its batch of rows rendered
    once (`BatchPage`); a refused start shows the person's own form and error."""
    batch = await request.app.state.runs_list()  # one batch's rows, shared by its requests
    workers = request.app.state.workers
    resuming = tuple(row["run_id"] for row in batch if row["status"] == "interrupted" and workers.busy(row["run_id"]))

    def render() -> Response:
        rows = [{**row, "status": "resuming" if row["run_id"] in resuming else row["status"]} for row in batch]
        return page(request, "runs.html", {"rows": rows, "error": error, "form": {**start_defaults(), **(form or {})},
                                            "choices": start_choices(), "runs_dir": request.app.state.runs_dir},
                    status_code)

    if error is None and form is None:
        return HTMLResponse(request.app.state.runs_html.get(batch, resuming, lambda: render().body))
    return render()


def start_defaults() -> dict[str, str]:
    """The start form's values before anyone types: RunSpec's own defaults, as `lero run` has them."""
    fields = RunSpec.model_fields
    return {name: "" if fields[name].default is None else str(fields[name].default)
            for name in START_FIELDS if name in fields}


def start_choices() -> dict[str, Any]:
    """The start form's menus and hints, from their owners: the algorithm table, RunSpec's
    choices, the LLM layer's request timeout."""
    from lero.agents.llm_config import DEFAULT_TIMEOUT_S
    from lero.training import ALGOS

    return {"algo": ALGOS, "sandbox": get_args(RunSpec.model_fields["sandbox"].annotation),
            "approve": APPROVE_MODES, "llm_timeout_s": DEFAULT_TIMEOUT_S}


def spec_from_form(form: FormData, runs_dir: str) -> RunSpec:
    """The form as `lero run` flags, through the CLI's own parser and RunSpec validation."""
    from lero.app.cli.args import build_parser, spec_fields

    argv = ["run"]
    for name in START_FIELDS:
        value = str(form.get(name, "")).strip()
        if value:
            argv += [FLAG.get(name, f"--{name.replace('_', '-')}"), value]
    for pair in str(form.get("env_args", "")).replace(",", " ").split():
        argv += ["--env-arg", pair]
    args = build_parser().parse_args(argv)
    args.runs_dir = runs_dir
    return RunSpec.parse(spec_fields(args)).with_run_id()


async def start_run(request: Request) -> Response:
    """Start a run from the form. Its `env` field is typed by the person at the page, so it
    confirms a `package.module:factory` env (graph.trust): the module is imported here, once its
    spec passed every check (a standard-library or foreign factory is refused uncalled)."""
    from lero.app.cli.args import UsageError, one_line
    from lero.graph.runner import preflight
    from lero.graph.trust import confirm_env

    form = await checked_form(request)
    state = request.app.state
    try:
        spec = spec_from_form(form, state.runs_dir)
        if (Path(state.runs_dir) / str(spec.run_id)).exists():
            raise RunError(f"run {spec.run_id!r} already exists in {state.runs_dir} (use lero resume)")
        typed = str(form.get("env", "")).strip() or None
        confirmed = await run_in_threadpool(confirm_env, spec.env, typed)
        await run_in_threadpool(preflight, spec, confirmed)  # no Docker, bad env kwargs, unreachable LLM
        state.workers.start(spec, confirm=typed)
    except (UsageError, ValueError) as error:
        return await runs_page(request, error=f"lero: error: {one_line(error)}", form=dict(form), status_code=400)
    return RedirectResponse(f"/runs/{spec.run_id}", status_code=303)


# ---------------------------------------------------------------- one run


async def run_page(request: Request) -> Response:
    run_id = request.path_params["run_id"]
    rundir = _run_dir(request, run_id)
    worker = request.app.state.workers.get(run_id)
    if not await run_in_threadpool(_has_spec, rundir):
        if worker is None:
            raise HTTPException(404, f"no run {run_id!r} in {request.app.state.runs_dir}/")
        return page(request, "starting.html", {"run_id": run_id, "working": worker.alive,
                                                "error": worker.error()})
    return await _run_view(request, run_id)


def _read_run_view(request: Request, run_id: str) -> dict[str, Any]:
    """The run page's parts from its files (blocking: a threadpool call); 404 when refused."""
    run = _load(request, run_id)
    try:
        return views.run_view(run)
    except ValueError as error:  # a file the page shows is refused (a planted symlink)
        raise HTTPException(404, f"run {run_id!r} cannot be read: {error}") from None


async def _run_view(request: Request, run_id: str, error: str | None = None, status_code: int = 200) -> Response:
    pages: RunCache = request.app.state.pages
    view = await run_in_threadpool(pages.get, _run_dir(request, run_id).path, "run",
                                   partial(_read_run_view, request, run_id))
    worker = request.app.state.workers.get(run_id)
    working = worker is not None and worker.alive
    view = {**view, "working": working, "error": error or (worker.error() if worker else None)}
    return page(request, "run.html", view, status_code)


def answer_from_form(form: FormData, pending: dict[str, Any]) -> object:
    """A pending question's answer from its form (schemas: graph.state). Every candidate
    asked about needs its action field, and no field may name another candidate (RunError):
    a form that lost its fields approves nothing."""
    kind = pending.get("kind")
    if kind in ("spec", "generation"):
        answer: dict[str, Any] = {"action": str(form.get("action", ""))}
        if kind == "generation":
            feedback = str(form.get("feedback", "")).strip()
            answer["feedback"] = feedback or None
        return answer
    asked = [candidate["candidate_id"] for candidate in pending.get("candidates", [])]
    named = {key.partition(":")[2] for key in form if key.partition(":")[0] in ("action", "code", "comment")}
    unknown = sorted(named - set(asked))
    if unknown:
        raise RunError(f"unknown candidate id(s) {', '.join(unknown)}: this question asks about {', '.join(asked)}")
    missing = [cid for cid in asked if not str(form.get(f"action:{cid}", "")).strip()]
    if missing:
        raise RunError(f"no action for candidate(s) {', '.join(missing)}")
    decisions = {}
    for candidate in pending.get("candidates", []):
        cid = candidate["candidate_id"]
        action = str(form.get(f"action:{cid}"))
        code = str(form.get(f"code:{cid}", "")).replace("\r\n", "\n")
        decision: dict[str, Any] = {"action": action}
        shown = {(candidate.get("code") or "").strip(), ((candidate.get("refused_edit") or {}).get("code") or "").strip()}
        if action == "approve" and code.strip() and code.strip() not in shown:
            decision = {"action": "edit", "code": code}  # approved with changes = an edit (a refused one kept: dropped)
        elif action == "edit":
            decision["code"] = code
        elif action == "comment":
            decision["comment"] = str(form.get(f"comment:{cid}", "")).replace("\r\n", "\n")
        decisions[cid] = decision
    return {"decisions": decisions, "default": "approve"}


async def answer_run(request: Request) -> Response:
    from lero.app.cli.args import one_line
    from lero.graph.nodes import normalize_answer

    run_id = request.path_params["run_id"]
    form = await checked_form(request)
    run = await run_in_threadpool(_load, request, run_id)
    workers = request.app.state.workers
    pending = views.pending_question(run)
    if workers.busy(run_id) or pending is None:
        return await _run_view(request, run_id, "this run is not waiting for an answer now", 409)
    if await run_in_threadpool(_run_dir(request, run_id).is_driven):
        return await _run_view(request, run_id, DRIVEN_ELSEWHERE, 409)
    if str(form.get("ts", "")) != pending["ts"]:
        return await _run_view(request, run_id, "that question was already answered; see the current one", 409)
    try:
        answer = normalize_answer(pending["kind"], answer_from_form(form, pending), pending)
        workers.resume(run_id, answer)
    except ValueError as error:
        return await _run_view(request, run_id, f"lero: error: {one_line(error)}", 400)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


async def resume_run(request: Request) -> Response:
    run_id = request.path_params["run_id"]
    await checked_form(request)
    run = await run_in_threadpool(_load, request, run_id)
    if request.app.state.workers.busy(run_id) or run.state.get("status") == "completed":
        return await _run_view(request, run_id, "this run is already running or finished", 409)
    if await run_in_threadpool(_run_dir(request, run_id).is_driven):
        return await _run_view(request, run_id, DRIVEN_ELSEWHERE, 409)
    try:
        request.app.state.workers.resume(run_id)
    except RunError as error:
        return await _run_view(request, run_id, f"lero: error: {error}", 409)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


def _sse(kind: str, payload: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps(payload, default=str)}\n\n"


def _poll(rundir: RunDir, offset: int, skipping: bool = False
          ) -> tuple[list[dict[str, Any]], int, bool, dict[str, Any]]:
    """New complete events.jsonl lines from `offset`, the new offset, whether the stream is
    inside a line longer than a chunk (STREAM_CHUNK: skipped to its end, never re-read), and
    the state snapshot (blocking file reads: called in the threadpool, never on the event loop)."""
    try:
        chunk = rundir.read_events_from(offset, STREAM_CHUNK)
    except ValueError:  # refused (a FIFO, a symlink): the snapshot's state read says why
        chunk = b""
    if skipping:
        end = chunk.find(b"\n")
        if end < 0:
            return [], offset + len(chunk), True, views.stream_snapshot(rundir)
        offset, chunk = offset + end + 1, chunk[end + 1:]
    complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits
    if not complete and len(chunk) >= STREAM_CHUNK:  # one line fills the chunk: move past it
        return [], offset + len(chunk), True, views.stream_snapshot(rundir)
    return parse_events(complete), offset + len(complete), False, views.stream_snapshot(rundir)


async def run_stream(request: Request) -> Response:
    """SSE: every events.jsonl line (from the start), then state changes, until the client leaves."""
    run_id = request.path_params["run_id"]
    rundir = _run_dir(request, run_id)
    workers = request.app.state.workers

    async def generate():
        offset, skipping, last = 0, False, None
        while not await request.is_disconnected():
            events, offset, skipping, snapshot = await run_in_threadpool(_poll, rundir, offset, skipping)
            for event in events:
                yield _sse("run", event)
            worker = workers.get(run_id)
            snapshot = {**snapshot, "working": bool(worker and worker.alive),
                        "progress": worker.live_progress() if worker and worker.alive else [],
                        "worker_error": worker.error() if worker else None}
            if snapshot != last:
                yield _sse("state", snapshot)
                last = snapshot
            await asyncio.sleep(STREAM_POLL_S)

    return StreamingResponse(generate(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def report_page(request: Request) -> Response:
    run_id = request.path_params["run_id"]
    run = await run_in_threadpool(_load, request, run_id)
    try:
        html = await run_in_threadpool(views.report_html, run)
    except ValueError as error:
        raise HTTPException(404, f"the report of run {run_id!r} cannot be read: {error}") from None
    return page(request, "report.html", {"run_id": run_id, "report": html,
                                          "status": run.state.get("status")})


async def plot_file(request: Request) -> Response:
    run_id, name = request.path_params["run_id"], request.path_params["name"]
    if not views.PLOT_NAME.match(name):
        raise HTTPException(404, "no such plot")
    try:
        png = await run_in_threadpool(_run_dir(request, run_id).read_plot, name)
    except ValueError as error:  # refused: a planted symlink, a FIFO, too large
        raise HTTPException(404, str(error)) from None
    if png is None:
        raise HTTPException(404, "no such plot")
    return Response(png, media_type="image/png")


async def candidate_page(request: Request) -> Response:
    run_id, candidate_id = request.path_params["run_id"], request.path_params["candidate_id"]
    if not CANDIDATE_ID.match(candidate_id):
        raise HTTPException(404, "no such candidate")
    run = await run_in_threadpool(_load, request, run_id)
    try:
        view = await run_in_threadpool(views.candidate_view, run, candidate_id)
    except ValueError as error:
        raise HTTPException(404, str(error)) from None
    return page(request, "candidate.html", {**view, "code_css": Markup(views.highlight_css())})


# ---------------------------------------------------------------- studies


async def studies_page(request: Request) -> Response:
    rows = await run_in_threadpool(views.list_studies, Path(request.app.state.runs_dir))
    return page(request, "studies.html", {"rows": rows, "runs_dir": request.app.state.runs_dir})


def _study_id(request: Request) -> str:
    study_id = request.path_params["study_id"]
    if not views.STUDY_ID.match(study_id):
        raise HTTPException(404, "no such study")
    return study_id


async def study_page(request: Request) -> Response:
    run_id, study_id = request.path_params["run_id"], _study_id(request)
    try:
        view = await run_in_threadpool(views.study_view, _run_dir(request, run_id), study_id)
    except ValueError as error:  # absent, or a file refused (a planted symlink, too large)
        raise HTTPException(404, str(error)) from None
    return page(request, "study.html", view)


async def study_plot_file(request: Request) -> Response:
    run_id, study_id, name = request.path_params["run_id"], _study_id(request), request.path_params["name"]
    if not views.PLOT_NAME.match(name):
        raise HTTPException(404, "no such plot")
    try:
        png = await run_in_threadpool(views.study_plot, _run_dir(request, run_id), study_id, name)
    except ValueError as error:
        raise HTTPException(404, str(error)) from None
    if png is None:
        raise HTTPException(404, "no such plot")
    return Response(png, media_type="image/png")


# ---------------------------------------------------------------- chat


def _chat(request: Request, fresh: bool = False) -> ChatSession:
    state = request.app.state
    if fresh or state.chat is None:
        if state.chat is not None:
            state.chat.close()
        cfg = state.llm_cfg
        base = chat_run_fields(cfg, state.runs_dir, state.llm_settings)

        def launch(spec: RunSpec, confirm: str | None) -> str:
            state.workers.start(spec.model_copy(update={"runs_dir": state.runs_dir}), confirm=confirm)
            return str(spec.run_id)

        state.chat = ChatSession(cfg, base, launch)
    return state.chat


async def chat_page(request: Request) -> Response:
    session = await run_in_threadpool(_chat, request)
    return page(request, "chat.html", {"session": session, "transcript": session.transcript,
                                        "run_id": session.desk.last_run_id})


async def chat_send(request: Request) -> Response:
    form = await checked_form(request)
    session = await run_in_threadpool(_chat, request)
    await run_in_threadpool(session.send, str(form.get("line", "")))
    return RedirectResponse("/chat#end", status_code=303)


async def chat_new(request: Request) -> Response:
    await checked_form(request)
    await run_in_threadpool(_chat, request, True)
    return RedirectResponse("/chat", status_code=303)


# ---------------------------------------------------------------- the application


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return page(request, "error.html", {"status_code": exc.status_code, "detail": exc.detail},
                status_code=exc.status_code)


def create_app(runs_dir: str, token: str, port: int, llm_cfg: Any, cwd: Path | None = None,
               llm_settings: dict[str, Any] | None = None) -> Starlette:
    """The application; `runs_dir` is used as given (relative to `cwd`, like the CLI)."""
    routes = [
        Route("/", runs_page),
        Route("/runs", start_run, methods=["POST"]),
        Route("/runs/{run_id}", run_page),
        Route("/runs/{run_id}/stream", run_stream),
        Route("/runs/{run_id}/answer", answer_run, methods=["POST"]),
        Route("/runs/{run_id}/resume", resume_run, methods=["POST"]),
        Route("/runs/{run_id}/report", report_page),
        Route("/runs/{run_id}/plots/{name}", plot_file),
        Route("/runs/{run_id}/candidates/{candidate_id}", candidate_page),
        Route("/studies", studies_page),
        Route("/runs/{run_id}/studies/{study_id}", study_page),
        Route("/runs/{run_id}/studies/{study_id}/plots/{name}", study_plot_file),
        Route("/chat", chat_page),
        Route("/chat", chat_send, methods=["POST"]),
        Route("/chat/new", chat_new, methods=["POST"]),
        *compare_routes(page),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(TokenGate, token=token, cookie=cookie_name(port))],
                    exception_handlers={HTTPException: http_error})
    app.state.runs_dir = runs_dir
    app.state.csrf = csrf_token(token)
    app.state.workers = Workers(runs_dir, cwd)
    app.state.llm_cfg = llm_cfg
    app.state.llm_settings = llm_settings or {}  # RunSpec-named, kept by the runs the chat page starts
    app.state.chat = None
    app.state.pages = RunCache()  # parsed rows and run pages, kept while their run is unchanged
    app.state.runs_list = Batched(partial(views.list_runs, Path(runs_dir), app.state.pages))
    app.state.runs_html = BatchPage()  # the runs list as its latest batch rendered it
    return app
