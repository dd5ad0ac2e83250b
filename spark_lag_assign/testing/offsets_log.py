"""The broker's own record of a group's offset commits: ``__consumer_offsets``, decoded.

A group coordinator appends every offset commit it accepts to ``__consumer_offsets`` (one
record per partition committed) before it answers; a transactional commit
(``TxnOffsetCommit``, what ``FencedGroupCommit`` sends) is appended inside the producer's
transaction, so a ``read_committed`` reader sees it only once the transaction committed,
and never one that was aborted (fenced). Read that way, the log is the history of every
commit the group accepted, in the order it accepted them, with the metadata each carried:
a proof can judge every commit, not samples of the group's offsets.

Records, as Kafka 4.x writes them (``group-coordinator/src/main/resources/common/message``):

- key: ``int16`` record type, then the key's fields. Types 0 (``LegacyOffsetCommitKey``)
  and 1 (``OffsetCommitKey``) are offset commits, both ``group: string, topic: string,
  partition: int32``; 2 (``GroupMetadataKey``) and every higher type (KIP-848 and share
  groups' records) are not offsets and are skipped.
- value: ``int16`` version, then ``offset: int64``, ``leaderEpoch: int32`` (v3+),
  ``metadata: string``, ``commitTimestamp: int64`` (ms), ``expireTimestamp: int64`` (v1
  only); v4 is flexible: ``metadata`` is a compact string and tagged fields follow (tag 0:
  ``topicId``, a UUID), which are skipped. A null value deletes the committed offset.
- ``string``: ``int16`` length then UTF-8; compact: unsigned varint ``length + 1``.

``decode`` is pure (unit-tested in tests/unit/test_offsets_log.py); ``read_commits`` reads
the log from a broker.

When a commit took effect. A transactional commit is accepted in two steps: the coordinator
appends it (``commitTimestamp``) as part of the producer's open transaction, and it becomes
the group's offset only when a COMMIT marker of that producer id follows in the same
partition of the log. Until then a fetch of the group's offsets still answers the previous
one. The two are milliseconds apart, except when the marker is late: a broker that shut
down between a transaction's ``PrepareCommit`` and its markers (Kafka completes it without
them when the partition has no leader, as the only broker's partitions have none during
its controlled shutdown) leaves the commit pending until that producer id's next marker,
which may come much later and settles it either way. ``visible_at`` is the time of that
marker, read from the broker's own segment files (``with_visibility``): record batches in
the v2 format (``magic`` 2), whose header is ``baseOffset: int64, batchLength: int32,
partitionLeaderEpoch: int32, magic: int8, crc: uint32, attributes: int16`` (bit 4:
transactional, bit 5: control), ``lastOffsetDelta: int32, baseTimestamp: int64,
maxTimestamp: int64, producerId: int64, producerEpoch: int16, baseSequence: int32,
records: int32``; a control batch holds one record whose key is ``version: int16, type:
int16`` (0 ABORT, 1 COMMIT).
"""

from __future__ import annotations

import bisect
import struct
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from spark_lag_assign.consume.kafka_commit import parse_metadata

TOPIC = "__consumer_offsets"
#: the key types that are offset commits (Legacy and current OffsetCommitKey)
OFFSET_COMMIT_KEYS = (0, 1)


class DecodeError(ValueError):
    """A record of ``__consumer_offsets`` that does not follow the schemas above."""


@dataclass(frozen=True)
class OffsetCommit:
    """One offset commit the coordinator accepted (or, with ``offset`` None, a deletion)."""

    position: tuple[int, int]  # (partition of __consumer_offsets, offset in it): the log order
    group: str
    topic: str
    partition: int
    offset: int | None
    metadata: str = ""
    committed_at: float = 0.0  # commitTimestamp: the broker's wall clock, in seconds
    leader_epoch: int = -1
    #: when the group's offset became this one: the COMMIT marker of a transactional commit
    #: (``with_visibility``), else None: at ``committed_at``
    visible_at: float | None = None

    @property
    def effective_at(self) -> float:
        """When a fetch of the group's offsets could first answer this commit."""
        return self.committed_at if self.visible_at is None else max(self.visible_at, self.committed_at)

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def by(self) -> tuple[str, int] | None:
        """(consumer, generation) from the metadata, or None if it is not a pipeline's."""
        return parse_metadata(self.metadata)

    def describe(self) -> str:
        return (
            f"{self.topic}-{self.partition}={self.offset} at {self.committed_at:.3f} "
            f"[{self.metadata or 'no metadata'}] (log {self.position[0]}/{self.position[1]})"
        )


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.at + n > len(self.data):
            raise DecodeError(f"needs {n} bytes at {self.at}, has {len(self.data) - self.at}")
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise DecodeError("an unsigned varint longer than 5 bytes")

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise DecodeError("a null string where the schema has none")
        return self.take(n).decode()

    def compact_string(self) -> str:
        n = self.uvarint()
        if n == 0:
            raise DecodeError("a null compact string where the schema has none")
        return self.take(n - 1).decode()

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag: none of them is needed here
            self.take(self.uvarint())

    def end(self) -> None:
        if self.at != len(self.data):
            raise DecodeError(f"{len(self.data) - self.at} bytes left over")


