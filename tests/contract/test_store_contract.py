"""The store contract (spark_lag_assign.store.base), run against every backend.

Only the ``Store`` interface is used here, except where a test damages the storage the way a
disk fault or a stray writer would (the harness does that per backend).
"""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest

from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.store import ClaimFencedError, ClaimRecord, PublishFencedError, Store
from tests.contract.conftest import Harness


def make_plan(generation: int, consumers: int = 3, partitions: int = 12, topic: str = "t", tag: int = 0) -> plan_io.Plan:
    """A plan document as the planner builds it: partitions dealt round robin, lag = tag + p."""
    names = [f"c{i}" for i in range(consumers)]
    rows = pd.DataFrame(
        {
            "consumer": [names[p % consumers] for p in range(partitions)],
            "topic": topic,
            "partition": range(partitions),
            "lag": [tag + p for p in range(partitions)],
            "starting_offset": [-2] * partitions,
        }
    )
    return plan_io.build_plan(
        rows, {c: [topic] for c in names}, generation=generation, strategy="range", reset="earliest", group="g"
    )


def publish(store: Store, consumers: int = 3, partitions: int = 12, tag: int = 0) -> plan_io.Plan:
    with store.publisher() as publisher:
        doc = make_plan(publisher.next_generation(), consumers, partitions, tag=tag)
        publisher.publish(doc)
    return doc


# -- plans ------------------------------------------------------------------------------------


def test_an_empty_store_has_no_plan_and_no_claims(harness: Harness) -> None:
    with harness.open() as store:
        assert store.latest() is None
        assert store.generations() == []
        assert store.get(1) is None
        assert store.claims() == {}
        with store.publisher() as publisher:
            assert publisher.previous() is None
            assert publisher.next_generation() == 1


def test_published_generations_read_back_whole_and_count_up(harness: Harness) -> None:
    with harness.open() as store:
        first = publish(store, tag=100)
        second = publish(store, tag=200)
        assert [first["generation"], second["generation"]] == [1, 2]
        assert store.latest() == second
        assert store.get(1) == first and store.get(2) == second
        assert store.generations() == [1, 2]
    with harness.open() as again:  # another reader, on another host, sees the same
        assert again.latest() == second
        with again.publisher() as publisher:
            assert publisher.previous() == second
            assert publisher.next_generation() == 3


def test_a_publish_with_the_wrong_generation_writes_nothing(harness: Harness) -> None:
    with harness.open() as store:
        publish(store)
        with store.publisher() as publisher:
            for wrong in (1, 3):
                with pytest.raises(ValueError, match="generation"):
                    publisher.publish(make_plan(wrong))
        assert store.generations() == [1]


def test_of_two_planners_only_one_publishes_a_generation(harness: Harness) -> None:
    with harness.open() as a_store, harness.open() as b_store:
        publish(a_store)
        slow = a_store.publisher()  # took the role, then stalled (a paused or zombie planner)
        assert slow.previous() is not None and slow.next_generation() == 2
        fast = b_store.publisher()  # a second planner
        fast.publish(make_plan(fast.next_generation(), tag=7))
        fast.close()
        with pytest.raises(PublishFencedError):
            slow.publish(make_plan(2, tag=9))
        slow.close()
        latest = b_store.latest()
        assert latest is not None and latest["generation"] == 2
        assert latest["consumers"]["c0"]["lag"] == make_plan(2, tag=7)["consumers"]["c0"]["lag"]
        assert b_store.generations() == [1, 2]


