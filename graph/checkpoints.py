"""The run's LangGraph checkpoints, read strictly.

LangGraph's default `JsonPlusSerializer` revives a msgpack extension object by importing
the module it names and calling the name with the stored arguments, so a planted blob
naming `os.system` runs a command as soon as a checkpoint is loaded. A run directory may
come from anyone, so every saver lero opens uses `StrictSerializer`: a blob may name only
the types lero's graph itself stores (LangGraph's `Send`, `Interrupt` and `Command`; its
state is JSON-able), and one naming anything else is refused whole with `UnsafeCheckpoint`,
before anything is imported or called. (LangGraph's own strict mode,
`allowed_msgpack_modules`, skips a blocked object silently and returns its arguments in
its place; lero refuses instead, so a tampered run stops rather than resuming altered.)
`check_checkpoints` reads every stored blob that way, read-only, before a resume writes
anything.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from lero.graph.configuration import RunError

# (module, name) pairs a lero checkpoint may name: what the graph's fan-out, approvals and
# answers store (checked against a real run's database in tests/graph/test_security_round2.py)
LERO_CHECKPOINT_TYPES = frozenset({("langgraph.types", "Send"), ("langgraph.types", "Interrupt"),
                                   ("langgraph.types", "Command")})
PLAIN_TYPES = ("null", "bytes", "bytearray")  # serializer formats that revive nothing
_CONSTRUCTORS = (jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG, jsonplus.EXT_CONSTRUCTOR_POS_ARGS,
                 jsonplus.EXT_CONSTRUCTOR_KW_ARGS, jsonplus.EXT_PYDANTIC_V1, jsonplus.EXT_PYDANTIC_V2)


class UnsafeCheckpoint(RunError):
    """A checkpoint naming code lero never stores (or not a msgpack value): never loaded."""


class _Scan:
    """One read of a msgpack value whose ext hook imports nothing: it notes the first name
    outside the allow-list and stops (ormsgpack reports a hook's exception as its own
    decode error, so the reason is kept here)."""

    def __init__(self) -> None:
        self.refused: str | None = None

    def unpack(self, data: bytes) -> Any:
        return ormsgpack.unpackb(data, ext_hook=self.ext_hook, option=ormsgpack.OPT_NON_STR_KEYS)

    def ext_hook(self, code: int, data: bytes) -> None:
        if code == jsonplus.EXT_DELTA_SNAPSHOT:
            self.unpack(data)
            return None
        if code not in _CONSTRUCTORS:  # a method call, a numpy array, an unknown code
            return self.refuse(f"an extension object of kind {code} that lero never stores")
        stored = self.unpack(data)
        named = tuple(str(part)[:80] for part in stored[:2]) if isinstance(stored, list | tuple) else ()
        if named not in LERO_CHECKPOINT_TYPES:
            return self.refuse(f"it names {'.'.join(named) or 'an unnamed object'}, which lero never stores")
        return None

    def refuse(self, reason: str) -> None:
        self.refused = self.refused or reason
        raise UnsafeCheckpoint(reason)


def check_blob(type_: str, data: bytes | None) -> None:
    """Refuse (UnsafeCheckpoint) a stored value unless it revives only allowed types."""
    if type_ in PLAIN_TYPES:
        return
    if type_ != "msgpack" or data is None:
        raise UnsafeCheckpoint(f"a {str(type_)[:20]!r} value, which lero never stores")
    scan = _Scan()
    try:
        scan.unpack(data)
    except (ormsgpack.MsgpackDecodeError, RecursionError, ValueError, TypeError) as error:
        raise UnsafeCheckpoint(scan.refused or f"a corrupt msgpack value ({str(error).splitlines()[0][:80]})") from None


class StrictSerializer(JsonPlusSerializer):
    """LangGraph's serializer for writing; for reading, every value passes `check_blob` first."""

    def __init__(self) -> None:
        super().__init__(allowed_msgpack_modules=LERO_CHECKPOINT_TYPES, allowed_json_modules=None)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        check_blob(*data)
        return super().loads_typed(data)


@contextmanager
def open_saver(path: Path) -> Iterator[SqliteSaver]:
    """A SqliteSaver on `path` that reads with `StrictSerializer`."""
    with closing(sqlite3.connect(str(path), check_same_thread=False)) as conn:
        yield SqliteSaver(conn, serde=StrictSerializer())


def check_checkpoints(path: Path) -> None:
    """Read every stored checkpoint and pending write of the database at `path`, refusing (UnsafeCheckpoint, naming the file) any value that names code lero never stores."""
    try:
        # selects only; not `mode=ro`, which would leave SQLite's -shm/-wal files behind in the run
        with closing(sqlite3.connect(str(path))) as conn:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            for table, column in (("checkpoints", "checkpoint"), ("writes", "value")):
                if table in tables:
                    for type_, data in conn.execute(f"SELECT type, {column} FROM {table}"):
                        check_blob(type_, data)
    except UnsafeCheckpoint as error:
        raise UnsafeCheckpoint(f"refusing {path.name}: {error}") from None