def decode_key(key: bytes) -> tuple[str, str, int] | None:
    """(group, topic, partition) of an offset-commit key; None for any other record type."""
    r = _Reader(key)
    kind = r.int16()
    if kind not in OFFSET_COMMIT_KEYS:
        return None
    group, topic, partition = r.string(), r.string(), r.int32()
    r.end()
    return group, topic, partition


def decode_value(value: bytes) -> tuple[int, int, str, int]:
    """(offset, leader epoch, metadata, commit timestamp in ms) of an offset-commit value."""
    r = _Reader(value)
    version = r.int16()
    if not 0 <= version <= 4:
        raise DecodeError(f"OffsetCommitValue version {version} is not one of 0-4")
    offset = r.int64()
    epoch = r.int32() if version >= 3 else -1
    metadata = r.compact_string() if version >= 4 else r.string()
    timestamp = r.int64()
    if version == 1:
        r.int64()  # expireTimestamp
    if version >= 4:
        r.tagged_fields()
    r.end()
    return offset, epoch, metadata, timestamp


def decode(position: tuple[int, int], key: bytes | None, value: bytes | None) -> OffsetCommit | None:
    """One record of ``__consumer_offsets`` as an ``OffsetCommit``; None if it is not one."""
    if key is None:
        return None
    found = decode_key(key)
    if found is None:
        return None
    group, topic, partition = found
    if value is None:
        return OffsetCommit(position, group, topic, partition, None)
    offset, epoch, metadata, timestamp = decode_value(value)
    return OffsetCommit(position, group, topic, partition, offset, metadata, timestamp / 1000.0, epoch)


@dataclass(frozen=True)
class RecordBatch:
    """The header of one record batch in a segment file (and, for a control batch, its type)."""

    base_offset: int
    last_offset: int
    max_timestamp: float  # seconds
    producer_id: int
    transactional: bool
    control: str | None = None  # "COMMIT" or "ABORT" for a control batch


_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")  # 61 bytes, the v2 layout above
_CONTROL_TYPES = {0: "ABORT", 1: "COMMIT"}


def decode_batches(data: bytes) -> Iterator[RecordBatch]:
    """The record batches of a segment file's bytes, in order; a batch cut off at the end (a
    segment being written) ends the iteration."""
    at = 0
    while at + _BATCH_HEADER.size <= len(data):
        base, length, _epoch, magic, _crc, attributes, last_delta, _first_ts, max_ts, pid, _pepoch, _seq, count = (
            _BATCH_HEADER.unpack_from(data, at)
        )
        end = at + 12 + length
        if end > len(data):
            return
        if magic != 2:
            raise DecodeError(f"a record batch at {base} has magic {magic}, not 2")
        control = None
        if attributes & 0x20 and count == 0:  # the cleaner keeps an emptied control batch: no marker left
            at = end
            continue
        if attributes & 0x20:
            if count != 1:
                raise DecodeError(f"a control batch at {base} holds {count} records, not 1")
            r = _Reader(data[at + _BATCH_HEADER.size : end])
            r.uvarint()  # the record's length (a zigzag varint, small and positive)
            r.take(1)  # attributes
            r.uvarint()  # timestampDelta, offsetDelta: zigzag varints, not needed
            r.uvarint()
            key_length = r.uvarint() >> 1
            key = _Reader(r.take(key_length))
            key.int16()  # version
            kind = key.int16()
            if kind not in _CONTROL_TYPES:
                raise DecodeError(f"a control record at {base} has type {kind}")
            control = _CONTROL_TYPES[kind]
        yield RecordBatch(base, base + last_delta, max_ts / 1000.0, pid, bool(attributes & 0x10), control)
        at = end


def with_visibility(commits: Iterable[OffsetCommit], data_dir: str | Path) -> list[OffsetCommit]:
    """``commits`` with ``visible_at`` set from the segment files of a broker's log directory
    (``data_dir``, holding ``__consumer_offsets-<n>/``): for a transactional commit, the time
    of the first marker of its producer id after it in its partition of the log (a COMMIT:
    ``commits`` come from a read_committed reader; the first marker settles every pending
    commit of that producer id, whatever its epoch). A commit with no marker after it in the
    files keeps ``committed_at``: the earlier, the stricter for a proof."""
    commits = list(commits)
    out: dict[tuple[int, int], OffsetCommit] = {}
    for partition in sorted({c.position[0] for c in commits}):
        batches = sorted(
            (
                b
                for segment in (Path(data_dir) / f"{TOPIC}-{partition}").glob("*.log")
                for b in decode_batches(segment.read_bytes())
            ),
            key=lambda b: b.base_offset,
        )
        starts = [b.base_offset for b in batches]
        markers: dict[int, list[RecordBatch]] = defaultdict(list)  # producer id -> its control batches, in log order
        for b in batches:
            if b.control:
                markers[b.producer_id].append(b)
        for c in (c for c in commits if c.position[0] == partition):
            at = bisect.bisect_right(starts, c.position[1]) - 1
            if at < 0 or batches[at].last_offset < c.position[1]:
                raise DecodeError(f"no batch of {TOPIC}-{partition} in {data_dir} holds offset {c.position[1]}")
            mine = batches[at]
            if not mine.transactional:
                out[c.position] = c
                continue
            theirs = markers[mine.producer_id]
            later = bisect.bisect_right(theirs, c.position[1], key=lambda m: m.base_offset)
            if later == len(theirs):
                # not expected (the cleaner keeps a marker while records of its transaction
                # remain, and the reader saw this one): the time it was appended, the stricter
                out[c.position] = c
                continue
            if theirs[later].control != "COMMIT":
                raise DecodeError(
                    f"{c.describe()} was read as committed, but the first marker of producer {mine.producer_id} "
                    f"after it, at {theirs[later].base_offset}, aborts it"
                )
            out[c.position] = replace(c, visible_at=theirs[later].max_timestamp)
    return [out[c.position] for c in commits]


