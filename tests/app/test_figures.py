"""Figures for a paper: every plot as PNG, PDF and SVG a column wide with its CSV beside it,
no title in any (report.md and study.md caption them), legends by name, each arm in its own
colour everywhere; the run's learning curve over seeds (a band from 3 seeds, each seed
below), training and greedy evaluation labelled apart; fitness per generation with every
candidate's seeds; nothing clipped at the edges; report.md's provenance."""

from __future__ import annotations

import csv
import json
import platform
import xml.etree.ElementTree as ET
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from lero.app.reports.figures import COLUMN_IN, GREEDY, PNG_DPI, TRAINING, plot_learning_curves
from lero.app.reports.run_figures import (
    HELD_OUT,
    confirmation_figure,
    confirmation_metric_figure,
    confirmation_series,
    curve_series,
)
from lero.app.study.arm_colors import ARM_COLORS, CANDIDATE, EXTRA_COLORS, NATIVE
from lero.app.study.plots import plot_curves, plot_metric, plot_profiles, plot_recheck
from lero.app.study.stats import MIN_INTERVAL_SEEDS, curve_band, summary
from lero.app.ui.charts import nice_ticks
from lero.graph.confirmation import LOOP_ARM, LOOP_ID, arm_name
from lero.training import PPOHparams
from lero.training.envs import task_spec
from tests.support.cli import lero
from tests.support.ui_server import UIServer

SLACK_IN = 0.25  # a tight box may pass the column by a tick label's overhang


@pytest.fixture
def run(tiny_runs: Path) -> Path:
    return tiny_runs / "runs" / "three"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as handle:
        return list(csv.DictReader(handle))


def svg_texts(png: Path) -> list[str]:
    """Every text the figure's SVG holds (its fonts are kept as text), in drawing order, its
    whitespace collapsed (a log axis's 10^3 reads "1 0 3")."""
    root = ET.parse(png.with_suffix(".svg")).getroot()
    return [" ".join("".join(el.itertext()).split()) for el in root.iter() if el.tag.endswith("}text")]


def _tick(text: str) -> bool:
    try:
        float(text.replace("\u2212", "-").replace(",", "").replace(" ", ""))
    except ValueError:
        return False
    return True


def check_words(png: Path, axis_labels: set[str], legend: set[str]) -> None:
    """The figure's words are its tick labels, AXIS_LABELS and LEGEND, nothing else: no title."""
    words = [t for t in svg_texts(png) if not _tick(t)]
    assert set(words) == axis_labels | legend, png.name
    assert len(words) == len(set(words)), f"{png.name}: a word twice: {words}"


def check_figure(png: Path) -> None:
    """PNG, PDF, SVG and CSV side by side; a column wide; nothing drawn on the PNG's edge."""
    for ext, magic in (("pdf", b"%PDF"), ("svg", b"<?xml"), ("png", b"\x89PNG")):
        assert png.with_suffix(f".{ext}").read_bytes().startswith(magic), (png, ext)
    assert _rows(png.with_suffix(".csv")), png
    svg = ET.parse(png.with_suffix(".svg")).getroot()
    assert float(svg.get("width").removesuffix("pt")) / 72 <= COLUMN_IN + SLACK_IN
    assert any(el.tag.endswith("text") for el in svg.iter())  # text kept as text
    pixels = np.asarray(Image.open(png).convert("L"))
    assert pixels.shape[1] / PNG_DPI <= COLUMN_IN + SLACK_IN
    border = np.concatenate([pixels[0], pixels[-1], pixels[:, 0], pixels[:, -1]])
    assert border.min() >= 250, f"{png.name}: something is cut at the figure's edge"


def test_the_runs_plots_come_in_every_format_with_their_numbers(run: Path) -> None:
    for name in ("fitness", "learning_curves"):
        check_figure(run / "plots" / f"{name}.png")


def _result(path: Path) -> dict:
    return json.loads(path.read_text())


