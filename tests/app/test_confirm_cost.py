"""benchmarks.confirm_cost's rows, from the statistics the confirmation's verdict computes."""

from __future__ import annotations

from benchmarks.confirm_cost import fitness_row
from lero.app.reports.confirmation_verdict import compare_arms

BETTER = {"return": "higher", "coverage": "higher"}


def test_a_fitness_row_holds_the_winners_return_edge_at_both_budgets() -> None:
    loop = compare_arms({"return": [-12.0, -12.2]}, {"return": [-15.0, -15.2]}, ["return"], BETTER)  # the loop's 2 seeds
    confirm = compare_arms({"return": [-11.5, -11.4, -11.6]}, {"return": [-11.2, -11.3, -11.1]},
                           ["return", "coverage"], BETTER)
    run = {"wall_s": 12.5, "load": 3.0,
           "confirmation": {"verdict": {"2-1": {"at_loop": {"metrics": loop}, "at_confirm": {"metrics": confirm}}}}}  # fmt: skip
    row = fitness_row(0, "auc", run)
    assert row["winner"] == "2-1" and row["fitness"] == "auc" and row["designer_seed"] == 0
    assert row["at_loop_diff"] == loop["return"]["diff"] and row["at_loop_verdict"] == "too few seeds"
    assert row["at_confirm_diff"] < 0 and row["at_confirm_poi"]["value"] == 0.0
    assert row["at_confirm_verdict"] == "worse"  # a lower return, in the metric's own direction


def test_a_run_that_confirmed_nothing_gives_an_empty_row_not_an_error() -> None:
    row = fitness_row(1, "final", {"wall_s": 1.0, "load": 0.5, "confirmation": None})
    assert row["winner"] is None and row["at_confirm_poi"] is None and row["at_loop_verdict"] is None


def test_the_confirmation_stage_is_timed_from_its_start_event_to_the_runs_last() -> None:
    from benchmarks.confirm_cost import confirm_stage

    events = [{"ts": 100.0, "event": "run_started"}, {"ts": 160.0, "event": "generation_finished"},
              {"ts": 180.0, "event": "confirm_started"}, {"ts": 225.0, "event": "confirm_finished"},
              {"ts": 234.0, "event": "run_finished"}]  # fmt: skip
    assert confirm_stage(events) == {"loop_s": 80.0, "confirm_s": 54.0, "in_run_ratio": 134.0 / 80.0}
    assert confirm_stage(events[:2]) == {"loop_s": None, "confirm_s": None, "in_run_ratio": None}
