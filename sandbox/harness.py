"""The in-sandbox runner: `python -m lero.sandbox.harness JOB_DIR` reads job.json, writes result.json.

This module is the security harness around the job handlers (`sandbox.jobs`, one per
job kind). Trusted code running next to untrusted code, so the order of things matters:
1. the runner makes itself non-dumpable, so no other process of the same user can
   ptrace it or read/write its memory and file descriptors through /proc, and ignores
   every catchable signal a candidate could send it (`RUNNER_IGNORES`): a signal must
   never end it between the candidate writing `result.json` and the runner replacing it;
2. it reads job.json, deletes it and parses it into a `Job` (`sandbox.types`), validated
   before anything runs (an invalid job ends as `crashed`, running nothing), then runs
   the handler its kind declares in the kinds table (`sandbox.types.JobKind`; job.json
   only names the kind: a kind outside lero is found only as the module file the host
   copied into the read-only kinds folder it names on the command line, `--kinds`);
   a sealed kind keeps all candidate code in a separate worker, see
   `sandbox.oef_worker`, and reads the host's key from stdin only after forking that
   worker, see `sandbox.seal`;
3. when it is PID 1 of its own PID namespace (Docker, or the process backend as root) it
   SIGKILLs every other process in the namespace, so nothing the candidate left behind
   can race it;
4. only then it replaces whatever `result.json` the candidate may have written (sealed
   with the key where the kind is declared sealed, `sandbox.jobkinds`).
Validation and training results therefore reflect candidate code (it ran in-process);
the fitness, computed by `evaluate`, does not.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lero.sandbox.jobs import Handler, Inside, failure, run_job
from lero.sandbox.seal import read_key, seal
from lero.sandbox.types import KINDS, Job, kind_of

JOB_FILE = "job.json"
KINDS_FLAG = "--kinds"  # the read-only folder of shipped kind modules (`<kind name>.py`)
KIND_MODULE_PREFIX = "lero_kind_"  # a shipped kind module's name in the runner
RESULT_FILE = "result.json"
WAIT_POLL_S = 0.005  # warm runners poll for job.json this often ...
WARM_IDLE_S = 900.0  # ... and exit after this long without a job
# Catchable signals another process in the sandbox could send the runner. SIGKILL and
# SIGSTOP cannot be ignored (the kernel drops them for PID 1 from inside its namespace);
# SIGCHLD, SIGSEGV and the like are left alone: they come from the runner's own state.
RUNNER_IGNORES = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGALRM,
    signal.SIGPIPE,
    signal.SIGVTALRM,
    signal.SIGPROF,
    signal.SIGTSTP,
    signal.SIGTTIN,
    signal.SIGTTOU,
)


def make_non_dumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): blocks ptrace and /proc/<pid>/{mem,fd,environ} of this process."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)


def ignore_signals() -> None:
    """SIG_IGN for RUNNER_IGNORES: Python's SIGINT handler raised KeyboardInterrupt, which
    ended the runner before it replaced a forged result.json."""
    for number in RUNNER_IGNORES:
        signal.signal(number, signal.SIG_IGN)


class KeyInbox:
    """The host's per-job key (evaluate), read from stdin once, when first asked for.

    It must arrive after the OEF worker is forked: a fork copies the runner's memory, and
    the worker runs candidate code.
    """

    def __init__(self) -> None:
        self._key: bytes | None = None

    def key(self) -> bytes:
        if self._key is None:
            self._key = read_key()
        return self._key


def kill_everything_else() -> None:
    """As PID 1 of a PID namespace: SIGKILL all other processes, then reap them."""
    if os.getpid() != 1:
        return
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        return
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def write_result(job_dir: Path, result: dict[str, Any]) -> None:
    """Replace anything at result.json (file, link, directory) with the runner's result."""
    target = job_dir / RESULT_FILE
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.exists() or target.is_symlink():
        target.unlink()
    fd, temp_path = tempfile.mkstemp(dir=job_dir, prefix=".result-")
    with os.fdopen(fd, "w") as handle:
        json.dump(result, handle)
    os.replace(temp_path, target)


