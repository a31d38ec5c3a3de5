"""What a page parsed from a run directory, kept while the directory's files are unchanged.

A lab shares one `lero ui` across people and tabs over hundreds of runs; parsing every run's
events.jsonl and result.json files on each request made pages contend under a lab's load
(benchmarks.ui_load).
A value is reused only while the run's *fingerprint* holds. The engine writes every run file
but one by a temp file and a rename (graph.safefs.write_atomic), which gives the file a new
inode and moves its folder's mtime; events.jsonl alone grows in place. So the fingerprint is
cheap: each entry of the run folder and of its sub-folders by name, kind and inode (readdir
gives them without a stat), the mtime of every folder down to a candidate's (so a rename in
any of them shows: a candidate's own files are seen only that way, unlisted), and
events.jsonl's size and mtime. Inodes also tell a run copied in with its mtimes kept. A planted symlink is a new entry of
another kind. A fingerprint whose newest mtime is within RACY_NS of the clock is not trusted
(two renames within one timestamp tick could leave a folder's mtime as it was): that run is
parsed afresh until it has been still that long, so a run being written is never stale.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Generic, TypeVar

from starlette.concurrency import run_in_threadpool

from lero.graph.rundir import CACHE_DIR, CHECKPOINT_FILE, EVENTS_FILE, LLM_DIR

Value = TypeVar("Value")
Fingerprint = tuple[tuple[str, int, int], ...]  # (relative path, inode or kind, size or mtime_ns)
RACY_NS = 2_000_000_000  # 2 s: far above any file system's timestamp granularity
UNREAD = (CACHE_DIR, "tensorboard", LLM_DIR, CHECKPOINT_FILE)  # no page part reads these (nor -wal, -shm)
LINK = -1  # the kind of an entry that is a symlink


def fingerprint(run_dir: Path, now_ns: int | None = None) -> Fingerprint | None:
    """The run folder as described above; None when it cannot be listed or was written
    within RACY_NS of NOW_NS (not to be trusted yet)."""
    entries: list[tuple[str, int, int]] = []
    mtimes: list[int] = []
    try:
        mtimes.append(os.lstat(run_dir).st_mtime_ns)
        for entry in _listing(run_dir):
            if entry.name.startswith(UNREAD):
                continue
            if entry.is_dir(follow_symlinks=False):
                mtimes.append(entry.stat(follow_symlinks=False).st_mtime_ns)
                entries.append((f"{entry.name}/", entry.inode(), mtimes[-1]))
                for inner in _listing(entry.path):
                    name = f"{entry.name}/{inner.name}"
                    if inner.is_dir(follow_symlinks=False):  # a candidate's folder: a rename inside moves its mtime
                        mtimes.append(inner.stat(follow_symlinks=False).st_mtime_ns)
                        entries.append((name, inner.inode(), mtimes[-1]))
                    else:
                        entries.append((name, LINK if inner.is_symlink() else inner.inode(), 0))
            elif entry.name == EVENTS_FILE and not entry.is_symlink():  # appended in place
                info = entry.stat(follow_symlinks=False)
                mtimes.append(info.st_mtime_ns)
                entries.append((entry.name, info.st_ino, info.st_size))
            else:
                entries.append((entry.name, LINK if entry.is_symlink() else entry.inode(), 0))
    except OSError:
        return None
    if (now_ns if now_ns is not None else time.time_ns()) - max(mtimes) < RACY_NS:
        return None
    return (("", 0, mtimes[0]), *sorted(entries))


def _listing(folder: str | Path) -> list[os.DirEntry]:
    with os.scandir(folder) as listing:
        return list(listing)


class RunCache(Generic[Value]):
    """Up to LIMIT values by (run directory, kind), each kept with its fingerprint.
    Thread-safe: pages build values in the threadpool; two threads that miss together
    both build (the same value), neither waits on the other."""

    def __init__(self, limit: int = 1024, clock: Callable[[], int] = time.time_ns) -> None:
        self.limit = limit
        self.clock = clock
        self._values: OrderedDict[tuple[str, str], tuple[Fingerprint, Value]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, run_dir: Path, kind: str, build: Callable[[], Value]) -> Value:
        """The value of KIND for RUN_DIR: the kept one while the directory is unchanged, else
        BUILD() (kept when the fingerprint can be trusted; an exception keeps nothing)."""
        key = (str(run_dir), kind)
        before = fingerprint(run_dir, self.clock())
        with self._lock:
            kept = self._values.get(key)
            if kept is not None and before is not None and kept[0] == before:
                self._values.move_to_end(key)
                return kept[1]
        value = build()
        if before is not None and fingerprint(run_dir, self.clock()) == before:  # unchanged while built
            with self._lock:
                self._values[key] = (before, value)
                self._values.move_to_end(key)
                while len(self._values) > self.limit:
                    self._values.popitem(last=False)
        return value


class Batched(Generic[Value]):
    """Concurrent requests for one blocking computation share it, and none is served from
    before it arrived: callers that arrive while a computation runs wait for the next one,
    started once the running one ends, and all of them get that. Under 20 clients the runs
    list is built once per batch instead of once per request. The batch
    runs in its own task, so a caller that leaves (a closed tab) stops no one else's."""

    def __init__(self, compute: Callable[[], Value]) -> None:
        self.compute = compute
        self._next: asyncio.Future[Value] | None = None
        self._lock = asyncio.Lock()

    async def __call__(self) -> Value:
        if self._next is None:
            self._next = asyncio.ensure_future(self._batch())
        return await asyncio.shield(self._next)

    async def _batch(self) -> Value:
        async with self._lock:  # the computation in flight ends first
            self._next = None  # who comes from now on waits for the next batch
            return await run_in_threadpool(self.compute)


class BatchPage:
    """A page rendered once per batch of its data: the requests one `Batched` batch answers
    all get the same bytes. Under 20 clients with 100 runs, rendering the runs list for every
    request cost as much of the GIL as the batch it shared (2 ms each), and p99 stayed above
    250 ms. The page is rendered again for a new batch (compared by
    identity: a batch is one object, never mutated) or a new KEY (what else the page shows)."""

    def __init__(self) -> None:
        self._kept: tuple[object, Hashable, bytes] | None = None

    def get(self, batch: object, key: Hashable, render: Callable[[], bytes]) -> bytes:
        """The bytes RENDER gives for BATCH and KEY, rendered only when either changed."""
        kept = self._kept
        if kept is not None and kept[0] is batch and kept[1] == key:
            return kept[2]
        body = render()
        self._kept = (batch, key, body)
        return body
