"""W&B's offline run file (`wandb/offline-run-*/run-<id>.wandb`) read back with W&B's own
record schema (`wandb.proto.wandb_internal_pb2.Record`): the tests' view of what a
`--logger wandb` run would sync. The file is LevelDB's log format: 32 KiB blocks of
chunks, each with a 7-byte header (CRC, length, type: full, first, middle, last), after a
7-byte W&B header (`:W&B`, magic, version)."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BLOCK, HEADER = 32 * 1024, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _payloads(data: bytes) -> Iterator[bytes]:
    assert data[:4] == b":W&B", "not a W&B run file"
    pos, pending = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # a block's tail too short for a header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        pos += HEADER
        chunk = data[pos:pos + length]
        pos += length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk
            pending = b""
        else:  # zero padding at a block's end
            pos += BLOCK - pos % BLOCK if pos % BLOCK else 0


def _key(item: Any) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


@dataclass
class OfflineRun:
    name: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)  # one dict per logged row
    files: list[str] = field(default_factory=list)
    run_dir: Path = Path()

    def series(self, key: str, axis: str) -> list[tuple[Any, Any]]:
        """(axis value, value) of every row that logged KEY."""
        return [(row.get(axis), row[key]) for row in self.history if key in row]


def read_offline_runs(root: Path) -> list[OfflineRun]:
    """Every offline run under ROOT (a `dir=` given to wandb.init), oldest first.

    W&B's service process writes the file and may still hold its last records after
    `run.finish()` returns; `wandb.teardown()`, what the process's exit does, flushes them."""
    import wandb
    from wandb.proto import wandb_internal_pb2

    wandb.teardown()
    runs = []
    for path in sorted(root.rglob("offline-run-*/run-*.wandb")):
        run = OfflineRun(run_dir=path.parent)
        for payload in _payloads(path.read_bytes()):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            kind = record.WhichOneof("record_type")
            if kind == "run":
                run.name, run.tags = record.run.display_name, list(record.run.tags)
                run.config |= {_key(i): json.loads(i.value_json) for i in record.run.config.update}
            elif kind == "config":
                run.config |= {_key(i): json.loads(i.value_json) for i in record.config.update}
            elif kind == "history":
                run.history.append({_key(i): json.loads(i.value_json) for i in record.history.item})
            elif kind == "files":
                run.files += [f.path for f in record.files.files]
        runs.append(run)
    return runs
