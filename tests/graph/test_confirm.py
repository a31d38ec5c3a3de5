"""The confirmation stage: after the last generation the best candidate(s) and native train
again at `--confirm-steps` on fresh seeds, measured on held-out episodes; report.md opens
with the verdict at both budgets; a kill during it resumes there; `--confirm-steps 0`
leaves the run as before.

Budgets are tiny (a loop of 1 generation x 1 candidate x 1 seed at 1600 steps, a
confirmation at 3200 steps x 3 seeds); the process sandbox runs the jobs. `--confirm-steps 0`
is read from the session's shared Docker run (tests/conftest.py's `tiny_docker_run`).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lero.app.cli.run_hooks import app_front
from lero.app.reports.run_report import write_report
from lero.graph.configuration import RunSpec
from lero.graph.confirmation import confirm_seeds, metric_directions, selected_metric
from lero.graph.protocol import train_and_evaluate
from lero.graph.runner import resume_run, start_run
from lero.graph.summary import load_run, native_task, summarize
from lero.sandbox import get_sandbox
from lero.training.defaults import EVAL_SEED
from tests.graph.test_resume import QuietUI, kill_when, read_events

HPARAMS = {"n_envs": 32, "rollout_len": 25, "epochs": 1}  # one iteration = 800 env steps
SPEC = {"generations": 1, "population": 1, "steps": 1600, "seeds": 1, "eval_episodes": 8,
        "hparams": HPARAMS, "sandbox": "process", "confirm_steps": 3200}  # fmt: skip
CONFIRM_SEEDS, CONFIRM_EVAL_SEEDS = confirm_seeds(3)


def run(tmp_path: Path, run_id: str, **fields: Any) -> Path:
    spec = RunSpec.parse({**SPEC, "run_id": run_id, "runs_dir": str(tmp_path / "runs"), **fields})
    outcome = start_run(spec, QuietUI(), front=app_front())
    assert outcome.status == "completed", outcome
    return outcome.run_dir


def confirm_jobs(run_dir: Path, kind: str = "train") -> Counter:
    """Sandbox jobs of the confirmation that ran (not cached), by candidate id."""
    return Counter(e["candidate_id"] for e in read_events(run_dir) if e["event"] == "job_finished"
                   and e["kind"] == kind and e["candidate_id"].startswith("confirm:") and not e["cached"])  # fmt: skip


@pytest.fixture(scope="module")
def confirmed(tmp_path_factory) -> Path:
    """One run with a confirmation (module-wide: the tests below read it)."""
    return run(tmp_path_factory.mktemp("confirmed"), "confirmed")


def test_the_best_candidate_and_native_train_at_the_confirm_budget_on_fresh_seeds(confirmed):
    report = json.loads((confirmed / "report.json").read_text())
    best = report["best"]["candidate_id"]
    block = report["confirmation"]
    assert block["status"] == "completed" and block["steps"] == 3200 and block["loop_steps"] == 1600
    assert [a["candidate_id"] for a in block["arms"]] == ["baseline", best]  # native and the best, nothing else
    assert block["seeds"] == CONFIRM_SEEDS and block["eval_seeds"] == CONFIRM_EVAL_SEEDS
    loop_seeds = {r["seed"] for r in json.loads((confirmed / "baseline" / "result.json").read_text())["per_seed"]}
    assert not loop_seeds & set(block["seeds"])  # fresh seeds, disjoint from the loop's
    assert EVAL_SEED not in block["eval_seeds"]  # held out: not the selection episodes
    assert confirm_jobs(confirmed) == {"confirm:baseline": 3, f"confirm:{best}": 3}
    assert confirm_jobs(confirmed, "evaluate") == {"confirm:baseline": 3, f"confirm:{best}": 3}
    for arm in ("baseline", best):
        for seed, eval_seed in zip(CONFIRM_SEEDS, CONFIRM_EVAL_SEEDS, strict=True):
            record = json.loads((confirmed / "confirm" / arm / f"seed-{seed}.json").read_text())
            assert record["status"] == "ok" and record["eval_seed"] == eval_seed
            assert record["curves"]["steps"][-1] > 1600  # trained past the loop's budget, to the confirmation's
    assert any(e["event"] == "confirm_started" and e["steps"] == 3200 for e in read_events(confirmed))
    assert "confirm" not in report["time"]["loop"]  # its time is its jobs', counted under time.jobs


def test_a_confirmation_seed_is_what_training_it_alone_on_its_held_out_episodes_gives(confirmed, tmp_path):
    """The saved values are a native training of 3200 steps on seed 3000, measured on the
    held-out episodes of seed 300000, not the selection episodes."""
    saved = json.loads((confirmed / "confirm" / "baseline" / f"seed-{CONFIRM_SEEDS[0]}.json").read_text())
    sandbox = get_sandbox("process", cache_dir=tmp_path / "cache")
    env = {"name": "simple_spread", **RunSpec().env_kwargs}
    try:
        alone = train_and_evaluate(sandbox, None, env, "mappo", 3200, CONFIRM_SEEDS[0], eval_seed=CONFIRM_EVAL_SEEDS[0],
                                           eval_episodes=8, hparams=HPARAMS)  # fmt: skip
        selection = train_and_evaluate(sandbox, None, env, "mappo", 3200, CONFIRM_SEEDS[0], eval_episodes=8,
                                               hparams=HPARAMS)  # fmt: skip
    finally:
        sandbox.close()
    assert saved["metrics"] == alone.metrics
    assert saved["metrics"] != selection.metrics


def test_report_opens_with_the_verdict_at_both_budgets_and_json_has_its_statistics(confirmed):
    summary = write_report(confirmed)
    best = summary["best"]["candidate_id"]
    verdict = summary["confirmation"]["verdict"][best]
    for budget, steps in (("at_loop", 1600), ("at_confirm", 3200)):
        assert verdict[budget]["steps"] == steps
        assert set(verdict[budget]["metrics"]) == {"return", "coverage", "occupied", "collisions"}
        row = verdict[budget]["metrics"]["return"]
        if budget == "at_confirm":  # 3 seeds: their range (no 95% CI below 5), P(better) and a verdict
            assert row["arm"]["ci_low"] is None and row["arm"]["min"] <= row["arm"]["mean"] <= row["arm"]["max"]
            assert 0.0 <= row["poi"]["value"] <= 1.0 and row["verdict"] in ("better", "worse", "no difference")
        else:  # the loop's 1 seed carries no interval (app.study.stats.MIN_INTERVAL_SEEDS)
            assert row["arm"]["ci_low"] is None and row["arm"]["no_ci"]
    assert verdict["at_loop"]["metrics"]["return"]["verdict"] == "too few seeds"  # 1 loop seed
    assert verdict["steps_to_native"]["target"] is not None and len(verdict["steps_to_native"]["per_seed"]) == 3
    lines = (confirmed / "report.md").read_text().splitlines()
    assert lines[2].startswith(f"**confirmed at 3,200 steps on held-out episodes: {best} ")  # the headline
    assert lines[4] == "## Does the winner still win at a longer budget?"
    opening = "\n".join(lines[:16])
    assert "at 1,600 steps return" in opening and "at 3,200 steps return" in opening
    assert "P(better than native)" in opening and "native's final training return" in opening
    assert "(range of 3 seeds [" in opening and "> **warning: 3 seeds per arm." in opening
    # each metric's row says which way is better (the env's TaskSpec): "higher" collisions is a loss
    assert summary["confirmation"]["better"] == {"return": "higher", "coverage": "higher", "occupied": "higher",
                                                 "collisions": "lower"}  # fmt: skip
    assert any(line.startswith("| collisions (lower is better) |") for line in lines)
    assert any(line.startswith("| return (higher is better) |") for line in lines)


def test_report_md_shows_the_confirmation_figure_under_its_verdict(confirmed):
    """Both arms' training curves at the confirmation budget, a band over the 3 seeds (their
    range) and each seed's held-out return: the numbers the verdict compares, captioned."""
    from lero.app.reports.figures import TRAINING
    from lero.app.reports.run_figures import HELD_OUT, candidate_label
    from tests.app.test_figures import _rows, check_figure, check_words

    summary = write_report(confirmed)
    best, block = summary["best"]["candidate_id"], summary["confirmation"]
    png = confirmed / "plots" / "confirmation.png"
    check_figure(png)
    check_words(png, {"env steps", "native return per agent"}, {candidate_label(best), "native", TRAINING, HELD_OUT})
    rows = _rows(png.with_suffix(".csv"))
    for arm, label in (("baseline", "native"), (best, candidate_label(best))):
        saved = next(a for a in block["arms"] if a["candidate_id"] == arm)
        held_out = {r["statistic"]: float(r["return"]) for r in rows if r["series"] == label and r["kind"] == HELD_OUT}
        assert [held_out[f"seed {k}"] for k in range(3)] == pytest.approx(saved["per_seed"]["return"])
        training = [r for r in rows if r["series"] == label and r["kind"] == TRAINING]
        assert {r["statistic"] for r in training} == {"mean", "range_low", "range_high", "seed 0", "seed 1", "seed 2"}
        assert max(float(r["steps"]) for r in training) > 1600  # at the confirmation's budget, past the loop's
        assert {float(r["steps"]) for r in rows if r["series"] == label and r["kind"] == HELD_OUT} == {3200.0}
    report = (confirmed / "report.md").read_text()
    section = report[report.index("## Does the winner"):report.index("- status:")]
    assert "![confirmation](plots/confirmation.png)\n\n**Figure 1.** Confirmation at 3,200 env steps on 3 fresh " \
        f"seeds: {candidate_label(best)}, native." in section  # fmt: skip
    assert "shaded: the seeds' range" in section


