"""The web UI's compare page: runs picked from the list (`?run=A&run=B`), their table and
their best candidates' curves (`app.reports.compare_runs`, what `lero compare` writes), and the figure's
files. In a module of its own so the rest of the UI stays as it is; `create_app` adds
`routes(page)`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lero.app.reports import compare_runs as compare
from lero.app.ui import views

FILES = {"curves.png": "image/png", "curves.svg": "image/svg+xml", "curves.pdf": "application/pdf",
         "curves.csv": "text/csv", "compare.csv": "text/csv"}  # fmt: skip


def _chosen(request: Request) -> list[str]:
    return list(dict.fromkeys(request.query_params.getlist("run")))


def compare_view(runs_dir: Path, chosen: list[str]) -> dict[str, Any]:
    """The page's data: every run (to pick from) and, for 2+ picked, the table's rows."""
    view: dict[str, Any] = {"runs": views.list_runs(runs_dir), "chosen": chosen, "rows": [], "error": None,
                            "band_seeds": compare.MIN_INTERVAL_SEEDS}  # fmt: skip
    if len(chosen) < compare.MIN_RUNS:
        return view
    try:
        rows, metrics = compare.comparison_rows(compare.load_runs(runs_dir, chosen))
    except ValueError as error:  # RunError, an unreadable run: said on the page
        view["error"] = " ".join(str(error).split())[:300]
        return view
    view["header"] = [*compare.COLUMNS, *(f"best {m}" for m in metrics)]
    view["rows"] = [compare.cells(row, metrics) for row in rows]
    view["query"] = "&".join(f"run={run_id}" for run_id in chosen)
    return view


def comparison_file(runs_dir: Path, chosen: list[str], name: str) -> bytes | None:
    """One of FILES for the runs chosen; None when no best candidate has a curve."""
    runs = compare.load_runs(runs_dir, chosen)
    if name == "compare.csv":
        return compare.comparison_csv(*compare.comparison_rows(runs))
    figure = compare.comparison_figure(runs)
    return None if figure is None else figure[name.removeprefix("curves.")]


def routes(page: Callable[..., Response]) -> list[Route]:
    """GET /compare and GET /compare/{name} (FILES), rendered with the app's `page`."""

    async def compare_page(request: Request) -> Response:
        view = await run_in_threadpool(compare_view, Path(request.app.state.runs_dir), _chosen(request))
        return page(request, "compare.html", view, 400 if view["error"] else 200)

    async def compare_file(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in FILES:
            raise HTTPException(404, "no such file")
        try:
            data = await run_in_threadpool(comparison_file, Path(request.app.state.runs_dir), _chosen(request), name)
        except ValueError as error:
            raise HTTPException(400, " ".join(str(error).split())[:300]) from None
        if data is None:
            raise HTTPException(404, "none of these runs has a best candidate with a learning curve")
        return Response(data, media_type=FILES[name])

    return [Route("/compare", compare_page), Route("/compare/{name}", compare_file)]
