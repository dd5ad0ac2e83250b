"""The checks of the multi-process handover proof, on records whose faults are known:
each check must find the loss, overlap, duplicate or backwards commit planted for it."""

from __future__ import annotations

import json

from spark_lag_assign.testing.pipeline_app import (
    SinkRecord,
    backwards,
    batches_of,
    duplicates,
    handover_gaps,
    losses,
    overlaps,
    parse_marker,
    parse_record,
)

T = "t1"


def rec(consumer: str, inc: str, gen: int, batch: int, started: float, offsets: range | list[int], *, partition: int = 0, written: float | None = None) -> list[SinkRecord]:  # fmt: skip
    w = started + 0.5 if written is None else written
    return [SinkRecord(consumer, inc, gen, batch, started, w, T, partition, o) for o in offsets]


def ends_of(records: list[SinkRecord], took: float = 0.2) -> dict[tuple[str, str, int, int], float]:
    """Markers: every batch ends ``took`` after its records were written."""
    return {r.batch: r.written + took for r in records}


def test_records_and_markers_parse() -> None:
    value = {"consumer": "A", "incarnation": "ab12", "generation": 3, "batch_id": 7, "started": 1.5, "written": 2.0,
             "topic": T, "partition": 1, "offset": 42, "value": "t1:1:42", "pid": 9}  # fmt: skip
    r = parse_record(json.dumps(value).encode())
    assert r == SinkRecord("A", "ab12", 3, 7, 1.5, 2.0, T, 1, 42)
    assert r.tp == (T, 1) and r.stint == ("A", "ab12", 3) and r.batch == ("A", "ab12", 3, 7)
    key, ended = parse_marker(json.dumps({**value, "ended": 2.25}))
    assert key == ("A", "ab12", 3, 7) and ended == 2.25


# -- losses


def test_no_loss_when_every_offset_is_there_even_twice() -> None:
    records = rec("A", "a", 1, 0, 0.0, range(6)) + rec("B", "b", 2, 0, 5.0, range(4, 10))
    assert losses(records, {(T, 0): 10}) == {}


def test_a_gap_and_a_missing_tail_are_found() -> None:
    records = rec("A", "a", 1, 0, 0.0, [0, 1, 2, 5, 6])
    assert losses(records, {(T, 0): 9}) == {(T, 0): [(3, 5), (7, 9)]}


def test_a_partition_nobody_read_is_lost_entirely() -> None:
    records = rec("A", "a", 1, 0, 0.0, range(3))
    assert losses(records, {(T, 0): 3, (T, 1): 4}) == {(T, 1): [(0, 4)]}


def test_records_beyond_the_end_are_reported() -> None:
    assert losses(rec("A", "a", 1, 0, 0.0, range(4)), {(T, 0): 3}) == {(T, 0): [(3, -1)]}


# -- overlaps


def test_batches_one_after_another_do_not_overlap() -> None:
    records = rec("A", "a", 1, 0, 0.0, range(5)) + rec("A", "a", 1, 1, 1.0, range(5, 8)) + rec("B", "b", 2, 0, 2.0, range(8, 9))
    batches = batches_of(records, ends_of(records))
    assert [b.ended_known for b in batches] == [True, True, True]
    assert overlaps(batches) == []


def test_two_readers_of_one_partition_at_once_are_found() -> None:
    a = rec("A", "a", 1, 4, 10.0, range(5), written=10.4)
    b = rec("B", "b", 2, 0, 10.5, range(5, 9))  # begins while A's batch is still committing
    found = overlaps(batches_of(a + b, {a[0].batch: 10.8, b[0].batch: 11.5}))
    assert len(found) == 1 and found[0].tp == (T, 0)
    assert found[0].first.consumer == "A" and found[0].second.consumer == "B"
    assert "overlaps" in found[0].describe()


def test_same_time_on_different_partitions_is_no_overlap() -> None:
    a = rec("A", "a", 1, 0, 10.0, range(3), partition=0)
    b = rec("B", "b", 1, 0, 10.0, range(3), partition=1)
    assert overlaps(batches_of(a + b, ends_of(a + b))) == []


def test_a_restarted_incarnation_overlapping_its_zombie_is_found() -> None:
    zombie = rec("A", "old", 3, 9, 20.0, range(4), written=20.2)
    successor = rec("A", "new", 3, 0, 20.5, range(4))
    found = overlaps(batches_of(zombie + successor, {zombie[0].batch: 21.0, successor[0].batch: 21.2}), across="incarnation")
    assert len(found) == 1


