"""The file system under a directory store: the operations it needs, with HDFS's atomicity.

``FileSystem`` is the interface (exclusive create of a complete file, no-overwrite rename,
listing with modification times); ``LocalFileSystem`` implements it on a POSIX path and
``spark_lag_assign.store.hadoop.HadoopFileSystem`` on a Hadoop URI. A file that exists but
cannot be read raises ``UnreadableFileError``, which the store counts as damage.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import shutil
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from spark_lag_assign.extract import atomic
from spark_lag_assign.store.base import StoreError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Entry:
    """One name in a directory listing."""

    name: str
    is_dir: bool
    mtime: float  # seconds since the epoch, by the file system's clock


class UnreadableFileError(OSError):
    """A file exists but its bytes cannot be had (missing blocks, still open by a dead writer)."""


@contextmanager
def fs_errors(uri: str, what: str) -> Iterator[None]:
    """Turn a file-system failure into one ``StoreError`` line naming the store and the step."""
    try:
        yield
    except OSError as exc:
        detail = exc.strerror or str(exc) or type(exc).__name__
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        raise StoreError(f"store {uri}: cannot {what}: {detail}{where}") from None


class FileSystem(ABC):
    """What the store needs of a file system, with HDFS's atomicity; failures raise OSError.

    Paths are strings joined with ``/`` (a local absolute path, or a Hadoop URI).
    """

    @abstractmethod
    def mkdirs(self, path: str) -> None:
        """Create a directory and its parents; an existing one is fine."""

    @abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Write a whole file (replacing it) and make it durable: only for names nobody else uses."""

    def write_all(self, files: Sequence[tuple[str, bytes]]) -> None:
        """``write`` each of ``files`` (path, bytes); all durable when it returns."""
        for path, data in files:
            self.write(path, data)

    @abstractmethod
    def create(self, path: str, data: bytes) -> bool:
        """Create a complete, durable file only if ``path`` does not exist: False if it does.

        Of two racing creators of one path exactly one gets True, and no reader ever sees the
        file partly written.
        """

    @abstractmethod
    def rename(self, src: str, dst: str) -> bool:
        """Rename a file or directory unless ``dst`` exists (then False, nothing moved)."""

    @abstractmethod
    def read(self, path: str) -> bytes | None:
        """A whole file, or None if it does not exist; ``UnreadableFileError`` if it exists
        but cannot be read whole."""

    @abstractmethod
    def list(self, path: str) -> list[Entry]:
        """The entries of a directory; empty if it does not exist."""

    @abstractmethod
    def delete(self, path: str, recursive: bool = False) -> bool:
        """Delete a file or directory (with ``recursive``, its contents); False if it did not exist."""

    def symlink(self, target: str, link: str) -> bool:
        """Point ``link`` at ``target`` atomically, unless ``link`` is something else than a
        symlink; False where the file system has no symlinks (they are a convenience only)."""
        return False

    def close(self) -> None:
        """Release the client (the store calls it when it is closed)."""


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


def _libc_renameat2() -> Any:
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    except OSError:
        return None


class LocalFileSystem(FileSystem):
    """POSIX: exclusive create is a fsynced temp file hard-linked to its final name (``link``
    fails if the name exists); no-overwrite rename is ``renameat2(RENAME_NOREPLACE)``."""

    def __init__(self) -> None:
        self._renameat2 = _libc_renameat2()

    def mkdirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def write(self, path: str, data: bytes) -> None:
        atomic.write_durably(path, data)

    def write_all(self, files: Sequence[tuple[str, bytes]]) -> None:
        atomic.write_all_durably(files)

    def create(self, path: str, data: bytes) -> bool:
        directory = os.path.dirname(path)
        with atomic.staged(path) as tmp:
            self.write(tmp, data)
            try:
                os.link(tmp, path)
                created = True
            except FileExistsError:
                created = False
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                    raise
                created = self._rename_noreplace(tmp, path)  # a mount without hard links
        if created:
            atomic.fsync_dir(directory)
        return created

    def rename(self, src: str, dst: str) -> bool:
        if not self._rename_noreplace(src, dst):
            return False
        atomic.fsync_dir(os.path.dirname(dst))
        return True

    def _rename_noreplace(self, src: str, dst: str) -> bool:
        if self._renameat2 is not None:
            result = self._renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE)
            if result == 0:
                return True
            code = ctypes.get_errno()
            if code == errno.EEXIST:
                return False
            if code not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
                raise OSError(code, os.strerror(code), src, None, dst)
        # no renameat2 here: rename fails on an existing non-empty directory, so only an
        # empty directory or a file created at ``dst`` in between could be replaced
        if os.path.lexists(dst):
            return False
        try:
            os.rename(src, dst)
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                return False
            raise
        return True

    def read(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def list(self, path: str) -> list[Entry]:
        try:
            scan = os.scandir(path)
        except FileNotFoundError:
            return []
        out: list[Entry] = []
        with scan:
            for e in scan:
                try:
                    st = e.stat(follow_symlinks=False)
                    out.append(Entry(e.name, e.is_dir(follow_symlinks=False), st.st_mtime))
                except FileNotFoundError:  # deleted while listed
                    continue
        return out

    def delete(self, path: str, recursive: bool = False) -> bool:
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                if recursive:
                    shutil.rmtree(path, onerror=_ignore_vanished)
                else:
                    os.rmdir(path)
            else:
                os.unlink(path)
        except FileNotFoundError:
            return False
        return True

    def symlink(self, target: str, link: str) -> bool:
        if os.path.lexists(link) and not os.path.islink(link):
            return False
        with atomic.staged(link) as tmp:
            os.symlink(target, tmp)
            os.replace(tmp, link)
        return True


def _ignore_vanished(function: Any, path: str, exc_info: Any) -> None:
    if not isinstance(exc_info[1], FileNotFoundError):
        raise exc_info[1]


__all__ = ["Entry", "FileSystem", "LocalFileSystem", "UnreadableFileError"]
