"""``__consumer_offsets`` records decoded as Kafka 4.x writes them: every value version, the
key types that are not offsets, deletions, and records that do not follow the schemas."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from spark_lag_assign.testing.offsets_log import (
    DecodeError,
    OffsetCommit,
    decode,
    decode_batches,
    decode_key,
    decode_value,
    of_group,
    partition_of,
    with_visibility,
)


def string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def compact(text: str) -> bytes:
    raw = text.encode()
    return uvarint(len(raw) + 1) + raw


def key(kind: int, group: str = "g", topic: str = "orders", partition: int = 3) -> bytes:
    return struct.pack(">h", kind) + string(group) + string(topic) + struct.pack(">i", partition)


META = "spark-lag-assign consumer=A generation=4"


def value(version: int, offset: int = 1234, metadata: str = META, ts: int = 1_700_000_000_123, epoch: int = 7) -> bytes:
    out = struct.pack(">h", version) + struct.pack(">q", offset)
    if version >= 3:
        out += struct.pack(">i", epoch)
    out += compact(metadata) if version >= 4 else string(metadata)
    out += struct.pack(">q", ts)
    if version == 1:
        out += struct.pack(">q", ts + 86_400_000)
    if version >= 4:
        topic_id = bytes(range(16))
        out += uvarint(1) + uvarint(0) + uvarint(len(topic_id)) + topic_id  # tag 0: topicId
    return out


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_every_value_version_decodes(version: int) -> None:
    offset, epoch, metadata, ts = decode_value(value(version))
    assert (offset, metadata, ts) == (1234, META, 1_700_000_000_123)
    assert epoch == (7 if version >= 3 else -1)


def test_a_flexible_value_without_tagged_fields_and_with_a_long_metadata() -> None:
    long = "x" * 300  # a compact length of two varint bytes
    raw = struct.pack(">hqi", 4, 9, -1) + compact(long) + struct.pack(">q", 5) + uvarint(0)
    assert decode_value(raw) == (9, -1, long, 5)


@pytest.mark.parametrize("kind", [0, 1])
def test_both_offset_commit_keys_decode(kind: int) -> None:
    assert decode_key(key(kind)) == ("g", "orders", 3)


@pytest.mark.parametrize("kind", [2, 3, 5, 12])
def test_other_record_types_are_skipped(kind: int) -> None:
    assert decode_key(struct.pack(">h", kind) + string("g")) is None
    assert decode((0, 1), struct.pack(">h", kind) + string("g"), b"anything") is None


def test_a_record_becomes_a_commit_with_its_place_in_the_log() -> None:
    c = decode((0, 42), key(1), value(3))
    assert c == OffsetCommit((0, 42), "g", "orders", 3, 1234, META, 1_700_000_000.123, 7)
    assert c.tp == ("orders", 3) and c.by == ("A", 4)
    assert "orders-3=1234" in c.describe()


def test_a_null_value_is_a_deletion_and_foreign_metadata_names_nobody() -> None:
    gone = decode((0, 1), key(1), None)
    assert gone is not None and gone.offset is None
    c = decode((0, 2), key(1), value(3, metadata=""))
    assert c is not None and c.by is None


def test_records_that_break_the_schema_are_refused() -> None:
    with pytest.raises(DecodeError, match="version 9"):
        decode_value(value(3)[:0] + struct.pack(">h", 9) + value(3)[2:])
    with pytest.raises(DecodeError, match="needs 8 bytes"):
        decode_value(value(3)[:-4])  # a truncated timestamp
    with pytest.raises(DecodeError, match="left over"):
        decode_value(value(2) + b"\x00")
    with pytest.raises(DecodeError, match="null string"):
        decode_key(struct.pack(">h", 1) + struct.pack(">h", -1))
    with pytest.raises(DecodeError, match="null compact string"):
        decode_value(struct.pack(">hqi", 4, 1, -1) + uvarint(0) + struct.pack(">q", 5) + uvarint(0))


def test_a_group_is_picked_out_in_log_order() -> None:
    a = decode((0, 9), key(1, "g"), value(3, offset=2))
    b = decode((0, 3), key(1, "g"), value(3, offset=1))
    other = decode((0, 5), key(1, "h"), value(3))
    assert a is not None and b is not None and other is not None
    assert of_group([a, other, b], "g") == [b, a]


# -- record batches of a segment file, and when a transactional commit took effect


def batch(base: int, n: int, ts_ms: int, pid: int = -1, *, transactional: bool = False, control: int | None = None) -> bytes:
    """A v2 record batch of ``n`` records (a control batch: one record whose key is ``control``);
    the records' bodies are opaque to ``decode_batches`` beyond a control record's key."""
    attributes = (0x10 if transactional else 0) | (0x20 if control is not None else 0)
    if control is not None:
        key = struct.pack(">hh", 0, control)
        body = b"\x00" + uvarint(0) + uvarint(0) + uvarint(2 * len(key)) + key + uvarint(2 * 6) + bytes(6) + uvarint(0)
        records = uvarint(2 * len(body)) + body
        n = 1
    else:
        records = bytes(10 * n)
    header_rest = struct.pack(">ibIhiqqqhii", 0, 2, 0, attributes, n - 1, ts_ms, ts_ms, pid, 0, 0, n)
    return struct.pack(">qi", base, len(header_rest) + len(records)) + header_rest + records


def test_batches_and_control_markers_are_read_from_segment_bytes() -> None:
    data = batch(0, 2, 1_000) + batch(2, 2, 2_000, 7, transactional=True) + batch(4, 1, 2_500, 7, transactional=True, control=1)
    data += batch(5, 1, 3_000, 9, transactional=True, control=0) + batch(6, 3, 4_000)[:-5]  # the last one is cut off
    found = list(decode_batches(data))
    assert [(b.base_offset, b.last_offset, b.producer_id, b.transactional, b.control) for b in found] == [
        (0, 1, -1, False, None), (2, 3, 7, True, None), (4, 4, 7, True, "COMMIT"), (5, 5, 9, True, "ABORT"),
    ]  # fmt: skip
    assert found[2].max_timestamp == 2.5


def test_a_batch_in_another_format_is_refused() -> None:
    data = bytearray(batch(0, 1, 1_000))
    data[16] = 1  # magic
    with pytest.raises(DecodeError, match="magic 1"):
        list(decode_batches(bytes(data)))


def test_a_transactional_commit_takes_effect_at_its_producers_next_commit_marker(tmp_path: Path) -> None:
    # pid 7 appends at 1-2 (t=2 s) and again at 5 (t=6 s); its first marker (t=9 s) settles both;
    # the plain commit at 0 takes effect when appended; pid 8's last one has no marker (compacted)
    log = tmp_path / "__consumer_offsets-0"
    log.mkdir()
    (log / "00000000000000000000.log").write_bytes(
        batch(0, 1, 1_000) + batch(1, 2, 2_000, 7, transactional=True) + batch(3, 1, 3_000, 8, transactional=True)
        + batch(4, 1, 3_500, 8, transactional=True, control=0)
    )  # fmt: skip
    (log / "00000000000000000005.log").write_bytes(
        batch(5, 1, 6_000, 7, transactional=True) + batch(6, 1, 9_000, 7, transactional=True, control=1)
        + batch(7, 1, 9_500, 8, transactional=True)
    )  # fmt: skip
    commits = [
        OffsetCommit((0, o), "g", "t", 0, 10 + o, META, at) for o, at in [(0, 1.0), (1, 2.0), (2, 2.0), (5, 6.0), (7, 9.5)]
    ]
    seen = with_visibility(commits, tmp_path)
    assert [c.visible_at for c in seen] == [None, 9.0, 9.0, 9.0, None]
    assert [c.effective_at for c in seen] == [1.0, 9.0, 9.0, 9.0, 9.5]
    with pytest.raises(DecodeError, match="aborts it"):  # pid 8's commit at 3 was aborted at 4
        with_visibility([OffsetCommit((0, 3), "g", "t", 0, 13, META, 3.0)], tmp_path)
    with pytest.raises(DecodeError, match="holds offset 12"):
        with_visibility([OffsetCommit((0, 12), "g", "t", 0, 1, META, 1.0)], tmp_path)


def test_a_commit_takes_the_first_marker_after_it_not_a_later_one(tmp_path: Path) -> None:
    # a later marker would put the commit later than it took effect: a D violation hidden
    log = tmp_path / "__consumer_offsets-0"
    log.mkdir()
    (log / "00000000000000000000.log").write_bytes(
        batch(0, 1, 1_000, 7, transactional=True) + batch(1, 1, 1_100, 7, transactional=True, control=1)
        + batch(2, 1, 5_000, 7, transactional=True) + batch(3, 1, 9_000, 7, transactional=True, control=1)
    )  # fmt: skip
    commits = [OffsetCommit((0, o), "g", "t", 0, 10 + o, META, at) for o, at in [(0, 1.0), (2, 5.0)]]
    assert [c.visible_at for c in with_visibility(commits, tmp_path)] == [1.1, 9.0]


def test_an_emptied_control_batch_is_skipped() -> None:
    empty = bytearray(batch(0, 1, 1_000, 7, transactional=True, control=1))
    header_only = bytes(empty[:61])
    emptied = struct.pack(">qi", 0, 49) + header_only[12:57] + struct.pack(">i", 0)
    found = list(decode_batches(emptied + batch(1, 1, 2_000)))
    assert [(b.base_offset, b.control) for b in found] == [(1, None)]


def test_a_groups_partition_of_the_offsets_log_is_javas_string_hash_modulo_the_count() -> None:
    """Values of Java's ``String.hashCode`` that are known: "hello" is 99162322, "Aa" and "BB"
    collide at 2112, "my-group" is -1906497762 (Kafka's ``Utils.abs``: partition 12 of 50,
    where clearing the sign bit would give 36), and "polygenelubricants" hashes to
    Integer.MIN_VALUE, whose ``Utils.abs`` is 0; a character outside the BMP counts as its
    two UTF-16 code units."""
    assert partition_of("hello", 50) == 99162322 % 50
    assert partition_of("hello", 1) == 0
    assert partition_of("Aa", 50) == partition_of("BB", 50) == 2112 % 50
    assert partition_of("my-group", 50) == 1906497762 % 50 == 12
    assert partition_of("polygenelubricants", 50) == 0
    assert partition_of("", 7) == 0
    assert partition_of("\U0001F600", 1000) == ((31 * 0xD83D + 0xDE00) & 0x7FFFFFFF) % 1000
