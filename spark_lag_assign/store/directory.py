"""The store in a directory: a local path, a shared POSIX mount or HDFS (``hdfs://``, through
Hadoop's own client: ``spark_lag_assign.store.hadoop``).

Layout (every name below the store's root)::

    generations/000007.manifest.json               makes generation 7 visible (created exclusively)
    generations/000007/plan.json                   the whole plan
    generations/000007/assign/<consumer>.json      that consumer's Kafka source ``assign`` JSON
    generations/000007/starting-offsets/<consumer>.json   ... and its ``startingOffsets`` JSON
    claims/<consumer>/0000000012.json              one file per claim write, numbered, never rewritten
    current -> generations/000007                  convenience links, local file systems only:
    plan.json, assign, starting-offsets -> current/...   readers of the store never use them

Publishing generation 7: the planner writes the whole generation into a staging directory
of its own (``generations/.000007.<writer>.tmp``), then creates ``000007.manifest.json``
exclusively (generation number, directory name, consumers, sha256 of plan.json's bytes),
then renames the staging directory to ``generations/000007``. The manifest is the one point
of arbitration: of two planners racing for a number exactly one creates it, and the loser
removes its staging directory and learns it was fenced. The directory keeps today's name
because it is renamed only by the manifest's owner, after it won (renaming first would let
a writer that dies between rename and manifest block that number for everyone); a writer
that dies between the manifest and the rename leaves a manifest whose directory is
missing, which readers skip like any damaged generation and whose number is never reused.

The current generation is the highest one whose manifest exists and whose plan.json
matches the manifest's checksum; nothing else (no symlink, no lock) is consulted. The next
number is one more than the highest manifest or generation directory seen, damaged or not.

Claims: one numbered file per claim write, created exclusively; an older incarnation's next
write finds its number taken, and that is its fencing (``spark_lag_assign.store.claimfiles``).

Every file-system operation goes through ``FileSystem``, whose operations are the ones HDFS
offers with the same atomicity (exclusive create of a complete file, no-overwrite rename),
so that ``HadoopFileSystem`` (``spark_lag_assign.store.hadoop``) can replace ``LocalFileSystem``.
A file that exists but cannot be read (``UnreadableFileError``: missing blocks, a file a dead
writer left open) counts as damage, like a bad checksum, never as a failure of the store.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import posixpath
import re
import socket
import time
import uuid
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from spark_lag_assign.core.ids import check_consumer_id
from spark_lag_assign.errors import ConfigError
from spark_lag_assign.store.base import (
    FENCER,
    Claims,
    ClaimWriter,
    Publisher,
    PublishFencedError,
    Store,
    StoreError,
    utc_stamp,
)
from spark_lag_assign.store.claimfiles import ClaimFiles, DirectoryClaimWriter
from spark_lag_assign.store.fs import FileSystem, LocalFileSystem, UnreadableFileError, fs_errors

if TYPE_CHECKING:
    from spark_lag_assign.plan.build import Plan
    from spark_lag_assign.store import StoreURI


log = logging.getLogger(__name__)

#: staging directories and temp files of writers silent this long (seconds) are removed
STALE_AFTER = 600.0
MANIFEST_FORMAT = 1

_GENERATION_DIR = re.compile(r"^(\d{6,})$")
_MANIFEST = re.compile(r"^(\d{6,})\.manifest\.json$")
#: what writers leave behind when they die: ``.<name>.<uuid>.tmp`` (staging directories,
#: temp files of exclusive creates and of links) and ``.trash.<uuid>`` (a deletion under way)
_LEFTOVER = re.compile(r"^\.(?:.+\.[0-9a-f]{32}\.tmp|trash\.[0-9a-f]{32})$")
_TRASH = re.compile(r"^\.trash\.[0-9a-f]{32}$")


# -- the store -----------------------------------------------------------------------------------


def hadoop_store(parsed: StoreURI, *, hadoop_conf: Mapping[str, str] | None = None, **settings: Any) -> Store:
    """A directory on a Hadoop file system (``hdfs://``, ``viewfs://``, ``webhdfs://``) through
    Hadoop's Java client in PySpark's JVM; ``hadoop_conf``: Hadoop settings over the cluster's
    own (e.g. ``{"ipc.client.connect.max.retries": "2"}``). Other settings: ``DirectoryStore``'s."""
    from spark_lag_assign.store.hadoop import HadoopFileSystem

    if hadoop_conf is not None and not isinstance(hadoop_conf, Mapping):
        raise ConfigError(f"store {parsed.uri}: hadoop_conf must map Hadoop setting names to values")
    try:
        fs = HadoopFileSystem(parsed.location, hadoop_conf)
    except OSError as exc:
        raise StoreError(f"store {parsed.uri}: cannot open the file system: {exc.strerror or exc}") from None
    try:
        return DirectoryStore(parsed, fs=fs, **settings)
    except BaseException:
        fs.close()
        raise


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:200] or "root"


