"""The run bar's ETA: from the chat's cost estimate before the first
progress report, then from the jobs' measured speed. Time is a forced clock; progress is
forced events; nothing waits."""

from __future__ import annotations

import io

from rich.console import Console

from lero.app.console import Asker, EstimatedTimeRemaining, RichUI
from lero.app.desk import ExperimentDesk, estimated_steps_per_s, training_estimate


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def remaining(ui: RichUI) -> str:
    run = next(t for t in ui.progress.tasks if t.id == ui.bars["run"])
    return EstimatedTimeRemaining().render(run).plain


def test_the_run_bar_counts_down_from_the_estimate_then_follows_measured_speed() -> None:
    clock = Clock()
    ui = RichUI(console=Console(file=io.StringIO(), width=160), stdin=io.StringIO(), interactive=False,
                generations=1, env_steps=6000, clock=clock)
    with ui:
        assert remaining(ui) == "-:--:--"  # nothing known yet
        ui.estimate(50.0)  # the chat's estimate: 6000 steps at 50 steps/s
        assert remaining(ui) == "~0:02:00"
        clock.now = 30.0
        assert remaining(ui) == "~0:01:30"  # counted down while the run designs, before any report
        clock.now = 200.0
        assert remaining(ui) == "~0:00:00"  # overdue: never negative
        for now, done in ((210.0, 1000), (220.0, 3000)):  # the jobs report: 200 steps/s measured
            clock.now = now
            ui.on_event({"type": "train_progress", "candidate_id": "0-0", "seed": 0, "done": done, "total": 6000})
        assert remaining(ui) == "0:00:15"  # (6000 - 3000) / 200: the measured speed took over


def test_lero_runs_estimate_is_the_chats(tmp_path, monkeypatch) -> None:
    """The speed `lero run` gives its bar makes the chat's training time over the run's planned
    env steps (the measured iteration forced to one value for both, so the two can be compared)."""
    from lero.graph import throughput

    monkeypatch.setattr(throughput, "measure_throughput", lambda spec, confirmed=None: (400.0, 1600))
    out = io.StringIO()
    desk = ExperimentDesk(Asker(Console(file=out, width=200), io.StringIO()),
                          base={"runs_dir": str(tmp_path), "steps": 3000, "generations": 2, "population": 2})
    assert "training time ≈ " in (chat := desk.estimate_cost())
    jobs, per_job, env_steps, train_s = training_estimate(desk.spec, 400.0, 1600)
    assert f"{jobs} training jobs" in chat and per_job == 3200 and f"= {env_steps:,} env steps" in chat and f"≈ {train_s / 60:.1f} min" in chat
    speed = estimated_steps_per_s(desk.spec)
    assert abs(desk.spec.budget()[1] / speed - train_s) < 1e-9
