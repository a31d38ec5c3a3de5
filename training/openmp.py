"""How torch's OpenMP threads wait between ops: chosen once, before torch is first imported.

The PyPI CPU build of torch runs an op on several threads inside an OpenMP region (GNU
libgomp); between regions the idle threads wait. OMP_WAIT_POLICY=PASSIVE sleeps at once,
and then every region pays the threads' wake-up: 80 us here against 2-5 us for a small
op. A spin keeps back-to-back ops warm, but on a busy machine the spinning threads take
the cores the working ones need. So lero looks at the machine when it starts:

    idle   a short spin (SPIN_COUNT iterations, then sleep), on all cores
    busy   one thread (nothing waits), sleeping if a caller asks for more threads

`benchmarks.openmp_wait` measured both against PASSIVE on all cores (lero's choice before)
on an idle machine and beside two busy loops (docs/benchmarks.md, "OpenMP wait"). A caller who set
any of CHOICES has chosen, and is left alone.

This module imports nothing heavy: the app (`lero.app`) and the benchmarks call
`settle_openmp_wait` before anything imports torch (libgomp reads its environment once).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

SPIN_COUNT = 30_000  # libgomp spin iterations (about 0.3 ms) before an idle thread sleeps
BUSY_SHARE = 0.5  # busy: other work holds at least this share of the cores
CHOICES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")
IDLE = {"GOMP_SPINCOUNT": str(SPIN_COUNT)}
BUSY = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}


def machine_is_busy(loadavg: str | None = None, cores: int | None = None) -> bool:
    """Whether other work holds BUSY_SHARE of the cores, by both the 1-minute load (which lags,
    and still counts lero's own last run) and the threads runnable now (a snapshot, which can
    catch a blip). LOADAVG is /proc/loadavg's text; no /proc: not busy."""
    cores = len(os.sched_getaffinity(0)) if cores is None else cores
    try:
        fields = (Path("/proc/loadavg").read_text() if loadavg is None else loadavg).split()
        load, runnable = float(fields[0]), int(fields[3].split("/")[0]) - 1  # less this process
    except (OSError, ValueError, IndexError):
        return False
    return min(load, runnable) >= BUSY_SHARE * cores


def settle_openmp_wait(environ: MutableMapping[str, str] = os.environ, busy: bool | None = None) -> str:
    """Give ENVIRON lero's wait for an idle or a busy machine (BUSY None: look now), unless
    the caller already chose; returns "idle", "busy" or "caller"."""
    if any(name in environ for name in CHOICES):
        return "caller"
    busy = machine_is_busy() if busy is None else busy
    environ.update(BUSY if busy else IDLE)
    return "busy" if busy else "idle"


def openmp_wait(environ: MutableMapping[str, str] = os.environ) -> str:
    """The wait in effect, as benchmark rows record it: a policy, a spin count or libgomp's
    default, with the thread count when the environment fixes it."""
    if "OMP_WAIT_POLICY" in environ:
        wait = environ["OMP_WAIT_POLICY"].upper()
    elif "GOMP_SPINCOUNT" in environ:
        wait = f"spin={environ['GOMP_SPINCOUNT']}"
    else:
        wait = "default"
    return f"{wait}, {environ['OMP_NUM_THREADS']} thread(s)" if "OMP_NUM_THREADS" in environ else wait