def test_the_runs_figures_are_untitled_named_by_arm_and_captioned_in_report_md(run: Path) -> None:
    best = _result(run / "report.json")["best"]["candidate_id"]
    candidates = [p for p in (run / "candidates").iterdir() if _result(p / "result.json").get("fitness") is not None]
    check_words(run / "plots" / "fitness.png", {"generation", "fitness (final)"},
                {"best of generation", NATIVE, f"candidates ({len(candidates)})"})  # fmt: skip
    check_words(run / "plots" / "learning_curves.png", {"env steps", "native return per agent"},
                {NATIVE, f"candidate {best}", TRAINING, GREEDY})  # fmt: skip
    for name in ("fitness", "learning_curves"):  # native and the candidate in their colours in both
        svg = run.joinpath("plots", f"{name}.svg").read_text().lower()
        assert ARM_COLORS[NATIVE].lower() in svg and ARM_COLORS[CANDIDATE].lower() in svg, name
    report = (run / "report.md").read_text()
    plots = report[report.index("## Plots"):]
    for number, name in enumerate(("fitness", "learning_curves"), 1):  # the image, then its caption
        assert f"![{name}](plots/{name}.png)\n\n**Figure {number}.** " in plots, name
    assert "bar: its seeds' range" in plots and "(diamond: mean over seeds; dots: each seed)" in plots


def test_fitness_per_generation_draws_every_candidate_with_its_seeds(run: Path) -> None:
    rows = _rows(run / "plots" / "fitness.csv")
    drawn = {(r["candidate"], r["statistic"]): float(r["fitness"]) for r in rows if r["series"] == "candidate"}
    results = {p.name: _result(p / "result.json") for p in (run / "candidates").iterdir()}
    scored = {cid: r for cid, r in results.items() if r.get("fitness") is not None}
    assert scored and {cid for cid, _ in drawn} == set(scored)
    for cid, result in scored.items():
        assert drawn[(cid, "mean")] == pytest.approx(result["fitness"])
        seeds = [s["fitness"] for s in result["per_seed"] if s.get("fitness") is not None]
        assert len(seeds) == 3 and [drawn[(cid, f"seed {k}")] for k in range(3)] == pytest.approx(seeds)
    native = {r["statistic"]: float(r["fitness"]) for r in rows if r["series"] == NATIVE}
    baseline = _result(run / "baseline" / "result.json")
    assert native["mean"] == pytest.approx(baseline["fitness"])
    assert [native[f"seed {k}"] for k in range(3)] == pytest.approx([s["fitness"] for s in baseline["per_seed"]])


def test_the_learning_curve_is_the_mean_over_seeds_with_a_band_and_the_greedy_evaluation_apart(run: Path) -> None:
    rows = _rows(run / "plots" / "learning_curves.csv")
    seeds = [json.loads((run / "baseline" / f"seed-{s}.json").read_text()) for s in range(3)]
    band = curve_band([(r["curves"]["steps"], r["curves"]["return"]) for r in seeds])
    drawn = {(r["statistic"], float(r["steps"])): float(r["return"]) for r in rows
             if r["series"] == NATIVE and r["kind"] == TRAINING}  # fmt: skip
    # 3 seeds, below MIN_INTERVAL_SEEDS: their mean and each seed's curve, no band (it would be a "CI" of 3 seeds)
    assert len(band["steps"]) > 1 and band["low"] == [] and len(band["per_seed"]) == 3
    assert [drawn[("mean", x)] for x in band["steps"]] == pytest.approx(band["mean"])
    for s, curve in enumerate(band["per_seed"]):
        assert [drawn[(f"seed {s}", x)] for x in band["steps"]] == pytest.approx(curve)
    assert not {statistic for statistic, _ in drawn} & {"ci_low", "ci_high"}
    table = np.array(band["per_seed"])  # [S, P]: shaded between the seeds' lowest and highest, labelled so
    assert [drawn[("range_low", x)] for x in band["steps"]] == pytest.approx(table.min(axis=0).tolist())
    assert [drawn[("range_high", x)] for x in band["steps"]] == pytest.approx(table.max(axis=0).tolist())
    greedy = {r["statistic"]: float(r["return"]) for r in rows if r["series"] == NATIVE and r["kind"] == GREEDY}
    assert greedy == pytest.approx({f"seed {s}": seeds[s]["fitness"] for s in range(3)}
                                   | {"mean": sum(r["fitness"] for r in seeds) / 3})  # fmt: skip
    report = (run / "report.md").read_text()
    assert "training episodes, where the policy samples its actions" in report
    assert "shaded: the seeds' range" in report and "95% CI" not in report[report.index("## Plots"):]


