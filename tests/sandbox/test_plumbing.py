"""Result reading, output capping, cache, events, backend selection, reaping, validation."""

from __future__ import annotations

import json
import os
import socket

import pytest

from lero.sandbox import Job, JobResult, Limits, ResultCache, SandboxUnavailable, get_sandbox
from lero.sandbox.base import Sandbox
from lero.sandbox.cache import cache_key
from lero.sandbox.output import CappedBuffer
from lero.sandbox.results import MAX_RESULT_BYTES, read_result
from lero.sandbox.seal import new_key, seal
from lero.sandbox.types import ScriptResult
from lero.training.defaults import MAX_EVAL_EPISODES
from tests.sandbox.test_contract import VALID
from tests.sandbox.test_jobs import ENV, LIMITS


def test_capped_buffer_keeps_head_and_tail() -> None:
    buffer = CappedBuffer(10)
    for chunk in (b"abc", b"defgh", b"0123456789", b"XYZ"):
        buffer.feed(chunk)
    assert buffer.text() == "abcde\n[... 11 bytes dropped ...]\n89XYZ"
    small = CappedBuffer(100)
    small.feed(b"hello")
    assert small.text() == "hello"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "malformed"),
        (json.dumps({"status": "great"}), "status"),
        (json.dumps({"status": "ok", "metrics": {"return": "high"}}), "metrics"),
        (json.dumps({"status": "ok", "fitness": float("nan")}), "fitness"),
        (json.dumps({"status": "ok", "error": {"type": 1}}), "error"),
        (json.dumps({"status": "ok", "curves": {"return": [1, "x"]}}), "curves"),
        (json.dumps({"status": "ok", "episodes": {"return": [1, None]}}), "episodes"),
        (json.dumps({"status": "ok", "episodes": {"return": [0.0] * (MAX_EVAL_EPISODES + 1)}}), "at most 8192"),
        ('{"status": "ok", "metrics": {"return": 1' + "0" * 400 + "}}", "metrics"),  # no OverflowError
        ('{"status": "ok", "fitness": 1' + "0" * 400 + "}", "fitness"),
    ],
)
def test_malformed_result_is_crashed(tmp_path, content: str, message: str) -> None:
    (tmp_path / "result.json").write_text(content)
    result = read_result(tmp_path, "evaluate")
    assert result.status == "crashed" and message in result.error["message"]


def test_result_reading_refuses_links_dirs_and_huge_files(tmp_path) -> None:
    assert read_result(tmp_path, "train").error["type"] == "NoResult"
    (tmp_path / "result.json").symlink_to("/etc/passwd")
    assert read_result(tmp_path, "train").status == "crashed"
    (tmp_path / "result.json").unlink()
    (tmp_path / "result.json").mkdir()
    assert read_result(tmp_path, "train").status == "crashed"
    (tmp_path / "result.json").rmdir()
    (tmp_path / "result.json").write_bytes(b" " * (MAX_RESULT_BYTES + 1))
    assert read_result(tmp_path, "train").error["type"] == "BadResult"


def test_only_evaluate_results_carry_fitness(tmp_path) -> None:
    (tmp_path / "result.json").write_text(
        json.dumps({"status": "ok", "fitness": 3.0, "metrics": {"return": 3.0}})
    )
    assert read_result(tmp_path, "evaluate").fitness == 3.0
    assert read_result(tmp_path, "train").fitness is None
    (tmp_path / "result.json").write_text(json.dumps({"status": "ok", "episodes": {"return": [1.0, 2.0]}}))
    assert read_result(tmp_path, "evaluate").episodes == {"return": [1.0, 2.0]}
    assert read_result(tmp_path, "train").episodes == {}


def test_an_evaluate_result_needs_the_seal_of_its_key(tmp_path) -> None:
    key = new_key()
    honest = {"status": "ok", "fitness": -3.0, "metrics": {"return": -3.0}}
    (tmp_path / "result.json").write_text(json.dumps(seal(honest, key)))
    assert read_result(tmp_path, "evaluate", key).fitness == -3.0
    forgeries = [
        {**seal(honest, key), "fitness": 1e9},  # the genuine seal on a changed result
        seal({**honest, "fitness": 1e9}, new_key()),  # sealed with another key
        {**honest, "fitness": 1e9},  # no seal at all
    ]
    for forged in forgeries:
        (tmp_path / "result.json").write_text(json.dumps(forged))
        result = read_result(tmp_path, "evaluate", key)
        assert result.status == "crashed" and result.error["type"] == "ForgedResult"


