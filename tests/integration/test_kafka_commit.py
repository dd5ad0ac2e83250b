"""The committer against the real broker: a successor's fence holds whatever fails in between.

The schedule is the one a transient fault makes dangerous: pipeline A commits under its
commit id; a fault fails A's next commit (the producer is closed); A's lease lapses and B
takes over: B fences A's id (``init_transactions`` under it) and commits further; then A,
which passed its lease check before it paused, commits again. A committer that opened a
new producer by itself here would take a new epoch of A's id, undoing B's fence, and move
the group's offset back. It must hold the commit instead: only the handover reopens.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from spark_lag_assign.consume.kafka_commit import FencedGroupCommit, commit_id, fence, parse_metadata
from spark_lag_assign.errors import CommitFencedError, CommitHeldError, KafkaCommitError
from spark_lag_assign.testing.localkafka import LocalKafka, commit, create_topic

pytestmark = pytest.mark.broker


def group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="sla-test-offsets")
    try:
        found = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {(tp.topic, tp.partition): (om.offset, om.metadata) for tp, om in found.items()}


def offset_after(bootstrap: str, group: str, tp: tuple[str, int], old: int, timeout: float = 30.0) -> tuple[int, str]:
    """The group's offset of ``tp`` once it moved from ``old``: a transaction's commit returns
    before the coordinator has written its markers, so the new offset shows a little later
    (seconds, after a broker restart)."""
    deadline = time.monotonic() + timeout
    while True:
        offset, note = group_offsets(bootstrap, group)[tp]
        if offset != old or time.monotonic() > deadline:
            return offset, note
        time.sleep(0.2)


def opened(bootstrap: str, group: str, store: str, consumer: str, timeout_ms: int = 5000) -> FencedGroupCommit:
    """A committer as the handover leaves it after a start: opened, checked, allowed."""
    committer = FencedGroupCommit(bootstrap, group, commit_id(store, consumer), consumer, timeout_ms=timeout_ms)
    committer.open()
    committer.allow(new_query=True)
    return committer


def take_over(bootstrap: str, group: str, store: str, tp: tuple[str, int], offset: int) -> FencedGroupCommit:
    """B fences A's commit id, then commits ``offset`` under its own."""
    fence(bootstrap, commit_id(store, "A"))
    b = opened(bootstrap, group, store, "B")
    b({tp: offset}, 2)
    return b


def test_a_commit_failure_never_lets_a_zombie_undo_its_successors_fence(kafka: LocalKafka) -> None:
    bootstrap, group, store, topic = kafka.bootstrap_servers, "fence-holds", "fence-holds", "fence-holds"
    create_topic(bootstrap, topic, 1)
    tp = (topic, 0)
    commit(bootstrap, group, {tp: 0})
    a = opened(bootstrap, group, store, "A")
    a({tp: 10}, 1)
    assert offset_after(bootstrap, group, tp, 0)[0] == 10
    a._producer.close(timeout=1)  # a transient fault: the producer is unusable, as write() leaves it after one
    with pytest.raises(KafkaCommitError) as failed:
        a({tp: 15}, 1)
    assert not isinstance(failed.value, CommitHeldError | CommitFencedError) and a.lost
    b = take_over(bootstrap, group, store, tp, 60)
    try:
        with pytest.raises(CommitHeldError):
            a({tp: 20}, 1)  # the zombie's commit: held, no producer opened behind the protocol's back
        offset, note = offset_after(bootstrap, group, tp, 10)
        assert offset == 60 and parse_metadata(note) == ("B", 2)
        # and the successor's commits go on as before: the zombie's held attempt left nothing
        # open under B's id (a reopened A must first read the claims and find B's fence note:
        # that is the handover's part, proven in tests/unit/test_handover_model.py)
        b({tp: 61}, 2)
        assert offset_after(bootstrap, group, tp, 60)[0] == 61
    finally:
        a.close()
        b.close()


def test_a_broker_outage_in_the_middle_never_undoes_the_fence(tmp_path: Path) -> None:
    """The fault that closes a producer in practice: the broker is away while A commits."""
    broker = LocalKafka(tmp_path / "kafka")
    with broker:
        bootstrap, group, store, topic = broker.bootstrap_servers, "outage-fence", "outage-fence", "outage-fence"
        create_topic(bootstrap, topic, 1)
        tp = (topic, 0)
        commit(bootstrap, group, {tp: 0})
        a = opened(bootstrap, group, store, "A", timeout_ms=3000)
        a({tp: 10}, 1)
        broker.stop()
        with pytest.raises(KafkaCommitError) as failed:
            a({tp: 15}, 1)  # times out: the transaction is left undecided and the producer closed
        assert not isinstance(failed.value, CommitHeldError) and a.lost
        broker.start()  # same port, same data
        b = take_over(bootstrap, group, store, tp, 60)
        try:
            with pytest.raises(CommitHeldError):
                a({tp: 20}, 1)
            offset, note = offset_after(bootstrap, group, tp, 10)
            assert offset == 60 and parse_metadata(note) == ("B", 2)
        finally:
            a.close()
            b.close()
