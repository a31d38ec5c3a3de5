"""A candidate's seeds trained in one sandbox and measured in one more (`train_and_evaluate_seeds`,
`run_group`): two starts for S seeds, and every seed's result, weights and cache entry what
it gets alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lero.graph.protocol import train_and_evaluate, train_and_evaluate_seeds
from lero.sandbox.types import Job, Limits
from lero.training import load_policy
from tests.sandbox.test_contract import VALID
from tests.sandbox.test_jobs import ENV

SMALL = {"n_envs": 16, "rollout_len": 25, "epochs": 1}  # 400-step iterations
FIELDS = {"hparams": SMALL, "eval_episodes": 8, "limits": Limits(wall_s=300, mem_mb=2048)}
SEEDS = [0, 4, 7]
# an OEF whose module keeps state between calls: a seed measured after another in the same
# module would see a different counter than alone
COUNTING_OEF = VALID.replace("SCALE = 0.5\n", "SCALE = 0.5\nCALLS = [0.0]\n").replace(
    "    speed = obs[:, 0:2].norm(dim=-1, keepdim=True)  # [M, 1]\n",
    "    CALLS[0] += 1.0\n    speed = obs[:, 0:2].norm(dim=-1, keepdim=True) + 1e-3 * CALLS[0]  # [M, 1]\n",
)
RAISING_HRF = VALID.replace("    team = ctx.env_reward\n", "    team = ctx.env_reward\n    team = team[0, 99]\n")


def job_dir_of(result) -> Path:
    return Path(result.policy_dir).parent.parent  # <job dir>/policy/seed-<seed>


def assert_same_seed(group_result, alone) -> None:
    assert group_result.status == alone.status == "ok", (group_result.error, alone.error)
    assert group_result.curves == alone.curves and group_result.fitness == alone.fitness
    assert group_result.metrics == alone.metrics and group_result.episodes == alone.episodes
    mine, theirs = load_policy(group_result.policy_dir).state_dict(), load_policy(alone.policy_dir).state_dict()
    assert all(torch.equal(mine[k], theirs[k]) for k in theirs)


@pytest.mark.parametrize("code", [VALID, COUNTING_OEF], ids=["valid", "stateful-oef"])
def test_a_group_of_seeds_trains_in_one_sandbox_with_each_seeds_own_result(sandbox, code: str) -> None:
    if code is COUNTING_OEF and sandbox.kind == "docker":
        pytest.skip("the module-state case is the runner's, the same on both backends")
    group = train_and_evaluate_seeds(sandbox, code, ENV, "mappo", 1600, SEEDS, **FIELDS)
    assert len({job_dir_of(r) for r in group}) == 1  # one job directory: one sandbox, one start
    for seed, result in zip(SEEDS, group, strict=True):
        assert Path(result.policy_dir).name == f"seed-{seed}"
        assert_same_seed(result, train_and_evaluate(sandbox, code, ENV, "mappo", 1600, seed, **FIELDS))
    assert len({tuple(r.curves["return"]) for r in group}) == len(SEEDS)


def test_a_group_continues_each_seeds_learner_state(process_sandbox) -> None:
    first = train_and_evaluate_seeds(process_sandbox, VALID, ENV, "qmix", 3200, SEEDS[:2], stop_at=1600, **FIELDS)
    resume_dirs = [r.policy_dir for r in first]
    rest = train_and_evaluate_seeds(process_sandbox, VALID, ENV, "qmix", 3200, SEEDS[:2], resume_dirs, **FIELDS)
    for seed, resume_dir, result in zip(SEEDS[:2], resume_dirs, rest, strict=True):
        assert result.curves["steps"][0] > 1600 and result.curves["steps"][-1] == 3200
        alone = train_and_evaluate(process_sandbox, VALID, ENV, "qmix", 3200, seed, resume_dir=resume_dir, **FIELDS)
        assert_same_seed(result, alone)


def count_starts(sandbox) -> list[str]:
    """The kinds of the runners SANDBOX starts from now on (one per sandbox it starts)."""
    kinds: list[str] = []
    launch = sandbox._launch_runner

    def counted(job_dir, limits, key=None):
        kinds.append("evaluate" if key is not None else "train")  # only an evaluation gets a key
        return launch(job_dir, limits, key)

    sandbox._launch_runner = counted
    return kinds


def test_a_groups_seeds_are_cached_one_by_one(process_sandbox, tmp_path: Path) -> None:
    """A seed trained in a group answers a later request of that seed alone, and a group
    with one seed cached trains only the others."""
    from lero.sandbox.process_backend import ProcessSandbox

    events: list[tuple[str, dict]] = []
    cached = ProcessSandbox(cache_dir=tmp_path / "cache", max_parallel=2,
                            events=lambda event, **fields: events.append((event, fields)))  # fmt: skip
    starts = count_starts(cached)
    first = train_and_evaluate_seeds(cached, VALID, ENV, "mappo", 800, [1, 2], **FIELDS)
    assert starts == ["train", "evaluate"]  # two seeds, two sandboxes
    again = train_and_evaluate(cached, VALID, ENV, "mappo", 800, 2, **FIELDS)
    assert again.cached and again.fitness == first[1].fitness
    events.clear()
    mixed = train_and_evaluate_seeds(cached, VALID, ENV, "mappo", 800, [1, 3], **FIELDS)
    assert mixed[0].cached and not mixed[1].cached
    assert starts == ["train", "evaluate"] * 2
    trained = [f for e, f in events if e == "job_finished" and f["kind"] == "train" and not f["cached"]]
    assert len(trained) == 1  # only seed 3 trained
    progress = {f["job_id"] for e, f in events if e == "train_progress"}
    assert progress == {trained[0]["job_id"]}


def test_a_failing_candidate_fails_every_seed_of_its_group(process_sandbox) -> None:
    results = train_and_evaluate_seeds(process_sandbox, RAISING_HRF, ENV, "ippo", 800, SEEDS, **FIELDS)
    assert [r.status for r in results] == ["code_error"] * len(SEEDS)
    assert all(r.error["type"] == "IndexError" for r in results)


def test_a_group_reports_its_progress_and_shares_its_seconds(tmp_path: Path) -> None:
    from lero.sandbox.process_backend import ProcessSandbox

    events: list[tuple[str, dict]] = []
    sandbox = ProcessSandbox(work_dir=tmp_path, events=lambda event, **fields: events.append((event, fields)))
    jobs = [Job(kind="train", code=VALID, env=ENV, algo="mappo", steps=800, seed=seed, **FIELDS) for seed in SEEDS]
    results = sandbox.run_group(jobs)
    assert all(r.status == "ok" for r in results)
    finished = {f["job_id"]: f for e, f in events if e == "job_finished"}
    assert set(finished) == {job.job_id for job in jobs}
    # the group's clock split evenly: the seeds' shares add up to one run, not three
    assert len({round(f["run_s"], 9) for f in finished.values()}) == 1
    last = {f["job_id"]: f for e, f in events if e == "train_progress"}
    assert set(last) == {job.job_id for job in jobs}
    assert all((f["done"], f["total"]) == (800 * len(SEEDS), 800 * len(SEEDS)) for f in last.values())


@pytest.mark.parametrize(
    ("change", "needle"),
    [({"steps": 1600}, "differ only in seed"), ({"seed": 0}, "distinct seeds"), ({"kind": "validate"}, "a kind that runs seeds together")],
)
def test_a_train_group_of_different_plans_is_refused(process_sandbox, change: dict, needle: str) -> None:
    first = Job(kind="train", code=VALID, env=ENV, algo="mappo", steps=800, seed=0, **FIELDS)
    other = Job(**{**first.to_dict(), "job_id": "other", "seed": 1, "limits": first.limits, **change})
    with pytest.raises((TypeError, ValueError), match=needle):
        process_sandbox.run_group([first, other])
