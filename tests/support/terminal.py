"""`lero` in a pseudo-terminal, as a person's shell runs it: stdin and stdout are a tty, so
the CLI asks its questions and draws its progress. `expect` waits for text on the screen
(a generous deadline against a hung child, never a timing assertion)."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
DEADLINE_S = 600.0  # a stuck child fails the test; a slow machine only waits longer


class Terminal:
    """One `python -m lero.app.cli.main ARGS` on a pty of COLUMNS x 50."""

    def __init__(self, args: list[str], cwd: Path, env: dict[str, str] | None = None, columns: int = 120) -> None:
        self.master, slave = pty.openpty()
        os.set_blocking(self.master, False)
        import fcntl
        import struct
        import termios

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
        environment = {**os.environ, "TERM": "xterm", "COLUMNS": str(columns), **(env or {})}
        self.process = subprocess.Popen([sys.executable, "-m", "lero.app.cli.main", *args], cwd=cwd, env=environment,
                                        stdin=slave, stdout=slave, stderr=slave, start_new_session=True)  # fmt: skip
        os.close(slave)
        self.raw = ""

    @property
    def text(self) -> str:
        """Everything shown so far, escape sequences and carriage returns removed."""
        return ANSI.sub("", self.raw)

    def _read(self, wait_s: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], wait_s)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the child closed the terminal
            return False
        if not chunk:
            return False
        self.raw += chunk.decode(errors="replace")
        return True

    def expect(self, pattern: str, start: int = 0) -> int:
        """Wait until PATTERN (a regex) shows after character START of `text`; its end."""
        waited = 0.0
        while waited < DEADLINE_S:
            if match := re.compile(pattern).search(self.text, start):
                return match.end()
            if not self._read(0.5) and self.process.poll() is not None:
                break
            waited += 0.5
        raise AssertionError(f"{pattern!r} never showed; the screen:\n{self.text[-3000:]}")

    def send(self, line: str) -> None:
        os.write(self.master, (line + "\n").encode())

    def interrupt(self) -> None:
        """Ctrl-C, as the terminal sends it: SIGINT to the foreground process group."""
        os.killpg(self.process.pid, signal.SIGINT)

    def wait(self) -> int:
        """Drain the screen until the child exits; its exit status."""
        while self._read(0.5) or self.process.poll() is None:
            if self.process.poll() is not None and not select.select([self.master], [], [], 0)[0]:
                break
        code = self.process.wait(timeout=DEADLINE_S)
        os.close(self.master)
        return code
