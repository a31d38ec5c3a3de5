"""The attack suite through `run_script`, against Docker, Docker on a custom env's image
layer (`sandbox.env_layer`: the env's code and its dependencies inside), and the process
backend.

Every attack must end with the expected status within the deadline + 2 s, leave no
container, process or job directory behind, and leave the host untouched.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from pathlib import Path

import pytest

from lero.sandbox.image import REPO_ROOT
from lero.sandbox.types import Limits, ScriptResult

LIMITS = Limits(wall_s=4, mem_mb=256, cpus=1, pids=64, output_bytes=4096, tmp_mb=8, disk_mb=16)
# An attack ends by its deadline, not by its own end (a sleep of 10**6 s) or the test's timeout.
# The margin is a sandbox's start (a zygote importing torch, a container) on a loaded machine:
# the fork bombs beside it have pushed the load past 100.
DEADLINE_MARGIN_S = 30

# The attacks, as scripts: run as they are here, and as the HRF/OEF of a whole run on a
# custom env (tests/graph/test_custom_env_attacks.py).
FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
# The same bomb holding every pid the limit allows, but waiting between failed forks: for a
# proof that waits out a long deadline (a run's job timeout) without spinning a core all along
IDLE_FORK_BOMB = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(1)\n"
MEMORY_BOMB = "blocks = []\nwhile True:\n    blocks.append(bytearray(10**7))\n"
NETWORK_EXTERNAL = (
    "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 80), timeout=2)\n    print('CONNECTED')\n"
    "except OSError as error:\n    print('blocked', error)\n"
)
SECRET_SNOOP = (
    "import os\nprint(dict(os.environ))\n"
    "for pid in [p for p in os.listdir('/proc') if p.isdigit()] + ['self', str(os.getppid())]:\n"
    "    try:\n        print(open(f'/proc/{pid}/environ', 'rb').read())\n"
    "    except OSError as error:\n        print(pid, error)\n"
)
PROC_SYS_SNOOP = (
    "import os\npids = [p for p in os.listdir('/proc') if p.isdigit()]\nprint('pids', len(pids))\n"
    "for pid in pids:\n    try:\n        print(open(f'/proc/{pid}/cmdline', 'rb').read())\n"
    "    except OSError:\n        pass\nprint('net', sorted(os.listdir('/sys/class/net')))\n"
)


def loopback_attack(port: int) -> str:
    """Connect to a listener on the host's loopback, bridge and hostname at PORT; print CONNECTED on success."""
    targets = ["127.0.0.1", "172.17.0.1", socket.gethostname()]
    return (
        "import socket\n"
        f"for host in {targets!r}:\n"
        "    try:\n"
        f"        socket.create_connection((host, {port}), timeout=1).sendall(b'exfiltrated')\n"
        "        print('CONNECTED', host)\n"
        "    except OSError as error:\n"
        "        print('blocked', host, error)\n"
    )


def write_attack(targets: list[str]) -> str:
    """Write 'pwned' to each of TARGETS; print WROTE on success, else blocked and the errno."""
    return (
        f"for path in {targets!r}:\n"
        "    try:\n        open(path, 'a').write('pwned')\n        print('WROTE', path)\n"
        "    except OSError as error:\n        print('blocked', path, error.errno)\n"
    )


def code_and_host_targets(token: str) -> list[str]:
    """Where an attack would plant code: the image's lero, this checkout's, /etc (the last two on the host)."""
    return [f"/opt/lero/training/pwn_{token}.py", str(REPO_ROOT / "training" / f"pwn_{token}.py"), f"/etc/pwn_{token}"]


class Listener:
    """A TCP listener on all the host's addresses that records whatever reaches it."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("0.0.0.0", 0))
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.socket.accept()
            except TimeoutError:
                continue
            self.received.append(connection.recv(100) or b"<connected>")
            connection.close()

    def __enter__(self) -> Listener:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.socket.close()


@pytest.fixture(params=["docker", "docker_env", "process"])
def sandbox(request):
    return request.getfixturevalue(f"{request.param}_sandbox")


def leftovers(sandbox) -> list[str]:
    """Containers of this sandbox (one of its job dirs mounted) but its idle spares, or
    processes working inside its job dirs. Another session sandbox's spares in this process
    are that sandbox's, whichever module's tests ran before."""
    work_dir = str(sandbox.work_dir)
    if sandbox.kind == "docker":
        from lero.sandbox.docker_backend import OWNER_LABEL, _owner

        found = sandbox.client.containers.list(
            all=True, filters={"label": f"{OWNER_LABEL}={_owner()}"}
        )
        idle = sandbox.idle_spares()
        return [c.name for c in found if c.id not in idle and mounts_a_job_dir_of(c, sandbox.work_dir)]
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd").startswith(work_dir):
                found.append(pid)
        except OSError:
            continue
    return found


def mounts_a_job_dir_of(container, work_dir) -> bool:
    """Whether CONTAINER's /job is a folder inside WORK_DIR (a path test, not a prefix of
    text: /tmp/jobs-a must not claim /tmp/jobs-ab's containers)."""
    return any(mount["Destination"] == "/job" and Path(mount["Source"]).is_relative_to(work_dir)
               for mount in container.attrs["Mounts"])


