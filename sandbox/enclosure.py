"""Confining the calling process in place: the process backend's rlimits, namespaces and
dropped privileges, entered by a fresh child of the zygote (`sandbox.zygote`) before it
runs a job or execs a command.

Done in-process rather than by `prlimit`, `unshare` and `setpriv` in front of a new
interpreter, so that a job forked from the zygote starts with the engine already
imported. What a confined process gets:
- its own session (a kill of its process group takes it and what it forks), rlimits
  (RLIMIT_AS = memory, RLIMIT_CPU, RLIMIT_NPROC = pids, RLIMIT_FSIZE = the job-dir cap, no
  core files);
- where the kernel lets us (root, or an unprivileged user namespace that maps the caller
  to root): new network (no network at all), PID (the process that returns from `enter`
  is PID 1 there, so a kill takes every descendant, even ones that call setsid; a fresh
  /proc) and mount namespaces (every mount read-only except the job directory, each
  keeping its nosuid/nodev/noexec), then no capabilities (bounding, ambient, inheritable,
  permitted, effective) and no-new-privs, which also holds across a later exec.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import resource
import signal
import sys
from dataclasses import dataclass

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 0x20, 0x400, 0x800, 0x1000
MS_REC, MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 0x4000, 0x40000, 0x200000, 0x1000000
# a mount's own flags as /proc/self/mountinfo names them: a read-only remount keeps them
MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
               "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}  # fmt: skip
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAPABILITY_VERSION_3 = 0x20080522
FAILED_SETUP_EXIT = 126  # the confinement could not be entered: nothing of the job ran

_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Confinement:
    """What one job's process is held to (from its `Limits`, `ProcessSandbox`)."""

    job_dir: str
    mem_bytes: int
    cpu_s: int
    nproc: int
    fsize_bytes: int
    namespaces: bool  # enter new network, PID and mount namespaces (`namespaces_work`)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int) -> int:
    encode = lambda text: None if text is None else os.fsencode(text)  # noqa: E731
    return _libc.mount(encode(source), encode(target), encode(fstype), ctypes.c_ulong(flags), None)


def enter(confinement: Confinement) -> None:
    """Confine the calling (single-threaded) process. With namespaces the caller forks: the
    child, PID 1 of the new PID namespace, returns; the caller waits for it and exits with
    its status (a signal it died of, re-raised), never returning. OSError when the kernel
    refuses a step: the caller must not go on to run the job."""
    if os.getsid(0) != os.getpid():
        os.setsid()
    for limit, value in ((resource.RLIMIT_AS, confinement.mem_bytes), (resource.RLIMIT_CPU, confinement.cpu_s),
                         (resource.RLIMIT_NPROC, confinement.nproc), (resource.RLIMIT_FSIZE, confinement.fsize_bytes),
                         (resource.RLIMIT_CORE, 0)):  # fmt: skip
        resource.setrlimit(limit, (value, value))
    os.chdir(confinement.job_dir)
    if confinement.namespaces:
        _enter_namespaces(confinement.job_dir)
    drop_privileges()


def _enter_namespaces(job_dir: str) -> None:
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | (CLONE_NEWUSER if uid != 0 else 0)
    _check(_libc.unshare(flags), "unshare")
    if uid != 0:  # map the caller to root in its own user namespace, as `unshare --map-root-user`
        # /proc/self of a non-dumpable process (the zygote's children) is root's: writable again
        # for the maps; the runner makes itself non-dumpable before it reads its job
        _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(DUMPABLE)")
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
    child = os.fork()
    if child:
        _exit_as(child)
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    _check(_mount(None, "/", None, MS_REC | MS_PRIVATE), "mount --make-rprivate /")
    _check(_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC), "mount proc")
    _check(_mount(job_dir, job_dir, None, MS_BIND), "bind the job directory")
    for target, own_flags in _mounts():
        if target != job_dir:  # may fail where a mount is gone or locked: it stays as it was
            _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | own_flags)
    os.chdir(job_dir)  # onto the job directory's own (writable) mount


def _exit_as(child: int) -> None:
    """Wait for CHILD and end this process as it ended (as `unshare --fork` does)."""
    _, status = os.waitpid(child, 0)
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))


def _mounts() -> list[tuple[str, int]]:
    """(mount point, its own flags) for every mount this process sees."""
    mounts = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            target = os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), os.fsencode(fields[4])))
            flags = sum(MOUNT_FLAGS.get(option, 0) for option in fields[5].split(","))
            mounts.append((target, flags))
    return mounts


def drop_privileges() -> None:
    """No-new-privs, then every capability gone from every set (a process without
    CAP_SETPCAP has none to drop from its bounding set but still ends with none)."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        last = int(handle.read())
    for capability in range(last + 1):
        if _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0 and _has_capabilities():
            _check(-1, f"prctl(CAPBSET_DROP, {capability})")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: two 32-bit words each
    _check(_libc.capset(header, data), "capset")


def _has_capabilities() -> bool:
    with open("/proc/self/status") as handle:
        return any(line.startswith("CapEff:") and int(line.split()[1], 16) != 0 for line in handle)


@functools.cache
def namespaces_work() -> bool:
    """Whether this machine lets a process enter the namespaces (`python -m
    lero.sandbox.enclosure` exits 0 where it does): probed once per host process, not
    once per sandbox (the kernel's answer does not change; a probe costs ~0.08 s)."""
    import subprocess

    probe = subprocess.run([sys.executable, "-m", "lero.sandbox.enclosure"], capture_output=True)
    return probe.returncode == 0


def _probe() -> int:
    """Enter the namespaces in a child, on a throwaway job directory: 0 where that works."""
    import tempfile

    with tempfile.TemporaryDirectory() as job_dir:
        child = os.fork()
        if child == 0:
            try:
                _enter_namespaces(job_dir)
                drop_privileges()
            except OSError:
                os._exit(1)
            os._exit(0)
        _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(_probe())