def test_the_run_page_shows_the_confirmation(confirmed):
    from starlette.testclient import TestClient

    from lero.agents import LLMConfig
    from lero.app.ui.app import create_app

    app = create_app(str(confirmed.parent), "t", 8765, LLMConfig.from_spec("offline"), cwd=confirmed.parent)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        page = client.get("/runs/confirmed?token=t").text
    app.state.workers.close()
    assert 'id="confirmation"' in page and "Confirmation at 3200 steps (completed)" in page
    assert "at 3,200 steps return" in page
    assert "<td>collisions (lower is better)</td>" in page
    assert "(range of 3 seeds [" in page and "(collisions " in page  # the verdict with its raw direction


def test_a_later_run_of_the_same_task_and_budget_reuses_natives_confirmation(confirmed, tmp_path):
    runs = confirmed.parent
    later = run(runs.parent, "later", designer_seed=1, max_parallel=2)
    assert "confirm:baseline" not in confirm_jobs(later)  # the shared cache answered native's seeds
    assert confirm_jobs(later)  # the candidate's trained
    # ... over both slots: its 3 seeds as jobs of 2 and 1, not one job of 3 beside native's cached one
    groups = Counter(e["group_of"] for e in read_events(later) if e["event"] == "job_finished"
                     and e["kind"] == "train" and e["candidate_id"].startswith("confirm:") and not e["cached"])  # fmt: skip
    assert groups == {2: 2, 1: 1}
    block = json.loads((later / "report.json").read_text())["confirmation"]
    assert next(a for a in block["arms"] if a["arm"] == "native")["cached"] == 3
    # native's cached seeds say their env steps: the run bar counts them (no progress ever comes)
    cached = [e for e in read_events(later) if e["event"] == "confirm_finished" and e["cached"]]
    assert [(e["candidate_id"], e["env_steps"]) for e in cached] == [("baseline", 3200)] * 3


