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