def test_a_batch_without_marker_ends_after_the_slowest_write_seen() -> None:
    a = rec("A", "a", 1, 0, 0.0, range(3), written=0.5)  # marker: its write took 2 s
    killed = rec("B", "b", 1, 0, 5.0, range(3, 6), partition=0, written=5.5)  # no marker: SIGKILLed
    later = rec("C", "c", 2, 0, 6.0, range(6, 9))
    batches = batches_of(a + killed + later, {a[0].batch: 2.5, later[0].batch: 7.0})
    b = next(b for b in batches if b.consumer == "B")
    assert not b.ended_known and b.ended == 7.5  # 5.5 + 2.0
    assert [(o.first.consumer, o.second.consumer) for o in overlaps(batches)] == [("B", "C")]


def test_handover_gaps_measure_from_the_last_batch_to_the_next_reader() -> None:
    a = rec("A", "a", 1, 0, 0.0, range(3), written=0.5) + rec("A", "a", 1, 1, 1.0, range(3, 6), written=1.5)
    b = rec("B", "b", 2, 0, 4.0, range(6, 9))
    gaps = handover_gaps(batches_of(a + b, ends_of(a + b, took=0.5)))
    assert [(tp, round(gap, 3), x.consumer, y.consumer) for tp, gap, x, y in gaps] == [((T, 0), 2.0, "A", "B")]


# -- duplicates


def test_no_duplicates_and_the_handovers_are_counted() -> None:
    records = rec("A", "a", 1, 0, 0.0, range(5)) + rec("B", "b", 2, 0, 5.0, range(5, 9)) + rec("A", "a", 3, 0, 9.0, range(9, 10))
    d = duplicates(records, max_per_batch=10)
    assert (d.records, d.offsets, d.boundaries, d.handovers, d.violations) == (0, 0, 2, 2, [])


def test_one_batch_read_again_at_a_handover_is_within_the_bound() -> None:
    records = (
        rec("A", "a", 1, 0, 0.0, range(5))
        + rec("A", "a", 1, 1, 1.0, range(5, 8))  # completed, its commit lost
        + rec("B", "b", 2, 0, 9.0, range(5, 12))  # B starts at the last commit: 5
    )
    d = duplicates(records, max_per_batch=10)
    assert (d.records, d.offsets, d.handovers, d.violations) == (3, 3, 1, [])


def test_reading_again_from_two_earlier_batches_breaks_the_bound() -> None:
    records = rec("A", "a", 1, 0, 0.0, range(5)) + rec("A", "a", 1, 1, 1.0, range(5, 8)) + rec("B", "b", 2, 0, 9.0, range(3, 12))
    d = duplicates(records, max_per_batch=10)
    assert d.records == 5 and len(d.violations) == 1 and "2 earlier batches" in d.violations[0]


def test_more_than_a_batch_read_again_breaks_the_bound() -> None:
    records = rec("A", "a", 1, 0, 0.0, range(8)) + rec("B", "b", 2, 0, 9.0, range(12))
    d = duplicates(records, max_per_batch=5)
    assert any("more than a batch" in v for v in d.violations)


def test_an_offset_twice_within_one_query_is_a_violation() -> None:
    records = rec("A", "a", 1, 0, 0.0, range(4)) + rec("A", "a", 1, 1, 1.0, range(3, 6))
    d = duplicates(records, max_per_batch=10)
    assert d.records == 1 and any("read twice by one query" in v for v in d.violations)


# -- commits that go backwards


def test_monotone_commits_pass_and_a_missing_partition_is_skipped() -> None:
    samples = [(0.0, {(T, 0): 1}), (0.5, {(T, 0): 1, (T, 1): 4}), (1.0, {(T, 1): 5}), (1.5, {(T, 0): 9, (T, 1): 5})]
    assert backwards(samples) == []


def test_a_commit_that_went_back_is_found() -> None:
    samples = [(0.0, {(T, 0): 5}), (0.5, {(T, 0): 7}), (1.0, {(T, 0): 6}), (1.5, {(T, 0): 8})]
    found = backwards(samples)
    assert len(found) == 1 and "7 at 0.500 then 6 at 1.000" in found[0]