class DirectoryStore(Store):
    """Plans and claims as immutable files in one directory (see the module docstring)."""

    def __init__(self, parsed: StoreURI, *, history: int = 20, poll: float = 0.2, fs: FileSystem | None = None) -> None:
        if isinstance(history, bool) or not isinstance(history, int) or history < 1:
            raise ConfigError(f"store {parsed.uri}: history must be a whole number of at least 1, not {history!r}")
        if isinstance(poll, bool) or not isinstance(poll, int | float) or not poll > 0:
            raise ConfigError(f"store {parsed.uri}: poll must be a positive number of seconds, not {poll!r}")
        self.uri = parsed.uri
        self.name = _safe_name(parsed.name)
        self.root = parsed.location
        self.history = history
        self.poll = float(poll)
        self.stale_after = STALE_AFTER
        self._fs = fs or LocalFileSystem()
        self._generations = posixpath.join(self.root, "generations")
        self._claim_files = ClaimFiles(self._fs, posixpath.join(self.root, "claims"), self.uri)
        self._reported: set[tuple[int, str]] = set()

    def __repr__(self) -> str:
        return f"DirectoryStore({self.uri!r})"

    def close(self) -> None:
        self._fs.close()

    def _io(self, what: str) -> AbstractContextManager[None]:
        """A file-system failure as one StoreError line naming the store and the step."""
        return fs_errors(self.uri, what)

    # -- plans: reading

    def _path(self, *parts: str) -> str:
        return posixpath.join(self._generations, *parts)

    def _manifests(self) -> list[int]:
        """Every generation number with a manifest, damaged or not, ascending."""
        return sorted(int(m.group(1)) for e in self._fs.list(self._generations) if (m := _MANIFEST.match(e.name)))

    def _missing_dirs(self, path: str) -> list[str]:
        """The directories from the outermost missing one down to ``path`` that do not exist yet."""
        missing: list[str] = []
        while True:
            parent, name = posixpath.split(path.rstrip("/"))
            if not name or parent == path:
                return list(reversed(missing))
            # the root of a URI (hdfs://host:port) is listed as "hdfs://host:port/", and is the last
            at_root = urlsplit(parent).path in ("", "/")
            if at_root:
                parent = parent.rstrip("/") + "/"
            if any(e.name == name and e.is_dir for e in self._fs.list(parent)):
                return list(reversed(missing))
            missing.append(path)
            if at_root:
                return list(reversed(missing))
            path = parent

    def _taken(self) -> int:
        """The highest generation number in use: manifests, and directories without one
        (a half-deleted generation, or one written by an older version of this tool)."""
        numbers = [0]
        for e in self._fs.list(self._generations):
            m = _MANIFEST.match(e.name) or (_GENERATION_DIR.match(e.name) if e.is_dir else None)
            if m:
                numbers.append(int(m.group(1)))
        return max(numbers)

    def _read(self, generation: int, parse: bool = True) -> Plan | bool | str | None:
        """One generation: the plan (or True unparsed) if complete, a reason if damaged, None if gone."""
        from spark_lag_assign.plan.document import PlanFormatError, parse_plan

        try:
            raw = self._fs.read(self._path(f"{generation:06d}.manifest.json"))
        except UnreadableFileError as exc:
            return f"its manifest is {exc.strerror}"
        if raw is None:
            return None
        try:
            manifest = json.loads(raw)
            directory, digest = manifest["dir"], manifest["sha256"]
            if manifest["generation"] != generation or not isinstance(directory, str) or not isinstance(digest, str):
                raise ValueError("fields do not match")
            if not directory or "/" in directory or directory in (".", ".."):
                raise ValueError(f"bad directory name {directory!r}")
        except (ValueError, KeyError, TypeError) as exc:
            return f"its manifest is unreadable ({' '.join(str(exc).split())})"
        try:
            data = self._fs.read(self._path(directory, "plan.json"))
        except UnreadableFileError as exc:
            return f"{directory}/plan.json is {exc.strerror}"
        if data is None:
            if self._fs.read(self._path(f"{generation:06d}.manifest.json")) is None:
                return None  # deleted meanwhile, manifest first (history)
            return f"{directory}/plan.json is missing"
        if hashlib.sha256(data).hexdigest() != digest:
            return f"{directory}/plan.json does not match its checksum"
        if not parse:
            return True
        try:
            doc = parse_plan(data, f"{directory}/plan.json")
        except PlanFormatError as exc:
            return str(exc)
        if doc.get("generation") != generation:
            return f"{directory}/plan.json holds generation {doc.get('generation')!r}"
        return doc

    def _report(self, generation: int, why: str) -> None:
        if (generation, why) not in self._reported:
            self._reported.add((generation, why))
            log.warning("store %s: generation %d is skipped: %s", self.uri, generation, why)

    def _latest(self, manifests: list[int] | None = None) -> Plan | None:
        for generation in reversed(manifests if manifests is not None else self._manifests()):
            found = self._read(generation)
            if isinstance(found, dict):
                return found
            if isinstance(found, str):
                self._report(generation, found)
        return None

    def latest(self) -> Plan | None:
        with self._io("read the newest plan"):
            return self._latest()

    def get(self, generation: int) -> Plan | None:
        with self._io(f"read generation {generation}"):
            found = self._read(generation)
        if isinstance(found, str):
            self._report(generation, found)
        return found if isinstance(found, dict) else None

    def generations(self) -> list[int]:
        with self._io("list the generations"):
            return [g for g in self._manifests() if self._read(g, parse=False) is True]

    def wait_for_plan(self, newer_than: int, timeout: float) -> Plan | None:
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            with self._io("read the newest plan"):
                manifests = self._manifests()
                if manifests and manifests[-1] > newer_than:
                    found = self._latest(manifests)
                    if found is not None and found["generation"] > newer_than:
                        return found
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(self.poll, left))

    def publisher(self) -> Publisher:
        return _DirectoryPublisher(self)

    # -- plans: writing

    def _publish(self, plan: Plan) -> None:
        from spark_lag_assign.plan.build import assign_json, plan_json, starting_offsets_json

        generation = plan["generation"]
        name = f"{generation:06d}"
        writer = uuid.uuid4().hex
        staged = self._path(f".{name}.{writer}.tmp")
        self._clean_leftovers()
        try:
            with self._io(f"write generation {generation}"):
                self._fs.mkdirs(posixpath.join(staged, "assign"))
                self._fs.mkdirs(posixpath.join(staged, "starting-offsets"))
                parts = {c: (assign_json(e), starting_offsets_json(e)) for c, e in plan["consumers"].items()}
                files = []
                for consumer, (assign, starting) in parts.items():
                    file = f"{consumer}.json"
                    files.append((posixpath.join(staged, "assign", file), (assign + "\n").encode()))
                    files.append((posixpath.join(staged, "starting-offsets", file), (starting + "\n").encode()))
                data = plan_json(plan, parts).encode()
                files.append((posixpath.join(staged, "plan.json"), data))
                self._fs.write_all(files)
                taken = f"store {self.uri}: generation {generation} was taken by another planner; nothing published"
                if self._taken() >= generation:
                    raise PublishFencedError(taken)
                manifest = {
                    "format": MANIFEST_FORMAT,
                    "generation": generation,
                    "dir": name,
                    "staged": posixpath.basename(staged),
                    "consumers": sorted(plan["consumers"]),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "bytes": len(data),
                    "writer": writer,
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "written": utc_stamp(),
                }
                text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
                if not self._fs.create(self._path(f"{name}.manifest.json"), text.encode()):
                    raise PublishFencedError(taken)
        except BaseException:
            self._discard(staged)
            raise
        # the number is ours now; until the rename, readers skip it as incomplete
        with self._io(f"move generation {generation} into place"):
            if not self._fs.rename(staged, self._path(name)):
                self._discard(staged)
                raise StoreError(
                    f"store {self.uri}: cannot move generation {generation} into place: {name} exists; publish again"
                )
        self._refresh_links(generation, name)
        self._prune()

    def _discard(self, path: str) -> None:
        try:
            self._fs.delete(path, recursive=True)
        except PermissionError as exc:  # the write failed the same way and says so already
            log.debug("store %s: cannot remove %s: %s", self.uri, path, exc.strerror or exc)
        except OSError as exc:
            log.warning("store %s: cannot remove %s: %s", self.uri, path, exc.strerror or exc)

    def _refresh_links(self, generation: int, name: str) -> None:
        """Best effort: today's ``current``, ``plan.json``, ... links, for people and for Spark
        jobs that read ROOT/plan.json; the store itself never reads them."""
        try:
            if not self._fs.symlink(posixpath.join("generations", name), posixpath.join(self.root, "current")):
                return
            for link in ("plan.json", "assign", "starting-offsets"):
                if not self._fs.symlink(posixpath.join("current", link), posixpath.join(self.root, link)):
                    log.warning("store %s: %s is not a link this store keeps; left alone", self.uri, link)
            if self._taken() > generation:  # a newer publish may have set current before us
                newest = self._latest()
                if newest is not None and newest["generation"] > generation:
                    target = posixpath.join("generations", f"{newest['generation']:06d}")
                    self._fs.symlink(target, posixpath.join(self.root, "current"))
        except OSError as exc:
            log.warning("store %s: cannot refresh the current links: %s", self.uri, exc)

    def _prune(self) -> None:
        """Keep the newest ``history`` generations; delete each older one manifest first."""
        try:
            for generation in self._manifests()[: -self.history]:
                manifest = self._path(f"{generation:06d}.manifest.json")
                try:
                    raw = self._fs.read(manifest)
                except UnreadableFileError:
                    raw = None
                try:
                    directory = json.loads(raw)["dir"] if raw is not None else f"{generation:06d}"
                except (ValueError, KeyError, TypeError):
                    directory = f"{generation:06d}"
                if not isinstance(directory, str) or "/" in directory or directory in ("", ".", ".."):
                    directory = f"{generation:06d}"
                self._fs.delete(manifest)
                self._trash(self._path(directory))
        except OSError as exc:
            log.warning("store %s: cannot delete old generations: %s", self.uri, exc)

    def _trash(self, path: str) -> None:
        """Delete a directory by first renaming it away, so that no one sees it half deleted
        under its name and a writer still renaming it loses cleanly."""
        trash = posixpath.join(posixpath.dirname(path), f".trash.{uuid.uuid4().hex}")
        if self._fs.rename(path, trash):
            self._fs.delete(trash, recursive=True)

    def _clean_leftovers(self) -> None:
        """Best effort: staging directories and temp files of writers that died long ago."""
        now = time.time()
        try:
            for directory in (self._generations, self.root):
                for e in self._fs.list(directory):
                    if not _LEFTOVER.match(e.name):
                        continue
                    path = posixpath.join(directory, e.name)
                    if _TRASH.match(e.name):
                        self._fs.delete(path, recursive=True)
                    elif now - e.mtime > self.stale_after:
                        if e.is_dir:
                            self._trash(path)
                        else:
                            self._fs.delete(path)
        except OSError as exc:
            log.warning("store %s: cannot remove leftovers: %s", self.uri, exc)

    # -- claims (``spark_lag_assign.store.claimfiles``)

    def claim_writer(self, consumer: str) -> ClaimWriter:
        if consumer != FENCER:
            check_consumer_id(consumer)  # it names a directory (and, in a Kafka store, a topic): one rule for both
        return DirectoryClaimWriter(self._claim_files, consumer, self.stale_after)

    def claims(self) -> Claims:
        return self._claim_files.read_all()


