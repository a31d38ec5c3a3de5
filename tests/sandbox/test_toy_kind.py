"""A job kind declared in this test module alone, with its own inputs, outputs and seal,
run through the Docker backend and the Ray executor: the package is not touched.

The runner imports this file inside the sandbox (the host ships it read-only,
`Sandbox.ship_kind`), where only lero and the standard library exist: everything else is
imported inside the tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from lero.sandbox.jobs import Inside
from lero.sandbox.result_checks import checked_fitness
from lero.sandbox.types import Input, Job, JobKind, Limits, Outputs, ResultField, register_kind

try:
    import pytest
except ImportError:  # inside the sandbox
    pytest = None

NOTE = "note.txt"
TOY_LIMITS = Limits(wall_s=300, mem_mb=1024)


def write_note(job: Job, inside: Inside) -> dict[str, Any]:
    """toy_write: leaves out/note.txt (kept), and junk beside it and in the job dir (not kept).
    It also claims a fitness, which an unsealed kind cannot give."""
    out = inside.job_dir / "out"
    out.mkdir()
    (out / NOTE).write_text(json.dumps({"seed": job.seed}))
    (out / "junk.bin").write_bytes(b"x" * 1000)
    (inside.job_dir / "scratch.txt").write_text("not an output")
    return {"status": "ok", "metrics": {"seed": float(job.seed)}, "fitness": 99.0}


def score_note(job: Job, inside: Inside) -> dict[str, Any]:
    """toy_score (sealed): reads the note the host copied in, then takes the host's key."""
    note = json.loads((Path(job.policy_dir) / NOTE).read_text())
    key = inside.take_key()
    return {"status": "ok", "metrics": {"key_digits": float(len(key))}, "fitness": note["seed"] + 0.5}


WRITE = register_kind(JobKind("toy_write", f"{__name__}:write_note", source=__file__,
                              outputs=Outputs("out", (NOTE,)), limits=TOY_LIMITS))  # fmt: skip
SCORE = register_kind(JobKind("toy_score", f"{__name__}:score_note", source=__file__, fields=frozenset({"policy_dir"}),
                              inputs=(Input("policy_dir", "toy_in", NOTE, required=True),), sealed=True,
                              result_fields=(ResultField("fitness", checked_fitness),), limits=TOY_LIMITS))  # fmt: skip


def checked_note(raw: Any) -> dict[str, str]:
    """toy_info's own check of its result field: exactly {"note": a string of at most 40 characters}."""
    if not (isinstance(raw, dict) and set(raw) == {"note"} and isinstance(raw["note"], str) and len(raw["note"]) <= 40):
        raise ValueError("toy info must be {note: a string of at most 40 characters}")
    return raw


def report_note(job: Job, inside: Inside) -> dict[str, Any]:
    """toy_info: an honest note at seed 0; at any other, what forging code would write there
    (a dict, so a check of the type alone would pass it)."""
    return {"status": "ok", "metrics": {}, "info": {"note": "hello"} if job.seed == 0 else {"note": "x" * 500, "verdict": "accept"}}


INFO = register_kind(JobKind("toy_info", f"{__name__}:report_note", source=__file__,
                             result_fields=(ResultField("info", checked_note),), limits=TOY_LIMITS))  # fmt: skip
REPO = Path(__file__).resolve().parents[2]


def run_toy_pair(sandbox: Any) -> tuple[Any, Any]:
    """A toy_write job, then a toy_score job on what it left."""
    written = sandbox.run_job(Job(kind=WRITE.name, code=None, seed=3))
    assert written.status == "ok", written.error
    scored = sandbox.run_job(Job(kind=SCORE.name, code=None, policy_dir=written.policy_dir))
    return written, scored


def assert_toy_pair(written: Any, scored: Any) -> None:
    folder = Path(written.policy_dir)
    assert folder.name == "out" and sorted(p.name for p in folder.parent.rglob("*")) == sorted(["out", NOTE])  # only the output
    assert json.loads((folder / NOTE).read_text()) == {"seed": 3}
    assert written.fitness is None and written.metrics == {"seed": 3.0}  # not its to give
    assert scored.status == "ok", scored.error
    assert scored.fitness == 3.5  # read from the copied input, accepted under the seal
    assert scored.metrics == {"key_digits": 64.0}  # the host sent its key: the kind is sealed
    assert scored.policy_dir is None  # no outputs: nothing kept


def test_the_kinds_declaration_is_checked() -> None:
    assert Job(kind=WRITE.name, code=None).limits == TOY_LIMITS  # the kind's default limits
    with pytest.raises(ValueError, match="the toy_score Job needs policy_dir"):
        Job(kind=SCORE.name, code=None)
    with pytest.raises(ValueError, match="the toy_write Job takes no policy_dir"):
        Job(kind=WRITE.name, code=None, policy_dir="/x")
    with pytest.raises(ValueError, match="only a sealed kind gives a fitness"):
        JobKind("toy_forger", f"{__name__}:write_note", result_fields=(ResultField("fitness", checked_fitness),))
    with pytest.raises(ValueError, match="another job kind is registered as 'toy_write'"):
        register_kind(JobKind("toy_write", f"{__name__}:score_note", source=__file__))