def test_below_three_seeds_each_seed_is_drawn_and_no_band(tmp_path: Path) -> None:
    result = {"per_seed": [{"status": "ok", "fitness": -15.0 - s,
                            "curves": {"steps": [0, 100, 200], "return": [-30.0 + s, -25.0, -20.0 - s]}}
                           for s in range(2)]}  # fmt: skip
    series = curve_series("two", result)
    assert series is not None and series.band["low"] == [] and len(series.band["per_seed"]) == 2
    files = plot_learning_curves([series])
    (tmp_path / "c.csv").write_bytes(files["csv"])
    statistics = {r["statistic"] for r in _rows(tmp_path / "c.csv")}
    assert {"mean", "seed 0", "seed 1"} <= statistics and not statistics & {"ci_low", "ci_high"}


def test_report_md_says_what_the_run_was_made_with(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = (run / "report.md").read_text()
    section = report[report.index("## Provenance"):]
    assert f"lero {metadata.version('lero')}, commit `" in section
    assert f"Python {platform.python_version()}, torch {torch.__version__}" in section
    assert "sandbox: process" in section
    hparams = PPOHparams(n_envs=8, rollout_len=25)  # the algorithm's defaults with the run's overrides
    for name, value in vars(hparams).items():
        assert f"| `{name}` | {value}{' *set*' if name in ('n_envs', 'rollout_len') else ''} |" in section
    for metric in task_spec("simple_spread").metrics:
        assert f"- `{metric.name}`: {metric.doc} (" in section
    recorded = json.loads((run / "provenance.json").read_text())
    code, _, err = lero(["report", "three", "--runs-dir", str(run.parent)], capsys)
    assert code == 0, err
    assert json.loads((run / "provenance.json").read_text()) == recorded  # a rebuild keeps the run's record


def _cell(variant: str, seeds: int) -> dict:
    values = [-20.0 - i - len(variant) for i in range(seeds)]
    curves = [([0, 50, 100], [-30.0, -25.0 + i, v]) for i, v in enumerate(values)]
    return {"algo": "mappo", "variant": variant, "seeds": list(range(seeds)), "curve": curve_band(curves),
            "per_seed": {"return": values}, "summary": {"return": summary(values)}}  # fmt: skip


@pytest.mark.parametrize("seeds", [2, 5])
def test_study_plots_come_in_every_format_with_their_numbers(tmp_path: Path, seeds: int) -> None:
    cells = [_cell(v, seeds) for v in ("native", "hrf", "oef", "hrf+oef")]
    profile = {"thresholds": [0.0, 0.5, 1.0], "fraction": [1.0, 0.5, 0.0], "low": [1.0, 0.3, 0.0],
               "high": [1.0, 0.7, 0.0]}  # fmt: skip
    check = {"algo": "mappo", "curves": {"steps": [0, 10], "return": [-3.0, -2.0], "train_reward": [1.0, 2.0]},
             "budget": 5, "reward_hacking": False}  # fmt: skip
    for png in (plot_curves(cells, -22.0, tmp_path / "curves-mappo.png"),
                plot_metric("return", cells, tmp_path / "return.png"),
                plot_profiles({"native": profile, "hrf+oef": profile}, tmp_path / "profile-mappo.png"),
                plot_recheck(check, tmp_path / "recheck.png")):  # fmt: skip
        check_figure(png)
    variants = {c["variant"] for c in cells}
    check_words(tmp_path / "curves-mappo.png", {"env steps", "native return per agent (training)"},
                variants | {"target -22.00"})  # fmt: skip
    check_words(tmp_path / "profile-mappo.png", {"score threshold", "fraction of runs above"}, {"native", "hrf+oef"})
    check_words(tmp_path / "recheck.png", {"env steps", "per-agent episode return (training)"},
                {"native return", "training reward", "study budget"})  # fmt: skip
    for name in ("curves-mappo", "return", "profile-mappo"):  # every arm in its colour, as in a run's figures
        svg = tmp_path.joinpath(f"{name}.svg").read_text().lower()
        assert all(ARM_COLORS[v].lower() in svg for v in ("native", "hrf+oef")), name
    recheck = tmp_path.joinpath("recheck.svg").read_text().lower()  # the candidate's curves: never native's blue
    assert ARM_COLORS[CANDIDATE].lower() in recheck and ARM_COLORS[NATIVE].lower() not in recheck
    rows = _rows(tmp_path / "return.csv")
    native = {r["statistic"]: float(r["return"]) for r in rows if r["arm"] == "native" and r["return"]}
    assert native["mean"] == pytest.approx(cells[0]["summary"]["return"]["mean"])
    assert ("ci_low" in native) == (seeds >= MIN_INTERVAL_SEEDS)


def test_nice_ticks_are_round_and_cover_the_range() -> None:
    assert nice_ticks(12_800, 51_200) == [20_000, 30_000, 40_000, 50_000]
    assert nice_ticks(-18.4, 0.2) == [-15.0, -10.0, -5.0, 0.0]
    assert nice_ticks(3.0, 3.0) == [3.0]


@pytest.mark.slow
def test_the_ui_reward_component_chart_has_axes(run: Path) -> None:
    playwright_api = pytest.importorskip("playwright.sync_api")
    best = json.loads((run / "report.json").read_text())["best"]["candidate_id"]
    server = UIServer(run.parent.parent)
    try:
        with playwright_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            page.goto(server.url)
            page.goto(f"{server.base}/runs/three/candidates/{best}")
            chart = page.locator("h2:has-text('Reward components') + svg.chart")
            assert chart.locator("line.axis").count() == 2
            assert chart.locator("text.x-label").text_content() == "env steps"
            assert chart.locator("text.y-label").text_content() == "episode sum per agent"
            x_ticks = chart.locator("text.x-tick").all_text_contents()
            assert len(x_ticks) >= 2 and all(t.replace(",", "").isdigit() for t in x_ticks)
            assert len(chart.locator("text.y-tick").all_text_contents()) >= 2
            box = chart.bounding_box()
            for label in chart.locator("text").all():  # every label inside the chart, none cut off
                inner = label.bounding_box()
                assert box["x"] - 1 <= inner["x"] and inner["x"] + inner["width"] <= box["x"] + box["width"] + 1
            browser.close()
    finally:
        server.close()


def _arm(cid: str, steps: int | None, shift: float) -> dict:
    """A confirmation arm as report.json's block holds it: 3 seeds' curves and held-out returns."""
    end = steps or 3000
    curves = [{"steps": [0, end // 2, end], "return": [-30.0 + shift, -25.0 + shift + s, -20.0 + shift - s]}
              for s in range(3)]  # fmt: skip
    return {"arm": arm_name(cid), "candidate_id": cid, "steps": steps, "seeds": [3000, 3001, 3002], "failed": {},
            "per_seed": {"return": [-21.0 + shift, -20.0 + shift, -19.0 + shift]}, "curves": curves}  # fmt: skip


def test_the_confirmation_figure_names_every_arm_in_its_colour(tmp_path: Path) -> None:
    """Two confirmed candidates, native and native@loop (trained 10x longer: a log step axis)."""
    block = {"steps": 3000, "seeds": [3000, 3001, 3002],
             "arms": [_arm("baseline", None, 0.0), _arm("1-0", None, 2.0), _arm("1-1", None, 1.0),
                      _arm(LOOP_ID, 30_000, 1.5)]}  # fmt: skip
    series = confirmation_series(block)
    assert [(s.label, s.color) for s in series] == [
        ("candidate 1-0", ARM_COLORS[CANDIDATE]), ("candidate 1-1", EXTRA_COLORS[0]),
        ("native", ARM_COLORS[NATIVE]), (LOOP_ARM, ARM_COLORS[LOOP_ARM])]  # fmt: skip
    figure = confirmation_figure(block)
    assert figure is not None and f"{LOOP_ARM} trained 30,000 env steps" in figure.caption
    for ext, data in figure.files.items():
        (tmp_path / f"confirmation.{ext}").write_bytes(data)
    png = tmp_path / "confirmation.png"
    check_figure(png)
    check_words(png, {"env steps", "native return per agent"},
                {"candidate 1-0", "candidate 1-1", "native", LOOP_ARM, TRAINING, HELD_OUT})  # fmt: skip
    assert "1 0 4" in svg_texts(png)  # a 10^4 tick: the log step axis
    ends = {r["series"]: float(r["steps"]) for r in _rows(tmp_path / "confirmation.csv") if r["kind"] == HELD_OUT}
    assert ends == {"candidate 1-0": 3000.0, "candidate 1-1": 3000.0, "native": 3000.0, LOOP_ARM: 30_000.0}
    assert confirmation_figure(None) is None


def test_a_verdict_on_success_gets_its_own_figure_of_each_arms_held_out_success(tmp_path: Path) -> None:
    """On a sparse task the return curves can rank the arms the wrong way round (the winner's
    collisions cost return while it reaches the goals): the metric the verdict compares is drawn
    per arm and seed, in the arms' colours."""
    arms = [_arm("baseline", None, 0.0), _arm("1-0", None, -0.1), _arm(LOOP_ID, 30_000, 0.0)]
    success = {"baseline": [0.0, 0.0, 0.0], "1-0": [0.99, 0.97, 0.98], LOOP_ID: [0.0, 0.0, 0.1]}
    for arm in arms:
        arm["per_seed"]["success"] = success[arm["candidate_id"]]
    block = {"steps": 3000, "seeds": [3000, 3001, 3002], "success_metric": "success", "arms": arms}
    figure = confirmation_metric_figure(block)
    assert figure is not None and figure.stem == "confirmation_success" and figure.under_verdict
    assert "`success`, on held-out episodes after training: candidate 1-0, native, native@loop" in figure.caption
    for ext, data in figure.files.items():
        (tmp_path / f"confirmation_success.{ext}").write_bytes(data)
    png = tmp_path / "confirmation_success.png"
    check_figure(png)
    check_words(png, {"held-out success"}, {"candidate 1-0", "native", LOOP_ARM})  # the arms name the ticks
    drawn = {(r["arm"], r["statistic"]): float(r["value"]) for r in _rows(tmp_path / "confirmation_success.csv")}
    for label, cid in (("candidate 1-0", "1-0"), ("native", "baseline"), (LOOP_ARM, LOOP_ID)):
        assert [drawn[(label, f"seed {s}")] for s in range(3)] == pytest.approx(success[cid])
        assert drawn[(label, "mean")] == pytest.approx(sum(success[cid]) / 3)
    svg = png.with_suffix(".svg").read_text().lower()
    assert all(ARM_COLORS[arm].lower() in svg for arm in (CANDIDATE, NATIVE, LOOP_ARM))
    assert confirmation_metric_figure({**block, "success_metric": "return"}) is None  # the curves show it
    for arm in arms:  # a task's metric name is no path: the plot's file name keeps safe characters only
        arm["per_seed"]["../on goal"] = arm["per_seed"]["success"]
    assert confirmation_metric_figure({**block, "success_metric": "../on goal"}).stem == "confirmation____on_goal"
    assert confirmation_metric_figure(None) is None
