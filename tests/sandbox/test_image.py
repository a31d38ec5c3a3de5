"""The sandbox image: its root filesystem from every kind of Python install, and its lifecycle."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from lero.sandbox import image
from lero.sandbox.image import INPUTS_LABEL, REPO_ROOT, image_inputs, image_site, image_state

LIBTORCH = "torch/lib/libtorch_cpu.so"
PROBE = (
    "import json, torch\nfrom lero.sandbox import image\n"
    "files = {k: str(v) for k, v in image.rootfs_files(lambda m: None).items()}\n"
    "print(json.dumps([str(image.image_site()), torch.__file__, image.__file__, files]))"
)


def assert_each_file_once(files: dict[str, str], site: str, host_dirs: list[Path]) -> None:
    """No file twice (the venv bug: ldd's copy at the host path), torch where the image imports it."""
    sources = Counter(files.values())
    assert [source for source, n in sources.items() if n > 1] == []
    assert [dest for dest in files if dest.endswith(LIBTORCH)] == [f"{site}/{LIBTORCH}"]
    assert f"{site}/numpy/__init__.py" in files
    for host_dir in host_dirs:  # nothing at a venv / user-site path the image never imports
        assert [dest for dest in files if dest.startswith(f"{host_dir}/")] == []
    assert [dest for dest in files if dest.startswith(f"{tempfile.gettempdir()}/")] == []


def test_rootfs_files_of_this_interpreter_each_file_once() -> None:
    files = {dest: str(source) for dest, source in image.rootfs_files(lambda message: None).items()}
    host_dirs = [Path(sys.prefix)] if sys.prefix != sys.base_prefix else []
    assert_each_file_once(files, str(image_site()), host_dirs)


def _package_dirs() -> list[Path]:
    """The site directories this interpreter imports its packages from, in import order: a
    venv's own, the base installation's, the user's; whichever of them pip filled."""
    dirs = [Path(entry) for entry in sys.path if Path(entry).name in ("site-packages", "dist-packages")]
    return [directory for directory in dict.fromkeys(dirs) if directory.is_dir()]


def _install_like(site_dir: Path) -> None:
    """Site-packages holding every package this interpreter imports (links), as `pip install`
    into it would; the first of a name wins, as on this interpreter's path."""
    site_dir.mkdir(parents=True, exist_ok=True)
    for directory in _package_dirs():
        for entry in directory.iterdir():
            link = site_dir / entry.name
            if not entry.name.startswith(("lero", "__editable__")) and not os.path.lexists(link):
                link.symlink_to(entry)


def _imports_the_runtime(python: Path, env: dict[str, str]) -> bool:
    probe = f"import importlib\nfor name in {image.RUNTIME_MODULES!r}: importlib.import_module(name)"
    return subprocess.run([python, "-c", probe], env=env, capture_output=True).returncode == 0


@pytest.mark.parametrize(
    "layout",
    [
        "venv-under-tmp",
        pytest.param("user-site", marks=pytest.mark.slow),
        pytest.param("system", marks=pytest.mark.slow),
    ],
)
def test_rootfs_files_from_each_kind_of_install(layout: str, tmp_path: Path) -> None:
    base_python = Path(sys._base_executable)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    code = tmp_path / "code" / "lero"  # lero itself, importable from any interpreter
    code.mkdir(parents=True)
    for package in ("sandbox", "training"):
        (code / package).symlink_to(REPO_ROOT / package)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(code.parent), "HOME": str(tmp_path)}
    python, host_dirs = base_python, []
    if layout == "venv-under-tmp":
        venv = tmp_path / "venv"
        subprocess.run([base_python, "-m", "venv", "--without-pip", venv], check=True)
        _install_like(venv / "lib" / version / "site-packages")
        python, host_dirs = venv / "bin" / "python", [venv]
    elif layout == "user-site":
        env["PYTHONUSERBASE"] = str(tmp_path / "user")
        _install_like(tmp_path / "user" / "lib" / version / "site-packages")
        host_dirs = [tmp_path / "user"]
    elif not _imports_the_runtime(base_python, env):
        # Running from a venv whose base installation has no packages of its own: a system
        # install would mean writing into that installation, which a test does not do.
        pytest.skip(f"{base_python} has no runtime packages of its own (only this venv has)")
    output = subprocess.run(
        [python, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300
    )
    assert output.returncode == 0, output.stderr[-2000:]
    site, torch_file, image_file, files = json.loads(output.stdout.splitlines()[-1])
    assert site == str(image_site())
    assert Path(image_file).resolve().is_relative_to(REPO_ROOT)  # this checkout's builder
    if host_dirs:  # the packages really came from the venv / the user site
        assert Path(torch_file).is_relative_to(host_dirs[0])
    assert_each_file_once(files, site, host_dirs)


@pytest.fixture
def throwaway_image(sandbox_image, monkeypatch):
    """make(label) -> tag of an image committed from the sandbox image with that inputs label.

    Every image it made (also one a rebuild left untagged) is removed afterwards.
    """
    import docker

    client = image.docker_client()
    container = client.containers.create(sandbox_image, ["true"])
    repository = f"lero-sandbox-test-{secrets.token_hex(4)}"
    made: list[str] = []  # tags, then image ids

    def make(label: str) -> str:
        tag = str(len(made))
        committed = container.commit(repository, tag, conf={"Labels": {INPUTS_LABEL: label}})
        made.extend([f"{repository}:{tag}", committed.id])
        monkeypatch.setattr(image, "image_tag", lambda mode="offline": f"{repository}:{tag}")
        return f"{repository}:{tag}"

    yield client, make
    container.remove(force=True)
    for name in made:
        with contextlib.suppress(docker.errors.ImageNotFound):
            client.images.remove(name, force=True)


def test_image_state_decides_rebuild_from_the_label(throwaway_image, monkeypatch) -> None:
    client, make = throwaway_image
    inputs = image_inputs("offline")
    make(json.dumps(inputs))
    assert image_state(client).status == "current"
    older = {
        **inputs,
        "distributions": [d for d in inputs["distributions"] if not d.startswith("torch==")],
    }
    make(json.dumps({**older, "distributions": [*older["distributions"], "torch==2.0.0"]}))
    state = image_state(client)
    assert state.status == "stale" and "torch==2.0.0" in state.detail
    make(json.dumps({**inputs, "lero": "0.0.1"}))
    assert image_state(client).status == "stale"
    make("")  # built before images were labelled
    assert image_state(client).status == "stale"
    monkeypatch.setattr(image, "image_tag", lambda mode="offline": "lero-sandbox-test-never-built:1")
    assert image_state(client).status == "missing"


def test_the_tag_is_the_digest_of_the_inputs(monkeypatch) -> None:
    tag = image.image_tag()
    assert tag.startswith(f"{image.IMAGE_REPO}:") and len(tag.split(":")[1]) == 12
    assert image.image_tag("dockerfile") != tag
    monkeypatch.setattr(image, "RUNTIME_DISTRIBUTIONS", (*image.RUNTIME_DISTRIBUTIONS, "packaging"))
    assert image.image_tag() != tag  # another package set (another venv) gets another tag


@pytest.mark.slow
def test_a_stale_image_under_another_inputs_tag_is_rebuilt_once_leaving_a_running_container_alone(
    sandbox_image, monkeypatch
) -> None:
    """Another venv's package set (here: one distribution more) builds under its own tag. An
    image under that tag from other inputs (here another lero version) is stale, so it is
    built again, once; the image a running container uses keeps its tag and the container
    keeps running. (One real build proves both: a build is the dearest step of the suite.)"""
    client = image.docker_client()
    running = client.containers.run(
        sandbox_image, ["python", "-c", "import time; time.sleep(900)"], detach=True,
        network_disabled=True,
    )  # fmt: skip
    monkeypatch.setattr(image, "RUNTIME_DISTRIBUTIONS", (*image.RUNTIME_DISTRIBUTIONS, "packaging"))
    other = image.image_tag()
    source = client.containers.create(sandbox_image, ["true"])
    stale = source.commit(*other.split(":"), conf={"Labels": {INPUTS_LABEL: json.dumps({**image_inputs("offline"), "lero": "0.0.1"})}})
    source.remove(force=True)
    try:
        lines: list[str] = []
        assert other != sandbox_image
        assert image_state(client).status == "stale"
        assert image.ensure_image(log=lines.append, client=client).status == "stale"
        assert "building it now" in lines[0] and "image size" in lines[-1] and other in lines[-1]
        assert image_state(client).status == "current"
        built = len(lines)
        assert image.ensure_image(log=lines.append, client=client).status == "current" and len(lines) == built
        assert client.containers.run(other, ["python", "-c", "import torch, numpy, packaging"], remove=True) == b""
        running.reload()
        assert running.status == "running"
        assert running.exec_run(["python", "-c", "import torch"]).exit_code == 0
        monkeypatch.undo()  # back to this venv's inputs: its image is still there and current
        assert image.image_tag() == sandbox_image
        assert image_state(client).status == "current"
        assert {sandbox_image, other} <= {t for i in client.images.list(name="lero-sandbox") for t in i.tags}
    finally:
        running.remove(force=True)
        for name in (other, stale.id):
            with contextlib.suppress(Exception):
                client.images.remove(name, force=True)


@pytest.mark.docker
def test_containers_run_the_image_the_sandbox_found_even_when_its_tag_moves(throwaway_image, tmp_path) -> None:
    """The backend pins its image by ID when it starts: an image tagged over the same name
    afterwards (here one whose ENV says so) is never what a job runs in."""
    from lero.sandbox.docker_backend import DockerSandbox

    client, make = throwaway_image
    tag = make("pinned")
    sandbox = DockerSandbox(image=tag, work_dir=tmp_path, spares_per_limits=0)
    try:
        env = client.images.get(tag).attrs["Config"]["Env"]
        container = client.containers.create(tag, ["true"])
        try:
            moved = container.commit(*tag.split(":"), conf={"Env": [*env, "LERO_RETAGGED=1"]})
        finally:
            container.remove(force=True)
        assert client.images.get(tag).id == moved.id  # the name now says another image
        result = sandbox.run_script("import os; print(os.environ.get('LERO_RETAGGED'))")
        assert result.status == "ok" and result.stdout.strip() == "None", result
    finally:
        sandbox.close()
        with contextlib.suppress(Exception):
            client.images.remove(moved.id, force=True)


def _blocked_on(lock: Path, pid: int) -> bool:
    """Does PID wait for a flock on LOCK? (/proc/locks lists each waiter as `-> FLOCK ...`)."""
    inode = f":{os.stat(lock).st_ino} "
    return any(
        "-> FLOCK" in line and f" {pid} " in line and inode in line
        for line in Path("/proc/locks").read_text().splitlines()
    )


def test_ensure_image_waits_for_another_process_build_and_does_not_repeat_it(
    sandbox_image, monkeypatch
) -> None:
    client = image.docker_client()
    repository = f"lero-sandbox-test-{secrets.token_hex(4)}"
    monkeypatch.setattr(image, "image_tag", lambda mode="offline": f"{repository}:built-by-another")
    holder = subprocess.Popen(  # another process, in the middle of a build: it holds the lock
        [sys.executable, "-c", "import fcntl, sys\nlock = open(sys.argv[1], 'a')\n"
         "fcntl.flock(lock, fcntl.LOCK_EX)\nprint('locked', flush=True)\nsys.stdin.readline()",
         str(image.BUILD_LOCK)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    container = client.containers.create(sandbox_image, ["true"])
    lines: list[str] = []
    found: list[image.ImageState] = []
    waiter = threading.Thread(target=lambda: found.append(image.ensure_image(lines.append, client)))
    try:
        assert holder.stdout.readline() == "locked\n"
        waiter.start()
        for _ in range(6000):  # until this process waits on the lock (no timing asserted)
            if _blocked_on(image.BUILD_LOCK, os.getpid()):
                break
            time.sleep(0.05)
        assert waiter.is_alive() and lines == []
        labels = {INPUTS_LABEL: json.dumps(image_inputs("offline"), sort_keys=True)}
        container.commit(repository, "built-by-another", conf={"Labels": labels})  # its build
        holder.communicate("done\n", timeout=60)
        waiter.join(timeout=600)
        assert [state.status for state in found] == ["missing"]  # as found before waiting
        assert lines == []  # it found the other process's build under the lock: no second build
        assert image_state(client).status == "current"
    finally:
        holder.kill()
        container.remove(force=True)
        with contextlib.suppress(Exception):
            client.images.remove(f"{repository}:built-by-another", force=True)


def test_without_a_daemon_the_docker_tests_skip_with_one_reason(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["DOCKER_HOST"] = f"unix://{tmp_path}/no-daemon.sock"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
         "tests/sandbox/test_attacks.py", "-k", "sleep_forever or memory_bomb and docker"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    *_, stats, last = run.stdout.strip().splitlines()
    assert "passed" in stats and "4 skipped" in stats  # on the base image and on a custom env's layer
    assert last.startswith("4 Docker tests (the attack suite among them) skipped: no Docker daemon")
    assert "sudo systemctl start docker" in last


def test_check_says_which_backend_a_run_would_use(sandbox_image, monkeypatch, tmp_path) -> None:
    from lero.sandbox.check import check

    report = check()
    assert list(report) == ["daemon", "backend", "image", "smoke"]
    assert report["backend"] == (
        True,
        "a run would use Docker: the daemon answers, the image is current",
    )
    assert report["smoke"][0], report["smoke"]
    monkeypatch.setattr(image, "image_tag", lambda mode="offline": "lero-sandbox-test-never-built:1")
    assert check()["backend"] == (True, "a run would use Docker after building the image (missing)")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    report = check()
    assert report["daemon"][0] is False and "PROCESS" in report["backend"][1]


def test_the_dockerfile_sets_the_offline_images_environment() -> None:
    """A Dockerfile cannot import `IMAGE_ENV` (nor `types.JOB_PROCESS_ENV` in it), so it
    restates it: both build modes must give every job the same environment."""
    text = (image.DOCKERFILE_DIR / "Dockerfile").read_text()
    block = text[text.index("\nENV ") + len("\nENV "):].split("\n\n")[0]
    entries = [line.strip().rstrip("\\").strip() for line in block.splitlines()]
    assert dict(entry.split("=", 1) for entry in entries if entry) == image.IMAGE_ENV
