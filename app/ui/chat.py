"""The chat page: `lero chat`'s own dialogue (app.chat.desk) behind a web form.

The experiment desk, its tools, the offline guided dialogue and the assistant loop are
app.chat.desk's, unchanged; they talk to an `Asker` whose input is fed line by line from
the form and whose console writes to a transcript. Only starting the run differs: the
web desk hands the spec to the server's workers, so the run page follows it and its
approvals are answered there.
"""

from __future__ import annotations

import io
import queue
import threading
from collections.abc import Callable
from typing import Any

from rich.console import Console

from lero.app.chat.desk import ExperimentDesk
from lero.app.chat.dialogues import assistant_chat, offline_chat
from lero.app.console.approvals import Asker
from lero.graph.configuration import RunSpec

TRANSCRIPT_WIDTH = 100
REPLY_TIMEOUT_S = 600.0  # a cost estimate trains one iteration; an LLM reply may be slow


class LineFeed(io.TextIOBase):
    """A blocking stdin fed by the web form; says when the dialogue waits for a line."""

    def __init__(self) -> None:
        self._lines: queue.Queue[str] = queue.Queue()
        self.waiting = threading.Event()

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        self.waiting.set()
        line = self._lines.get()
        self.waiting.clear()
        return line

    def feed(self, line: str | None) -> None:
        """One line of input; None ends the input (EOF)."""
        self._lines.put("" if line is None else line.replace("\n", " ") + "\n")


class WebDesk(ExperimentDesk):
    """The chat's experiment desk; its runs start in the server's background workers."""

    def __init__(self, io: Asker, base: dict[str, Any], launch: Callable[[RunSpec, str | None], str]) -> None:
        super().__init__(io, base)
        self._launch = launch

    def start_run(self) -> str:
        """Start the experiment with the current spec, after the user confirms it. The run
        goes on in the background; its page shows progress and asks its approvals."""
        if (declined := self.confirm_start()) is not None:
            return declined
        confirmed = self.confirmed_env()
        run_id = self._launch(self.spec.with_run_id(), confirmed.name if confirmed else None)
        self.last_run_id = run_id
        return f"run {run_id} started: follow it and answer its approvals at /runs/{run_id}"


class ChatSession:
    """One conversation: the dialogue runs in a thread, the page reads its transcript."""

    def __init__(self, llm_cfg: Any, base: dict[str, Any], launch: Callable[[RunSpec, str | None], str]) -> None:
        self._buffer = io.StringIO()
        console = Console(file=self._buffer, width=TRANSCRIPT_WIDTH, color_system=None,
                          force_terminal=False, highlight=False, soft_wrap=True)
        self.feed = LineFeed()
        self.desk = WebDesk(Asker(console, self.feed), base, launch)
        self.llm_cfg = llm_cfg
        self.error: str | None = None
        self._thread = threading.Thread(target=self._talk, daemon=True, name="lero-ui-chat")
        self._thread.start()
        self.wait()

    def _talk(self) -> None:
        try:
            if self.llm_cfg.backend == "offline":
                offline_chat(self.desk)
            else:
                assistant_chat(self.desk, self.llm_cfg)
        except Exception as error:  # the page says so; the server goes on
            self.error = f"{type(error).__name__}: {error}"

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    @property
    def transcript(self) -> str:
        return self._buffer.getvalue()

    def wait(self, timeout_s: float = REPLY_TIMEOUT_S) -> None:
        """Until the dialogue asks for the next line or ends."""
        step = 0.05
        waited = 0.0
        while not self.done and not self.feed.waiting.wait(step) and waited < timeout_s:
            waited += step

    def send(self, line: str) -> None:
        """The user's line: echoed into the transcript, then given to the dialogue."""
        if self.done:
            return
        self._buffer.write(line + "\n")
        self.feed.waiting.clear()
        self.feed.feed(line)
        self.wait()

    def close(self) -> None:
        if not self.done:
            self.feed.feed(None)