@pytest.mark.slow
@pytest.mark.docker
def test_confirm_steps_0_leaves_the_run_as_before(tiny_docker_run):
    """The session's shared Docker run confirms nothing (`LERO_CONFIRM_STEPS=0`, tests/conftest.py):
    read, not trained again."""
    run_dir = tiny_docker_run.run_dir
    assert json.loads((run_dir / "spec.json").read_text())["confirm_steps"] == 0
    write_report(run_dir)
    events = read_events(run_dir)
    assert not (run_dir / "confirm").exists()
    assert not [e for e in events if "confirm" in e["event"] or str(e.get("candidate_id", "")).startswith("confirm")]
    assert "confirm" not in {e.get("node") for e in events}
    assert json.loads((run_dir / "report.json").read_text())["confirmation"] is None
    assert "Does the winner" not in (run_dir / "report.md").read_text()


def test_the_engine_states_which_way_each_metric_is_better_and_what_the_loop_selected_on():
    """One home: graph.confirmation says it, the app's verdict reads it (never recomputes it)."""
    task = native_task("simple_spread", {})
    assert metric_directions(task) == {"return": "higher", **{m.name: m.better for m in task.metrics}}
    assert metric_directions(task)["collisions"] == "lower"
    assert metric_directions(None) == {"return": "higher"}  # a task known only once built
    assert selected_metric(task, "success") == task.success_metric != "return"
    assert selected_metric(task, "final") == selected_metric(None, "success") == "return"


def test_report_json_written_by_the_engine_alone_carries_them(confirmed):
    block = summarize(load_run(confirmed))["confirmation"]  # graph only: no app statistics
    assert "verdict" not in block and block["success_metric"] == "return"
    assert block["better"] == metric_directions(native_task("simple_spread", {}))


def test_the_budget_counts_the_confirmation():
    spec = RunSpec(generations=1, population=2, steps=1000, seeds=2, confirm_steps=None, confirm_top=2)
    assert spec.confirm_budget() == 3000 and spec.confirm_seeds == 3
    assert spec.budget() == ((2 + 1) * 2 + 3 * 3, (2 + 1) * 2 * 1000 + 3 * 3 * 3000)
    assert RunSpec(steps=60_000_000, confirm_steps=None).confirm_budget() == 100_000_000  # MAX_STEPS
    assert RunSpec(confirm_steps=0).budget() == RunSpec(confirm_steps=0, confirm_top=3).budget()


