"""File access confined to one directory: no symlink below it is ever followed.

A run directory can come from anyone (a shared disk, a downloaded run), so its files
are reached one path part at a time from a directory descriptor, each part opened with
O_NOFOLLOW: a planted symlink, `..` or a FIFO is refused with `UnsafeFile` instead of
leading outside or blocking. Only the directory's parent (the runs root) may be a
symlink. Reads take regular files only, up to a size cap; writes go to a uniquely
named temp file in the same folder, fsynced, then renamed over the target.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from lero.graph.configuration import RunError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_REFUSED = (errno.ELOOP, errno.ENOTDIR, errno.ENAMETOOLONG, errno.ENXIO, errno.EMLINK)


class UnsafeFile(RunError):
    """A path under a run that is refused: a symlink, outside the run, not a regular file, too large."""


def parts_of(relative: str) -> list[str]:
    """The path parts of `relative` ("a/b.json"); UnsafeFile for absolute paths, `.` or `..`."""
    parts = relative.split("/")
    if any(part in ("", ".", "..") or "\0" in part for part in parts):
        raise UnsafeFile(f"refusing path {relative!r}: not a plain relative path")
    return parts


def _refused(path: str, error: OSError, dir_fd: int, name: str) -> UnsafeFile:
    try:
        link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        link = False
    return UnsafeFile(f"refusing {path}: {'a symlink' if link else error.strerror}")


def replace_at(dir_fd: int, name: str, data: bytes) -> None:
    """Write `data` to a fresh temp file in the folder of `dir_fd`, fsync it, rename it over
    `name` and fsync the folder. The temp file is removed when anything fails (a full disk)."""
    temp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)


def write_atomic(path: Path, content: str | bytes) -> None:
    """Write a file anywhere via a unique temp file + rename: readers never see half of it."""
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        replace_at(fd, path.name, content.encode() if isinstance(content, str) else content)
    finally:
        os.close(fd)


class Confined:
    """Reads and writes under `path`, which must be a real directory (not a symlink)."""

    def __init__(self, path: Path) -> None:
        if path.name in ("", ".", ".."):
            raise UnsafeFile(f"refusing run directory {str(path)!r}: not a plain name")
        self.path = path

    def _show(self, parts: list[str]) -> str:
        return str(self.path.joinpath(*parts))

    @contextmanager
    def folder(self, parts: list[str], create: bool = False) -> Iterator[int]:
        """A descriptor of the folder `parts` below the directory, each part reached without
        following a symlink; FileNotFoundError when absent (unless `create`)."""
        fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the runs root may be a link
        try:
            for depth, name in enumerate([self.path.name, *parts]):
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(name, 0o755, dir_fd=fd)
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as error:
                    if error.errno in _REFUSED:
                        raise _refused(self._show(parts[:depth]), error, fd, name) from None
                    raise
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    def _open_at(self, dir_fd: int, parts: list[str], flags: int) -> int:
        try:
            return os.open(parts[-1], flags, 0o644, dir_fd=dir_fd)
        except OSError as error:
            if error.errno in _REFUSED:
                raise _refused(self._show(parts), error, dir_fd, parts[-1]) from None
            raise

    def read(
        self, relative: str, limit: int, offset: int = 0, whole: bool = True, last: bool = False
    ) -> bytes | None:
        """The bytes of a regular file from `offset` (None when absent). With `whole`, a file
        longer than `limit` is refused; otherwise at most `limit` bytes are returned: its
        last `limit` bytes with `last`."""
        parts = parts_of(relative)
        shown = self._show(parts)
        try:
            with self.folder(parts[:-1]) as dir_fd:
                fd = self._open_at(dir_fd, parts, _READ_FLAGS)
        except FileNotFoundError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UnsafeFile(f"refusing {shown}: not a regular file")
            if last:
                offset = max(info.st_size - limit, 0)
            if whole and info.st_size - offset > limit:
                raise UnsafeFile(f"refusing {shown}: {info.st_size} bytes, more than the {limit} allowed")
            chunks, left = [], min(limit, max(info.st_size - offset, 0))
            while left > 0:
                chunk = os.pread(fd, left, offset)
                if not chunk:
                    break
                chunks.append(chunk)
                offset, left = offset + len(chunk), left - len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def kind(self, relative: str) -> str | None:
        """"file", "dir", "other" (symlinks, FIFOs, ...) or None when absent."""
        parts = parts_of(relative)
        try:
            with self.folder(parts[:-1]) as dir_fd:
                mode = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None
        return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "other"

    def names(self, relative: str | None, kind: str) -> list[str]:
        """Sorted names of the entries of `kind` ("file" or "dir") in a folder (symlinks are
        neither); [] when the folder is absent."""
        try:
            with self.folder(parts_of(relative) if relative else []) as dir_fd, os.scandir(dir_fd) as entries:
                return sorted(e.name for e in entries
                              if (e.is_file if kind == "file" else e.is_dir)(follow_symlinks=False))
        except FileNotFoundError:
            return []

    def write(self, relative: str, data: bytes) -> None:
        """Replace a file atomically, creating its folders; a symlink or non-file there is refused."""
        parts = parts_of(relative)
        with self.folder(parts[:-1], create=True) as dir_fd:
            try:
                mode = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                mode = stat.S_IFREG
            if not stat.S_ISREG(mode):
                raise UnsafeFile(f"refusing to write {self._show(parts)}: not a regular file")
            replace_at(dir_fd, parts[-1], data)

    def open_fd(self, relative: str, flags: int) -> int:
        """A descriptor of a regular file opened with `flags` (O_CREAT allowed), never through a symlink."""
        parts = parts_of(relative)
        with self.folder(parts[:-1], create=bool(flags & os.O_CREAT)) as dir_fd:
            fd = self._open_at(dir_fd, parts, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise UnsafeFile(f"refusing {self._show(parts)}: not a regular file")
        return fd

    def ensure_dir(self, relative: str) -> Path:
        """Create a folder (and its parents) inside the directory; its path, for libraries
        that write there themselves (SQLite, TensorBoard, the result cache)."""
        parts = parts_of(relative)
        with self.folder(parts, create=True):
            return self.path.joinpath(*parts)
