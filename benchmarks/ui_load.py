"""The web UI under a lab's load: one client against 20 concurrent ones, 100 runs listed.

    python -m benchmarks.ui_load [--template RUN_DIR] --runs 100 --clients 20 --seconds 20 \
        --rounds 2 --json benchmarks/results/ui_load.json

A runs dir of RUNS copies of one real run (--template, or a tiny offline `lero run` made
here: process sandbox, 1,600 steps), each copy's name its own; `lero ui --port 0` serves it
on loopback as a person starts it. Every client is one keep-alive HTTP/1.1 connection that
asks for `/` and a run page alternately (the run pages in turn) for SECONDS; a sitting is
one client, then CLIENTS at once, ROUNDS times in alternating order, so that the machine's
other work falls on both. Reported per side: requests/s, p50 and p99 latency, errors (a
status other than 200, a broken connection), and the concurrent/single throughput ratio.
The client is raw asyncio sockets in this process, cheap beside the server it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lero.app.reports.provenance import lero_commit

URL = re.compile(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)")
TINY_RUN_CONFIG = "eval_episodes = 8\nmax_parallel = 2\n[hparams]\nn_envs = 32\nrollout_len = 25\nepochs = 1\n"
COPY_SKIPS = shutil.ignore_patterns("cache", "tensorboard", "checkpoints.sqlite", "*.lock")


def lero(cwd: Path, *args: str, **popen: Any) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lero.app.cli.main", *args], cwd=cwd, **popen)


def tiny_run(work: Path) -> Path:
    """A real run to copy: the offline designer, the process sandbox, 1,600 steps."""
    (work / "fast.toml").write_text(TINY_RUN_CONFIG)
    made = lero(work, "run", "--config", "fast.toml", "--steps", "1600", "--llm", "offline", "--sandbox", "process",
                "--approve", "none", "--run-id", "template", "--runs-dir", "template-runs")
    if made.wait() != 0:
        raise SystemExit("the template run failed")
    return work / "template-runs" / "template"


def fill_runs_dir(template: Path, runs_dir: Path, count: int) -> list[str]:
    """COUNT copies of TEMPLATE, named run-000..; the names, for the run pages."""
    names = [f"run-{index:03d}" for index in range(count)]
    for name in names:
        shutil.copytree(template, runs_dir / name, ignore=COPY_SKIPS)
    return names


class Server:
    """`lero ui --port 0` over RUNS_DIR; `port` and `cookie` once it listens."""

    def __init__(self, cwd: Path, runs_dir: Path) -> None:
        self.process = lero(cwd, "ui", "--port", "0", "--runs-dir", str(runs_dir), "--llm", "offline",
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if match := URL.search(line):
                self.port = int(match.group(1))
                self.cookie = asyncio.run(token_cookie(self.port, match.group(2)))
                return
        raise SystemExit(f"lero ui exited without its URL (status {self.process.wait()})")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


async def token_cookie(port: int, token: str) -> str:
    """The cookie the printed URL sets, as a browser gets it (`name=value`)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /?token={token} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    cookie = re.search(rb"(?i)set-cookie: ([^;\r]+)", head)
    if cookie is None:
        raise SystemExit(f"lero ui set no cookie: {head[:200]!r}")
    return cookie.group(1).decode()


async def one_client(port: int, cookie: str, paths: list[str], offset: int, deadline: float
                     ) -> tuple[list[float], dict[str, int]]:
    """Request PATHS in turn (from OFFSET) on one keep-alive connection until DEADLINE;
    (latencies in s of the good answers, errors by status or exception)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    latencies, errors, turn = [], {}, offset
    try:
        while time.perf_counter() < deadline:
            path = paths[turn % len(paths)]
            turn += 1
            started = time.perf_counter()
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {cookie}\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            length = re.search(rb"(?i)content-length: (\d+)", head)
            if length is None:  # every page has a length; a chunked answer is an error here
                errors["no length"] = errors.get("no length", 0) + 1
                break
            await reader.readexactly(int(length.group(1)))
            if status == 200:
                latencies.append(time.perf_counter() - started)
            else:
                errors[str(status)] = errors.get(str(status), 0) + 1
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as error:
        errors[type(error).__name__] = errors.get(type(error).__name__, 0) + 1
    finally:
        writer.close()
    return latencies, errors


async def side(port: int, cookie: str, paths: list[str], clients: int, seconds: float) -> dict[str, Any]:
    """CLIENTS connections at once for SECONDS: requests/s, p50/p99 ms, errors."""
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    answers = await asyncio.gather(*(one_client(port, cookie, paths, 2 * i, deadline) for i in range(clients)))
    elapsed = time.perf_counter() - started
    latencies = sorted(t for got, _ in answers for t in got)
    errors: dict[str, int] = {}
    for _, failed in answers:
        for kind, count in failed.items():
            errors[kind] = errors.get(kind, 0) + count
    return {"clients": clients, "seconds": round(elapsed, 2), "requests": len(latencies), "errors": errors,
            "requests_per_s": round(len(latencies) / elapsed, 2),
            "p50_ms": quantile_ms(latencies, 0.50), "p99_ms": quantile_ms(latencies, 0.99),
            "mean_ms": round(1000 * statistics.fmean(latencies), 1) if latencies else None}


def quantile_ms(ordered: list[float], q: float) -> float | None:
    """The Q quantile (nearest rank) of ORDERED seconds, in ms; None when empty."""
    return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1) if ordered else None


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--template", type=Path, help="a run directory to copy (default: a tiny run made here)")
    parser.add_argument("--runs", type=int, default=100, help="run directories in the runs dir")
    parser.add_argument("--clients", type=int, default=20, help="concurrent clients on the busy side")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds a side")
    parser.add_argument("--rounds", type=int, default=2, help="sittings of single then concurrent (alternating)")
    parser.add_argument("--label", default="", help="what this measures (e.g. before / after)")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args()

    started_load = load()
    with tempfile.TemporaryDirectory(prefix="lero-ui-load-") as tmp:
        work = Path(tmp)
        template = args.template.resolve() if args.template else tiny_run(work)
        names = fill_runs_dir(template, work / "runs", args.runs)
        paths = [p for name in names for p in ("/", f"/runs/{name}")]
        server = Server(work, work / "runs")
        try:
            asyncio.run(side(server.port, server.cookie, paths, 1, 2.0))  # warm-up: imports, first parses
            rounds = []
            for index in range(args.rounds):
                order = (1, args.clients) if index % 2 == 0 else (args.clients, 1)
                measured = {n: asyncio.run(side(server.port, server.cookie, paths, n, args.seconds)) for n in order}
                rounds.append({"single": measured[1], "concurrent": measured[args.clients]})
                print(json.dumps(rounds[-1]), flush=True)
        finally:
            server.close()
    single = sum(r["single"]["requests_per_s"] for r in rounds) / len(rounds)
    concurrent = sum(r["concurrent"]["requests_per_s"] for r in rounds) / len(rounds)
    result = {
        "label": args.label, "commit": lero_commit(), "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "runs": args.runs, "clients": args.clients, "seconds": args.seconds, "template": str(args.template or "tiny run"),
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "uptime_start": started_load, "uptime_end": load(), "rounds": rounds,
        "single_rps": round(single, 2), "concurrent_rps": round(concurrent, 2),
        "concurrent_over_single": round(concurrent / single, 3) if single else None,
        "concurrent_p99_ms_worst": max(r["concurrent"]["p99_ms"] or 0 for r in rounds),
        "errors": sum(sum(r[s]["errors"].values()) for r in rounds for s in ("single", "concurrent")),
    }
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
