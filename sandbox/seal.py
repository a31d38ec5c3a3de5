"""Seals a sealed kind's result with the job's secret key, so the host knows the runner wrote it.

A fitness comes only from a kind declared `sealed` (`sandbox.types.JobKind`; which of lero's
kinds are is `sandbox.jobkinds`'), and the candidate shares the job directory, so a
result.json that merely parses is not enough: the host makes a fresh key per such job,
hands it to the runner on stdin (read only after the OEF worker is forked, so no
candidate process ever holds it), and accepts only a result whose `seal` is
HMAC-SHA256(key, the rest of the result). A MAC rather than the key itself: a process that
reads the genuine result learns nothing that seals a different one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from typing import Any

SEAL_FIELD = "seal"
KEY_HEX_DIGITS = 64
MAX_KEY_LINE = KEY_HEX_DIGITS + 1  # the key and its newline


def new_key() -> bytes:
    """A fresh per-job key (hex digits, so it travels as one line)."""
    return secrets.token_hex(KEY_HEX_DIGITS // 2).encode()


def sign(result: dict[str, Any], key: bytes) -> str:
    """HMAC-SHA256 of the result's canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(result, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, canonical, hashlib.sha256).hexdigest()


def seal(result: dict[str, Any], key: bytes) -> dict[str, Any]:
    """RESULT with its seal added."""
    return {**result, SEAL_FIELD: sign(result, key)}


def is_sealed(data: Any, key: bytes) -> bool:
    """Whether DATA (parsed result.json) carries a seal made with KEY over the rest of it."""
    if not isinstance(data, dict) or not isinstance(data.get(SEAL_FIELD), str):
        return False
    rest = {name: value for name, value in data.items() if name != SEAL_FIELD}
    return hmac.compare_digest(sign(rest, key), data[SEAL_FIELD])


def read_key(fd: int = 0) -> bytes:
    """The key line the host sends on FD (stdin), unbuffered: nothing beyond it is read."""
    line = b""
    while not line.endswith(b"\n") and len(line) < MAX_KEY_LINE:
        chunk = os.read(fd, MAX_KEY_LINE - len(line))
        if not chunk:
            break
        line += chunk
    return line.strip()
