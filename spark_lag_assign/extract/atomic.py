"""Whole-file writes on a local file system: readers see the old file or the new one, never a
part, and a failed write leaves the old file as it was and no temp file behind.

Everything is staged in a temp file beside its final name (same directory, so the same file
system): ``.<name>.<32 hex digits>.tmp``, the name the directory store already sweeps up
when a writer dies before it can remove its own.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from typing import Any

Writer = Callable[[str], None]


def temp_name(path: str | os.PathLike[str]) -> str:
    """A fresh temp path beside ``path``, hidden and unique to this call."""
    directory, name = os.path.split(os.fspath(path))
    return os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")


@contextmanager
def staged(path: str | os.PathLike[str]) -> Iterator[str]:
    """A temp path beside ``path`` for the caller to fill and move into place; whatever is
    left at that path when the block ends (it failed, or the caller linked rather than moved
    it) is removed."""
    tmp = temp_name(path)
    try:
        yield tmp
    finally:
        remove(tmp)


def write_atomically(path: str | os.PathLike[str], content: bytes | Writer, *, mode: int = 0o644) -> None:
    """Replace ``path`` with ``content`` in one step, durably.

    ``content`` is the bytes, or a function that writes the file at the path it is given
    (``frame.to_parquet``). The file is fsynced before the rename, and the directory after.
    """
    target = os.fspath(path)
    with staged(target) as tmp:
        if isinstance(content, bytes):
            write_durably(tmp, content)
        else:
            content(tmp)
            fsync_file(tmp)
        os.chmod(tmp, mode)  # exactly, whatever the umask
        os.replace(tmp, target)
    fsync_dir(os.path.dirname(target))


def write_durably(path: str, data: bytes, *, mode: int = 0o644) -> None:
    """Write a whole new file (truncating one already there) and fsync it."""
    _write(path, data, mode, sync=True)


def _write(path: str, data: bytes, mode: int, *, sync: bool) -> None:
    """Write a whole new file (truncating one already there), fsynced if ``sync``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def write_all_durably(files: Sequence[tuple[str, bytes]], *, mode: int = 0o644) -> None:
    """``write_durably`` for many files, with one flush for all of them where the system has
    ``syncfs`` (Linux): a thousand fsyncs of small files cost about half a second, one
    ``syncfs`` of their file system a few milliseconds. Elsewhere, or where the files are on
    more than one file system, each file is fsynced. Many files are written on threads
    (``WRITERS``)."""
    if not files:
        return
    syncfs = _syncfs()
    folders = {os.path.dirname(path) or "." for path, _ in files}
    sync_each = syncfs is None or len({os.stat(f).st_dev for f in folders}) != 1
    _each(lambda file: _write(file[0], file[1], mode, sync=sync_each), files)
    if sync_each:
        return
    fd = os.open(os.path.dirname(files[0][0]) or ".", os.O_RDONLY)
    try:
        if syncfs(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"syncfs: {os.strerror(code)}")
    finally:
        os.close(fd)


#: threads that write a generation's files: the system calls release the GIL, and creating a
#: thousand small files one after another waits on the file system's journal each time
WRITERS = 8


def _each(write: Callable[[tuple[str, bytes]], None], files: Sequence[tuple[str, bytes]]) -> None:
    """``write`` every file, on ``WRITERS`` threads where there are many; the first error is
    raised once all have finished. A path named twice is written in order, the last one last."""
    if len(files) < 2 * WRITERS or len({path for path, _ in files}) != len(files):
        for file in files:
            write(file)
        return
    with ThreadPoolExecutor(WRITERS) as pool:
        for _ in pool.map(write, files):
            pass


@functools.cache
def _syncfs() -> Any:
    """libc's ``syncfs`` (one file system's dirty data to disk), None where there is none."""
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
    except OSError:
        return None


def fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str) -> None:
    """Make a directory's new entries durable (where the file system can say so)."""
    fd = os.open(path or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def remove(path: str) -> None:
    """Delete a file if it is there."""
    with suppress(FileNotFoundError):
        os.unlink(path)
