"""Successive halving's next rung in the sandbox: a train job continues the learner state a
finished train job left, moved by the host as bytes it never loads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lero.graph.protocol import train_and_evaluate
from lero.sandbox.types import Job, Limits
from lero.training.resume import LEARNER_FILE
from tests.sandbox.test_contract import VALID
from tests.sandbox.test_jobs import ENV

SMALL = {"n_envs": 16, "rollout_len": 25, "epochs": 1}  # 400-step iterations
FIELDS = {"hparams": SMALL, "eval_episodes": 8, "limits": Limits(wall_s=300, mem_mb=2048)}


def test_the_next_rung_continues_the_first_rungs_learner(sandbox) -> None:
    first = train_and_evaluate(sandbox, VALID, ENV, "mappo", 3200, 0, stop_at=1600, **FIELDS)
    assert first.status == "ok", first.error
    assert first.curves["steps"][-1] == 1600 and (Path(first.policy_dir) / LEARNER_FILE).is_file()
    rest = train_and_evaluate(sandbox, VALID, ENV, "mappo", 3200, 0, resume_dir=first.policy_dir, **FIELDS)
    assert rest.status == "ok", rest.error
    assert rest.fitness is not None and rest.policy_dir != first.policy_dir
    assert rest.curves["steps"][0] > 1600 and rest.curves["steps"][-1] == 3200


def test_a_learner_state_of_another_plan_fails_the_job_not_the_host(sandbox) -> None:
    first = train_and_evaluate(sandbox, VALID, ENV, "mappo", 3200, 0, stop_at=1600, **FIELDS)
    assert first.status == "ok", first.error
    other = sandbox.run_job(Job(kind="train", code=VALID, env=ENV, algo="ippo", steps=3200, seed=0,
                                resume_dir=first.policy_dir, **FIELDS))  # fmt: skip
    assert other.status != "ok" and "another plan" in other.error["message"], other


def test_a_linked_learner_state_is_not_followed(process_sandbox, tmp_path) -> None:
    """The previous job's folder was the candidate's to write: a link there is no state."""
    folder = process_sandbox.work_dir / "linked-learner"
    folder.mkdir()
    (tmp_path / "secret").write_text("host file")
    os.symlink(tmp_path / "secret", folder / LEARNER_FILE)
    result = process_sandbox.run_job(Job(kind="train", code=VALID, env=ENV, steps=3200, seed=0,
                                         resume_dir=str(folder), **FIELDS))  # fmt: skip
    assert result.status == "crashed" and result.error["type"] == "NoPolicy", result
    assert "not a regular file" in result.error["message"] or "no learner.pt" in result.error["message"]


def test_a_resume_dir_outside_the_sandboxs_job_directories_is_never_read(process_sandbox, tmp_path) -> None:
    """resume_dir comes from a run's state: a tampered one must not make the host read its files."""
    first = process_sandbox.run_job(Job(kind="train", code=VALID, env=ENV, steps=3200, seed=0, stop_at=1600, **FIELDS))
    assert first.status == "ok", first.error
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / LEARNER_FILE).write_bytes((Path(first.policy_dir) / LEARNER_FILE).read_bytes())  # a valid state
    (process_sandbox.work_dir / "link-out").symlink_to(elsewhere)
    for resume_dir in (elsewhere, process_sandbox.work_dir / "link-out"):
        result = process_sandbox.run_job(Job(kind="train", code=VALID, env=ENV, steps=3200, seed=0,
                                             resume_dir=str(resume_dir), **FIELDS))  # fmt: skip
        assert result.status == "crashed" and result.error["type"] == "NoPolicy", result
        assert "is not a job directory of this sandbox" in result.error["message"]


@pytest.mark.parametrize(("fields", "needle"), [({"kind": "evaluate", "policy_dir": "x", "resume_dir": "y"}, "evaluate Job takes no resume_dir"),
                                                ({"kind": "train", "steps": 10, "stop_at": 11}, "stop_at")])  # fmt: skip
def test_job_fields_of_a_rung_are_checked(fields: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        Job(code=None, **fields)
