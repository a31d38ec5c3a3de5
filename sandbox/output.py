"""Capped capture of a stream: keep the head and the tail, count what was dropped.

A flood of output must neither fill host memory nor hide the end of a traceback,
so both ends survive and the middle is replaced by a marker.
"""

from __future__ import annotations

import threading
from typing import BinaryIO


class CappedBuffer:
    """Keeps the first and last `limit // 2` bytes of everything fed to it."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk[-self.tail_limit :]
            del self.tail[: max(0, len(self.tail) - self.tail_limit)]

    def text(self) -> str:
        dropped = self.total - len(self.head) - len(self.tail)
        marker = f"\n[... {dropped} bytes dropped ...]\n".encode() if dropped else b""
        return bytes(self.head + marker + self.tail).decode("utf-8", errors="replace")


def drain_in_thread(stream: BinaryIO, buffer: CappedBuffer) -> threading.Thread:
    """Read `stream` to EOF into `buffer` on a daemon thread (pipes must never block the child)."""

    def drain() -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            buffer.feed(chunk)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    return thread