def test_readers_see_a_whole_generation_or_the_previous_one(harness: Harness) -> None:
    # big enough that a Kafka backend splits it over many records
    with harness.open() as writer_store, harness.open() as reader_store:
        plans = {1: publish(writer_store, consumers=50, partitions=60_000, tag=1)}
        seen: list[int] = []
        bad: list[str] = []
        done = threading.Event()

        def read() -> None:
            while not done.is_set():
                doc = reader_store.latest()
                assert doc is not None
                g = doc["generation"]
                seen.append(g)
                if g in plans and doc != plans[g]:
                    bad.append(f"generation {g} read back differently")

        reader = threading.Thread(target=read)
        reader.start()
        try:
            for tag in (2, 3):
                doc = publish(writer_store, consumers=50, partitions=60_000, tag=tag)
                plans[doc["generation"]] = doc
        finally:
            done.set()
            reader.join(120)
        assert not bad
        assert set(seen) <= {1, 2, 3} and seen == sorted(seen)
        assert reader_store.latest() == plans[3]


def test_a_damaged_generation_is_skipped_and_its_number_never_reused(harness: Harness) -> None:
    with harness.open() as store:
        first = publish(store)
        publish(store)
        harness.damage_generation(2)
    with harness.open() as store:
        assert store.latest() == first
        with store.publisher() as publisher:
            assert publisher.previous() == first
            assert publisher.next_generation() == 3
            publisher.publish(make_plan(3, tag=3))
        latest = store.latest()
        assert latest is not None and latest["generation"] == 3


def test_history_keeps_the_newest_generations(harness: Harness) -> None:
    with harness.open(history=3) as store:
        for _ in range(6):
            publish(store)
        kept = store.generations()
        assert kept[-3:] == [4, 5, 6] and all(g >= 1 for g in kept)
        assert all(store.get(g) is not None for g in (4, 5, 6))
        latest = store.latest()
        assert latest is not None and latest["generation"] == 6


def test_waiting_for_a_plan_ends_when_one_is_published(harness: Harness) -> None:
    with harness.open() as store, harness.open() as other:
        publish(store)
        assert other.wait_for_plan(newer_than=1, timeout=1.0) is None
        timer = threading.Timer(1.0, lambda: publish(store, tag=5))
        timer.start()
        try:
            found = other.wait_for_plan(newer_than=1, timeout=60)
        finally:
            timer.join()
        assert found is not None and found["generation"] == 2
        assert other.wait_for_plan(newer_than=0, timeout=0.1) == found  # already newer: at once


# -- claims -----------------------------------------------------------------------------------


def holds(*partitions: int) -> list[tuple[str, int]]:
    return [("t", p) for p in partitions]


def test_a_claim_is_read_back_by_every_reader_as_soon_as_it_is_written(harness: Harness) -> None:
    with harness.open() as a, harness.open() as b, a.claim_writer("A") as writer:
        first = writer.write(3, holds(2, 0), lease=20.0, state="waiting")
        seen = b.claims()
        assert set(seen) == {"A"}
        record = seen["A"]
        assert isinstance(record, ClaimRecord)
        assert (record.consumer, record.generation, record.holds, record.lease, record.state) == (
            "A", 3, frozenset(holds(0, 2)), 20.0, "waiting",
        )  # fmt: skip
        assert record.version == first.version and record.incarnation == writer.incarnation
        assert record == first  # what ``write`` returns is what every reader reads, stamps included
        second = writer.write(4, holds(), lease=20.0, state="released")
        assert second.seq > first.seq
        again = b.claims()["A"]
        assert isinstance(again, ClaimRecord) and again.version == second.version and again.holds == frozenset()


@pytest.mark.parametrize("lease", [0, -1.0, float("nan"), True, "20"])
def test_a_claim_without_a_positive_lease_is_refused_and_nothing_is_written(harness: Harness, lease: object) -> None:
    with harness.open() as store, store.claim_writer("A") as writer:
        first = writer.write(1, holds(0), lease=20.0)
        with pytest.raises(ValueError, match="lease must be a positive number of seconds"):
            writer.write(2, holds(0, 1), lease=lease)  # type: ignore[arg-type]
        after = writer.write(2, holds(1), lease=20.0)
        assert store.claims()["A"].version == after.version and after.seq == first.seq + 1


