"""Results of finished jobs on disk, keyed by what they compute, so resumed runs never redo them.

A cache entry decides a fitness without any job running, and a cache folder is a file a run
directory copied in from elsewhere (or a person's editor) can hold, so an entry counts only
with proof that this installation wrote it: `{"key", "result", "seal"}`, the seal being
`sandbox.seal`'s HMAC over the key and the result with a `CacheSigner`'s key, derived from a
secret the caller keeps outside every runs directory (graph.trust's run key). An entry
without it (forged, edited, copied from another installation, or of an older lero) is a
miss, said once per cache (`on_untrusted`); so is anything that is not a regular file of at
most `MAX_ENTRY_BYTES`, read without following links and without blocking on a FIFO.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lero.sandbox.jobs import TOO_SLOW
from lero.sandbox.results import MAX_RESULT_BYTES, read_capped
from lero.sandbox.seal import is_sealed, seal
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


MAX_ENTRY_BYTES = 2 * MAX_RESULT_BYTES  # a result as read back from its job, with the host's fields
CACHE_PURPOSE = b"lero result cache"  # the signer's key is derived for this use only


class CacheSigner:
    """Seals and checks cache entries with a key derived from SECRET (never the secret
    itself: a spec signature made with it proves nothing here)."""

    def __init__(self, secret: bytes) -> None:
        self.key = hmac.new(secret, CACHE_PURPOSE, hashlib.sha256).hexdigest().encode()

    def entry(self, key: str, result: dict[str, Any]) -> dict[str, Any]:
        """The sealed entry for RESULT under KEY (sealed as it reads back: JSON round-tripped)."""
        return seal(json.loads(json.dumps({"key": key, "result": result})), self.key)

    def holds(self, key: str, entry: Any) -> bool:
        """Whether ENTRY (parsed) is one this signer sealed under KEY."""
        return isinstance(entry, dict) and entry.get("key") == key and isinstance(entry.get("result"), dict) \
            and is_sealed(entry, self.key)


# for callers that keep no installation key: what they write holds within this process only
PROCESS_SIGNER = CacheSigner(secrets.token_bytes(32))


class ResultCache:
    """One sealed JSON file per key in `directory`; writes are atomic (rename).

    `on_untrusted(path)` is called for the first entry of this cache that is refused (not
    provably this installation's, not a regular file, too large): its job runs again."""

    def __init__(self, directory: str | os.PathLike, signer: CacheSigner = PROCESS_SIGNER,
                 on_untrusted: Callable[[Path], None] | None = None) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.signer = signer
        self.on_untrusted = on_untrusted
        self._told = False

    def get(self, key: str) -> JobResult | None:
        path = self.directory / f"{key}.json"
        try:
            raw = read_capped(path, MAX_ENTRY_BYTES)
        except FileNotFoundError:
            return None
        except OSError:  # a link (O_NOFOLLOW), no permission
            raw = None
        try:
            entry = json.loads(raw) if raw is not None else None
        except (ValueError, RecursionError):
            entry = None
        if not self.signer.holds(key, entry):
            self._untrusted(path)
            return None
        try:
            result = JobResult.from_dict(entry["result"])
        except TypeError:
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
            json.dump(self.signer.entry(key, {**result.to_dict(), "cached": False}), handle)
        os.replace(temp_path, self.directory / f"{key}.json")

    def _untrusted(self, path: Path) -> None:
        if not self._told and self.on_untrusted is not None:
            self._told = True
            self.on_untrusted(path)
