"""The run bar: its ETA from the chat's cost estimate before the first progress report, then
the run's own average speed; one row per sandbox, counted once; never past its total; on
`resume` too. Time is a forced clock; progress is forced events; nothing waits."""

from __future__ import annotations

import io
import itertools
import json

import pytest
from rich.console import Console

from lero.app.chat.desk import ExperimentDesk, estimated_steps_per_s, training_estimate
from lero.app.console.approvals import Asker
from lero.app.console.progress import EstimatedTimeRemaining, RichUI, run_eta


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def task(ui: RichUI, key: str):
    return next(t for t in ui.progress.tasks if t.id == ui.bars[key])


def remaining(ui: RichUI) -> str:
    return EstimatedTimeRemaining().render(task(ui, "run")).plain


def test_the_run_bar_counts_down_from_the_estimate_then_follows_measured_speed() -> None:
    clock = Clock()
    ui = RichUI(console=Console(file=io.StringIO(), width=160), stdin=io.StringIO(), interactive=False,
                generations=1, env_steps=6000, clock=clock)
    with ui:
        assert remaining(ui) == "-:--:--"  # nothing known yet
        ui.estimate(50.0)  # the chat's estimate: 6000 steps at 50 steps/s, +-50% (app.console.eta.ESTIMATE_ERROR)
        assert remaining(ui) == "~0:02:00 ±0:01:00"
        clock.now = 30.0
        assert remaining(ui) == "~0:01:30 ±0:00:45"  # counted down while the run designs, before any report
        clock.now = 60.0
        ui.on_event({"type": "train_progress", "candidate_id": "0-0", "seed": 0, "done": 300, "total": 6000})
        # 300 of 6000 measured (5%, half of MEASURED_FROM): speed = half 5 steps/s (300 in 60 s), half 50
        assert run_eta(6000, 300, 60.0, 50.0) == pytest.approx(5700 / 27.5)  # 207 s
        # shown: from 60 s left (90 s, 30 s later) by at most the 45 s it stated; the margin covers the raw
        assert remaining(ui) == "~0:01:45 ±0:01:42"
        clock.now = 120.0
        ui.on_event({"type": "train_progress", "candidate_id": "0-0", "seed": 0, "done": 3000, "total": 6000})
        # measured alone: 3000 steps in 120 s, 3000 left = 120 s, within the 102 s stated; +-10%
        assert remaining(ui) == "0:02:00 ±0:00:12"


def test_a_burst_of_parallel_progress_does_not_swing_the_eta() -> None:
    """Rich's windowed speed swung 0:00:01 -> 0:04:08 -> 0:01:30 as parallel jobs reported in
    bursts between LLM pauses; the run's average speed moves only as much as it changes."""
    clock = Clock()
    ui = RichUI(console=Console(file=io.StringIO(), width=160), stdin=io.StringIO(), interactive=False,
                generations=1, env_steps=100_000, clock=clock)
    seen = []
    with ui:
        ui.estimate(100.0)
        for now, done in ((100.0, 10_000), (101.0, 20_000), (300.0, 20_000), (301.0, 30_000)):
            clock.now = now
            ui.on_event({"type": "train_progress", "candidate_id": "0-0", "seed": 0, "done": done, "total": 100_000})
            seen.append(run_eta(100_000, task(ui, "run").completed, now, 100.0))
        assert remaining(ui) == "0:11:42 ±0:01:10"  # 70,000 left at 30,000 / 301 s, +-10%
    # the ETA follows the run's average speed: it grows while nothing trains (the LLM's turn) and
    # shrinks as steps come; a burst of 10,000 steps in one second (Rich's window: 10,000 steps/s,
    # an ETA of 8 s) moves it from 900 s to 404 s, not to seconds
    assert seen == pytest.approx([900.0, 404.0, 1200.0, 702.333], abs=0.01)
    assert run_eta(100_000, 0, 0.0, None) is None


def test_a_groups_sandbox_is_one_row_counted_once_and_the_bar_never_passes_its_total() -> None:
    """Three seeds of a candidate train in one sandbox; its progress (their steps summed) comes
    once per seed's job: one row, the run bar counts it once, and stops at its total though
    the rollouts overshoot; the row goes when the sandbox's job ends, and the line says how
    long the seed took."""
    clock = Clock()
    out = io.StringIO()
    ui = RichUI(console=Console(file=out, width=160), stdin=io.StringIO(), interactive=False,
                generations=1, env_steps=3000, clock=clock)
    with ui:
        for seed in (0, 1, 2):
            ui.on_event({"type": "job", "event": "train_started", "kind": "train", "candidate_id": "0-0", "seed": seed})
        assert task(ui, "queued").description == "3 training job(s) queued for a slot"
        clock.now = 10.0
        for done in (900, 3300):  # the group's 3 x 1100 steps: the rollouts overshoot the 3 x 1000 planned
            for job in ("j0", "j1", "j2"):
                ui.on_event({"type": "train_progress", "job_id": job, "kind": "train", "candidate_id": "0-0",
                             "group": "j0", "group_of": 3, "done": done, "total": 3000})  # fmt: skip
        assert set(ui.bars) == {"run", "job:j0"} and task(ui, "job:j0").description == "train 0-0 (3 seeds)"
        assert "queued" not in ui.bars  # the 3 seeds got their sandbox
        run = task(ui, "run")
        assert (run.completed, run.total) == (3000, 3000)  # counted once, and never past the total
        for job in ("j0", "j1", "j2"):
            ui.on_event({"type": "job", "event": "job_finished", "job_id": job, "kind": "train",
                         "candidate_id": "0-0", "status": "ok", "elapsed_s": 38.390651238666656})  # fmt: skip
        assert set(ui.bars) == {"run"}  # the sandbox's row went with its job
        ui.on_event({"type": "job", "event": "train_finished", "kind": "train", "candidate_id": "0-0", "seed": 0,
                     "status": "ok", "fitness": -20.0, "elapsed_s": 38.390651238666656})  # fmt: skip
    assert "train 0-0 seed 0: ok fitness -20.000 in 38.4 s" in out.getvalue()