class _DirectoryPublisher(Publisher):
    """The planner's role: the number it may publish is fixed when it is created."""

    def __init__(self, store: DirectoryStore) -> None:
        self._store = store
        self._published = False
        with store._io("open the generations for writing"):
            # created now, so that an unwritable store fails before any planning; removed
            # again by close() if nothing was published, so a failed run leaves nothing behind
            self._created = store._missing_dirs(store._generations)
            store._fs.mkdirs(store._generations)
            self._next = store._taken() + 1
            self._previous = store._latest()

    def close(self) -> None:
        if not self._published:
            for path in reversed(self._created):  # innermost first, and only while still empty
                try:
                    if not self._store._fs.list(path):
                        self._store._fs.delete(path)
                except OSError:
                    break

    def previous(self) -> Plan | None:
        return self._previous

    def next_generation(self) -> int:
        return self._next

    def publish(self, plan: Plan) -> None:
        from spark_lag_assign.plan.document import check_plan

        generation = plan.get("generation") if isinstance(plan, dict) else None
        if generation != self._next:
            raise ValueError(
                f"store {self._store.uri}: the plan's generation {generation!r} is not the next generation {self._next}"
            )
        check_plan(plan, f"store {self._store.uri}: generation {generation}")
        try:
            self._store._publish(plan)
        except StoreError:
            try:  # failed after its manifest was created: the number is used up
                if self._store._fs.read(self._store._path(f"{self._next:06d}.manifest.json")) is not None:
                    self._next += 1
            except OSError:
                pass
            raise
        self._published = True
        self._previous, self._next = plan, self._next + 1


__all__ = ["DirectoryStore", "hadoop_store"]
