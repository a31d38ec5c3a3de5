"""Sandbox fixtures: real Docker (its image built by `sandbox_image`, tests/conftest.py) and the
process backend."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def docker_sandbox(sandbox_image, tmp_path_factory):
    from lero.sandbox.docker_backend import DockerSandbox

    return DockerSandbox(work_dir=tmp_path_factory.mktemp("docker-jobs"), max_parallel=4)


@pytest.fixture(scope="session")
def process_sandbox(tmp_path_factory):
    from lero.sandbox.process_backend import ProcessSandbox

    return ProcessSandbox(work_dir=tmp_path_factory.mktemp("process-jobs"), max_parallel=4)


@pytest.fixture(params=["docker", "process"])
def sandbox(request):
    return request.getfixturevalue(f"{request.param}_sandbox")


@pytest.fixture(scope="session")
def custom_env(tmp_path_factory) -> dict:
    """A working-directory PettingZoo env (tests/support/proof_env.py), as a confirmed job names it."""
    from tests.support.envs import proof_env_source

    directory = tmp_path_factory.mktemp("custom-env")
    (directory / "attack_gather_env.py").write_text(proof_env_source())
    return {"name": "attack_gather_env:make_env", "import_root": str(directory)}


@pytest.fixture(scope="session")
def docker_env_sandbox(sandbox_image, custom_env, tmp_path_factory):
    """The Docker backend as a run on a custom env gets it: on that env's image layer."""
    from lero.sandbox.backends import local_sandbox

    sandbox = local_sandbox("docker", work_dir=tmp_path_factory.mktemp("docker-env-jobs"), max_parallel=4,
                            env=custom_env, progress=lambda line: None,
                            spares_per_limits=0)  # no warm container for the attack suite to find
    assert sandbox.image.startswith("lero-sandbox-env:")
    return sandbox
