"""Session-wide: the test command builds the Docker sandbox image itself, and starts the
real model server for the `real_llm` tests.

`python -m pytest` on a fresh machine with a Docker daemon builds (or rebuilds, when
stale) the sandbox image (`lero-sandbox:<digest>`) once and runs the Docker tests, the attack suite included.
Without a daemon they skip with one reason, repeated in one line at the end of the run.
The `real_llm` tests share one llama.cpp server per model (SmolLM2-135M, Gemma 3 270M,
n_ctx 2048) for the session; without the `llm-test` extra they skip with one line (under CI=true they fail).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from lero.sandbox.image import START_DOCKER_HINT
from lero.sandbox.types import SandboxUnavailable

if TYPE_CHECKING:
    from lero.graph.runner import RunOutcome

NO_DAEMON = "no Docker daemon answered"
# Runs in tests confirm nothing unless they ask (RunSpec.confirm_steps' default, which their
# worker processes inherit): a confirmation trains 2 arms x 3 seeds more, which only
# tests/graph/test_confirm.py needs.
os.environ.setdefault("LERO_CONFIRM_STEPS", "0")


@pytest.fixture(scope="session", autouse=True)
def installation_key(tmp_path_factory) -> None:
    """The spec-signing key (graph.trust.key_path) of this test session, not the user's."""
    os.environ.setdefault("LERO_KEY_FILE", str(tmp_path_factory.mktemp("lero-config") / "run-key"))


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@pytest.fixture(scope="session")
def sandbox_image(request) -> str:
    """The sandbox image, built now when missing or stale; skips every user without a daemon."""
    from lero.sandbox.image import docker_client, ensure_image, image_tag

    try:
        client = docker_client()
    except SandboxUnavailable as error:
        if in_ci():
            pytest.fail(f"CI=true but {NO_DAEMON}: {error}")
        pytest.skip(f"{NO_DAEMON} (how to run them: the last line of this run)")
    capture = request.config.pluginmanager.getplugin("capturemanager")

    def progress(message: str) -> None:
        with capture.global_and_fixture_disabled():
            print(f"\n[sandbox image] {message}", flush=True)

    try:
        ensure_image(log=progress, client=client)
    except SandboxUnavailable as error:
        pytest.fail(f"a Docker daemon answers but the sandbox image could not be built: {error}")
    return image_tag()


@pytest.fixture(scope="session")
def tiny_docker_run(tmp_path_factory) -> RunOutcome:
    """One tiny offline run (tests/graph/test_graph_e2e.py's TINY: 1 generation of 2
    candidates, run id `t`) in the Docker sandbox, made once for the tests that only read what
    it left: a Docker run is the dearest loop, and these tests check different things of one."""
    from lero.graph.runner import start_run
    from tests.graph.test_graph_e2e import RecordingUI, _docker_or_skip, spec

    _docker_or_skip()
    return start_run(spec(tmp_path_factory.mktemp("docker-run"), sandbox="docker"), RecordingUI())


def _real_server(tmp_path_factory, model: str):
    from tests.support.llama_server import LlamaServer, missing_extra

    reason = missing_extra(model)
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI=true but the real-model tests cannot run: {reason}")
        pytest.skip(reason)
    with LlamaServer(tmp_path_factory.mktemp("llama") / "server.log", n_ctx=2048, model=model) as server:
        yield server


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """The real model server (SmolLM2-135M), started once per session and stopped at its end."""
    yield from _real_server(tmp_path_factory, "smollm2-135m")


@pytest.fixture(scope="session")
def gemma_server(tmp_path_factory):
    """The second real model (Gemma 3 270M, a base model) on its own server, once per session."""
    yield from _real_server(tmp_path_factory, "gemma3-270m")


@pytest.fixture(params=["llama_server", "gemma_server"], ids=["smollm2", "gemma3"])
def real_server(request):
    """Each real model in turn."""
    return request.getfixturevalue(request.param)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items) -> None:
    """Under pytest-xdist, each module's tests and the modules sharing a dear session fixture
    on one worker (tests/support/workers.py)."""
    from tests.support.workers import mark_worker_groups

    mark_worker_groups(items)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    """The run's last line: why the Docker tests did not run, and how to run them."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    from tests.support.llama_server import INSTALL_HINT

    no_model = [r for r in reporter.stats.get("skipped", []) if INSTALL_HINT in str(r.longrepr)]
    if no_model:
        reporter.write_line(f"{len(no_model)} real-model tests (real_llm) skipped: {INSTALL_HINT}", yellow=True)
    skipped = [r for r in reporter.stats.get("skipped", []) if NO_DAEMON in str(r.longrepr)]
    if skipped:
        reporter.write_line(
            f"{len(skipped)} Docker tests (the attack suite among them) skipped: {NO_DAEMON}; "
            f"{START_DOCKER_HINT} and rerun: the test command builds the image itself",
            yellow=True,
            bold=True,
        )
