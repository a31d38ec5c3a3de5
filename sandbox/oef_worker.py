"""Runs the candidate's `enhance_observation` in its own process for trusted evaluation.

The evaluator (`sandbox.harness`, PID 1 of the container) never executes candidate
code: it forks this worker (before evaluating; torch already imported, so no second
import) and sends it observation batches over pipes, checking the answers. The worker
execs the module (never calling `hybrid_reward`) in its own address space, so it can
neither patch `training.evaluate` nor the runner's memory (the runner is non-dumpable),
and the runner kills it before writing the result: the score is out of its reach.

Wire format over two pipes (candidate prints go to /dev/null):
request  = int32 rows, int32 cols, rows*cols float32            (first: int32 n, n bytes of source)
response = b"K" int32 rows, int32 cols, float32 data  |  b"E" int32 n, n bytes of error JSON
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
from typing import BinaryIO

MAX_OUTPUT_COLS = 4096
HEADER = struct.Struct("<ii")
LENGTH = struct.Struct("<i")


def read_exact(stream: BinaryIO, n: int) -> bytes:
    """n bytes from a pipe (reads may return less), or EOFError when it closes first."""
    data = bytearray()
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            raise EOFError("pipe closed")
        data += chunk
    return bytes(data)


def send_error(out: BinaryIO, error: dict) -> None:
    payload = json.dumps(error).encode()
    out.write(b"E" + LENGTH.pack(len(payload)) + payload)
    out.flush()


def isolate_stdio(keep: set[int]) -> None:
    """In the forked worker: stdio to /dev/null, every other inherited descriptor closed."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the candidate's prints reach neither the protocol nor the logs
        os.dup2(devnull, fd)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def serve(requests: BinaryIO, replies: BinaryIO) -> None:
    """Load the candidate sent first, then answer observation batches until EOF."""
    import torch

    from lero.sandbox.tracebacks import error_dict, register_source
    from lero.training import load_candidate

    (length,) = LENGTH.unpack(read_exact(requests, LENGTH.size))
    source = read_exact(requests, length).decode()
    register_source(source)
    try:
        enhance = load_candidate(source).enhance_observation
        if enhance is None:
            raise ValueError("the candidate defines no enhance_observation")
    except Exception as error:
        send_error(replies, error_dict(error))
        return
    replies.write(b"K")
    replies.flush()
    while True:
        try:
            rows, cols = HEADER.unpack(read_exact(requests, HEADER.size))
        except EOFError:
            return
        obs = torch.frombuffer(
            bytearray(read_exact(requests, rows * cols * 4)), dtype=torch.float32
        )
        try:
            out = enhance(obs.reshape(rows, cols))  # [M, D] -> [M, D + k]
            if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.dim() != 2:
                raise TypeError("enhance_observation must return a 2-D float torch.Tensor")
            if out.shape[1] > MAX_OUTPUT_COLS:
                raise ValueError(
                    f"enhance_observation returned {out.shape[1]} columns > {MAX_OUTPUT_COLS}"
                )
            out = out.detach().to(torch.float32).contiguous()
        except Exception as error:
            send_error(replies, error_dict(error))
            continue
        replies.write(b"K" + HEADER.pack(*out.shape) + out.numpy().tobytes())
        replies.flush()
