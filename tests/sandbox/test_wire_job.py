"""One typed job on the wire: the host's `Job` (single or group) is what the runner parses,
validates before anything runs, and dispatches through the handler table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lero.sandbox.harness import JOB_FILE, RESULT_FILE, parse_job, resolve_handler
from lero.sandbox.types import KINDS, GroupMember, Job, Limits

REPO = Path(__file__).resolve().parents[2]


def wire(job: Job) -> Job:
    """JOB as the host writes it and the runner reads it back."""
    return parse_job(json.dumps(job.to_dict()))


def test_a_job_and_a_group_cross_the_wire_unchanged() -> None:
    single = Job(kind="train", code="x = 1\n", steps=10, seed=3, limits=Limits(cpus=2), hparams={"lr": 0.1},
                 resume_dir="/job/in-learner", checkpoint_every=5)  # fmt: skip
    assert wire(single) == single
    assert single.members() == (GroupMember(seed=3, resume_dir="/job/in-learner"),)
    group = Job(kind="evaluate", code=None, group=(GroupMember(0, eval_seed=7, policy_dir="/job/p-0"),
                                                   GroupMember(1, policy_dir="/job/p-1")))  # fmt: skip
    assert wire(group) == group
    assert [m.seed for m in group.members()] == [0, 1]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "fly"}, "Job.kind must be one of"),
        ({"surprise": 1}, "unknown Job fields"),
        ({"seed": "0"}, "Job.seed must be an int"),
        ({"limits": {"wall_s": 1, "nope": 2}}, "nope"),
        ({"group": [{"seed": 0}, {"seed": 0}]}, "distinct seeds"),
        ({"group": [{"seed": 0, "where": "/"}]}, "unknown GroupMember fields"),
        ({"kind": "validate", "group": [{"seed": 0}]}, "the validate Job takes no group"),
        ({"kind": "evaluate"}, "the evaluate Job needs policy_dir"),
        ({"kind": "validate", "stop_at": 5}, "the validate Job takes no stop_at"),
    ],
)
def test_the_runner_refuses_a_job_it_cannot_type(change: dict, message: str) -> None:
    data = {**Job(kind="train", code=None, steps=10).to_dict(), **change}
    with pytest.raises(ValueError, match=message):
        parse_job(json.dumps(data))
    with pytest.raises(ValueError, match="not an object"):
        parse_job("[]")


def test_every_kind_has_one_handler_and_only_evaluate_is_sealed() -> None:
    assert {"describe", "validate", "train", "evaluate"} <= set(KINDS)
    assert all(callable(resolve_handler(name)) for name in KINDS)
    assert [name for name, kind in KINDS.items() if kind.sealed and kind.source is None] == ["evaluate"]


def test_an_unknown_kind_runs_nothing_and_ends_as_crashed(tmp_path: Path) -> None:
    """The real runner process: the job is refused before any handler or candidate code runs."""
    marker = tmp_path / "ran"
    data = {**Job(kind="train", code=f"open({str(marker)!r}, 'w')\n", steps=10).to_dict(), "kind": "fly"}
    (tmp_path / JOB_FILE).write_text(json.dumps(data))
    subprocess.run([sys.executable, "-m", "lero.sandbox.harness", str(tmp_path)], cwd=REPO, check=True, timeout=120)
    result = json.loads((tmp_path / RESULT_FILE).read_text())
    assert result["status"] == "crashed"
    assert result["error"]["type"] == "InvalidJob" and "Job.kind must be one of" in result["error"]["message"]
    assert not marker.exists() and not (tmp_path / JOB_FILE).exists()
