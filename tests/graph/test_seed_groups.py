"""A candidate's seeds train in one sandbox job when that costs the generation no extra
round (`graph.schedule.seed_groups`); results, events and crash recovery stay per seed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lero.graph.configuration import RunSpec
from lero.graph.nodes.train import rung_sends, task_seeds, training_sends
from lero.graph.runner import start_run
from lero.graph.schedule import seed_groups
from tests.graph.test_graph_e2e import RecordingUI, assert_complete_run_dir, events, spec


@pytest.mark.parametrize(
    ("lengths", "seeds", "slots", "plan"),
    [
        # 4 jobs of 2 seeds end after 4 seed-lengths on 2 slots, as 8 jobs of 1
        ([1] * 4, 2, 2, [[[0, 1]]] * 4),
        # the baseline first: its 2 seeds alone, then 4 jobs of 2 end at 5, as 10 jobs of 1;
        # 5 jobs of 2 would end at 6
        ([1] * 5, 2, 2, [[[0], [1]]] + [[[0, 1]]] * 4),
        # successive halving's first rung: the baseline, 4x as long, fills one slot while the
        # 4 candidates' jobs fill the other
        ([1] + [0.25] * 4, 2, 2, [[[0, 1]]] * 5),
        ([1], 3, 1, [[[0, 1, 2]]]),
        ([1] * 4, 3, 2, [[[0, 1, 2]]] * 4),
        ([1] * 2, 3, 4, [[[0, 1], [2]]] * 2),  # 4 jobs of <= 2 fill 4 slots in 2 seed-lengths; jobs of 3 take 3
        ([1] * 4, 2, 16, [[[0], [1]]] * 4),  # a big machine: every seed on its own core
        ([1] * 4, 1, 2, [[[0]]] * 4),
    ],
)
def test_seeds_go_together_only_where_the_fan_out_ends_no_later(lengths, seeds: int, slots: int, plan) -> None:
    assert seed_groups([float(x) for x in lengths], list(range(seeds)), slots) == plan


def run_spec(**spec_fields: Any) -> RunSpec:
    return RunSpec(population=4, seeds=2, **spec_fields)


def run_state() -> dict[str, Any]:
    candidates = [{"candidate_id": f"0-{k}", "code": f"# {k}", "stage": "approved"} for k in range(4)]
    return {"generation": 0, "candidates": candidates, "evaluated": [{"candidate_id": "baseline"}]}


def test_the_fan_out_sends_each_candidates_seeds_in_groups() -> None:
    sends = training_sends(run_state(), run_spec(max_parallel=2))
    assert [(s.arg["candidate_id"], s.arg["seeds"], s.arg["resume_dirs"]) for s in sends] == [
        (f"0-{k}", [0, 1], [None, None]) for k in range(4)
    ]
    with_baseline = training_sends({**run_state(), "evaluated": []}, run_spec(max_parallel=2))
    assert [(s.arg["candidate_id"], s.arg["seeds"]) for s in with_baseline] == [
        ("baseline", [0]), ("baseline", [1]), *((f"0-{k}", [0, 1]) for k in range(4))
    ]
    on_ray = training_sends(run_state(), run_spec(max_parallel=2, executor="ray", ray_address="127.0.0.1:1"))
    assert [s.arg["seeds"] for s in on_ray] == [[0], [1]] * 4


def test_the_next_rung_sends_each_seed_its_own_learner_state() -> None:
    state = run_state()
    state["results"] = [
        {"candidate_id": f"0-{k}", "generation": 0, "seed": seed, "rung": 0, "status": "ok",
         "fitness": float(k + seed), "policy_dir": f"/jobs/{k}/policy/seed-{seed}"}
        for k in range(4) for seed in (1, 0)
    ]  # fmt: skip
    sends = rung_sends(state, run_spec(max_parallel=1, schedule="halving"))
    assert [(s.arg["candidate_id"], s.arg["rung"], s.arg["seeds"], s.arg["resume_dirs"]) for s in sends] == [
        (f"0-{k}", 1, [0, 1], [f"/jobs/{k}/policy/seed-0", f"/jobs/{k}/policy/seed-1"]) for k in (3, 2)
    ]


def test_a_branch_saved_before_seed_groups_still_runs_its_one_seed() -> None:
    old = {"candidate_id": "0-0", "generation": 0, "code": None, "seed": 3, "spec": {}, "resume_dir": "/p"}
    assert task_seeds(old) == ([3], ["/p"])
    assert task_seeds({**old, "seeds": [0, 1]}) == ([0, 1], [None, None])


def test_a_run_on_one_slot_trains_each_candidates_seeds_in_one_job(tmp_path: Path) -> None:
    outcome = start_run(spec(tmp_path, seeds=2, max_parallel=1), RecordingUI())
    records = assert_complete_run_dir(outcome.run_dir, generations=1)
    assert records
    for folder in [outcome.run_dir / "baseline", *sorted((outcome.run_dir / "candidates").iterdir())]:
        seeds = [json.loads((folder / f"seed-{seed}.json").read_text()) for seed in (0, 1)]
        assert [r["status"] for r in seeds] == ["ok", "ok"]
        dirs = [Path(r["policy_dir"]) for r in seeds]
        assert [d.name for d in dirs] == ["seed-0", "seed-1"] and dirs[0].parent == dirs[1].parent  # one job
        assert seeds[0]["curves"] != seeds[1]["curves"]
    log = events(outcome.run_dir)
    finished = [(e["candidate_id"], e["seed"]) for e in log if e["event"] == "train_finished"]
    assert len(finished) == len(set(finished)) == 2 * (1 + len(records))  # the baseline and each candidate
    report = json.loads((outcome.run_dir / "report.json").read_text())
    for kind in ("train", "evaluate"):  # two seeds per sandbox
        assert report["time"]["jobs"][kind]["jobs"] == 2 * report["time"]["jobs"][kind]["sandboxes"] == 2 * 3