def run_attack(sandbox, source: str, limits: Limits = LIMITS) -> ScriptResult:
    """SOURCE run in SANDBOX (a session's, shared with other modules' tests): it ends by the
    deadline and leaves no process, container or file in the job dirs (what was there before
    it, such as another test's copied policy, is not the attack's)."""
    before = set(Path(sandbox.work_dir).iterdir())
    started = time.monotonic()
    result = sandbox.run_script(source, limits)
    assert time.monotonic() - started <= limits.wall_s + DEADLINE_MARGIN_S, result
    assert leftovers(sandbox) == []
    spare_dirs = set(sandbox.idle_spares().values()) if sandbox.kind == "docker" else set()
    assert set(Path(sandbox.work_dir).iterdir()) - before <= spare_dirs
    return result


def needs_namespaces(sandbox) -> None:
    if sandbox.kind == "process" and not sandbox.namespaces:
        pytest.skip("process backend without namespaces cannot stop this (docs/sandbox.md)")


def test_fork_bomb(sandbox) -> None:
    if sandbox.kind == "process" and os.geteuid() == 0:
        pytest.skip(
            "as real root RLIMIT_NPROC is not enforced: the process backend cannot stop a fork bomb"
        )
    assert run_attack(sandbox, FORK_BOMB).status == "timeout"


def test_memory_bomb(sandbox) -> None:
    assert run_attack(sandbox, MEMORY_BOMB).status == "oom"


def test_infinite_loop(sandbox) -> None:
    assert run_attack(sandbox, "while True:\n    pass\n").status == "timeout"


def test_sleep_forever(sandbox) -> None:
    assert run_attack(sandbox, "import time\ntime.sleep(10**6)\n").status == "timeout"


def test_stdout_flood_keeps_head_and_tail(sandbox) -> None:
    source = "import sys\nsys.stdout.write('HEAD')\nfor _ in range(300):\n    sys.stdout.write('A' * 65536)\nprint('TAIL')\n"
    result = run_attack(sandbox, source)
    assert result.status == "ok"
    assert result.stdout.startswith("HEAD") and result.stdout.rstrip().endswith("TAIL")
    assert "bytes dropped" in result.stdout
    assert len(result.stdout) <= LIMITS.output_bytes + 100


def test_disk_fill_tmp(sandbox) -> None:
    token = secrets.token_hex(4)
    source = (
        f"written = 0\ntry:\n    with open('/tmp/fill-{token}', 'wb') as f:\n"
        "        while True:\n            f.write(b'x' * 2**20)\n            f.flush()\n            written += 1\n"
        "except OSError as error:\n    print('stopped', written, error.errno)\n"
    )
    result = run_attack(sandbox, source)
    assert result.status == "ok" and result.stdout.startswith("stopped")
    assert int(result.stdout.split()[1]) <= LIMITS.tmp_mb
    assert not Path(f"/tmp/fill-{token}").exists()


def test_tmp_fill_at_small_memory_is_enospc_not_oom(docker_sandbox) -> None:
    """/tmp's tmpfs pages count against the memory limit: filling it must end ENOSPC, not OOM."""
    limits = Limits(wall_s=8, mem_mb=128, cpus=1, pids=64, output_bytes=4096)
    source = "with open('/tmp/fill', 'wb') as f:\n    while True:\n        f.write(b'x' * 2**20)\n        f.flush()\n"
    result = run_attack(docker_sandbox, source, limits)
    assert result.status == "error", result
    assert "No space left on device" in result.stderr or "File too large" in result.stderr


