"""How a run driven from the command line stops: Ctrl-C, and SIGTERM (`kill`, `docker stop`,
a scheduler's time limit, `lero ui` closing its workers). Shared by the front-ends that drive
a run (`lero run` / `lero resume`, the web UI's worker), which import no one another.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

EXIT_INTERRUPTED = 130  # the exit status of a stopped run (a shell's for SIGINT)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """Ctrl-C (SIGINT) or SIGTERM during a run: the first kills its sandbox jobs (in a thread,
    so a lock the interrupted code holds cannot deadlock it) and raises KeyboardInterrupt; the
    second exits at once."""

    def __init__(self) -> None:
        from lero.graph.context import CancelScope  # the engine: only for a command that runs one

        self.scope = CancelScope()  # the runs this command drives
        self.canceller: threading.Thread | None = None

    def handle(self, signum: int, frame: object) -> None:
        if self.canceller is not None:
            os._exit(EXIT_INTERRUPTED)
        self.canceller = threading.Thread(target=self.scope.cancel_all, daemon=True)
        self.canceller.start()
        raise KeyboardInterrupt

    def wait(self, timeout_s: float = 10.0) -> None:
        """Until the jobs are killed: no container outlives the command."""
        if self.canceller is not None:
            self.canceller.join(timeout_s)


@contextmanager
def first_stop_cancels() -> Iterator[Interrupts]:
    """Every STOP_SIGNALS stops a run as Ctrl-C does: no container outlives the command and
    the run is left `interrupted`, to resume (SIGTERM's default would end lero on the spot)."""
    interrupts = Interrupts()
    if threading.current_thread() is not threading.main_thread():
        yield interrupts  # signals reach only the main thread
        return
    previous = {sig: signal.signal(sig, interrupts.handle) for sig in STOP_SIGNALS}
    try:
        yield interrupts
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
