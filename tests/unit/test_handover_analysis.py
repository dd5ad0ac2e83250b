"""The checks of the multi-process handover proof, on records, events and commit logs whose
faults are known: each check must pass the history without one and find the loss, overlap,
late batch, duplicate, backwards, stale or fenced commit planted for it."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from spark_lag_assign.testing.offsets_log import OffsetCommit
from spark_lag_assign.testing.verdict import (
    Query,
    SinkRecord,
    backwards,
    batches_of,
    commits_after_fences,
    commits_backwards,
    duplicates,
    follower_margin,
    handover_gaps,
    late_batches,
    live_overlaps,
    losses,
    overlaps,
    parse_marker,
    parse_record,
    queries_of,
    reread_allowance,
    rerun,
    stale_commits,
    unknown_commits,
)

T = "t1"


def rec(consumer: str, inc: str, gen: int, batch: int, started: float, offsets: range | list[int], *, partition: int = 0, written: float | None = None, sink: str = "kafka") -> list[SinkRecord]:  # fmt: skip
    w = started + 0.5 if written is None else written
    return [SinkRecord(consumer, inc, gen, batch, started, w, T, partition, o, sink) for o in offsets]


def ends_of(records: list[SinkRecord], took: float = 0.2) -> dict[tuple[str, str, int, int], float]:
    """Markers: every batch ends ``took`` after its records were written."""
    return {r.batch: r.written + took for r in records}


def test_records_and_markers_parse() -> None:
    value = {"consumer": "A", "incarnation": "ab12", "generation": 3, "batch_id": 7, "started": 1.5, "written": 2.0,
             "topic": T, "partition": 1, "offset": 42, "value": "t1:1:42", "pid": 9}  # fmt: skip
    r = parse_record(json.dumps(value).encode())
    assert r == SinkRecord("A", "ab12", 3, 7, 1.5, 2.0, T, 1, 42, "kafka")  # records without a sink came from write_batch
    assert parse_record(json.dumps({**value, "sink": "plain"})).sink == "plain"
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
    assert d.records == 5 and len(d.violations) == 1 and "2 batches of ('A', 'a', 1) [0, 1] were read again" in d.violations[0]
    assert d.batches_again == {((T, 0), ("A", "a", 1)): 2}


def test_more_than_a_batch_read_again_breaks_the_bound() -> None:
    records = rec("A", "a", 1, 0, 0.0, range(8)) + rec("B", "b", 2, 0, 9.0, range(12))
    d = duplicates(records, max_per_batch=5)
    assert any("8 offsets of ('A', 'a', 1) read again, more than 1 batch(es) (5)" in v for v in d.violations)


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


# -- the broker's log of commits

G = "group"


def commit(seq: int, offset: int | None, consumer: str = "A", generation: int = 1, *, at: float | None = None, partition: int = 0, metadata: str | None = None) -> OffsetCommit:  # fmt: skip
    meta = f"spark-lag-assign consumer={consumer} generation={generation}" if metadata is None else metadata
    return OffsetCommit((0, seq), G, T, partition, offset, meta, float(seq) if at is None else at)


def test_commits_that_only_go_forward_pass_whatever_the_partition_order() -> None:
    log = [commit(1, 5), commit(2, 3, partition=1), commit(3, 5), commit(4, 9), commit(5, 4, partition=1), commit(6, None)]
    assert commits_backwards(log) == []


def test_a_commit_below_the_one_before_it_is_found_in_log_order() -> None:
    log = [commit(3, 7), commit(1, 5), commit(5, 6, "B", 2), commit(6, 8)]  # given out of order: the log's order counts
    found = commits_backwards(log)
    assert len(found) == 1 and "t1-0 went back" in found[0] and "=7" in found[0] and "=6" in found[0]


def test_commits_must_name_a_known_consumer_and_a_published_generation() -> None:
    log = [commit(1, 5, "A", 1), commit(2, 6, "B", 2)]
    assert unknown_commits(log, ["A", "B"], [1, 2]) == []
    bad = [*log, commit(3, 7, "Z", 1), commit(4, 8, "A", 9), commit(5, 9, metadata="")]
    assert len(unknown_commits(bad, ["A", "B"], [1, 2])) == 3


# -- queries from the pipelines' events

LEASE = 6.0  # margin 1.0: a claim sent at t keeps its query live until t + 5


def ev(kind: str, wall: float, *, began: float | None = None, generation: int = 1, partitions: tuple[int, ...] = (0,), consumer: str = "A", stint: str | None = None, detail: str = "") -> dict[str, Any]:  # fmt: skip
    out: dict[str, Any] = {"consumer": consumer, "kind": kind, "generation": generation, "assign": {T: list(partitions)}, "detail": detail, "wall": wall}  # fmt: skip
    if began is not None:
        out["began"] = began
    if stint is not None:
        out["stint"] = stint
    return out


def test_the_margin_is_the_followers_own() -> None:
    assert follower_margin(6.0) == 1.0 and follower_margin(30.0) == 3.0 and follower_margin(2.0) == 0.5


def test_a_query_renewed_in_time_is_live_until_it_stops() -> None:
    events = [ev("claim", 0.1, began=0.0), ev("start", 1.0, stint="a"), ev("claim", 2.1, began=2.0),
              ev("claim", 4.1, began=4.0), ev("stop", 7.0, detail='{"t1-0": 9}')]  # fmt: skip
    [q] = queries_of(events, LEASE, process="A-1")
    assert (q.key, q.start, q.stop, q.live_end, q.ended, q.tps) == (("A", "a", 1), 1.0, 7.0, 7.0, "orderly", frozenset({(T, 0)}))


def test_a_lapse_ends_the_live_interval_and_a_late_renewal_revives_nothing() -> None:
    # paused from 2.5 to 20: the renewal sent at 20.0 is past the deadline 2.0 + 5
    events = [ev("claim", 0.1, began=0.0), ev("start", 1.0, stint="a"), ev("claim", 2.1, began=2.0),
              ev("claim", 20.1, began=20.0), ev("claim", 22.1, began=22.0), ev("stop", 23.0, detail="{}")]  # fmt: skip
    [q] = queries_of(events, LEASE, process="A-1")
    assert (q.live_end, q.stop, q.ended) == (7.0, 23.0, "lapse")
    # measured from when the write was sent, not from when it returned (or was printed)
    late_return = [ev("claim", 0.1, began=0.0), ev("start", 1.0), ev("claim", 7.5, began=4.9), ev("stop", 9.0)]
    assert queries_of(late_return, LEASE)[0].ended == "orderly"


def test_a_killed_pipelines_query_is_live_until_it_died_and_later_queries_start_afresh() -> None:
    events = [ev("claim", 0.1, began=0.0), ev("start", 1.0, stint="a"), ev("stop", 3.0),
              ev("claim", 30.1, began=30.0), ev("start", 31.0, stint="a+1", generation=2), ev("claim", 32.1, began=32.0)]  # fmt: skip
    first, second = queries_of(events, LEASE, process="B-1", died=33.0)
    assert first.ended == "orderly" and first.live_end == 3.0
    assert (second.key, second.stop, second.live_end, second.ended) == (("A", "a+1", 2), None, 33.0, "killed")


def q(process: str, start: float, live_end: float, *, stop: float | None = None, consumer: str | None = None, stint: str = "s", generation: int = 1, partitions: tuple[int, ...] = (0,)) -> Query:  # fmt: skip
    return Query(process, consumer or process[0], stint, generation, frozenset((T, p) for p in partitions), start,
                 live_end if stop is None else stop, live_end)  # fmt: skip


def test_live_intervals_one_after_another_do_not_overlap() -> None:
    queries = [q("A-1", 0.0, 7.0, stop=30.0), q("B-1", 8.0, 20.0), q("A-1", 21.0, 25.0, stint="s+1"), q("C-1", 0.0, 40.0, partitions=(1,))]
    assert live_overlaps(queries) == []


def test_two_live_readers_of_one_partition_are_found_even_between_their_batches() -> None:
    found = live_overlaps([q("A-1", 0.0, 9.0), q("B-1", 8.5, 20.0)])
    assert len(found) == 1 and "t1-0" in found[0] and "by 0.500s" in found[0]
    # two incarnations of one consumer count as two readers
    assert len(live_overlaps([q("B-1", 0.0, 9.0), q("B-2", 5.0, 20.0)])) == 1


def batch(consumer: str, stint: str, gen: int, bid: int, started: float, ended: float | None, offsets: range) -> list[SinkRecord]:
    return rec(consumer, stint, gen, bid, started, offsets, written=started + 0.2)


def test_one_batch_after_a_lapse_is_counted_and_passes() -> None:
    records = batch("A", "s", 1, 0, 1.0, 1.5, range(5)) + batch("A", "s", 1, 1, 6.5, 21.0, range(5, 9))
    batches = batches_of(records, {("A", "s", 1, 0): 1.5, ("A", "s", 1, 1): 21.0})
    late, problems = late_batches(batches, [q("A-1", 0.5, 7.0, stop=22.0)])
    assert problems == [] and [b.key for b in late[("A", "s", 1)]] == [("A", "s", 1, 1)]


def test_two_batches_after_a_lapse_or_any_after_an_orderly_stop_break_i2() -> None:
    records = batch("A", "s", 1, 0, 6.5, 20.5, range(5)) + batch("A", "s", 1, 1, 20.6, 21.0, range(5, 9))
    batches = batches_of(records, {("A", "s", 1, 0): 20.5, ("A", "s", 1, 1): 21.0})
    _, problems = late_batches(batches, [q("A-1", 0.5, 7.0, stop=22.0)])
    assert len(problems) == 1 and "completed 2 batches after its lease lapsed" in problems[0]
    _, problems = late_batches(batches_of(records[:5], {("A", "s", 1, 0): 20.5}), [q("A-1", 0.5, 20.0)])
    assert len(problems) == 1 and "after it stopped reading" in problems[0]
    _, problems = late_batches(batches, [])
    assert len(problems) == 2 and "no query" in problems[0]


def test_a_batch_without_marker_counts_as_completed_when_written() -> None:
    records = batch("B", "s", 1, 0, 8.0, None, range(3))  # SIGKILLed after writing at 8.2
    _, problems = late_batches(batches_of(records, {}, slack=30.0), [q("B-1", 1.0, 8.5)])
    assert problems == []


def test_the_allowance_is_one_batch_and_two_after_a_lapse_with_a_plain_sink() -> None:
    queries = [q("A-1", 0.0, 7.0, stop=20.0, stint="a"), q("A-1", 21.0, 30.0, stint="b"),
               q("B-1", 8.0, 15.0, stop=20.0, stint="c"), q("C-1", 0.0, 5.0, stop=None, stint="d")]  # fmt: skip
    records = rec("A", "a", 1, 0, 0.0, [1], sink="plain") + rec("A", "b", 1, 0, 22.0, [2], sink="plain") + rec("B", "c", 1, 0, 9.0, [3])
    assert reread_allowance(queries, records) == {("A", "a", 1): 2, ("A", "b", 1): 1, ("B", "c", 1): 1, ("C", "d", 1): 1}


# -- duplicates against the broker's accepted commits (D)


def test_reading_again_past_the_last_accepted_commit_passes() -> None:
    records = rec("A", "a", 1, 0, 0.0, range(5)) + rec("A", "a", 1, 1, 1.0, range(5, 8)) + rec("B", "b", 2, 0, 9.0, range(5, 12))
    accepted = [commit(1, 5, "A", 1, at=0.8)]  # batch 1's commit never happened
    d = duplicates(records, 10, commits=accepted)
    assert (d.records, d.violations, d.bound) == (3, [], 10)


def test_reading_again_what_the_earlier_reader_had_committed_breaks_d() -> None:
    records = rec("A", "a", 1, 0, 0.0, range(5)) + rec("A", "a", 1, 1, 1.0, range(5, 8)) + rec("B", "b", 2, 0, 9.0, range(5, 12))
    accepted = [commit(1, 5, "A", 1, at=0.8), commit(2, 8, "A", 1, at=1.8)]  # B started behind A's commit of 8
    d = duplicates(records, 10, commits=accepted)
    assert len(d.violations) == 3 and all(v.startswith("D: t1-0@") and "commit of 8 under generation 1" in v for v in d.violations)


def test_a_transactional_commit_counts_from_its_commit_marker() -> None:
    # B's commit of 8 was appended at 1.8 but its COMMIT marker came only at 9.5 (a broker that
    # shut down between the two): until then the group still showed 5, where B began at 9.0
    records = rec("B", "b", 4, 1, 1.0, range(5, 8)) + rec("B", "b+1", 4, 0, 9.0, range(5, 12))
    late = [commit(1, 5, "B", 4, at=0.8), replace(commit(2, 8, "B", 4, at=1.8), visible_at=9.5)]
    assert duplicates(records, 10, commits=late).violations == []
    settled = [commit(1, 5, "B", 4, at=0.8), replace(commit(2, 8, "B", 4, at=1.8), visible_at=1.9)]
    assert len(duplicates(records, 10, commits=settled).violations) == 3


def test_a_commit_accepted_after_the_later_reader_began_is_not_what_it_started_from() -> None:
    # A zombie's late commit (I6's business, not D's): B could not have known it
    records = rec("A", "a", 1, 1, 1.0, range(5, 8)) + rec("B", "b", 2, 0, 9.0, range(5, 12))
    d = duplicates(records, 10, commits=[commit(1, 5, "A", 1, at=0.8), commit(2, 8, "A", 1, at=9.5)])
    assert d.violations == []


def test_two_batches_of_a_lapsed_plain_pipeline_may_be_read_again_and_three_may_not() -> None:
    a = ("A", "a", 1)
    records = (rec("A", "a", 1, 0, 0.0, range(5), sink="plain") + rec("A", "a", 1, 1, 1.0, range(5, 8), sink="plain")
               + rec("A", "a", 1, 2, 20.0, range(8, 10), sink="plain") + rec("B", "b", 2, 0, 9.0, range(5, 12)))  # fmt: skip
    ok = duplicates(records, 10, commits=[commit(1, 5, at=0.8)], allowance={a: 2})
    assert (ok.records, ok.violations, ok.batches_again, ok.bound) == (5, [], {((T, 0), a): 2}, 20)
    assert len(duplicates(records, 10, commits=[commit(1, 5, at=0.8)]).violations) == 1  # an orderly stop allows one
    three = duplicates(rec("A", "a", 1, 3, 0.5, [4], sink="plain") + records, 10, allowance={a: 2})
    assert any("3 batches of ('A', 'a', 1)" in v for v in three.violations)


def test_more_offsets_than_the_allowed_batches_hold_break_the_bound() -> None:
    records = rec("A", "a", 1, 0, 0.0, range(8)) + rec("A", "a", 1, 1, 1.0, range(8, 16)) + rec("B", "b", 2, 0, 9.0, range(16))
    d = duplicates(records, 5, allowance={("A", "a", 1): 2})
    assert any("16 offsets of ('A', 'a', 1) read again, more than 2 batch(es) (10)" in v for v in d.violations)


# -- I6 and fences on the broker's record


def test_commits_from_the_newest_reader_of_each_partition_pass() -> None:
    queries = [q("A-1", 0.0, 7.0, stop=20.0), q("B-1", 10.0, 30.0, generation=2), q("A-2", 31.0, 50.0, stint="t", generation=3)]
    log = [commit(1, 5, "A", 1, at=3.0), commit(2, 8, "B", 2, at=12.0), commit(3, 9, "B", 2, at=29.0), commit(4, 12, "A", 3, at=33.0)]
    assert stale_commits(log, queries) == []
    assert commits_after_fences(log, [(9.0, "A", "B")], queries) == []


def test_a_replaced_querys_commit_is_stale_and_one_after_its_fence_is_caught() -> None:
    queries = [q("A-1", 0.0, 7.0, stop=20.0), q("B-1", 10.0, 30.0, generation=2)]
    zombie = [commit(1, 5, "A", 1, at=3.0), commit(2, 8, "B", 2, at=12.0), commit(3, 9, "A", 1, at=19.0)]
    found = stale_commits(zombie, queries)
    assert len(found) == 1 and "=9" in found[0] and "was accepted after B-1" in found[0]
    # between the fence and the successor's start only the fence says so
    early = [commit(1, 5, "A", 1, at=3.0), commit(2, 6, "A", 1, at=9.5)]
    assert stale_commits(early, queries) == []
    found = commits_after_fences(early, [(9.0, "A", "B")], queries)
    assert len(found) == 1 and "after B fenced A at 9.000" in found[0]


@pytest.mark.parametrize("who", [("A", 2), ("C", 1)])
def test_a_commit_no_query_made_is_stale(who: tuple[str, int]) -> None:
    found = stale_commits([commit(1, 5, who[0], who[1], at=3.0)], [q("A-1", 0.0, 7.0)])
    assert len(found) == 1 and "comes from no query" in found[0]


def test_a_restart_on_the_checkpoint_re_running_a_committed_batch_is_counted_not_judged_by_d() -> None:
    # C's batch 7 was written and committed (write_batch) just before a lapse stopped the
    # query, whose checkpoint had not recorded it: the restart C/c+1 runs batch 7 again
    records = rec("C", "c", 4, 6, 0.0, range(5)) + rec("C", "c", 4, 7, 1.0, range(5, 10)) + rec("C", "c+1", 4, 7, 9.0, range(5, 12))
    accepted = [commit(1, 5, "C", 4, at=0.8), commit(2, 10, "C", 4, at=1.8)]
    d = duplicates(records, 10, commits=accepted)
    assert (d.records, d.reruns, d.violations) == (5, 5, [])
    assert rerun(records[5], records[10]) and not rerun(records[5], records[0])


def test_a_restart_that_reads_from_elsewhere_is_judged_by_d() -> None:
    # the same restart, but its batch 0 re-reads what C had committed: not a re-run of batch 7
    records = rec("C", "c", 4, 7, 1.0, range(5, 10)) + rec("C", "c+1", 4, 0, 9.0, range(5, 12))
    d = duplicates(records, 10, commits=[commit(2, 10, "C", 4, at=1.8)])
    assert d.reruns == 0 and len(d.violations) == 5
    # nor is another consumer's batch of the same number, or another generation's
    other = rec("B", "c+1", 4, 7, 9.0, range(5, 12)) + rec("C", "c+1", 5, 7, 9.0, range(5, 12))
    assert not rerun(records[0], other[0]) and not rerun(records[0], other[7])


def test_a_start_before_the_previous_query_stopped_is_a_lost_event_not_a_dropped_query() -> None:
    events = [ev("claim", 0.1, began=0.0), ev("start", 1.0, stint="a"), ev("claim", 2.1, began=2.0),
              ev("start", 3.0, stint="a+1", generation=2), ev("stop", 4.0)]  # fmt: skip
    with pytest.raises(ValueError, match=r"B-1: the query started at 3.0 follows the one started at 1.0 .*stop event was lost"):
        queries_of(events, LEASE, process="B-1")