def of_group(commits: Iterable[OffsetCommit], group: str) -> list[OffsetCommit]:
    """A group's commits in log order (a group lives in one partition of the log)."""
    return sorted((c for c in commits if c.group == group), key=lambda c: c.position)


def partition_of(group: str, partitions: int) -> int:
    """The partition of ``__consumer_offsets`` that holds ``group``'s records: Kafka's
    ``Utils.abs(group.hashCode()) % partitions``, with Java's ``String.hashCode`` (31 * h +
    each UTF-16 code unit, in signed 32 bits) and ``Utils.abs`` (0 for the smallest int,
    else the absolute value; not the sign bit cleared, which is the producer's rule)."""
    code = 0
    units = group.encode("utf-16-be")
    for i in range(0, len(units), 2):
        code = (31 * code + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    signed = code - (1 << 32) if code >= 1 << 31 else code
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


def _decided(consumer: Any, log_ends: Mapping[Any, int], deadline: float, timeout: float) -> dict[Any, int]:
    """The last stable offsets of ``log_ends``' partitions, once each reaches its end there
    (every transaction begun before is decided); ``TimeoutError`` naming one that does not."""
    while True:
        ends = consumer.end_offsets(list(log_ends))  # read_committed: a reader stops at an open transaction
        undecided = {tp: (ends[tp], end) for tp, end in log_ends.items() if ends[tp] < end}
        if not undecided:
            return dict(ends)
        if time.monotonic() > deadline:
            tp, (stable, end) = min(undecided.items())
            raise TimeoutError(
                f"a transaction in {TOPIC}-{tp.partition} stayed open for {timeout:g}s at offset {stable} "
                f"(the log ends at {end}): the commits past it cannot be read"
            )
        time.sleep(0.2)


def read_commits(
    bootstrap_servers: str, group: str | None = None, *, timeout: float = 120.0, client_options: Mapping[str, Any] | None = None
) -> list[OffsetCommit]:
    """Every offset commit in ``__consumer_offsets`` that a ``read_committed`` reader sees,
    up to the log's end as of the call, in log order; only ``group``'s if given (read from its
    one partition). On a broker that authorizes, ``client_options`` log in as a super user
    (nobody else may read the log).

    Never a part of the log read as if it were all of it: a ``read_committed`` reader stops at
    the first transaction still open (the last stable offset), so this first waits until
    every transaction begun before the call is decided, and raises ``TimeoutError`` naming
    the partition and both offsets if one stays open past ``timeout`` (a hanging transaction:
    ``kafka-transactions.sh find-hanging``); commits past it would otherwise go unjudged.
    """
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    def reader(isolation: str) -> Any:
        return KafkaConsumer(
            bootstrap_servers=bootstrap_servers, client_id="sla-offsets-log", enable_auto_commit=False,
            isolation_level=isolation, auto_offset_reset="earliest", max_partition_fetch_bytes=4 * 1024 * 1024,
            **dict(client_options or {}),
        )  # fmt: skip

    consumer = reader("read_committed")
    try:
        partitions = consumer.partitions_for_topic(TOPIC)
        if not partitions:
            return []
        numbers = sorted(partitions) if group is None else [partition_of(group, len(partitions))]
        tps = [TopicPartition(TOPIC, p) for p in numbers]
        written = reader("read_uncommitted")
        try:
            log_ends = written.end_offsets(tps)  # every record appended so far, decided or not
        finally:
            written.close()
        deadline = time.monotonic() + timeout
        ends = _decided(consumer, log_ends, deadline, timeout)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        found: list[OffsetCommit] = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {TOPIC} did not reach {ends} within {timeout:g}s")
            for tp, records in consumer.poll(timeout_ms=1000, max_records=5000).items():
                for rec in records:
                    commit = decode((tp.partition, rec.offset), rec.key, rec.value)
                    if commit is not None and (group is None or commit.group == group):
                        found.append(commit)
        return sorted(found, key=lambda c: c.position)
    finally:
        consumer.close()


__all__ = [
    "TOPIC", "DecodeError", "OffsetCommit", "RecordBatch", "decode", "decode_batches", "decode_key", "decode_value",
    "of_group", "partition_of", "read_commits", "with_visibility",
]  # fmt: skip
