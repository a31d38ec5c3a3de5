"""`lero ui` as a child process, the way a user starts it (`--port 0`: a free port)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


class UIServer:
    """`lero ui --port 0` as a child process; `url` is the printed URL with its token."""

    def __init__(self, cwd: Path, *args: str, env: dict | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lero.app.cli.main", "ui", "--port", "0", *args], cwd=cwd,
            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        assert self.process.stdout is not None
        for line in self.process.stdout:  # printed once the server listens
            if match := re.search(r"(http://127\.0\.0\.1:(\d+))/\?token=(\S+)", line):
                self.base, self.token = match.group(1), match.group(3)
                self.url = f"{self.base}/?token={self.token}"
                return
        raise AssertionError(f"lero ui exited without printing its URL (status {self.process.wait()})")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
