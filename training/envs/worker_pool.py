"""B env copies split into groups, each stepped in a forked worker process (or in this one).

The PettingZoo adapter's copies are plain Python envs; stepping groups of them in parallel
processes is what makes a generic env usable. The B slots are split into contiguous groups
whose sizes differ by at most one; each group is an object built by `build(count)` inside
its process, which answers (command, argument) messages over a pipe by calling the
group's method of that name (``workers=0``: one group in this process, behind the same
calls). `WorkerPool.call` sends every group its part of a slot-major argument at once and
concatenates the answers' arrays in slot order.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing as mp
from collections.abc import Callable
from typing import Any

import numpy as np

MAX_WORKERS = 4  # the default cap
MAX_EXPLICIT_WORKERS = 64  # forked processes one env may ask for

Build = Callable[[int], Any]  # count -> a group of that many copies, with one method per command


def _serve(conn: Any, build: Build, count: int) -> None:
    """Worker loop: build the group, then answer (command, argument) messages until close/EOF."""
    try:
        group = build(count)
    except Exception as error:  # reported to the parent as a one-line ValueError
        conn.send(("error", f"{type(error).__name__}: {error}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            command, argument = conn.recv()
        except (EOFError, OSError):
            break
        if command == "close":
            break
        try:
            result = getattr(group, command)(argument)
        except Exception as error:
            conn.send(("error", f"{type(error).__name__}: {error}"))
            continue
        conn.send(("ok", result))
    group.close()


class Worker:
    """Parent-side handle of one forked worker process."""

    def __init__(self, build: Build, count: int) -> None:
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, build, count), daemon=True)
        self.process.start()
        child.close()

    def wait_ready(self, owner: str) -> None:
        self.receive(owner)

    def send(self, command: str, argument: Any) -> None:
        self.conn.send((command, argument))

    def receive(self, owner: str) -> Any:
        try:
            status, value = self.conn.recv()
        except (EOFError, OSError):
            raise RuntimeError(f"{owner}: an env worker process died") from None
        if status == "error":
            raise ValueError(f"{owner}: {value}")
        return value

    def close(self) -> None:
        with contextlib.suppress(BrokenPipeError, OSError):
            self.conn.send(("close", None))
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


class InProcess:
    """The group of ``workers=0``, behind the same send/receive calls as a worker."""

    def __init__(self, build: Build, count: int) -> None:
        self.group = build(count)
        self.pending: Any = None

    def wait_ready(self, owner: str) -> None:
        """Nothing to wait for: the group was built in the constructor."""

    def send(self, command: str, argument: Any) -> None:
        self.pending = getattr(self.group, command)(argument)

    def receive(self, owner: str) -> Any:
        return self.pending

    def close(self) -> None:
        self.group.close()


class WorkerPool:
    """N_ENVS slots in max(WORKERS, 1) groups; OWNER names the env in error messages."""

    def __init__(self, build: Build, n_envs: int, workers: int, owner: str) -> None:
        self.owner = owner
        self.sizes = split(n_envs, max(workers, 1))
        self.groups: list[Worker | InProcess] = []
        try:
            for size in self.sizes:
                self.groups.append(InProcess(build, size) if workers == 0 else Worker(build, size))
            for group in self.groups:
                group.wait_ready(owner)
        except BaseException:
            self.close()
            raise

    def call(self, command: str, slot_values: Any) -> dict[str, np.ndarray]:
        """Send COMMAND to every group with its contiguous part of SLOT_VALUES (slot-major),
        gather their answers in slot order."""
        bounds = np.cumsum([0, *self.sizes])
        for group, (start, end) in zip(self.groups, itertools.pairwise(bounds), strict=True):
            group.send(command, slot_values[start:end])
        answers = [group.receive(self.owner) for group in self.groups]
        return {key: np.concatenate([answer[key] for answer in answers]) for key in answers[0]}

    def close(self) -> None:
        for group in self.groups:
            group.close()
        self.groups = []


def split(total: int, parts: int) -> list[int]:
    """``total`` slots in ``parts`` contiguous groups, sizes differing by at most one."""
    base, extra = divmod(total, parts)
    return [base + (1 if k < extra else 0) for k in range(parts)]
