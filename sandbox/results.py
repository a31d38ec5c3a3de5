"""What the host reads back from a job directory, which candidate code could write to.

result.json is trusted only after the runner exited 0 on its own (the caller checks that),
and then read size-capped, without following links, schema-checked, and for a sealed kind
checked against the job's key (`sandbox.seal`); of the fields beyond every result's, only
those the kind declares (`JobKind.result_fields`) are taken; anything else becomes a `crashed` result,
never a host exception. The outputs a job left (a train job's weights, learner state and
checkpoints: `JobKind.outputs`), and its progress.json, are read the same way; the host only moves weights into other
sandboxed jobs, it never loads them.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lero.sandbox.harness import RESULT_FILE
from lero.sandbox.jobs import CHECKPOINT_PREFIX, GROUP_SEED_PREFIX, PROGRESS_FILE
from lero.sandbox.seal import is_sealed
from lero.sandbox.types import JOB_STATUSES, JobResult, Outputs, kind_of
from lero.training.files import POLICY_FILE
from lero.training.validation import finite_number

MAX_RESULT_BYTES = 16 * 2**20
MAX_POLICY_BYTES = 64 * 2**20
MAX_PROGRESS_BYTES = 4096


def _check_schema(data: Any, kind: str) -> JobResult:
    """result.json of a KIND job -> JobResult, or ValueError naming the first thing wrong."""
    if not isinstance(data, dict) or data.get("status") not in JOB_STATUSES:
        raise ValueError("no valid 'status'")
    error = data.get("error")
    if error is not None and not (
        isinstance(error, dict)
        and all(isinstance(error.get(k), str) for k in ("type", "message", "traceback"))
    ):
        raise ValueError("'error' must be {type, message, traceback} strings")
    metrics = data.get("metrics", {})
    if not isinstance(metrics, dict) or not all(
        isinstance(k, str) and finite_number(v) for k, v in metrics.items()
    ):
        raise ValueError("'metrics' must map names to finite numbers")
    curves = data.get("curves", {})
    if not isinstance(curves, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(finite_number(x) for x in v)
        for k, v in curves.items()
    ):
        raise ValueError("'curves' must map names to lists of finite numbers")
    if not isinstance(data.get("reflection_stats", {}), dict):
        raise ValueError("'reflection_stats' must be a dict")
    run_s = data.get("elapsed_s", 0.0)  # the runner's own clock; only shown, never trusted
    if not finite_number(run_s) or run_s < 0:
        raise ValueError("'elapsed_s' must be a finite number >= 0")
    declared = {f.name: f.check(data[f.name]) for f in kind_of(kind).result_fields if f.name in data}
    return JobResult(
        status=data["status"],
        error=error,
        metrics=metrics,
        curves=curves,
        reflection_stats=data.get("reflection_stats", {}),
        run_s=float(run_s),
        **declared,
    )


def read_capped(path: Path, max_bytes: int) -> bytes | None:
    """PATH's bytes, opened without following links; None unless a regular file <= max_bytes.

    For files candidate code, or whoever copied a run directory, could have written (a FIFO
    opens without blocking and is refused); OSError if it cannot be opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        data = handle.read(max_bytes + 1)
    return data if len(data) <= max_bytes else None  # grew after the fstat


def read_result(job_dir: Path, kind: str, key: bytes | None = None) -> JobResult:
    """Read JOB_DIR/result.json defensively; every problem becomes a `crashed` result.

    With KEY (a sealed kind's jobs) the result must carry the runner's seal made with it: a
    result.json the candidate wrote is `crashed` (ForgedResult), whatever it claims.
    """
    data = _read_sealed(job_dir, key)
    if isinstance(data, JobResult):
        return data
    try:
        return _check_schema(data, kind)
    except (ValueError, TypeError, RecursionError) as error:
        return _malformed(error)


def read_group_result(job_dir: Path, kind: str, seeds: list[int], key: bytes | None = None) -> list[JobResult]:
    """A group job's result.json (`JobKind.groups`; sealed as a whole with
    KEY where its kind is), read once like `read_result`: one result per seed, in SEEDS' order; a failure (or
    anything malformed) is every seed's."""
    data = _read_sealed(job_dir, key)
    try:
        whole = data if isinstance(data, JobResult) else _check_schema(data, kind)
        if whole.status != "ok":
            return [JobResult.from_dict(whole.to_dict()) for _ in seeds]
        entries = data.get("group")
        if not isinstance(entries, list) or [e.get("seed") if isinstance(e, dict) else None for e in entries] != seeds:
            raise ValueError(f"'group' must hold one entry per seed {seeds}")
        results = [_check_schema(entry, kind) for entry in entries]
    except (ValueError, TypeError, RecursionError) as error:
        return [_malformed(error) for _ in seeds]
    for result in results:
        result.run_s = whole.run_s / len(seeds)  # the runner's clock, shared
    return results


