"""A watchdog on the job directory's total size: RLIMIT_FSIZE caps one file, this caps all.

It also caps the number of entries (MAX_ENTRIES): empty files cost no blocks but do
exhaust the host filesystem's inodes.

Polled (DISK_POLL_S), so a writer can overshoot the cap by what it writes in one poll
interval before it is killed; per-file size is capped exactly by RLIMIT_FSIZE.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from lero.sandbox.poller import Poller

DISK_POLL_S = 0.2
MAX_ENTRIES = 1_000  # a job needs ~5 (job.json, result.json, policy/)


def over_limit(root: Path, limit_bytes: int) -> bool:
    """True as soon as `root` holds more than MAX_ENTRIES entries or `limit_bytes` allocated."""
    allocated, entries = 0, 0
    for dirpath, dirnames, filenames in os.walk(root):
        entries += len(dirnames) + len(filenames)
        if entries > MAX_ENTRIES:
            return True
        for name in filenames:
            try:
                allocated += os.lstat(os.path.join(dirpath, name)).st_blocks * 512  # sparse-aware
            except OSError:
                continue
    return allocated > limit_bytes


def allocated_bytes(root: Path) -> int:
    """What ROOT's files take on disk (blocks, so sparse files count what they really use)."""
    total = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total


def exceeded_note(disk_mb: int) -> bytes:
    """The line a backend appends to stderr when it killed a run for its job directory."""
    return f"\n[sandbox] job directory exceeded {disk_mb} MB or {MAX_ENTRIES} entries: killed\n".encode()


class DiskWatch(Poller):
    """Calls `kill()` once if `root` grows past `limit_bytes`; `exceeded` tells afterwards."""

    def __init__(self, root: Path, limit_bytes: int, kill: Callable[[], None]) -> None:
        self.exceeded = threading.Event()

        def check() -> bool:
            if not over_limit(root, limit_bytes):
                return False
            self.exceeded.set()
            kill()
            return True

        super().__init__(DISK_POLL_S, check)
