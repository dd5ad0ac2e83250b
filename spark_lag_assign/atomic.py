"""Whole-file writes on a local file system: readers see the old file or the new one, never a
part, and a failed write leaves the old file as it was and no temp file behind.

Everything is staged in a temp file beside its final name (same directory, so the same file
system): ``.<name>.<32 hex digits>.tmp``, the name the directory store already sweeps up
when a writer dies before it can remove its own.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

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
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


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