class LeavesAnOkResult(Sandbox):
    """A backend whose runner leaves a well-formed `ok` result.json, then ends with STATUS."""

    kind = "fake"

    def __init__(self, status: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.status = status

    def _launch_runner(self, job_dir, limits, key=None) -> ScriptResult:
        (job_dir / "result.json").write_text(json.dumps({"status": "ok", "metrics": {}}))
        return ScriptResult(self.status, 0 if self.status == "ok" else 1, "", "boom\n", 0.0)

    def _launch(self, command, job_dir, limits) -> ScriptResult:
        raise NotImplementedError

    def _job_path_inside(self, job_dir, name) -> str:
        return str(job_dir / name)

    def close(self) -> None:
        """Nothing held."""

    def _kill_running(self) -> None:
        """Nothing runs."""


@pytest.mark.parametrize(("ended", "status"), [("ok", "ok"), ("error", "crashed"), ("killed", "crashed")])
def test_a_runner_that_did_not_exit_0_leaves_no_result(tmp_path, ended: str, status: str) -> None:
    sandbox = LeavesAnOkResult(ended, work_dir=tmp_path)
    result = sandbox.run_job(Job(kind="validate", code=VALID, env=ENV, limits=LIMITS))
    assert result.status == status
    if status == "crashed":
        assert result.error["type"] == "RunnerFailed" and "boom" in result.error["message"]


def test_result_cache_roundtrip_and_transient_failures(tmp_path) -> None:
    cache = ResultCache(tmp_path)
    key = cache_key("code", {"kind": "train"}, 0)
    assert (
        key != cache_key("code", {"kind": "train"}, 1) != cache_key("code2", {"kind": "train"}, 0)
    )
    cache.put(key, JobResult(status="ok", fitness=1.5, metrics={"return": 1.5}))
    hit = cache.get(key)
    assert hit is not None and hit.cached and hit.fitness == 1.5
    timeout_key = cache_key("code", {"kind": "train"}, 2)
    cache.put(timeout_key, JobResult.failure("timeout", "Timeout", "slow machine"))
    assert cache.get(timeout_key) is None
    gone_key = cache_key("code", {"kind": "train"}, 3)
    cache.put(gone_key, JobResult(status="ok", policy_dir=str(tmp_path / "deleted")))
    assert cache.get(gone_key) is None


def test_run_job_cache_and_events(tmp_path) -> None:
    events: list[tuple[str, dict]] = []
    sandbox = get_sandbox(
        "process", cache_dir=tmp_path, events=lambda event, **f: events.append((event, f))
    )
    first = sandbox.run_job(
        Job(kind="validate", code=VALID, env=ENV, limits=LIMITS, candidate_id="0-1")
    )
    assert first.status == "ok" and not first.cached
    second = sandbox.run_job(
        Job(kind="validate", code=VALID, env=ENV, limits=LIMITS, candidate_id="0-1")
    )
    assert second.cached and second.metrics == first.metrics
    assert [e for e, _ in events] == ["job_started", "job_finished"] * 2
    assert events[1][1] == {
        "job_id": events[1][1]["job_id"],
        "kind": "validate",
        "candidate_id": "0-1",
        "status": "ok",
        "cached": False,
        **first.timing(),  # where the job's seconds went (the run's time breakdown)
        "group_of": 1,  # the jobs that shared its sandbox: it ran alone
    }
    assert first.run_s > 0 and first.elapsed_s > first.run_s
    assert events[3][1]["cached"] is True and "elapsed_s" not in events[3][1]  # a hit cost nothing


def test_bad_inputs_fail_with_one_line_errors() -> None:
    with pytest.raises(ValueError, match="wall_s"):
        Limits(wall_s=0)
    with pytest.raises(ValueError, match=r"Job\.kind"):
        Job(kind="deploy", code=None)
    with pytest.raises(ValueError, match="policy_dir"):
        Job(kind="evaluate", code=None)
    with pytest.raises(ValueError, match="steps"):
        Job(kind="train", code=None)
    with pytest.raises(ValueError, match="sandbox kind"):
        get_sandbox("vm")
    with pytest.raises(ValueError, match="unknown Job fields"):
        Job.from_dict({"kind": "validate", "code": None, "gpu": True})
    job = Job(kind="validate", code=VALID, limits=Limits(wall_s=5))
    assert Job.from_dict(job.to_dict()) == job


def test_tmp_tmpfs_is_a_bounded_share_of_memory() -> None:
    assert Limits(mem_mb=4096).tmp_mb == 256
    assert Limits(mem_mb=128).tmp_mb == 32  # 256 MB of tmpfs pages would OOM a 128 MB sandbox
    assert Limits(mem_mb=128, tmp_mb=16).tmp_mb == 16
    with pytest.raises(ValueError, match=r"tmp_mb must be between 1 and mem_mb \* 0.25 = 32"):
        Limits(mem_mb=128, tmp_mb=64)
    limits = Limits(mem_mb=256)
    assert Limits(**limits.to_dict()) == limits


def test_auto_falls_back_loudly_without_docker(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    with pytest.raises(SandboxUnavailable, match="no Docker daemon"):
        get_sandbox("docker")
    sandbox = get_sandbox("auto")
    assert sandbox.kind == "process"
    assert "WARNING" in capsys.readouterr().err


def test_missing_image_is_never_pulled(docker_sandbox) -> None:
    from lero.sandbox import image

    with pytest.raises(SandboxUnavailable, match=r"lero-sandbox:missing not found locally.*lero sandbox build"):
        image.require_image(docker_sandbox.client, "lero-sandbox:missing")


def test_containers_of_dead_owners_are_reaped(docker_sandbox) -> None:
    from lero.sandbox.docker_backend import LABEL, OWNER_LABEL

    orphan = docker_sandbox.client.containers.create(
        docker_sandbox.image,
        ["python", "-c", "pass"],
        labels={LABEL: "1", OWNER_LABEL: f"{socket.gethostname()}:999999999"},
    )
    live = docker_sandbox.client.containers.create(
        docker_sandbox.image,
        ["python", "-c", "pass"],
        labels={LABEL: "1", OWNER_LABEL: f"{socket.gethostname()}:{os.getpid()}"},
    )
    try:
        assert docker_sandbox.reap() >= 1
        remaining = {
            c.id for c in docker_sandbox.client.containers.list(all=True, filters={"label": LABEL})
        }
        assert orphan.id not in remaining and live.id in remaining
    finally:
        live.remove(force=True)


def test_docker_failure_during_a_job_is_crashed_not_raised(sandbox_image, tmp_path) -> None:
    import docker

    from lero.sandbox.docker_backend import DockerSandbox

    sandbox = DockerSandbox(work_dir=tmp_path)
    sandbox.client = docker.DockerClient(
        base_url=f"unix://{tmp_path}/daemon-gone.sock", version="1.41"
    )
    result = sandbox.run_job(Job(kind="validate", code=VALID, env=ENV, limits=LIMITS))
    assert result.status == "crashed" and result.error["type"] == "SandboxUnavailable"


def test_evaluate_refuses_a_linked_missing_or_foreign_policy(tmp_path) -> None:
    """The weights' folder comes from the run's state or result cache: the host reads it only
    inside its own job directories, and there never through a link."""
    jobs = tmp_path / "jobs"
    sandbox = get_sandbox("process", work_dir=jobs)
    (jobs / "linked").symlink_to("/etc")
    (jobs / "policy").mkdir()
    (jobs / "policy" / "policy.pt").symlink_to("/etc/passwd")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "policy.pt").write_bytes(b"weights")  # a plain file, outside
    for policy_dir in (jobs / "linked", jobs / "policy", jobs / "missing", tmp_path / "foreign"):
        result = sandbox.run_job(
            Job(kind="evaluate", code=None, env=ENV, policy_dir=str(policy_dir))
        )
        assert result.status == "crashed" and result.error["type"] == "NoPolicy"
    assert "not a job directory of this sandbox" in result.error["message"]
