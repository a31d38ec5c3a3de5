"""What the reports say of sparse tasks and shaping: which candidates are policy-invariant,
which learned only their shaping, native@loop's budget for the study, the success column."""

from __future__ import annotations

import pytest

from lero.app.reports.shaping_notes import (
    INVARIANT,
    adds_shaping,
    hollow_note,
    shaped_without_success,
    shaping_kind,
)
from lero.app.study.execute import spent_env_steps
from lero.app.study.report import _success_metric
from lero.graph.confirmation import LOOP_ID
from lero.graph.schedule import loop_env_steps

pytest.importorskip("vmas")


def stats(shaping: float | None, change: float | None) -> dict:
    found = {}
    if shaping is not None:
        found["potential_shaping"] = {"max": shaping, "min": 0.0, "mean": 0.0, "snapshots": []}
    if change is not None:
        found["hrf_change"] = {"max": change, "min": 0.0, "mean": 0.0, "snapshots": []}
    return {"reflection_stats": found}


def test_policy_invariance_is_read_off_the_engines_curves() -> None:
    assert shaping_kind(stats(0.4, 0.0)) == INVARIANT
    assert shaping_kind(stats(0.4, 0.2)) == "not policy-invariant"
    assert shaping_kind(stats(None, None)) is None  # no potential: nothing to say
    assert shaping_kind({}) is None


def test_a_shaped_return_that_rises_while_success_stays_zero_is_named() -> None:
    rising = {"train_reward": [0.1, 0.2, 0.5, 0.9, 1.4, 2.0], "success": [0.0] * 6}
    assert shaped_without_success({"curves": rising, "eval": {"success": 0.0}}, "success")
    assert not shaped_without_success({"curves": rising, "eval": {"success": 0.25}}, "success")  # it solved it
    flat = {**rising, "train_reward": [1.0] * 6}
    assert not shaped_without_success({"curves": flat, "eval": {"success": 0.0}}, "success")
    once = {**rising, "success": [0.0, 0.0, 0.1, 0.0, 0.0, 0.0]}
    assert not shaped_without_success({"curves": once, "eval": {"success": 0.0}}, "success")


def test_only_a_candidate_that_shapes_is_said_to_have_learned_its_shaping() -> None:
    collisions_fade = [-2.0, -1.5, -1.1, -0.6, -0.3, -0.1]  # native return: rises, success stays 0
    never = {"success": [0.0] * 6}
    native = {"curves": {"return": collisions_fade, "train_reward": collisions_fade, **never}, "eval": {"success": 0.0}}
    scaled = {"curves": {"return": collisions_fade, "train_reward": [1.366 * r for r in collisions_fade], **never},
              "eval": {"success": 0.0}}  # `env` x 1.366: the task's own reward
    toward = [r + d for r, d in zip(collisions_fade, [0.1, 0.4, 0.9, 1.2, 1.6, 2.0], strict=True)]
    hrf = {"curves": {"return": collisions_fade, "train_reward": toward, **never}, "eval": {"success": 0.0}}
    potential = {**scaled, **stats(0.4, 0.4)}  # a potential beside the scaled reward: it shapes
    for result in (native, scaled, hrf, potential):
        assert shaped_without_success(result, "success")  # every training return rose
    assert not adds_shaping(native) and not adds_shaping(scaled)
    assert adds_shaping(hrf) and adds_shaping(potential)
    assert hollow_note(native, "success") is None and hollow_note(scaled, "success") is None
    assert "learned the shaping" in hollow_note(hrf, "success") and "learned the shaping" in hollow_note(potential, "success")
    negated = {"curves": {**scaled["curves"], "train_reward": [-r for r in collisions_fade]}, "eval": {"success": 0.0}}
    assert adds_shaping(negated)  # minus the task's reward is not the task's reward


def test_native_at_loop_counts_the_confirmation_but_not_itself() -> None:
    assert spent_env_steps({"env_steps": 4800, "confirmation": None}) == 4800
    block = {"steps": 1600, "seeds": [3000, 3001, 3002],
             "arms": [{"candidate_id": "baseline"}, {"candidate_id": "0-0"}, {"candidate_id": LOOP_ID}]}
    assert spent_env_steps({"env_steps": 4800, "confirmation": block}) == loop_env_steps(4800, 1600, 3, 2) == 14400
    assert spent_env_steps({"env_steps": None, "confirmation": block}) is None