@pytest.mark.slow
def test_sigkill_during_the_confirmation_resumes_there_without_retraining_a_finished_job(tmp_path):
    runs = tmp_path / "runs"
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({**SPEC, "run_id": "killed", "runs_dir": str(runs), "max_parallel": 1}))
    run_dir = runs / "killed"

    def one_arm_done_and_the_other_training() -> bool:
        log = read_events(run_dir)
        done = [e for e in log if e["event"] == "confirm_finished"]
        started = [e for e in log if e["event"] == "job_started" and e["kind"] == "train"
                   and e["candidate_id"].startswith("confirm:")]  # fmt: skip
        return bool(done) and len({e["candidate_id"] for e in started}) == 2

    kill_when(one_arm_done_and_the_other_training, spec_file, tmp_path / "runner.log")
    saved = {p: p.read_bytes() for p in (run_dir / "confirm").rglob("seed-*.json")}
    assert saved, "the kill must land after a finished confirmation job"

    outcome = resume_run("killed", runs, QuietUI(), front=app_front())

    assert outcome.status == "completed"
    for path, content in saved.items():  # the kill cost none of these
        assert path.read_bytes() == content
    log = read_events(run_dir)
    resumed = [e["event"] for e in log].index("run_resumed")
    assert not [e for e in log[resumed:] if e["event"] == "train_started"]  # the loop did not run again
    assert max(confirm_jobs(run_dir).values()) == 3  # no confirmation seed trained twice
    assert json.loads((run_dir / "report.json").read_text())["confirmation"]["status"] == "completed"


@pytest.mark.parametrize("argv", [
    ["--confirm-steps", "-1"], ["--confirm-steps", "many"], ["--confirm-steps", "200000000"],
    ["--confirm-top", "0"], ["--confirm-top", "17"],
])  # fmt: skip
def test_bad_confirmation_flags_are_one_line_and_exit_2(argv, tmp_path, monkeypatch, capsys):
    from tests.support.cli import lero

    monkeypatch.chdir(tmp_path)
    code, _, err = lero(["run", "--sandbox", "process", *argv], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("lero: error:"), err
    assert not (tmp_path / "runs").exists()


def test_a_bad_confirm_steps_default_from_the_environment_is_one_line(tmp_path, monkeypatch, capsys):
    from tests.support.cli import lero

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LERO_CONFIRM_STEPS", "lots")
    code, _, err = lero(["run", "--sandbox", "process"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "confirm_steps" in err, err


def test_native_at_loops_job_limit_scales_with_its_steps_and_the_plan_says_so():
    """The default sparse run: native@loop trains 13.2M env steps per seed, 14.7 confirmation
    jobs' worth, so its job limit is 14.7 x --job-timeout; the plan (the start line, /estimate)
    says so, with the time one of its jobs takes at a forced estimate of the speed."""
    pytest.importorskip("vmas")
    from lero.app.chat.desk import cost_lines, training_estimate
    from lero.graph.confirmation import loop_arm_plan
    from lero.sandbox.types import JOB_WALL_S

    sparse = RunSpec.parse({"env": "vmas:navigation", "env_kwargs": {"n_agents": 3, "pos_shaping_factor": 0},
                            "confirm_steps": None})  # the default confirmation (the tests set 0)
    assert sparse.loop_arm_steps() == (3 * 4 + 1) * 2 * 300_000 + 2 * 3 * 900_000 == 13_200_000
    assert sparse.job_wall_s(sparse.steps) == sparse.job_wall_s(sparse.confirm_budget()) == JOB_WALL_S
    assert sparse.job_wall_s(13_200_000) == pytest.approx(JOB_WALL_S * 13_200_000 / 900_000) == 52_800
    plan = loop_arm_plan(sparse, steps_per_s=2_000.0)
    assert plan == ("native@loop trains 13,200,000 env steps per seed (every step the run spends), 14.7x a "
                    "confirmation job's 900,000: its job limit is --job-timeout 3,600 s x 14.7 = 52,800 s; "
                    "at ~2,000 steps/s one takes ~6,600 s")  # fmt: skip
    longer = sparse.model_copy(update={"job_timeout_s": 7_200.0})
    assert "= 105,600 s" in loop_arm_plan(longer)  # --job-timeout is what scales
    cost = training_estimate(sparse, 2_000.0, 3_000)
    total, second = cost_lines(sparse, cost)
    assert second == plan and "+ 3 native@loop (x 3 seeds) x 13,200,000 steps = 39,600,000" in total
    assert (cost.jobs, cost.env_steps) == sparse.budget() == (35, 52_800_000)  # /estimate adds up with it
    dense = RunSpec(confirm_steps=None)
    assert dense.loop_arm_steps() is None and loop_arm_plan(dense) is None and len(cost_lines(dense, training_estimate(dense, 2_000.0, 3_000))) == 1
    assert sparse.model_copy(update={"confirm_steps": 0}).loop_arm_steps() is None  # no confirmation: no arm