def test_disk_fill_job_dir_many_files(sandbox) -> None:
    source = "n = 0\nwhile True:\n    open(f'fill{n}', 'wb').write(b'x' * 4 * 2**20)\n    n += 1\n"
    result = run_attack(sandbox, source)
    assert result.status == "killed"
    assert "job directory exceeded" in result.stderr


def test_inode_exhaustion_in_job_dir(sandbox) -> None:
    source = "n = 0\nwhile True:\n    open(f'empty{n}', 'w').close()\n    n += 1\n"
    result = run_attack(sandbox, source)
    assert result.status == "killed"
    assert "job directory exceeded" in result.stderr


def test_disk_fill_job_dir_one_file(sandbox) -> None:
    source = (
        "written = 0\ntry:\n    with open('big', 'wb') as f:\n        while True:\n"
        "            f.write(b'x' * 2**20)\n            f.flush()\n            written += 1\n"
        "except OSError as error:\n    print('stopped', written, error.errno)\n"
    )
    result = run_attack(sandbox, source)
    assert result.stdout.startswith("stopped") or result.status == "killed"
    if result.stdout.startswith("stopped"):
        assert int(result.stdout.split()[1]) <= LIMITS.disk_mb


def test_network_to_external_address(sandbox) -> None:
    needs_namespaces(sandbox)
    result = run_attack(sandbox, NETWORK_EXTERNAL)
    assert "blocked" in result.stdout and "CONNECTED" not in result.stdout


def test_network_to_host_loopback_listener(sandbox) -> None:
    needs_namespaces(sandbox)
    with Listener() as listener:
        result = run_attack(sandbox, loopback_attack(listener.port))
    assert "CONNECTED" not in result.stdout
    assert listener.received == []


def test_host_secret_never_enters(sandbox, monkeypatch) -> None:
    needs_namespaces(sandbox)
    secret = "sk-" + secrets.token_hex(16)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("LERO_TEST_SECRET", secret)
    result = run_attack(sandbox, SECRET_SNOOP)
    assert result.status == "ok"
    assert secret not in result.stdout + result.stderr
    assert "LERO_TEST_SECRET" not in result.stdout


def test_writing_to_the_code_and_the_host(sandbox) -> None:
    targets = code_and_host_targets(secrets.token_hex(4))
    result = run_attack(sandbox, write_attack(targets))
    assert "WROTE" not in result.stdout
    assert not any(Path(p).exists() for p in targets[1:])


def test_proc_and_sys_show_no_host_processes(sandbox) -> None:
    needs_namespaces(sandbox)
    result = run_attack(sandbox, PROC_SYS_SNOOP)
    assert result.status == "ok"
    assert int(result.stdout.split()[1]) <= 3  # the script itself (and its namespace init)
    assert "pytest" not in result.stdout
    if sandbox.kind == "docker":
        assert "net ['lo']" in result.stdout


def test_no_privileges_and_setuid_fails(sandbox) -> None:
    source = (
        "import os\nstatus = open('/proc/self/status').read()\n"
        "print([line for line in status.splitlines() if line.startswith(('CapEff', 'CapPrm', 'NoNewPrivs'))])\n"
        "try:\n    os.setuid(0)\n    os.setgid(0)\n    print('uid', os.getuid())\nexcept OSError as error:\n    print('setuid denied', error.errno)\n"
    )
    result = run_attack(sandbox, source)
    assert "CapEff:\\t0000000000000000" in result.stdout
    assert "CapPrm:\\t0000000000000000" in result.stdout
    assert "NoNewPrivs:\\t1" in result.stdout
    if sandbox.kind == "docker":
        assert "setuid denied" in result.stdout


def test_killing_pid_1(sandbox) -> None:
    needs_namespaces(sandbox)
    source = (
        "import os, signal, time\ntry:\n    os.kill(1, signal.SIGKILL)\nexcept OSError as error:\n    print('refused', error)\n"
        "time.sleep(0.3)\nprint('alive')\n"
    )
    result = run_attack(sandbox, source)
    assert result.status == "ok" and "alive" in result.stdout


def test_the_custom_envs_files_are_read_only(docker_env_sandbox) -> None:
    from lero.sandbox.env_layer import ENV_ROOT
    from lero.sandbox.image import image_site

    targets = [f"{ENV_ROOT}/attack_gather_env.py", f"{ENV_ROOT}/pwn.py", f"{image_site()}/pettingzoo/pwn.py"]
    result = run_attack(docker_env_sandbox, write_attack(targets))
    assert result.status == "ok" and result.stdout.count("blocked") == 3, result.stdout