def test_a_study_names_the_success_metric_where_it_is_not_the_return() -> None:
    env = {"name": "vmas:navigation", "n_agents": 2, "pos_shaping_factor": 0}
    assert _success_metric(env, ["return", "success"]) == "success"
    assert _success_metric(env, ["return"]) is None  # not measured
    assert _success_metric({"name": "simple_spread", "reward": "sparse"}, ["return", "coverage"]) == "coverage"
    assert _success_metric({"name": "mypkg.envs:make"}, ["return"]) is None  # not lero's env: not built


def study(env: dict, success: str | None, values: dict[str, tuple[list[float], list[float]]]) -> dict:
    """A finished study's cells: arm -> (returns, success rates) over seeds."""
    return {"study_id": env["name"], "config": {"env": env}, "success_metric": success,
            "cells": [{"algo": "mappo", "variant": arm, "absolute": None,
                       "per_seed": {"return": ret, **({success: rate} if success else {})}}
                      for arm, (ret, rate) in values.items()]}


def test_the_lero_table_gives_the_success_rate_of_sparse_tasks_beside_the_return() -> None:
    from lero.app.study.combine import combine_studies, render_combined

    navigation = study({"name": "vmas:navigation", "pos_shaping_factor": 0}, "success",
                       {"native": ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0]), "hrf+oef": ([-0.1, -0.2, 0.0], [0.5, 1.0, 0.75]),
                        "native@loop": ([0.0, 0.0, 0.0], [0.0, 0.25, 0.0])})
    spread = study({"name": "simple_spread", "reward": "sparse"}, "coverage",
                   {"native": ([1.0, 2.0, 1.5], [0.0, 0.05, 0.0]), "hrf+oef": ([3.0, 2.5, 2.0], [0.2, 0.3, 0.1])})
    dense = study({"name": "simple_spread"}, None, {"native": ([-20.0, -21.0], []), "hrf+oef": ([-19.0, -18.0], [])})
    combined = combine_studies([navigation, spread, dense])
    success = combined["success"]
    assert len(combined["tasks"]) == 3 and len(success["tasks"]) == 2  # the dense task has no success rate
    assert success["arms"]["mappo:hrf+oef"]["mean"] == pytest.approx((0.5 + 1.0 + 0.75 + 0.2 + 0.3 + 0.1) / 6)
    assert success["improvement"]["mappo:hrf+oef"]["value"] == 1.0  # every seed beats native on both tasks
    assert success["improvement"]["mappo:native@loop"]["versus"] == "mappo:native"
    assert "Success rate (each task's own success metric" in render_combined(combined, [])
    assert combine_studies([dense])["success"] is None


def test_report_and_run_page_name_policy_invariant_candidates_and_those_that_learned_only_their_shaping(
        tmp_path) -> None:
    import json

    from starlette.testclient import TestClient

    from lero.agents import LLMConfig
    from lero.app.reports.run_report import write_report
    from lero.app.ui.app import create_app
    from tests.app.test_report import make_run_dir

    run = make_run_dir(tmp_path, "sparse-page")
    spec = json.loads((run / "spec.json").read_text())
    spec.update(env="vmas:navigation", env_kwargs={"n_agents": 2, "pos_shaping_factor": 0}, fitness="success")
    (run / "spec.json").write_text(json.dumps(spec))
    rising = [0.1, 0.3, 0.6, 1.0, 1.5, 2.1]
    shaped = {  # 0-0 shapes only through its potential and solves the task; 1-0 learned only its shaping
        "0-0": (stats(0.4, 0.0)["reflection_stats"], {"train_reward": rising, "success": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]}, 0.5),
        "1-0": (stats(0.4, 0.3)["reflection_stats"], {"train_reward": rising, "success": [0.0] * 6}, 0.0),
    }
    for cid, (found, curves, success) in shaped.items():
        path = run / "candidates" / cid / "result.json"
        result = json.loads(path.read_text())
        result["reflection_stats"] = found
        result["curves"] = {**result["curves"], "steps": [0, 200, 400, 600, 800, 1000], **curves}
        result["eval"] = {**result["eval"], "success": success}
        path.write_text(json.dumps(result))
    write_report(run)
    markdown = (run / "report.md").read_text()
    hollow = "its shaped training return rose while success stayed 0: it learned the shaping, not the task"
    assert "- `0-0`: policy-invariant (shapes only through its potential)" in markdown
    assert f"- `1-0`: {hollow}" in markdown and markdown.count(hollow) == 1
    app = create_app(str(tmp_path), "t0ken", 8765, LLMConfig.from_spec("offline"))
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        page = client.get("/runs/sparse-page?token=t0ken").text
    app.state.workers.close()
    assert '<span class="shaping">policy-invariant</span>' in page
    assert f'<span class="hollow">{hollow}</span>' in page and page.count('class="hollow"') == 1
