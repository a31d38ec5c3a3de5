"""The process backend's zygote and in-place confinement (`sandbox.zygote`,
`sandbox.enclosure`), seen from inside a real job: a job kind declared here reports what
its process can see and do, through the real runner forked from the real zygote.

The attack suite (`test_attacks.py`) drives the same confinement through `run_script`,
where the zygote's child execs the command instead of running the runner.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lero.sandbox.jobs import Inside
from lero.sandbox.types import Job, JobKind, Limits, register_kind

try:
    import pytest
except ImportError:  # inside the sandbox
    pytest = None

LIMITS = Limits(wall_s=120, mem_mb=3072, cpus=1, pids=64, disk_mb=64)
HOST_SECRET = "LERO_ZYGOTE_TEST_SECRET"
REPO = Path(__file__).resolve().parents[2]


def _blocked(path: Path) -> float:
    try:
        path.write_text("x")
    except OSError:
        return 1.0
    path.unlink()
    return 0.0


def look_around(job: Job, inside: Inside) -> dict[str, Any]:
    """zygote_look: what the job's own process is and may do, as numbers."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {"status": "ok", "metrics": {
        "torch_already_imported": float("torch" in sys.modules),
        "pid": float(os.getpid()),
        "processes": float(sum(name.isdigit() for name in os.listdir("/proc"))),
        "cap_eff": float(int(status["CapEff"], 16)), "cap_prm": float(int(status["CapPrm"], 16)),
        "cap_bnd": float(int(status["CapBnd"], 16)), "cap_amb": float(int(status["CapAmb"], 16)),
        "no_new_privs": float(status["NoNewPrivs"]),
        "interfaces": float(len(Path("/proc/self/net/dev").read_text().splitlines()) - 2),
        "repo_write_blocked": _blocked(REPO / f"zygote-look-{job.seed}.txt"),
        "tmp_write_blocked": _blocked(Path(f"/tmp/zygote-look-{job.seed}.txt")),
        "job_dir_write_blocked": _blocked(inside.job_dir / "mine.txt"),
        "mem_limit_mb": resource.getrlimit(resource.RLIMIT_AS)[0] / 2**20,
        "cpu_limit_s": float(resource.getrlimit(resource.RLIMIT_CPU)[0]),
        "host_secret_seen": float(HOST_SECRET in os.environ),
        "home_is_job_dir": float(os.environ.get("HOME") == str(inside.job_dir)),
        "open_fds": float(len(os.listdir("/proc/self/fd"))),
    }}  # fmt: skip


LOOK = register_kind(JobKind("zygote_look", f"{__name__}:look_around", source=__file__, limits=LIMITS))


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    from lero.sandbox.process_backend import ProcessSandbox

    monkeypatch.setenv(HOST_SECRET, "the host's")
    box = ProcessSandbox(work_dir=tmp_path / "jobs", max_parallel=2)
    yield box
    box.close()


def test_a_job_forked_from_the_zygote_is_confined_and_starts_with_the_engine_imported(sandbox) -> None:
    assert sandbox.namespaces  # root here, or unprivileged user namespaces
    first, second = (sandbox.run_job(Job(kind=LOOK.name, code=None, seed=seed)) for seed in (1, 2))
    for result in (first, second):
        assert result.status == "ok", result.error
        seen = result.metrics
        assert seen["torch_already_imported"] == 1.0  # forked: a new interpreter would import it first
        assert seen["pid"] == 1.0 and seen["processes"] == 1.0  # PID 1 of its own PID namespace
        assert seen["cap_eff"] == seen["cap_prm"] == seen["cap_bnd"] == seen["cap_amb"] == 0.0
        assert seen["no_new_privs"] == 1.0
        assert seen["interfaces"] == 1.0  # loopback only: its own network namespace
        assert seen["repo_write_blocked"] == seen["tmp_write_blocked"] == 1.0
        assert seen["job_dir_write_blocked"] == 0.0
        assert seen["mem_limit_mb"] == LIMITS.mem_mb and seen["cpu_limit_s"] == LIMITS.wall_s * LIMITS.cpus + 1
        assert seen["host_secret_seen"] == 0.0 and seen["home_is_job_dir"] == 1.0
        assert seen["open_fds"] <= 4  # stdin, stdout, stderr and the listing itself: nothing of the zygote's
    assert not list(REPO.glob("zygote-look-*")) and not list(Path("/tmp").glob("zygote-look-*"))


def test_a_dead_zygote_is_started_again_and_the_next_sandbox_forks_from_the_same_one(sandbox, tmp_path) -> None:
    from lero.sandbox.process_backend import ProcessSandbox

    assert sandbox.run_job(Job(kind=LOOK.name, code=None, seed=3)).status == "ok"
    zygote = sandbox._zygote._process
    zygote.kill()
    zygote.wait()
    assert sandbox.run_job(Job(kind=LOOK.name, code=None, seed=4)).status == "ok"
    restarted = sandbox._zygote._process
    assert restarted.pid != zygote.pid
    sandbox.close()
    later = ProcessSandbox(work_dir=tmp_path / "later")
    try:
        assert later.run_job(Job(kind=LOOK.name, code=None, seed=5)).status == "ok"
        assert later._zygote._process is restarted  # the engine is not imported again
    finally:
        later.close()