def wait_for_job(job_dir: Path, idle_s: float) -> str | None:
    """Warm start: the host writes job.json (atomically) when it has a job; its text, or
    None if it never comes."""
    job_path = job_dir / JOB_FILE
    give_up = time.monotonic() + idle_s
    while not job_path.exists():
        if time.monotonic() > give_up:
            return None
        time.sleep(WAIT_POLL_S)
    return job_path.read_text()


def parse_job(text: str, kinds_dir: Path | None = None) -> Job:
    """job.json as a validated `Job`; ValueError (one line) for anything else. A kind that
    is not lero's is looked up in KINDS_DIR (`load_kind`) before the job is typed."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"job.json holds {type(data).__name__}, not an object")
        if kinds_dir is not None and isinstance(data.get("kind"), str):
            load_kind(kinds_dir, data["kind"])
        return Job.from_dict(data)
    except (ValueError, TypeError) as error:
        raise ValueError(f"invalid job.json: {str(error).splitlines()[0] if str(error) else type(error).__name__}") from None


def load_kind(kinds_dir: Path, name: str) -> None:
    """Import KINDS_DIR/<NAME>.py, the module the host copied for kind NAME, which registers
    it; nothing for a kind already known, a name no kind can have, or no such file. The
    folder is the host's and read-only here: job.json chooses among its files by name only."""
    path = kinds_dir / f"{name}.py"
    if name in KINDS or not name.isidentifier() or not path.is_file() or path.is_symlink():
        return
    module_name = f"{KIND_MODULE_PREFIX}{name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise ValueError(f"{path.name} failed to load: {type(error).__name__}: {error}") from None
    if name not in KINDS or not KINDS[name].handler.startswith(f"{module_name}:"):
        raise ValueError(f"{path.name} does not register the job kind {name!r} with a handler of its own")


def resolve_handler(kind_name: str) -> Handler:
    """The function the kind's declaration names (`module:function`)."""
    module, _, function = kind_of(kind_name).handler.partition(":")
    return getattr(importlib.import_module(module), function)


def preload() -> None:
    """Import what a job imports once it arrives, while a warm runner waits for it: the
    engine (`lero.training` itself loads nothing until used). Nothing of torch's compiler
    stack: the learners' optimizer (`training.optim`) needs none of it."""
    import lero.training.candidate
    import lero.training.evaluation
    import lero.training.trainer  # noqa: F401


def main(argv: list[str]) -> int:
    """`python -m lero.sandbox.harness JOB_DIR [--wait] [--kinds DIR]`; --wait imports the
    engine first, then waits; --kinds: where shipped kind modules are (`load_kind`).

    A sealed kind's job key comes on stdin (sandbox.seal); job.json is deleted once read, so
    it is gone before any candidate code runs.
    """
    make_non_dumpable()
    ignore_signals()
    job_dir = Path(argv[0] if argv else ".").resolve()
    kinds_dir = Path(argv[argv.index(KINDS_FLAG) + 1]) if KINDS_FLAG in argv[:-1] else None
    if "--wait" in argv:
        preload()
        text = wait_for_job(job_dir, WARM_IDLE_S)
        if text is None:
            return 0
    else:
        text = (job_dir / JOB_FILE).read_text()
    (job_dir / JOB_FILE).unlink()
    try:
        job = parse_job(text, kinds_dir)
        handler = resolve_handler(job.kind)
    except (ValueError, ImportError, AttributeError) as error:  # nothing ran: the host reads a crash with the reason
        write_result(job_dir, failure("crashed", "InvalidJob", str(error)[:500]))
        return 0
    inbox = KeyInbox()
    started = time.perf_counter()
    result = run_job(handler, job, Inside(job_dir, inbox.key))
    result["elapsed_s"] = time.perf_counter() - started
    kill_everything_else()
    if kind_of(job.kind).sealed:
        result = seal(result, inbox.key())
    write_result(job_dir, result)
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # no interpreter teardown: with torch loaded it takes ~0.4 s of every job's slot, and
    # nothing (no atexit handler a candidate registered) may run after the result is written
    os._exit(code)
