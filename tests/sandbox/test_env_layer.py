"""A custom env's image layer (`sandbox.env_layer`): what goes in, reuse and rebuild by
digest, the one-line stop where Docker cannot serve an env, `lero sandbox check --env`,
and the adapter's worker count inside a job."""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from lero.sandbox.env_layer import (
    DIGEST_LABEL,
    ENV_IMAGE_REPO,
    ENV_ROOT,
    EnvNotServed,
    _dist_files,
    base_image_id,
    ensure_env_layer,
    plan_layer,
)
from lero.sandbox.image import image_site
from tests.support.envs import layered_venv, pip_install, proof_env_source, write_wheel


def module_env(directory: Path, name: str = "gather_env", source: str | None = None) -> dict:
    """A working-directory module env, as a confirmed job names it."""
    (directory / f"{name}.py").write_text(source or proof_env_source())
    return {"name": f"{name}:make_env", "import_root": str(directory)}


@pytest.fixture
def client(sandbox_image):
    from lero.sandbox.image import docker_client

    return docker_client()


def test_the_layer_holds_the_module_and_the_requirements_the_base_lacks(client, tmp_path: Path) -> None:
    env = module_env(tmp_path)
    (tmp_path / "secrets.txt").write_text("API_KEY=not-for-the-image")
    (tmp_path / "other.py").write_text("x = 1\n")
    layer = plan_layer(env, base_image_id(client))
    assert layer.import_root == ENV_ROOT
    outside_site = [dest for dest in layer.files if not dest.startswith(str(image_site()))]
    assert outside_site == [f"{ENV_ROOT}/gather_env.py"]  # nothing else of the working directory
    entries = {Path(dest).relative_to(image_site()).parts[0] for dest in layer.files if dest not in outside_site}
    assert {"pettingzoo", "gymnasium"} <= entries
    assert not {"torch", "numpy", "lero"} & entries  # in the base image, or mounted


def test_a_layer_is_reused_until_its_inputs_change(client, tmp_path: Path) -> None:
    env = module_env(tmp_path, "reuse_env")
    lines: list[str] = []
    first = ensure_env_layer(env, client, lines.append)
    assert lines[0].startswith(f"building {first.image}") and client.images.get(first.image)
    assert client.images.get(first.image).labels[DIGEST_LABEL] == first.digest
    lines.clear()
    assert ensure_env_layer(env, client, lines.append).image == first.image and lines == []
    module_env(tmp_path, "reuse_env", proof_env_source() + "\nCHANGED = True\n")
    second = ensure_env_layer(env, client, lines.append)
    assert second.digest != first.digest and lines[0].startswith(f"building {second.image}")
    tags = [tag for image in client.images.list(name=ENV_IMAGE_REPO) for tag in image.tags]
    assert second.image in tags and first.image not in tags  # the stale layer is gone
    client.images.remove(second.image)


