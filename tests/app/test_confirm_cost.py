"""benchmarks.confirm_cost's rows, from the statistics the confirmation's verdict computes."""

from __future__ import annotations

from benchmarks.confirm_cost import fitness_row
from lero.app.confirmation import _compare


def test_a_fitness_row_holds_the_winners_return_edge_at_both_budgets() -> None:
    loop = _compare({"return": [-12.0, -12.2]}, {"return": [-15.0, -15.2]}, ["return"])  # the loop's 2 seeds
    confirm = _compare({"return": [-11.5, -11.4, -11.6]}, {"return": [-11.2, -11.3, -11.1]}, ["return", "coverage"])
    run = {"wall_s": 12.5, "load": 3.0,
           "confirmation": {"verdict": {"2-1": {"at_loop": {"metrics": loop}, "at_confirm": {"metrics": confirm}}}}}  # fmt: skip
    row = fitness_row(0, "auc", run)
    assert row["winner"] == "2-1" and row["fitness"] == "auc" and row["designer_seed"] == 0
    assert row["at_loop_diff"] == loop["return"]["diff"] and row["at_loop_verdict"] == "too few seeds"
    assert row["at_confirm_diff"] < 0 and row["at_confirm_poi"]["value"] == 0.0
    assert row["at_confirm_verdict"] == "worse"


def test_a_run_that_confirmed_nothing_gives_an_empty_row_not_an_error() -> None:
    row = fitness_row(1, "final", {"wall_s": 1.0, "load": 0.5, "confirmation": None})
    assert row["winner"] is None and row["at_confirm_poi"] is None and row["at_loop_verdict"] is None
