"""Claims in a directory store: one numbered file per claim write, never rewritten.

Layout (below the store's root)::

    claims/<consumer>/0000000012.json     the 12th claim file of that consumer id

``DirectoryClaimWriter`` takes an id over by reading the newest claim file N of the id and
exclusively creating N+1 under its fresh incarnation (a copy of the predecessor's claim,
state "taken over", or an empty claim of generation 0 for a first incarnation); every later
write creates the next number exclusively. An older incarnation's next write finds its
number taken: that is its fencing. The newest ``CLAIMS_KEPT`` files of an id are kept.
"""

from __future__ import annotations

import logging
import posixpath
import re
import threading
import time
import uuid
from collections.abc import Iterable, Mapping

from spark_lag_assign.store.base import (
    ClaimFencedError,
    ClaimRecord,
    Claims,
    ClaimWriter,
    StoreError,
    TopicPartition,
    Version,
)
from spark_lag_assign.store.fs import FileSystem, UnreadableFileError, fs_errors

log = logging.getLogger(__name__)

#: claim files kept per consumer (older ones are deleted; readers only need the newest)
CLAIMS_KEPT = 4

_CLAIM = re.compile(r"^(\d{10,})\.json$")


class ClaimFiles:
    """The claim files under one store's ``claims/`` directory: finding, reading, pruning."""

    def __init__(self, fs: FileSystem, root: str, uri: str) -> None:
        self.fs = fs
        self.root = root
        self.uri = uri

    def dir(self, consumer: str) -> str:
        return posixpath.join(self.root, consumer)

    def path(self, consumer: str, number: int) -> str:
        return posixpath.join(self.root, consumer, f"{number:010d}.json")

    def numbers(self, consumer: str) -> list[int]:
        entries = self.fs.list(self.dir(consumer))
        return sorted(int(m.group(1)) for e in entries if (m := _CLAIM.match(e.name)))

    def newest(self, consumer: str) -> tuple[int, ClaimRecord | str | None]:
        """The newest claim file's number and record (a reason if unreadable; None: no claim)."""
        for _ in range(20):
            numbers = self.numbers(consumer)
            if not numbers:
                return 0, None
            try:
                data = self.fs.read(self.path(consumer, numbers[-1]))
            except UnreadableFileError as exc:
                return numbers[-1], f"claims/{consumer}/{numbers[-1]:010d}.json: {exc.strerror}"
            if data is None:  # deleted between listing and reading: a newer one exists
                continue
            try:
                return numbers[-1], ClaimRecord.from_json(data, consumer)
            except ValueError as exc:
                return numbers[-1], f"claims/{consumer}/{numbers[-1]:010d}.json: {' '.join(str(exc).split())}"
        return 0, f"claims/{consumer}: the newest claim file kept vanishing while read"

    def read_all(self) -> Claims:
        """Every consumer's newest claim (a reason where it cannot be read)."""
        out: Claims = {}
        with fs_errors(self.uri, "read the claims"):
            for e in sorted(self.fs.list(self.root), key=lambda e: e.name):
                if not e.is_dir or e.name.startswith("."):
                    continue
                _, record = self.newest(e.name)
                if record is not None:
                    out[e.name] = record
        return out

    def prune(self, consumer: str, newest: int, stale_after: float, everything: bool = False) -> None:
        """Best effort: claim files older than the last few, and temp files older than ``stale_after``."""
        try:
            if not everything:
                if newest > CLAIMS_KEPT:
                    self.fs.delete(self.path(consumer, newest - CLAIMS_KEPT))
                return
            now = time.time()
            for e in self.fs.list(self.dir(consumer)):
                m = _CLAIM.match(e.name)
                old = m is not None and int(m.group(1)) <= newest - CLAIMS_KEPT
                stale = e.name.startswith(".") and now - e.mtime > stale_after
                if old or stale:
                    self.fs.delete(posixpath.join(self.dir(consumer), e.name))
        except OSError as exc:
            log.warning("store %s: cannot delete old claims of %s: %s", self.uri, consumer, exc)


class DirectoryClaimWriter(ClaimWriter):
    """Writes claim files N+1, N+2, ... of one consumer; a number found taken means fenced."""

    def __init__(self, files: ClaimFiles, consumer: str, stale_after: float) -> None:
        self._files = files
        self._stale_after = stale_after
        self._lock = threading.Lock()
        self.consumer = consumer
        self.incarnation = uuid.uuid4().hex
        self.predecessor = None
        self._seq = 0
        self._last = 0
        with fs_errors(files.uri, f"take consumer {consumer} over"):
            files.fs.mkdirs(files.dir(consumer))
            self._take_over()

    def _record(
        self,
        generation: int,
        holds: Iterable[TopicPartition],
        lease: float,
        state: str,
        committed: Mapping[str, Mapping[str, int]] | None,
        fences: Mapping[str, Version] | None = None,
    ) -> ClaimRecord:
        record = ClaimRecord.to_write(
            self.consumer, self.incarnation, self._seq + 1, generation, holds, lease, state, committed, fences
        )
        self._seq += 1
        return record

    def _take_over(self) -> None:
        files = self._files
        for _ in range(100):
            newest, found = files.newest(self.consumer)
            if isinstance(found, str):
                raise StoreError(
                    f"store {files.uri}: cannot take {self.consumer} over: its newest claim cannot be read ({found}); "
                    "what it held is unknown, remove the file to go on"
                )
            if found is None:
                record = self._record(0, (), 1.0, "started", None)
            else:
                # the fence notes too: dropped, a fenced holder could reopen its producer unseen
                record = self._record(found.generation, found.holds, found.lease, "taken over", found.committed, found.fences)
            if files.fs.create(files.path(self.consumer, newest + 1), record.to_json().encode()):
                self.predecessor, self._last = found, newest + 1
                files.prune(self.consumer, self._last, self._stale_after, everything=True)
                return
            self._seq = 0  # another writer took newest + 1 first: look again
        raise StoreError(f"store {files.uri}: cannot take {self.consumer} over: its claims keep changing")

    def write(
        self,
        generation: int,
        holds: Iterable[TopicPartition],
        lease: float,
        state: str = "",
        committed: Mapping[str, Mapping[str, int]] | None = None,
        fences: Mapping[str, Version] | None = None,
    ) -> ClaimRecord:
        files = self._files
        with self._lock:
            record = self._record(generation, holds, lease, state, committed, fences)
            data = record.to_json().encode()
            number = self._last + 1
            with fs_errors(files.uri, f"write a claim of {self.consumer}"):
                while not files.fs.create(files.path(self.consumer, number), data):
                    if not self._mine(number):
                        raise ClaimFencedError(
                            f"store {files.uri}: consumer {self.consumer} was taken over by another incarnation; stop reading"
                        )
                    self._last = number = number + 1  # an earlier write of ours that reported a failure
                self._last = number
            files.prune(self.consumer, number, self._stale_after)
            return ClaimRecord.from_json(data, self.consumer)

    def _mine(self, number: int) -> bool:
        try:
            data = self._files.fs.read(self._files.path(self.consumer, number))
        except UnreadableFileError:
            return False
        try:
            return data is not None and ClaimRecord.from_json(data, self.consumer).incarnation == self.incarnation
        except ValueError:
            return False


__all__ = ["CLAIMS_KEPT", "ClaimFiles", "DirectoryClaimWriter"]
