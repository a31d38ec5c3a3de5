"""Both backends with the default, relative run directory, as `lero run` uses it from a project dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from lero.sandbox import Limits, get_sandbox
from tests.sandbox.test_contract import VALID
from tests.sandbox.test_jobs import job


@pytest.mark.parametrize("kind", ["docker", "process"])
def test_relative_cache_dir_runs_validate_and_train(kind, request, tmp_path, monkeypatch) -> None:
    if kind == "docker":
        request.getfixturevalue("sandbox_image")
    monkeypatch.chdir(tmp_path)
    sandbox = get_sandbox(kind, cache_dir=Path("runs", "r1", "cache"), spares_per_limits=0)
    try:
        assert sandbox.work_dir == tmp_path / "runs" / "r1" / "cache" / "jobs"
        validated = sandbox.run_job(job("validate", VALID))
        assert validated.status == "ok", validated.error
        trained = sandbox.run_job(
            job("train", VALID, steps=2_000, n_envs=8, limits=Limits(wall_s=120, mem_mb=2048))
        )
        assert trained.status == "ok", trained.error
    finally:
        sandbox.close()
    assert Path(trained.policy_dir).is_absolute() and Path(trained.policy_dir).is_dir()
    assert len(list((tmp_path / "runs" / "r1" / "cache").glob("*.json"))) == 2  # both cached