def test_a_toy_result_counts_only_with_its_seal(tmp_path: Path) -> None:
    from lero.sandbox.harness import RESULT_FILE
    from lero.sandbox.results import read_result
    from lero.sandbox.seal import new_key, seal

    key, result = new_key(), {"status": "ok", "metrics": {}, "fitness": 7.0}
    (tmp_path / RESULT_FILE).write_text(json.dumps(result))
    assert read_result(tmp_path, SCORE.name, key).error["type"] == "ForgedResult"
    (tmp_path / RESULT_FILE).write_text(json.dumps(seal(result, key)))
    assert read_result(tmp_path, SCORE.name, key).fitness == 7.0


def run_runner(job_dir: Path, kind: str, kinds_dir: Path) -> dict[str, Any]:
    """The real runner process on a job.json naming KIND; its result.json."""
    data = {**Job(kind=WRITE.name, code=None).to_dict(), "kind": kind}
    (job_dir / "job.json").write_text(json.dumps(data))
    subprocess.run([sys.executable, "-m", "lero.sandbox.harness", str(job_dir), "--kinds", str(kinds_dir)],
                   cwd=REPO, check=True, timeout=120)  # fmt: skip
    return json.loads((job_dir / "result.json").read_text())


def test_job_json_picks_only_a_module_the_host_shipped(tmp_path: Path) -> None:
    """A kind name that leads out of the kinds folder, or a module there that does not
    register the kind, runs nothing of it: the job ends as crashed."""
    kinds, job_dir, marker = tmp_path / "kinds", tmp_path / "job", tmp_path / "ran"
    kinds.mkdir()
    job_dir.mkdir()
    planted = f"open({str(marker)!r}, 'w')\n"
    (tmp_path / "evil.py").write_text(planted)
    result = run_runner(job_dir, "../evil", kinds)
    assert result["error"]["type"] == "InvalidJob" and "Job.kind must be one of" in result["error"]["message"]
    (kinds / "fly.py").write_text("x = 1\n")
    result = run_runner(job_dir, "fly", kinds)
    assert result["error"]["type"] == "InvalidJob" and "does not register the job kind 'fly'" in result["error"]["message"]
    assert not marker.exists()


if pytest is not None:

    def test_the_raw_surface_runs_a_command_on_files(sandbox) -> None:
        """`Sandbox.run(command, files, limits)`: what every kind rides on, on both backends."""
        command = ["python", "-c", "import os; print(open('data/in.txt').read()[::-1], os.listdir('.'))"]
        result = sandbox.run(command, {"data/in.txt": b"abc"}, Limits(wall_s=120, mem_mb=512))
        assert result.status == "ok" and result.stdout.strip() == "cba ['data']", result.stderr
        with pytest.raises(ValueError, match="files named inside the job directory"):
            sandbox.run(command, {"../out.txt": b""})

    def test_a_toy_kinds_result_field_is_taken_only_through_its_own_check(process_sandbox) -> None:
        """The host runs the check the kind declares with its field, whatever the field."""
        honest = process_sandbox.run_job(Job(kind=INFO.name, code=None, seed=0))
        assert honest.status == "ok" and honest.info == {"note": "hello"}, honest.error
        forged = process_sandbox.run_job(Job(kind=INFO.name, code=None, seed=1))
        assert forged.status == "crashed" and forged.info == {}
        assert forged.error["type"] == "BadResult" and "toy info must be {note:" in forged.error["message"]
        assert "\n" not in forged.error["message"]

    @pytest.mark.docker
    def test_a_toy_kind_runs_in_docker(sandbox_image, tmp_path) -> None:
        """A Docker backend of its own, without warm spares: none is left for the next test to find."""
        from lero.sandbox.docker_backend import DockerSandbox

        sandbox = DockerSandbox(work_dir=tmp_path, spares_per_limits=0)
        try:
            assert_toy_pair(*run_toy_pair(sandbox))
            shipped = sandbox.kinds_dir / f"{SCORE.name}.py"
            assert shipped.read_bytes() == Path(__file__).read_bytes() and shipped.stat().st_mode & 0o777 == 0o644
        finally:
            sandbox.close()

    @pytest.mark.docker
    @pytest.mark.slow
    def test_a_toy_kind_runs_on_a_ray_cluster(sandbox_image, tmp_path) -> None:
        """Two nodes on loopback, the Docker backend on each; the kind travels with the task,
        its input to the node and its output back."""
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        ray = pytest.importorskip("ray")
        from ray.cluster_utils import Cluster

        from lero.sandbox import get_sandbox

        node = {"num_cpus": 1, "memory": 3 * 2**30, "object_store_memory": 100 * 2**20}
        cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        events: list[tuple[str, dict]] = []
        try:
            sandbox = get_sandbox("docker", work_dir=tmp_path / "jobs", executor="ray", ray_address=cluster.address,
                                  events=lambda event, **fields: events.append((event, fields)), spares_per_limits=0)
            written, scored = run_toy_pair(sandbox)
            sandbox.close()
        finally:
            ray.shutdown()
            cluster.shutdown()
        assert_toy_pair(written, scored)
        assert Path(written.policy_dir).is_relative_to(tmp_path / "jobs")  # shipped back to the host
        placed = [fields["kind"] for event, fields in events if event == "job_placed"]
        assert placed == [WRITE.name, SCORE.name]  # each ran as a Ray task on a node
