"""The confirmation's verdict says better or worse in each metric's own direction, shows 3
seeds as their range (never as a 95% CI) and carries the small-sample caveat: computed by
app.reports.confirmation_verdict from per-seed values like those of the quick start, where the winner's
return was higher and its collisions higher (a loss), against native."""

from __future__ import annotations

from typing import Any

from lero.app.reports.confirmation_verdict import (
    UNCONFIRMED,
    compare_arms,
    confirmation_markdown,
    headline,
    short_verdict,
)
from lero.app.reports.provenance import native_metrics

WINNER = {"return": [-12.2, -12.1, -12.3], "collisions": [3.95, 3.81, 3.85]}
NATIVE = {"return": [-15.147, -14.991, -15.07], "collisions": [3.02, 3.05, 3.03]}
BETTER = {m.name: m.better for m in native_metrics("simple_spread")}


def confirmation(winner: dict[str, list[float]], native: dict[str, list[float]]) -> dict[str, Any]:
    """A confirmation as app.reports.confirmation_verdict.confirmation_verdict returns it (3 seeds per arm)."""
    names = list(winner)
    arms = [{"arm": arm, "candidate_id": cid, "seeds": [3000, 3001, 3002], "failed": {}}
            for arm, cid in (("native", "baseline"), ("0-1", "0-1"))]  # fmt: skip
    return {"status": "completed", "steps": 30000, "loop_steps": 10000, "seeds": [3000, 3001, 3002],
            "eval_seeds": [300000, 300001, 300002], "eval_episodes": 8, "arms": arms, "better": BETTER,
            "verdict": {"0-1": {"at_loop": {"steps": 10000, "metrics": compare_arms(
                {m: v[:1] for m, v in winner.items()}, {m: v[:1] for m, v in native.items()}, names, BETTER)},
                "at_confirm": {"steps": 30000, "metrics": compare_arms(winner, native, names, BETTER)},
                "steps_to_native": {"target": None, "per_seed": [], "reached": 0, "mean_of_reached": None}}}}  # fmt: skip


def test_more_collisions_read_as_worse_and_a_higher_return_as_better() -> None:
    assert BETTER["collisions"] == "lower" and BETTER["return"] == "higher"
    text = "\n".join(confirmation_markdown(confirmation(WINNER, NATIVE)))
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    assert "P(> native)" not in text
    assert rows["| collisions (lower is better)"].endswith(
        "| 3.870 (range of 3 seeds [3.810, 3.950]) | 3.033 (range of 3 seeds [3.020, 3.050]) "
        "| 0.00 (3 seeds per arm, no CI) | worse (collisions higher) |")
    assert rows["| return (higher is better)"].endswith("| better (return higher) |")
    assert "95% CI]" not in rows["| return (higher is better)"]  # 3 seeds are a range, not a CI
    assert "> **warning: 3 seeds per arm." in text  # the study's small-sample caveat
    # a second run's winner collides less: that is better, and reads so
    fewer = confirmation({"collisions": NATIVE["collisions"]}, {"collisions": WINNER["collisions"]})
    assert "| better (collisions lower) |" in "\n".join(confirmation_markdown(fewer))


def test_the_headline_is_the_confirmed_verdict_on_return_with_its_caveat() -> None:
    confirmed = confirmation(WINNER, NATIVE)
    assert headline(confirmed) == ("confirmed at 30,000 steps on held-out episodes: 0-1 better (return higher), "
                                   "return -12.200 vs native -15.069, 3 seeds per arm: a pilot")  # fmt: skip
    assert short_verdict(confirmed) == "better*"
    worse = confirmation({"return": NATIVE["return"]}, {"return": WINNER["return"]})
    assert short_verdict(worse) == "worse*" and "0-1 worse (return lower)" in headline(worse)
    assert headline(None) == UNCONFIRMED and short_verdict(None) == "-"


def _stored_block(seeds: int) -> dict[str, Any]:
    """report.json's raw confirmation block (graph.confirmation): native and the winner 0-0,
    SEEDS seeds each, every winner seed above every native seed."""
    def arm(cid: str, shift: float) -> dict[str, Any]:
        returns = [-20.0 + shift + 0.1 * s for s in range(seeds)]
        return {"arm": "native" if cid == "baseline" else cid, "candidate_id": cid, "steps": None,
                "seeds": list(range(3000, 3000 + seeds)), "failed": {}, "per_seed": {"return": returns},
                "curves": [{"steps": [0, 1500, 3000], "return": [-30.0, -25.0, r]} for r in returns]}  # fmt: skip

    return {"status": "completed", "steps": 3000, "loop_steps": 1000, "seeds": list(range(3000, 3000 + seeds)),
            "eval_seeds": list(range(300000, 300000 + seeds)), "eval_episodes": 8, "env_steps": 6 * seeds * 1000,
            "arms": [arm("baseline", 0.0), arm("0-0", 5.0)], "better": BETTER, "success_metric": "return"}  # fmt: skip


def test_report_json_stores_no_95_ci_of_p_better_below_five_seeds(tmp_path) -> None:
    """The quick start's 3 seeds: P(better) 1.00 whose bootstrap "CI" [1.00, 1.00] is only the
    seeds' order; report.json keeps it null with the reason, as report.md says "no CI"."""
    import json

    from lero.app.reports.run_report import write_report_files
    from lero.app.study.stats import MIN_INTERVAL_SEEDS
    from lero.graph.summary import load_run, summarize
    from tests.app.test_report import make_run_dir

    for seeds in (3, MIN_INTERVAL_SEEDS):
        run = load_run(make_run_dir(tmp_path, f"seeds-{seeds}"))
        write_report_files(run, {**summarize(run), "confirmation": _stored_block(seeds)})
        stored = json.loads((run.run_dir / "report.json").read_text())["confirmation"]["verdict"]["0-0"]
        row = stored["at_confirm"]["metrics"]["return"]
        assert row["poi"]["value"] == 1.0 and row["verdict"] == "better"
        markdown = (run.run_dir / "report.md").read_text()
        if seeds < MIN_INTERVAL_SEEDS:
            assert row["poi"]["ci_low"] is None and row["poi"]["ci_high"] is None
            assert row["poi"]["no_ci"] == f"no CI: {seeds} seeds per arm; an interval needs >= {MIN_INTERVAL_SEEDS}"
            assert row["arm"]["ci_low"] is None and row["arm"]["no_ci"]  # each arm: its seeds' range
            assert f"1.00 ({seeds} seeds per arm, no CI)" in markdown and "1.00 [1.00, 1.00]" not in markdown
        else:
            assert row["poi"]["ci_low"] == row["poi"]["ci_high"] == 1.0 and "no_ci" not in row["poi"]
            assert "1.00 [1.00, 1.00]" in markdown
