"""`lero compare RUN...` on real tiny runs (a working directory, the default relative runs/)
and the web UI's compare page in the real browser: one table, one figure, the same numbers."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from lero.app.reports.compare_runs import COLUMNS, comparison_csv, comparison_rows, load_runs
from lero.app.reports.figures import GREEDY, TRAINING
from lero.app.study.arm_colors import EXTRA_COLORS
from tests.app.test_figures import check_figure, check_words
from tests.support.cli import lero
from tests.support.ui_server import UIServer


@pytest.fixture
def workdir(tiny_runs: Path) -> Path:
    return tiny_runs


@pytest.fixture
def here(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(workdir)
    return workdir


def _report(workdir: Path, run_id: str) -> dict:
    return json.loads((workdir / "runs" / run_id / "report.json").read_text())


def test_compare_writes_one_table_and_the_best_curves(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lero(["compare", "alpha", "three"], capsys)
    assert code == 0, err
    folder = here / "runs" / "comparisons" / "alpha+three"
    assert f"markdown: {folder / 'compare.md'}" in out
    rows = list(csv.DictReader(io.StringIO((folder / "compare.csv").read_text())))
    assert [r["run"] for r in rows] == ["alpha", "three"]
    for row in rows:
        report = _report(here, row["run"])
        assert float(row["best_fitness"]) == pytest.approx(report["best"]["fitness"])
        assert float(row["baseline_fitness"]) == pytest.approx(report["baseline"]["fitness"])
        assert float(row["improvement"]) == pytest.approx(report["best"]["fitness"] - report["baseline"]["fitness"])
        assert row["best_candidate"] == report["best"]["candidate_id"]
        assert float(row["best_return"]) == pytest.approx(report["best"]["eval"]["return"])
    markdown = (folder / "compare.md").read_text()
    assert markdown.count("\n| alpha |") == 1 and markdown.count("\n| three |") == 1
    check_figure(folder / "learning_curves.png")
    series = {r["series"] for r in csv.DictReader(io.StringIO((folder / "learning_curves.csv").read_text()))}
    # unnamed runs: `run k` by their row in the table, never their ids; one colour per run
    legend = {f"run {k} ({_report(here, run)['best']['candidate_id']})" for k, run in enumerate(("alpha", "three"), 1)}
    assert series == legend
    check_words(folder / "learning_curves.png", {"env steps", "native return per agent"}, legend | {TRAINING, GREEDY})
    svg = (folder / "learning_curves.svg").read_text().lower()
    assert EXTRA_COLORS[0].lower() in svg and EXTRA_COLORS[1].lower() in svg
    assert "`run k`: the table's k-th row" in markdown and "**Figure.**" in markdown
    # runs listing still shows runs only (comparisons/ holds no spec.json)
    code, out, _ = lero(["runs"], capsys)
    assert code == 0 and "comparisons" not in out


def test_compare_refuses_bad_input_in_one_line(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (here / "a-file").write_text("x")
    for argv, message in ((["compare", "alpha"], "compare takes 2 to 12 runs"),
                          (["compare", "alpha", "nope"], "unknown run id 'nope'"),
                          (["compare", "alpha", "alpha"], "a run is named twice"),
                          (["compare", "alpha", "../x"], "not a run id"),
                          (["compare", "alpha", "three", "--out", "a-file"], "exists and is not a folder")):  # fmt: skip
        code, _, err = lero(argv, capsys)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (argv, err)


@pytest.mark.slow
def test_compare_page_picks_runs_and_shows_the_same_table_and_figure(workdir: Path, browser, tmp_path: Path) -> None:
    server = UIServer(workdir)
    try:
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(server.url)
        page.click("header >> text=Compare")
        page.check("input[name=run][value=alpha]")
        page.check("input[name=run][value=three]")
        page.click("#compare-form button[type=submit]")
        table = page.locator("#compare-table")
        table.wait_for()
        texts = [[cell.inner_text() for cell in row.locator("td").all()] for row in table.locator("tr").all()[1:]]
        assert sorted(row[0] for row in texts) == ["alpha", "three"]  # in the list's order (newest first)
        for row in texts:
            report = _report(workdir, row[0])
            shown = dict(zip(COLUMNS, row, strict=False))
            assert shown["best candidate"] == report["best"]["candidate_id"]
            assert shown["best fitness"].startswith(f"{report['best']['fitness']:.3f}") and shown["confirmed"] == "-"
        image = page.locator("#compare-curves")
        image.wait_for()
        page.wait_for_function("document.getElementById('compare-curves').complete")
        assert page.evaluate("document.getElementById('compare-curves').naturalWidth") > 300
        shown = page.request.get(f"{server.base}/compare/compare.csv?run=alpha&run=three").body()
        runs = load_runs(workdir / "runs", ["alpha", "three"])
        assert shown == comparison_csv(*comparison_rows(runs))  # the CLI's table, byte for byte
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280  # the wide table scrolls in its box
        page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
        page.goto(f"{server.base}/compare?run=alpha&run=nope")
        assert "unknown run id 'nope'" in page.locator("#compare-error").inner_text()
        assert not errors
    finally:
        server.close()
