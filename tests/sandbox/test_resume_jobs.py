"""Successive halving's next rung in the sandbox: a train job continues the learner state a
finished train job left, moved by the host as bytes it never loads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lero.sandbox.types import Job, Limits
from lero.training.resume import LEARNER_FILE
from tests.sandbox.test_contract import VALID
from tests.sandbox.test_jobs import ENV

SMALL = {"n_envs": 16, "rollout_len": 25, "epochs": 1}  # 400-step iterations
FIELDS = {"hparams": SMALL, "eval_episodes": 8, "limits": Limits(wall_s=300, mem_mb=2048)}


def test_the_next_rung_continues_the_first_rungs_learner(sandbox) -> None:
    first = sandbox.train_and_evaluate(VALID, ENV, "mappo", 3200, 0, stop_at=1600, **FIELDS)
    assert first.status == "ok", first.error
    assert first.curves["steps"][-1] == 1600 and (Path(first.policy_dir) / LEARNER_FILE).is_file()
    rest = sandbox.train_and_evaluate(VALID, ENV, "mappo", 3200, 0, resume_dir=first.policy_dir, **FIELDS)
    assert rest.status == "ok", rest.error
    assert rest.fitness is not None and rest.policy_dir != first.policy_dir
    assert rest.curves["steps"][0] > 1600 and rest.curves["steps"][-1] == 3200


def test_a_learner_state_of_another_plan_fails_the_job_not_the_host(sandbox) -> None:
    first = sandbox.train_and_evaluate(VALID, ENV, "mappo", 3200, 0, stop_at=1600, **FIELDS)
    assert first.status == "ok", first.error
    other = sandbox.run_job(Job(kind="train", code=VALID, env=ENV, algo="ippo", steps=3200, seed=0,
                                resume_dir=first.policy_dir, **FIELDS))  # fmt: skip
    assert other.status != "ok" and "another plan" in other.error["message"], other


def test_a_linked_learner_state_is_not_followed(process_sandbox, tmp_path) -> None:
    """The previous job's folder was the candidate's to write: a link there is no state."""
    (tmp_path / "secret").write_text("host file")
    os.symlink(tmp_path / "secret", tmp_path / LEARNER_FILE)
    result = process_sandbox.run_job(Job(kind="train", code=VALID, env=ENV, steps=3200, seed=0,
                                         resume_dir=str(tmp_path), **FIELDS))  # fmt: skip
    assert result.status == "crashed" and result.error["type"] == "NoPolicy", result


@pytest.mark.parametrize(("fields", "needle"), [({"kind": "evaluate", "policy_dir": "x", "resume_dir": "y"}, "only a train"),
                                                ({"kind": "train", "steps": 10, "stop_at": 11}, "stop_at")])  # fmt: skip
def test_job_fields_of_a_rung_are_checked(fields: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        Job(code=None, **fields)
