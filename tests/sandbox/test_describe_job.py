"""The `describe` job: an env's facts read inside the sandbox are what the host reads of it."""

from __future__ import annotations

import json

from lero.sandbox.types import Job, Limits
from lero.training.envs.registry import describe_env

LIMITS = Limits(wall_s=60, mem_mb=1024, cpus=1, pids=64, output_bytes=8192, disk_mb=64)


def test_a_describe_job_reports_the_envs_facts(sandbox) -> None:
    env = {"name": "simple_speaker_listener"}
    result = sandbox.run_job(Job(kind="describe", code=None, env=env, limits=LIMITS))
    assert result.status == "ok", result.error
    assert result.info == json.loads(json.dumps(describe_env("simple_speaker_listener")))  # as JSON carries it