def test_a_lease_of_any_real_number_type_is_written_as_seconds(harness: Harness) -> None:
    with harness.open() as store, store.claim_writer("A") as writer:
        for lease in (np.float32(12.5), np.int64(20), 7):
            written = writer.write(1, holds(0), lease=lease)  # type: ignore[arg-type]
            assert store.claims()["A"] == written and written.lease == float(lease)


def test_a_new_incarnation_fences_the_old_one(harness: Harness) -> None:
    with harness.open() as old_host, harness.open() as new_host:
        old = old_host.claim_writer("A")
        old.write(1, holds(0), lease=20.0)
        new = new_host.claim_writer("A")  # the driver restarted elsewhere
        assert new.incarnation != old.incarnation
        # what the old one held stays visible: nobody may take it before its lease runs out
        assert new.predecessor is not None and new.predecessor.incarnation == old.incarnation
        assert (new.predecessor.generation, new.predecessor.holds) == (1, frozenset(holds(0)))
        held = new_host.claims()["A"]
        assert isinstance(held, ClaimRecord) and held.holds == frozenset(holds(0))
        with pytest.raises(ClaimFencedError):
            old.write(1, holds(0, 1), lease=20.0)
        new.write(2, holds(1), lease=20.0)
        with pytest.raises(ClaimFencedError):  # and it stays fenced
            old.write(2, holds(), lease=20.0)
        record = old_host.claims()["A"]
        assert isinstance(record, ClaimRecord)
        assert (record.incarnation, record.generation, record.holds) == (new.incarnation, 2, frozenset(holds(1)))
        old.close()
        new.close()


def test_a_first_incarnation_has_no_predecessor(harness: Harness) -> None:
    with harness.open() as store, store.claim_writer("A") as writer:
        assert writer.predecessor is None
        writer.write(1, holds(0), lease=10.0)
        record = store.claims()["A"]
        assert isinstance(record, ClaimRecord) and record.incarnation == writer.incarnation


def test_many_consumers_claims_are_all_read(harness: Harness) -> None:
    with harness.open() as store:
        writers = [store.claim_writer(f"c{i}") for i in range(12)]
        for i, w in enumerate(writers):
            w.write(1, holds(i), lease=10.0)
        for w in writers[::2]:
            w.write(2, holds(), lease=10.0)
        claims = store.claims()
        assert sorted(claims) == sorted(f"c{i}" for i in range(12))
        got = {c: (r.generation, r.holds) for c, r in claims.items() if isinstance(r, ClaimRecord)}
        assert got == {f"c{i}": (2, frozenset()) if i % 2 == 0 else (1, frozenset(holds(i))) for i in range(12)}
        for w in writers:
            w.close()


def test_an_unreadable_claim_is_reported_not_skipped(harness: Harness) -> None:
    with harness.open() as store:
        with store.claim_writer("A") as a, store.claim_writer("B") as b:
            a.write(1, holds(0), lease=10.0)
            b.write(1, holds(1), lease=10.0)
        harness.damage_claim("B")
        claims = store.claims()
        assert isinstance(claims["A"], ClaimRecord)
        assert isinstance(claims["B"], str) and claims["B"]


def test_waiting_for_claims_ends_when_one_changes(harness: Harness) -> None:
    with harness.open() as store, harness.open() as other:
        writer = store.claim_writer("A")
        writer.write(1, holds(0), lease=10.0)
        before = other.claims()
        assert other.wait_for_claims(before, timeout=0.5) == before
        timer = threading.Timer(1.0, lambda: writer.write(2, holds(), lease=10.0))
        timer.start()
        try:
            after = other.wait_for_claims(before, timeout=60)
        finally:
            timer.join()
        record = after["A"]
        assert isinstance(record, ClaimRecord) and record.generation == 2
        writer.close()


def test_claims_and_plans_do_not_mix(harness: Harness) -> None:
    with harness.open() as store:
        with store.claim_writer("A") as writer:
            writer.write(5, holds(0), lease=10.0)
        assert store.latest() is None and store.generations() == []
        publish(store)
        assert set(store.claims()) == {"A"}
