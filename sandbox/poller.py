"""A daemon thread that calls `tick()` every `interval_s` while a job runs (a context manager).

The host watches a running job from outside (the job directory's size, training
progress) while the backend blocks waiting for it. The thread runs in a copy of the
caller's context, so callbacks that rely on context variables (langgraph's stream
writer) behave as they would on the caller's thread.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Self


class Poller:
    """Calls `tick()` every `interval_s` until the `with` block ends or `tick()` returns True."""

    def __init__(self, interval_s: float, tick: Callable[[], bool | None]) -> None:
        self._interval_s = interval_s
        self._tick = tick
        self._stop = threading.Event()
        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(self._poll,), daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(self._interval_s):
            if self._tick():
                return