def test_resume_has_a_run_bar_from_the_steps_already_done(tmp_path, monkeypatch) -> None:
    """`lero resume`'s bar: the run's whole budget, from the env steps its state already counts."""
    from lero.app.cli.main import resume_ui
    from lero.graph.configuration import RunSpec
    from tests.app.test_report import make_run_dir

    path = make_run_dir(tmp_path, "r", status="interrupted")
    ui = resume_ui(path, Console(file=io.StringIO()))
    planned = RunSpec.parse(json.loads((path / "spec.json").read_text())).budget()[1]
    with ui:
        run = task(ui, "run")
        assert (run.total, run.completed) == (planned, json.loads((path / "state.json").read_text())["env_steps"])


def test_lero_runs_estimate_is_the_chats(tmp_path, monkeypatch) -> None:
    """The speed `lero run` gives its bar makes the chat's training time over the run's planned
    env steps (the measured iteration forced to one value for both, so the two can be compared)."""
    from lero.graph import throughput

    monkeypatch.setattr(throughput, "measure_throughput", lambda spec, confirmed=None: (400.0, 1600))
    out = io.StringIO()
    desk = ExperimentDesk(Asker(Console(file=out, width=200), io.StringIO()),
                          base={"runs_dir": str(tmp_path), "steps": 3000, "generations": 2, "population": 2})
    assert "training time ≈ " in (chat := desk.estimate_cost())
    cost = training_estimate(desk.spec, 400.0, 1600)
    assert f"{cost.jobs} training jobs" in chat and cost.steps_per_job == 3200
    assert f"; {cost.env_steps:,} env steps in all" in chat and f"≈ {cost.train_s / 60:.1f} min" in chat
    speed = estimated_steps_per_s(desk.spec)
    assert abs(desk.spec.budget()[1] / speed - cost.train_s) < 1e-9


def test_cached_confirmation_seeds_advance_the_run_bar() -> None:
    """A confirmation seed the cache answers trains nothing and reports no progress: its
    `confirm_finished` (a line for people) carries its env steps, which the run bar counts."""
    out = io.StringIO()
    ui = RichUI(console=Console(file=out, width=160), stdin=io.StringIO(), interactive=False,
                generations=1, env_steps=10_000, clock=Clock())
    with ui:
        for seed in (100, 101):
            ui.on_event({"type": "log", "event": "confirm_finished", "candidate_id": "baseline", "seed": seed,
                         "status": "ok", "cached": True, "env_steps": 3000,
                         "message": f"confirmation native seed {seed}: held-out return -20.000 (cached)"})  # fmt: skip
        ui.on_event({"type": "log", "event": "confirm_finished", "candidate_id": "1-0", "seed": 100, "status": "ok",
                     "cached": False, "env_steps": 3000, "message": "confirmation 1-0 seed 100: trained"})  # fmt: skip
        assert task(ui, "run").completed == 6000  # the trained seed counts through its progress, not here
    assert "confirmation native seed 101: held-out return -20.000 (cached)" in out.getvalue()


def test_the_eta_states_its_margin_and_never_swings_more_than_it_stated() -> None:
    """Speeds that change (an LLM pause, then a burst of parallel jobs) move the raw estimate by
    minutes; what the bar shows moves, beyond the time that passed, by at most the margin it
    stated at the reading before, and the margin grows to cover the disagreement."""
    clock = Clock()
    ui = RichUI(console=Console(file=io.StringIO(), width=160), stdin=io.StringIO(), interactive=False,
                generations=1, env_steps=100_000, clock=clock)
    readings = []  # (time, shown, margin, raw)
    with ui:
        ui.estimate(100.0)
        for now, done in ((0.0, 0), (50.0, 0), (100.0, 10_000), (101.0, 20_000), (300.0, 20_000),
                          (301.0, 30_000), (302.0, 60_000), (600.0, 60_000), (900.0, 100_000 - 1)):  # fmt: skip
            clock.now = now
            ui.on_event({"type": "train_progress", "candidate_id": "0-0", "seed": 0, "done": done, "total": 100_000})
            shown, margin = remaining(ui).lstrip("~").split(" ±")
            raw = run_eta(100_000, task(ui, "run").completed, now, 100.0)
            readings.append((now, seconds(shown), seconds(margin), raw))
    swings = [abs(shown - (before_shown - (now - before_now)))
              for (before_now, before_shown, _, _), (now, shown, _, _) in itertools.pairwise(readings)]
    stated = [margin for _, _, margin, _ in readings[:-1]]
    assert all(swing <= margin + 1 for swing, margin in zip(swings, stated, strict=True))  # +1: shown in whole seconds
    raw_swings = [abs(b[3] - (a[3] - (b[0] - a[0]))) for a, b in itertools.pairwise(readings)]
    assert max(raw_swings) > 300 and max(raw_swings) > max(stated)  # the raw estimate would have jumped
    assert readings[0][2] == pytest.approx(0.5 * 1000, abs=1)  # the estimator's +-50% of 1000 s
    assert all(abs(raw - shown) <= margin + 1 for _, shown, margin, raw in readings)  # the margin covers the raw


def seconds(text: str) -> int:
    hours, minutes, secs = (int(part) for part in text.split(":"))
    return hours * 3600 + minutes * 60 + secs