def test_a_dependency_with_a_console_script_named_like_its_package(client, tmp_path: Path) -> None:
    """Launched by a console script (`lero run`), Python puts the script's `bin/` first on
    sys.path. A dependency's own script there, named like its package (tabulate 0.10's
    `bin/tabulate` beside `tabulate/`), was placed in site-packages as a file where the
    package's directory goes, and Docker refused the layer (`open .../tabulate/__init__.py:
    not a directory`). Only the distribution's files inside site-packages belong in it."""
    python = layered_venv(tmp_path / "venv")
    package = {"tiny_clash/__init__.py": 'MARK = "dependency-inside"\n\ndef main():\n    pass\n'}
    scripts = "[console_scripts]\ntiny_clash = tiny_clash:main\n"
    pip_install(python, write_wheel(tmp_path, "tiny-clash", package, entry_points=scripts))
    assert (tmp_path / "venv" / "bin" / "tiny_clash").is_file()
    work = tmp_path / "work"
    work.mkdir()
    env = module_env(work, "clash_env", proof_env_source("tiny_clash"))
    launcher = tmp_path / "venv" / "bin" / "build-layer"  # a console script, as pip writes `lero`
    launcher.write_text(
        f"#!{python}\nimport json, sys\nfrom lero.sandbox.env_layer import ensure_env_layer\n"
        "from lero.sandbox.image import docker_client\n"
        "print(ensure_env_layer(json.loads(sys.argv[1]), docker_client(), print).image)\n"
    )
    launcher.chmod(0o755)
    done = subprocess.run([str(launcher), json.dumps(env)], cwd=work, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    layer = done.stdout.strip().splitlines()[-1]
    try:
        probe = "import tiny_clash; print(tiny_clash.MARK)"
        assert client.containers.run(layer, ["python", "-c", probe], remove=True) == b"dependency-inside\n"
    finally:
        client.images.remove(layer, force=True)


def broken_compiled_dependency(directory: Path) -> Path:
    """An installed distribution whose RECORD lists a compiled file that is not there."""
    site = directory / "site"
    (site / "brokenext").mkdir(parents=True)
    (site / "brokenext" / "__init__.py").write_text("MARK = 1\n")
    info = site / "brokenext-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenext\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("brokenext\n")
    (info / "RECORD").write_text("brokenext/__init__.py,,\nbrokenext/_speed.cpython-311-x86_64-linux-gnu.so,,\n"
                                 "brokenext-1.0.dist-info/RECORD,,\n")
    return site


def test_a_missing_compiled_file_is_seen_whichever_metadata_library_found_it(tmp_path: Path) -> None:
    """The importlib_metadata backport (mlflow's import puts its finder first) drops a gone
    file from `Distribution.files`: the check reads RECORD itself, so it still sees it."""
    backport = pytest.importorskip("importlib_metadata")
    site = broken_compiled_dependency(tmp_path)
    for dist in (backport.PathDistribution(site / "brokenext-1.0.dist-info"),
                 metadata.PathDistribution(site / "brokenext-1.0.dist-info")):
        with pytest.raises(EnvNotServed, match=r"brokenext's compiled file brokenext/_speed\..* is missing"):
            _dist_files("broken_env:make_env", dist, [site])


def test_a_missing_compiled_file_stops_the_run_in_one_line(sandbox_image, tmp_path: Path, monkeypatch,
                                                           capsys) -> None:
    from lero.app.cli.main import main

    monkeypatch.syspath_prepend(str(broken_compiled_dependency(tmp_path)))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    module_env(work, "broken_env", proof_env_source("brokenext"))
    code = main(["run", "--env", "broken_env:make_env", "--llm", "offline", "--sandbox", "auto"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "\n" not in err, err
    assert "cannot run in the Docker sandbox" in err and "_speed" in err and "--sandbox process" in err
    assert not (work / "runs").exists()  # stopped before anything was written


def test_sandbox_check_says_which_backend_an_env_gets(client, tmp_path: Path, monkeypatch, capsys) -> None:
    from lero.app.cli.main import main

    monkeypatch.chdir(tmp_path)
    module_env(tmp_path, "checked_env")
    assert main(["sandbox", "check", "--env", "checked_env:make_env"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "env: a run would use Docker on lero-sandbox-env:" in out
    assert main(["sandbox", "check", "--env", "missing_env:make_env"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "FAIL env: env 'missing_env:make_env' cannot run in the Docker sandbox" in out
    assert "--sandbox process" in out


def test_the_docker_backend_names_the_layers_import_root(client, tmp_path: Path) -> None:
    from lero.sandbox.docker_backend import DockerSandbox

    env = module_env(tmp_path)
    layer = ensure_env_layer(env, client, lambda line: None)
    sandbox = DockerSandbox(work_dir=tmp_path / "jobs", image=layer.image, import_root=layer.import_root,
                            spares_per_limits=0)
    try:
        assert sandbox._env_inside({**env, "N": 2}) == {"name": env["name"], "N": 2, "import_root": ENV_ROOT}
        result = sandbox.run_script("import sys; sys.path.insert(0, '/opt/lero-env'); import gather_env, "
                                    "pettingzoo; print(gather_env.make_env().possible_agents)")
        assert result.status == "ok" and "agent_1" in result.stdout, result.stderr
    finally:
        sandbox.close()


@pytest.mark.parametrize(("cpus", "workers"), [(0.5, 1), (1.0, 1), (2.5, 2), (16.0, 4)])
def test_the_adapters_workers_follow_the_jobs_cpu_quota(cpus: float, workers: int) -> None:
    from lero.sandbox.jobs import env_kwargs

    assert env_kwargs({"name": "pkg.mod:make", "N": 3}, cpus) == {"N": 3, "workers": workers}
    assert env_kwargs({"name": "pkg.mod:make", "workers": 3}, cpus)["workers"] == 3
    assert env_kwargs({"name": "simple_spread", "N": 3}, cpus) == {"N": 3}


def test_a_wheel_env_is_found_without_importing_it(client, tmp_path: Path, monkeypatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    wheel = write_wheel(tmp_path, "never-imported", {"never_imported/__init__.py": "raise SystemExit('ran')\n"})
    zipfile.ZipFile(wheel).extractall(site)
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(EnvNotServed, match="no installed package registers"):
        plan_layer({"name": "never_imported_env"}, base_image_id(client))
    layer = plan_layer({"name": "never_imported:make", "import_root": str(site)}, base_image_id(client))
    assert any(dest.endswith("never_imported/__init__.py") for dest in layer.files)


def test_an_hrf_on_a_custom_env_runs_contained(docker_env_sandbox, custom_env, monkeypatch) -> None:
    """A candidate's HRF on a custom env job: in the container, unprivileged, blind to the host."""
    import secrets

    from lero.sandbox.types import Job, Limits

    secret = "sk-" + secrets.token_hex(16)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    leak = ("import os\n\ndef enhance_observation(obs):\n    return obs\n\ndef hybrid_reward(ctx):\n"
            "    pids = len([p for p in os.listdir('/proc') if p.isdigit()])\n"
            "    raise ValueError(f'uid={os.getuid()} cwd={os.getcwd()} pids={pids} env={sorted(os.environ)}')\n")
    job = Job(kind="validate", code=leak, env={**custom_env, "n_agents": 2}, static_check=False,
              limits=Limits(wall_s=60, mem_mb=1024, cpus=1, pids=64))
    result = docker_env_sandbox.run_job(job)
    assert result.status == "code_error", result.error
    message = result.error["message"]
    expected_uid = 10001 if os.geteuid() == 0 else os.getuid()
    assert f"uid={expected_uid} cwd=/job" in message and "OMP_NUM_THREADS" in message
    assert secret not in str(result.to_dict()) and "OPENAI_API_KEY" not in message
    pids = int(message.split("pids=")[1].split()[0])
    assert pids <= 4  # the runner, the adapter's one worker (cpus=1), the OEF worker: no host process
