"""Results of finished jobs on disk, keyed by what they compute, so resumed runs never redo them."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from lero.sandbox.jobs import TOO_SLOW
from lero.sandbox.types import Job, JobResult

# Failures that say something about the candidate; timeouts, OOMs and crashes may be
# the machine's fault and are retried instead of cached. So is a "too slow" verdict:
# it depends on the machine's load at the time, so a resume measures again.
CACHEABLE_STATUSES = ("ok", "rejected", "code_error", "invalid_output")


def cacheable(result: JobResult) -> bool:
    return result.status in CACHEABLE_STATUSES and (result.error or {}).get("type") != TOO_SLOW


def cache_key(code: str | None, config: dict[str, Any], seed: int) -> str:
    """sha256 of (code, job config, seed), canonical JSON."""
    blob = json.dumps({"code": code, "config": config, "seed": seed}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def job_cache_key(job: Job) -> str:
    """One job's key: what it computes (`Job.config`), the files it measures or continues
    and whether its code was checked; no ids, no limits."""
    return cache_key(
        job.code,
        {**job.config(), "policy_dir": job.policy_dir, "static_check": job.static_check,
         **({"resume_dir": job.resume_dir} if job.resume_dir else {})},
        job.seed,
    )  # fmt: skip


class ResultCache:
    """One JSON file per key in `directory`; writes are atomic (rename)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> JobResult | None:
        path = self.directory / f"{key}.json"
        try:
            result = JobResult.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        if result.policy_dir is not None and not Path(result.policy_dir).is_dir():
            return None  # the weights are gone: the job has to run again
        result.cached = True
        return result

    def put(self, key: str, result: JobResult) -> None:
        if not cacheable(result):
            return
        fd, temp_path = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        with os.fdopen(fd, "w") as handle:
            json.dump({**result.to_dict(), "cached": False}, handle)
        os.replace(temp_path, self.directory / f"{key}.json")