def test_the_zygote_goes_with_its_host_and_imports_nothing_from_the_hosts_directory(tmp_path) -> None:
    """A zygote outlives no host (its end of the control socket closes); a module in the
    directory the host ran from (here one that shadows `json`, which the zygote imports) is
    never what the zygote or a job imports."""
    (tmp_path / "json.py").write_text("raise SystemExit('imported from the host directory')\n")
    script = ("from lero.sandbox.process_backend import ProcessSandbox\nbox = ProcessSandbox(work_dir='jobs')\n"
              "result = box.run_script('import json; print(json.dumps(1))')\n"
              "print(result.status, result.stdout.strip(), box._zygote._process.pid)")
    done = subprocess.run([sys.executable, "-P", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    status, printed, pid = done.stdout.split()
    assert (status, printed) == ("ok", "1"), done.stderr
    for _ in range(600):  # until the zygote has read the end of its socket (no timing asserted)
        if not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists()


def test_a_zygote_that_stops_answering_fails_the_job_and_the_next_job_gets_a_new_one(sandbox, monkeypatch) -> None:
    """Stopped (SIGSTOP), the zygote forks nothing: the job fails within the spawn deadline
    instead of hanging before its own wall clock starts, and the next job is served."""
    import signal

    from lero.sandbox import zygote as zygote_module

    assert sandbox.run_job(Job(kind=LOOK.name, code=None, seed=5)).status == "ok"
    stopped = sandbox._zygote._process
    os.kill(stopped.pid, signal.SIGSTOP)
    monkeypatch.setattr(zygote_module, "SPAWN_TIMEOUT_S", 0.5)
    failed = sandbox.run_job(Job(kind=LOOK.name, code=None, seed=6))
    assert failed.status == "crashed" and "did not start the job within 0.5 s" in failed.error["message"]
    assert stopped.poll() == -signal.SIGKILL  # killed, not left stopped
    monkeypatch.undo()
    assert sandbox.run_job(Job(kind=LOOK.name, code=None, seed=7)).status == "ok"
    assert sandbox._zygote._process.pid != stopped.pid


def test_a_zygote_that_never_gets_ready_fails_with_its_deadline(tmp_path, monkeypatch) -> None:
    """A start that hangs (here a `sitecustomize` that sleeps before the engine is imported)
    ends at the ready deadline with one line saying so, and leaves no zygote behind."""
    from lero.sandbox import zygote as zygote_module
    from lero.sandbox.process_backend import JOBS_ENV
    from lero.sandbox.types import SandboxUnavailable

    (tmp_path / "sitecustomize.py").write_text("import time\ntime.sleep(3600)\n")
    monkeypatch.setattr(zygote_module, "READY_TIMEOUT_S", 0.5)
    zygote = zygote_module.Zygote({**JOBS_ENV, "PYTHONPATH": str(tmp_path)})
    try:
        with pytest.raises(SandboxUnavailable, match="not ready within 0.5 s"):
            zygote.spawn({"env": JOBS_ENV, "confinement": {}, "exec": ["true"]})
        assert zygote._process.poll() is not None
    finally:
        zygote.close()


def test_a_job_that_cannot_be_confined_runs_nothing_and_says_why(tmp_path) -> None:
    from lero.sandbox.enclosure import FAILED_SETUP_EXIT, Confinement
    from lero.sandbox.process_backend import JOBS_ENV
    from lero.sandbox.zygote import Zygote

    marker = tmp_path / "ran"
    confinement = Confinement(job_dir=str(tmp_path / "missing"), mem_bytes=2**30, cpu_s=10, nproc=64,
                              fsize_bytes=2**20, namespaces=True)  # fmt: skip
    zygote = Zygote(JOBS_ENV)
    try:
        child = zygote.spawn({"env": JOBS_ENV, "confinement": confinement.to_dict(),
                              "exec": [shutil.which("touch"), str(marker)]})  # fmt: skip
        child.stdin.close()
        assert child.wait(timeout=60) == FAILED_SETUP_EXIT
        assert "could not confine the job" in child.stderr.read().decode()
        assert not marker.exists()
    finally:
        zygote.close()


def test_without_root_the_zygote_maps_a_user_namespace() -> None:
    """The same confinement for an unprivileged caller (nobody), where the kernel allows it."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to become another user")
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
    nested = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import lero.sandbox.zygote'], check=True)"
    readable = subprocess.run([*as_nobody, "-c", nested], capture_output=True, cwd="/")
    if readable.returncode != 0:
        pytest.skip(f"user nobody cannot start this Python with lero: {readable.stderr.decode().strip().splitlines()[-1:]}")
    work = Path(tempfile.mkdtemp(prefix="lero-nobody-"))  # pytest's own tmp is the owner's alone
    try:
        work.chmod(0o777)
        script = (
            "from lero.sandbox.process_backend import ProcessSandbox\n"
            f"box = ProcessSandbox(work_dir={str(work / 'jobs')!r})\n"
            "source = \"import os\\nprint(os.getuid(), os.getpid(), len(open('/proc/self/net/dev').readlines()) - 2)\\n\"\n"
            "result = box.run_script(source)\nbox.close()\nprint(box.namespaces, result.status, result.stdout.strip())\n"
        )
        done = subprocess.run([*as_nobody, "-c", script], capture_output=True, text=True, cwd="/", timeout=300)
    finally:
        shutil.rmtree(work)
    assert done.returncode == 0, done.stderr
    if done.stdout.split()[0] == "False":
        pytest.skip("this kernel gives unprivileged users no user namespaces")
    assert done.stdout.split() == ["True", "ok", "0", "1", "1"]  # root in its namespace, PID 1, loopback only
