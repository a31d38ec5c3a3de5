"""A watchdog on the job directory's total size: RLIMIT_FSIZE caps one file, this caps all.

Polled (DISK_POLL_S), so a writer can overshoot the cap by what it writes in one poll
interval before it is killed; per-file size is capped exactly by RLIMIT_FSIZE.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

DISK_POLL_S = 0.2


def disk_usage(root: Path) -> int:
    """Bytes actually allocated under `root` (sparse files count what they use)."""
    total = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total


class DiskWatch:
    """Calls `kill()` once if `root` grows past `limit_bytes`; `exceeded` tells afterwards."""

    def __init__(self, root: Path, limit_bytes: int, kill: Callable[[], None]) -> None:
        self.exceeded = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(root, limit_bytes, kill), daemon=True)

    def __enter__(self) -> DiskWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self, root: Path, limit_bytes: int, kill: Callable[[], None]) -> None:
        while not self._stop.wait(DISK_POLL_S):
            if disk_usage(root) > limit_bytes:
                self.exceeded.set()
                kill()
                return