def _read_sealed(job_dir: Path, key: bytes | None) -> Any:
    """JOB_DIR/result.json parsed (capped, no links, sealed with KEY when given), or the
    `crashed` result saying why not."""
    try:
        raw = read_capped(job_dir / RESULT_FILE, MAX_RESULT_BYTES)
    except OSError as error:
        return JobResult.failure(
            "crashed", "NoResult", f"the runner left no readable {RESULT_FILE} ({error.strerror})"
        )
    if raw is None:
        return JobResult.failure(
            "crashed",
            "BadResult",
            f"{RESULT_FILE} is not a regular file <= {MAX_RESULT_BYTES} bytes",
        )
    try:
        data = json.loads(raw)
        if key is not None and not is_sealed(data, key):
            return JobResult.failure(
                "crashed", "ForgedResult", f"{RESULT_FILE} does not carry this job's seal"
            )
    except (ValueError, TypeError, RecursionError) as error:
        return _malformed(error)
    return data


def _malformed(error: BaseException) -> JobResult:
    return JobResult.failure("crashed", "BadResult", f"malformed {RESULT_FILE}: {error}"[:500])


def read_policy(policy_dir: Path, name: str = POLICY_FILE) -> bytes | JobResult:
    """The weights (or, NAME=LEARNER_FILE, the learner state) a train job left: its
    directory was writable by the candidate, so no links, capped. The host only moves
    these bytes into other sandboxed jobs; it never loads them."""
    try:
        if policy_dir.is_symlink():
            raise OSError("policy_dir is a symlink")
        policy = read_capped(policy_dir / name, MAX_POLICY_BYTES)
    except OSError as error:
        return JobResult.failure("crashed", "NoPolicy", f"no {name} in {policy_dir}: {error}")
    if policy is None:
        return JobResult.failure(
            "crashed",
            "NoPolicy",
            f"{name} is not a regular file <= {MAX_POLICY_BYTES} bytes",
        )
    return policy


_CHECKPOINT_DIR = re.compile(rf"^{re.escape(CHECKPOINT_PREFIX)}([0-9]{{1,12}})$")


def checkpoint_dirs(policy_dir: str | Path) -> dict[int, Path]:
    """env steps -> folder of each interval checkpoint a train job left beside its final
    weights (`policy/step-<n>/`), in step order."""
    found = {}
    for entry in Path(policy_dir).iterdir():
        match = _CHECKPOINT_DIR.match(entry.name)
        if match:
            found[int(match.group(1))] = entry
    return dict(sorted(found.items()))


def output_folder(job_dir: Path, outputs: Outputs, seed: int | None) -> Path:
    """Where a job leaves its outputs (a group's seed SEED: its own folder under them)."""
    folder = job_dir / outputs.folder
    return folder if seed is None else folder / f"{GROUP_SEED_PREFIX}{seed}"


def kept_files(folder: Path, outputs: Outputs) -> list[Path]:
    """The files of FOLDER the host keeps: the declared ones, and those matching `also`
    (links and folders among them are for the caller to refuse)."""
    found = [path for path in folder.rglob("*") if not path.is_dir() or path.is_symlink()]
    also = [p for p in found if any(fnmatch.fnmatch(p.relative_to(folder).as_posix(), g) for g in outputs.also)]
    return [folder / name for name in outputs.files] + sorted(also)


def read_outputs(folder: Path, outputs: Outputs) -> dict[str, bytes] | JobResult:
    """The kept files of FOLDER (`kept_files`) by their path in it, each read like the
    weights (`read_policy`: no links, capped); a missing or bad one fails them all. Their
    total is bounded by the job directory's cap (`Limits.disk_mb`)."""
    files = {}
    for path in kept_files(folder, outputs):
        read = read_policy(path.parent, path.name)
        if isinstance(read, JobResult):
            return read
        files[path.relative_to(folder).as_posix()] = read
    return files


Progress = tuple[int, int, float | None]  # done steps, total steps, latest training return


def read_progress(job_dir: Path) -> Progress | None:
    """JOB_DIR/progress.json as (done, total, return); None for anything unexpected.

    The runner writes it in a directory candidate code can write to, so it is read like
    result.json: without following links, regular files only, size-capped,
    schema-checked, and never raising: a bad file only means no progress to show.
    """
    try:
        raw = read_capped(job_dir / PROGRESS_FILE, MAX_PROGRESS_BYTES)
        data = json.loads(raw) if raw is not None else None
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    done, total, latest = data.get("done"), data.get("total"), data.get("return")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (done, total)):
        return None
    return done, total, float(latest) if finite_number(latest) else None


class ProgressRelay:
    """Poller tick: calls `report(done=, total=, return=)` whenever JOB_DIR/progress.json changed."""

    def __init__(self, job_dir: Path, report: Callable[..., None]) -> None:
        self.job_dir = job_dir
        self.report = report
        self.last: Progress | None = None

    def __call__(self) -> None:
        progress = read_progress(self.job_dir)
        if progress is None or progress == self.last:
            return
        self.last = progress
        done, total, latest = progress
        self.report(done=done, total=total, **{"return": latest})
