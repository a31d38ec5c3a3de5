"""Sandbox fixtures: real Docker (skipped without daemon/image unless CI=true) and the process backend."""

from __future__ import annotations

import os

import pytest
import torch
from lero.sandbox.types import SandboxUnavailable

torch.set_num_threads(1)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but the Docker sandbox is unavailable: {reason}")
    pytest.skip(f"Docker sandbox unavailable: {reason}")


@pytest.fixture(scope="session")
def docker_sandbox(tmp_path_factory):
    try:
        from lero.sandbox.docker_backend import DockerSandbox

        return DockerSandbox(work_dir=tmp_path_factory.mktemp("docker-jobs"), max_parallel=4)
    except (SandboxUnavailable, ImportError) as error:
        _unavailable(str(error))


@pytest.fixture(scope="session")
def process_sandbox(tmp_path_factory):
    from lero.sandbox.process_backend import ProcessSandbox

    return ProcessSandbox(work_dir=tmp_path_factory.mktemp("process-jobs"), max_parallel=4)


@pytest.fixture(params=["docker", "process"])
def sandbox(request):
    return request.getfixturevalue(f"{request.param}_sandbox")
