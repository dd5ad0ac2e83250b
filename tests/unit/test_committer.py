"""ProgressCommitter: every completed micro-batch's end offsets reach the group, never backwards,
and a refused commit stops the committing at once (pure: a fake commit function, no Kafka)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from spark_lag_assign.consume.committer import ProgressCommitter
from spark_lag_assign.errors import CommitFencedError, CommitHeldError, CommitNotAuthorizedError, KafkaCommitError
from spark_lag_assign.extract.acls import Acl

TP = tuple[str, int]


def end(**offsets: int) -> str:
    """A progress report's endOffset JSON for topic t: end(p0=5) -> {"t": {"0": 5}}."""
    return json.dumps({"t": {k[1:]: v for k, v in offsets.items()}})


class Group:
    """The group's committed offsets, with a switch to fail or refuse the next commits."""

    def __init__(self) -> None:
        self.committed: dict[TP, int] = {}
        self.calls: list[tuple[dict[TP, int], int]] = []
        self.fail = 0
        self.refuse = False
        self.deny = False

    def __call__(self, offsets: Mapping[TP, int], generation: int) -> None:
        self.calls.append((dict(offsets), generation))
        if self.refuse:
            raise CommitFencedError("a newer owner fenced the id")
        if self.deny:
            raise CommitNotAuthorizedError("committing: not authorized: grant READ on Group:g (literal) to this principal")
        if self.fail:
            self.fail -= 1
            raise KafkaCommitError("broker away")
        for tp, offset in offsets.items():
            assert offset >= self.committed.get(tp, -1), f"{tp} would go back from {self.committed[tp]} to {offset}"
            self.committed[tp] = offset


def committer(group: Group, refused: list[str] | None = None) -> ProgressCommitter:
    return ProgressCommitter(group, lambda: 7, (refused.append if refused is not None else None))


def test_each_batch_commits_what_is_new_under_the_generation() -> None:
    group = Group()
    c = committer(group)
    c.track("q", [("t", 0), ("t", 1)])
    assert c.record("q", [end(p0=5, p1=3)])
    assert c.record("q", [end(p0=5, p1=3)])  # nothing new: no call
    assert c.record("q", [end(p0=9, p1=3), json.dumps({"other": {"0": 4}})])  # untracked partitions are not ours
    assert group.calls == [({("t", 0): 5, ("t", 1): 3}, 7), ({("t", 0): 9}, 7)]
    assert c.committed("q") == {("t", 0): 9, ("t", 1): 3}


def test_a_failed_commit_is_carried_by_the_next_batch_and_counted() -> None:
    group = Group()
    c = committer(group)
    c.track("q", [("t", 0)])
    group.fail = 1
    assert not c.record("q", [end(p0=5)])
    assert c.failures == 1 and group.committed == {}
    assert c.record("q", [end(p0=8)])
    assert group.committed == {("t", 0): 8}


def test_a_refused_commit_stops_committing_and_is_reported_once() -> None:
    group, refused = Group(), []
    c = committer(group, refused)
    c.track("q", [("t", 0)])
    assert c.record("q", [end(p0=5)])
    group.refuse = True
    assert not c.record("q", [end(p0=6)])
    assert not c.record("q", [end(p0=7)])  # never retried
    assert refused == ["q"] and len(group.calls) == 2
    with pytest.raises(CommitFencedError):
        c.finish("q", [end(p0=8)], timeout=1.0)


def test_a_late_progress_report_never_commits_behind_a_sink_transaction() -> None:
    """The listener's reports lag the batches: a sink that committed batch N+1 in its own
    transaction must not see the report of batch N commit N's smaller offsets after it."""
    group = Group()
    c = committer(group)
    c.track("q", [("t", 0)])
    group({("t", 0): 12}, 7)  # batch N+1's sink transaction
    c.committed_elsewhere({("t", 0): 12})
    assert c.record("q", [end(p0=9)])  # batch N's report arrives late
    assert group.committed == {("t", 0): 12} and len(group.calls) == 1


def test_offsets_committed_elsewhere_move_nothing_back_nor_past_what_was_read() -> None:
    """A sink's call that arrives after a later report leaves the furthest offsets; an empty
    partition's next offset 0 commits nothing more (offset 1 would skip its first record)."""
    group = Group()
    c = committer(group)
    c.track("q", [("t", 0), ("t", 1)])
    assert c.record("q", [end(p0=15)])
    c.committed_elsewhere({("t", 0): 12, ("t", 1): 0})
    assert c.committed("q") == {("t", 0): 15, ("t", 1): 0}
    assert c.retry("q")
    assert group.calls == [({("t", 0): 15}, 7)] and c.failures == 0


def test_an_idle_event_commits_what_a_failed_commit_left_pending() -> None:
    group = Group()
    c = committer(group)
    c.track("q", [("t", 0)])
    group.fail = 1
    assert not c.record("q", [end(p0=5)])
    assert c.retry("q")
    assert group.committed == {("t", 0): 5} and c.committed("q") == {("t", 0): 5}


class FakeTime:
    """A clock that moves only when slept on, and the pauses asked for."""

    def __init__(self) -> None:
        self.now = 100.0
        self.pauses: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


def test_the_final_commit_retries_until_its_timeout(caplog: pytest.LogCaptureFixture) -> None:
    group, fake = Group(), FakeTime()
    c = ProgressCommitter(group, lambda: 7, clock=fake.clock, sleep=fake.sleep)
    c.track("q", [("t", 0)])
    group.fail = 1000
    with (
        caplog.at_level(logging.DEBUG, logger="spark_lag_assign"),
        pytest.raises(KafkaCommitError, match="did not succeed within 3s"),
    ):
        c.finish("q", [end(p0=4)], timeout=3.0, pause=1.0)
    assert "the final commit of query q: " in caplog.text  # each retry says what it retries
    # attempts at 0, 1, 2 and 3 s: the last one at the deadline, then it gives up
    assert fake.pauses == [1.0, 1.0, 1.0] and len(group.calls) == 4
    assert c.tracked("q")  # still pending
    group.fail = 0
    assert c.finish("q", [], timeout=1.0) == {("t", 0): 4}
    assert not c.tracked("q")
    quick = FakeTime()
    d = ProgressCommitter(group, lambda: 7, clock=quick.clock, sleep=quick.sleep)
    d.track("q", [("t", 0)])
    group.fail = 2
    assert d.finish("q", [end(p0=6)], timeout=3.0) == {("t", 0): 6}
    assert quick.pauses == [0.5, 0.5]  # by default a final commit is retried every half second


def test_a_commit_refused_for_want_of_an_acl_is_never_retried_as_if_transient() -> None:
    group, fake, refused = Group(), FakeTime(), []
    c = ProgressCommitter(group, lambda: 7, refused.append, clock=fake.clock, sleep=fake.sleep)
    c.track("q", [("t", 0)])
    group.deny = True
    assert not c.record("q", [end(p0=5)])  # the follower's commit function reports it to the run
    assert c.failures == 1 and refused == []  # no fencing: nobody newer owns the partitions
    with pytest.raises(CommitNotAuthorizedError, match="grant READ on Group:g"):
        c.finish("q", [end(p0=6)], timeout=60.0, pause=1.0)
    assert fake.pauses == [] and len(group.calls) == 2  # at once: one attempt, no waiting
    assert c.tracked("q")


class Broker:
    """The transactional id's epochs and the group's offsets, as the broker keeps them."""

    def __init__(self) -> None:
        self.epoch = 0
        self.inits = 0
        self.group: dict[TP, int] = {}
        self.log: list[dict[TP, int]] = []
        self.notes: list[str] = []  # each commit's metadata
        self.records: list[tuple[str, bytes | None]] = []
        self.made: list[tuple[Any, ...]] = []  # the arguments each producer was made with
        self.waits: list[tuple[str, float | None]] = []  # each bounded call and record wait
        self.groups: list[str] = []  # the group of each offsets commit
        self.epochs: list[int] = []  # the leader epoch sent with each offset
        self.refuse_records = False  # the sink topic's WRITE is not granted
        self.closes: list[float | None] = []  # each producer close's timeout
        self.fail_next = 0  # the next commits fail as a broker outage makes them fail

    def fence(self) -> None:
        """A successor's ``init_transactions`` under the same id."""
        self.epoch += 1


class FakeProducer:
    """Just enough of kafka-python's transactional producer: an epoch taken at
    ``init_transactions``, commits refused once a newer epoch exists."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.epoch: int | None = None
        self.pending: dict[TP, int] = {}

    def init_transactions(self) -> None:
        self.broker.epoch += 1
        self.broker.inits += 1
        self.epoch = self.broker.epoch

    def begin_transaction(self) -> None:
        self.pending = {}
        self.sent: list[tuple[str, bytes | None]] = []
        self.note: set[str] = set()

    def send(self, topic: str, key: bytes | None = None, value: bytes | None = None) -> Future:
        self.sent.append((topic, value) if key is None else (topic, key + b"=" + (value or b"")))
        return Future(self.broker)

    def send_offsets_to_transaction(self, offsets: Mapping[object, object], group: str) -> None:
        self.pending = {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}  # type: ignore[attr-defined]
        self.note = {meta.metadata for meta in offsets.values()}  # type: ignore[attr-defined]

    def commit_transaction(self) -> None:
        from kafka.errors import KafkaConnectionError, KafkaError

        if self.broker.fail_next:
            self.broker.fail_next -= 1
            raise KafkaConnectionError("broker away")
        if self.epoch != self.broker.epoch:
            raise KafkaError("ProducerFencedError: there is a newer producer with the same transactionalId")
        self.broker.group.update(self.pending)
        self.broker.log.append(self.pending)
        self.broker.notes.extend(sorted(self.note))
        self.broker.records.extend(self.sent)

    def close(self, timeout: float | None = None) -> None:
        self.broker.closes.append(timeout)


class Future:
    """A sent record's future: how long the committer waits for it."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def get(self, timeout: float | None = None) -> None:
        self.broker.waits.append(("record", timeout))
        if self.broker.refuse_records:
            from kafka.errors import TopicAuthorizationFailedError

            raise TopicAuthorizationFailedError("sink")


def fenced_commit(monkeypatch: pytest.MonkeyPatch, broker: Broker, **options: Any) -> Any:
    """A ``FencedGroupCommit`` of consumer A to group g under id "id", whose producers are
    ``FakeProducer``s; the broker notes how each was made and how long each call may wait."""
    from spark_lag_assign.consume import kafka_commit

    def producer(*args: Any) -> FakeProducer:
        broker.made.append(args)
        return FakeProducer(broker)

    def bounded(producer: FakeProducer, step: str, timeout: int, *args: Any) -> None:
        broker.waits.append((step, timeout))
        if step == "send_offsets_to_transaction":
            broker.groups.append(args[1])
            broker.epochs.extend(meta.leader_epoch for meta in args[0].values())
        getattr(producer, step)(*args)

    monkeypatch.setattr(kafka_commit, "_producer", producer)
    monkeypatch.setattr(kafka_commit, "_bounded", bounded)
    return kafka_commit.FencedGroupCommit("k:9092", "g", "id", "A", **options)


def test_a_fenced_group_commit_only_moves_forward_within_a_query(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever order a sink's transaction and a late progress report reach the committer in,
    the group never goes back; a new query starts afresh."""
    broker = Broker()
    commit = fenced_commit(monkeypatch, broker)
    commit.open()
    commit.allow(new_query=True)
    commit.write({("t", 0): 12, ("t", 1): 4}, 3, "sink", [(None, b"r")])  # batch N+1's sink transaction
    commit({("t", 0): 9, ("t", 1): 5}, 3)  # batch N's late report: only t-1 moves on
    commit({("t", 0): 9}, 3)  # nothing new: no transaction at all
    assert broker.log == [{("t", 0): 12, ("t", 1): 4}, {("t", 1): 5}]
    commit.open()  # a new query (after a handover back, a reset): its own start decides
    commit.allow(new_query=True)
    commit({("t", 0): 2}, 4)
    assert broker.log[-1] == {("t", 0): 2}


def test_a_committer_never_opens_a_producer_by_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing goes before the handover opened and allowed a producer: a commit is held."""
    broker = Broker()
    commit = fenced_commit(monkeypatch, broker)
    with pytest.raises(CommitHeldError):
        commit({("t", 0): 5}, 1)
    commit.open()
    with pytest.raises(CommitHeldError):  # opened, not yet confirmed by the handover
        commit({("t", 0): 5}, 1)
    assert broker.log == [] and broker.inits == 1
    commit.allow(new_query=True)
    commit({("t", 0): 5}, 1)
    commit.close()  # a stop: the producer is gone, and only the handover opens another
    assert commit.lost and not commit.fenced
    with pytest.raises(CommitHeldError):  # a progress report that arrives after the stop
        commit({("t", 0): 6}, 1)
    assert broker.log == [{("t", 0): 5}] and broker.inits == 1


def test_a_transient_failure_never_undoes_a_successors_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    """The defect of a reopen behind the protocol's back: A commits 10; a failure closes A's
    producer; B fences A's id and commits 60; A, a zombie that passed its lease check before
    it paused, commits 20. Its commit must be held, never sent through a new epoch."""
    broker = Broker()
    a = fenced_commit(monkeypatch, broker)
    a.open()
    a.allow(new_query=True)
    a({("t", 0): 10}, 1)
    broker.fail_next = 1
    with pytest.raises(KafkaCommitError) as failed:
        a({("t", 0): 15}, 1)
    assert not isinstance(failed.value, CommitHeldError | CommitFencedError) and a.lost
    broker.fence()  # B takes over
    broker.group[("t", 0)] = 60  # B's commit
    with pytest.raises(CommitHeldError):
        a({("t", 0): 20}, 1)
    assert broker.group == {("t", 0): 60} and broker.inits == 1


def test_a_fenced_commit_refuses_every_later_one_until_a_new_start(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = Broker()
    a = fenced_commit(monkeypatch, broker)
    a.open()
    a.allow(new_query=True)
    broker.fence()
    with pytest.raises(CommitFencedError):
        a({("t", 0): 3}, 1)
    with pytest.raises(CommitFencedError):  # refused at once: no transaction is tried
        a({("t", 0): 4}, 1)
    assert a.fenced and not a.lost and broker.log == []
    a.close()
    assert a.fenced  # closing does not turn a refusal into a retryable wait
    a.open()
    a.allow(new_query=True)
    a({("t", 0): 4}, 2)
    assert broker.group == {("t", 0): 4}


def test_a_held_final_commit_returns_at_once_for_the_handover_to_reopen() -> None:
    """The final commit of a stopped query does not retry a held commit until its timeout."""
    calls: list[int] = []

    def held(offsets: Mapping[TP, int], generation: int) -> None:
        calls.append(generation)
        raise CommitHeldError("waits for the handover")

    fake = FakeTime()
    c = ProgressCommitter(held, lambda: 7, clock=fake.clock, sleep=fake.sleep)
    c.track("q", [("t", 0)])
    with pytest.raises(CommitHeldError):
        c.finish("q", [end(p0=4)], timeout=30.0, pause=1.0)
    assert calls == [7] and fake.pauses == [] and c.tracked("q")


def test_what_a_query_committed_and_whether_it_is_tracked() -> None:
    group = Group()
    c = committer(group)
    assert c.committed("unknown") == {} and not c.tracked("unknown")
    c.track("q", [("t", 0)])
    assert c.tracked("q") and c.committed("q") == {}
    c.record("q", [end(p0=3)])
    assert c.committed("q") == {("t", 0): 3}
    c.untrack("q")
    assert not c.tracked("q") and c.committed("q") == {}
    c.untrack("q")  # again, or a query never tracked: nothing to do
    c.untrack("unknown")


def test_each_commit_names_its_consumer_and_generation_and_a_sinks_records_go_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The metadata is what a successor and ``foreign_commits`` judge a commit by; a sink's
    records go in the transaction even when its offsets move nothing forward."""
    broker = Broker()
    commit = fenced_commit(monkeypatch, broker)
    commit.open()
    commit.allow(new_query=True)
    commit({("t", 0): 12}, 3)
    assert broker.notes == ["spark-lag-assign consumer=A generation=3"]
    commit.write({("t", 0): 12}, 3, "sink", [(None, b"again")])  # a batch redone: its offsets are not new
    assert broker.records == [("sink", b"again")] and broker.group == {("t", 0): 12}
    with pytest.raises(KafkaCommitError) as failed:
        commit.write({("t", 0): 13}, 3, None, [(None, b"lost")])
    assert str(failed.value) == "committing offsets for group g failed: AssertionError: records need a topic"
    assert broker.group == {("t", 0): 12}
    commit.open()
    commit.allow(new_query=True)
    commit.write({("t", 0): 14}, 3, "sink", [(b"k", b"v")])  # a record's key goes with it
    assert broker.records[-1] == ("sink", b"k=v")


def test_refused_and_held_commits_say_whose_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = Broker()
    commit = fenced_commit(monkeypatch, broker)
    with pytest.raises(CommitHeldError, match="A's committer waits for its handover to open a producer of id"):
        commit({("t", 0): 1}, 1)
    commit.open()
    commit.allow(new_query=True)
    broker.fence()
    with pytest.raises(CommitFencedError, match="A's commit under generation 1 was refused"):
        commit({("t", 0): 1}, 1)
    with pytest.raises(CommitFencedError, match="A's commits are fenced"):
        commit({("t", 0): 2}, 1)


def test_the_gate_sends_only_offsets_past_the_furthest_committed() -> None:
    """Within a query, a partition's commit only moves forward: an offset already committed
    is not sent again, a negative one never, and the furthest stays the bar whatever order
    successes are reported in."""
    from spark_lag_assign.consume.gate import CommitGate

    gate = CommitGate()
    gate.opened()
    gate.allow(new_query=True)
    assert gate.decide({("t", 0): 0}) == ("send", {("t", 0): 0})
    assert gate.decide({("t", 0): -1}) == ("skip", {})  # no offset at all: never committed
    gate.sent({("t", 0): 0})
    assert gate.decide({("t", 0): 1}) == ("send", {("t", 0): 1})
    assert gate.decide({("t", 0): 0}) == ("skip", {})  # already committed: no transaction
    gate.sent({("t", 0): 5})
    gate.sent({("t", 0): 3})  # a success reported late: the bar stays at 5
    assert gate.decide({("t", 0): 4}) == ("skip", {})
    assert gate.decide({("t", 0): 4}, records=True) == ("send", {})


def test_the_committer_opens_its_producer_and_bounds_every_wait_as_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    """The producer is made for the configured servers, id, client options and timeout; the
    commit goes to the configured group with no leader epoch (-1: kafka-python's "unknown"),
    and no step waits longer than the timeout (kafka-python's own waits have no bound)."""
    broker = Broker()
    commit = fenced_commit(monkeypatch, broker)
    commit.open()
    assert broker.made == [("k:9092", "id", {}, 15000)]  # the default timeout
    commit.allow(new_query=True)
    commit.write({("t", 0): 3}, 1, "sink", [(None, b"r")])
    assert broker.groups == ["g"] and broker.epochs == [-1]
    assert broker.waits == [("record", 15.0), ("send_offsets_to_transaction", 15000), ("commit_transaction", 15000)]
    broker = Broker()
    tuned = fenced_commit(monkeypatch, broker, client_options={"security_protocol": "SASL_PLAINTEXT"}, timeout_ms=2000)
    tuned.open()
    assert broker.made == [("k:9092", "id", {"security_protocol": "SASL_PLAINTEXT"}, 2000)]
    tuned.allow(new_query=True)
    tuned.write({("t", 0): 3}, 1, "sink", [(None, b"r")])
    assert broker.waits == [("record", 2.0), ("send_offsets_to_transaction", 2000), ("commit_transaction", 2000)]


def test_a_failed_commit_says_what_failed_and_a_refusal_names_the_acl_to_grant(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = Broker()
    commit = fenced_commit(monkeypatch, broker)
    commit.open()
    commit.allow(new_query=True)
    broker.fail_next = 1
    with pytest.raises(KafkaCommitError, match=r"^committing offsets for group g failed: KafkaConnectionError: broker away$"):
        commit({("t", 0): 1}, 1)
    commit.open()
    commit.allow(new_query=True)
    broker.refuse_records = True
    with pytest.raises(CommitNotAuthorizedError, match=r"grant WRITE on Topic:sink \(literal\) to this principal") as refused:
        commit.write({("t", 0): 1}, 1, "sink", [(None, b"r")])
    assert refused.value.acls == (Acl("WRITE", "Topic", "sink"),)
    commit.open()
    commit.allow(new_query=True)
    from kafka.errors import GroupAuthorizationFailedError

    def refused_group(*args: Any) -> None:
        raise GroupAuthorizationFailedError("g")

    monkeypatch.setattr(FakeProducer, "commit_transaction", refused_group)
    with pytest.raises(CommitNotAuthorizedError) as denied:  # the offsets alone: no topic to write
        commit({("t", 0): 1}, 1)
    assert denied.value.acls == (Acl("READ", "Group", "g"),)
    assert str(denied.value).startswith("committing offsets for group g failed: not authorized: grant READ on Group:g")


def test_a_producer_that_cannot_be_opened_says_why_and_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka.errors import KafkaConnectionError, TransactionalIdAuthorizationFailedError

    broker = Broker()
    commit = fenced_commit(monkeypatch, broker)
    from spark_lag_assign.consume import kafka_commit

    def unreachable(*args: Any) -> FakeProducer:
        raise KafkaConnectionError("no broker")

    monkeypatch.setattr(kafka_commit, "_producer", unreachable)
    with pytest.raises(KafkaCommitError) as failed:
        commit.open()
    assert str(failed.value) == "opening the committer id failed: KafkaConnectionError: no broker"
    commit = fenced_commit(monkeypatch, broker)

    def refused(self: FakeProducer) -> None:
        raise TransactionalIdAuthorizationFailedError("id")

    monkeypatch.setattr(FakeProducer, "init_transactions", refused)
    with pytest.raises(CommitNotAuthorizedError) as denied:
        commit.open()
    assert denied.value.acls == (Acl("WRITE", "TransactionalId", "id"),)
    assert str(denied.value).startswith("opening the committer id failed: not authorized: grant WRITE on TransactionalId:id")
    assert broker.closes == [0] and commit.lost  # the half-opened producer is closed at once, and none is kept


def test_a_final_commit_refused_names_its_query_and_one_that_was_untracked_meanwhile_still_returns() -> None:
    group, refused = Group(), []
    c = committer(group, refused)
    c.track("q", [("t", 0)])
    group.refuse = True
    with pytest.raises(CommitFencedError):
        c.finish("q", [end(p0=8)], timeout=1.0)
    assert refused == ["q"]  # the query that was refused, by its id
    with pytest.raises(CommitFencedError, match=r"^commits of query q were refused"):
        c.finish("q", [end(p0=9)], timeout=1.0)
    calls: list[int] = []

    def untracking(offsets: Mapping[TP, int], generation: int) -> None:
        calls.append(generation)
        other.untrack("r")  # the query is forgotten while its final commit runs (a stop racing it)

    other = ProgressCommitter(untracking, lambda: 3)
    other.track("r", [("t", 0)])
    assert other.finish("r", [end(p0=4)], timeout=1.0) == {("t", 0): 4}
    assert calls == [3] and not other.tracked("r")


def test_every_commit_outcome_is_counted_and_logged_as_what_it_is(caplog: pytest.LogCaptureFixture) -> None:
    """What an operator reads in the pipeline's log, and the counts its metrics show: a
    commit, a transient failure (retried with the next batch), a wait for the handover, a
    missing ACL and a refusal each say so, with the query and the reason."""
    group, refused = Group(), []
    c = committer(group, refused)
    c.track("q", [("t", 0), ("t", 1)])
    with caplog.at_level(logging.DEBUG, logger="spark_lag_assign.consume.committer"):
        assert c.record("q", [end(p0=5, p1=2)])
        assert (c.commits, c.failures) == (1, 0) and c.committed("q") == {("t", 0): 5, ("t", 1): 2}
        group.fail = 2
        assert not c.record("q", [end(p0=6)])
        assert (c.commits, c.failures) == (1, 1) and c.committed("q") == {("t", 0): 5, ("t", 1): 2}
        assert not c.retry("q")  # the broker is still away: counted again
        assert (c.commits, c.failures) == (1, 2)
        assert c.record("q", [end(p0=7)])
        assert (c.commits, c.failures) == (2, 2) and group.calls[-1] == ({("t", 0): 7}, 7)
        group.deny = True
        assert not c.record("q", [end(p0=8)])  # the follower's commit function reports it to the run
        assert c.failures == 3
        group.deny, group.refuse = False, True
        assert not c.record("q", [end(p0=9)])
        assert refused == ["q"] and c.failures == 3
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "spark_lag_assign.consume.committer"]
    assert lines == [
        ("DEBUG", "committed {('t', 0): 5, ('t', 1): 2}"),
        ("WARNING", "commit of 1 offset(s) failed (query q), retrying with the next batch: KafkaCommitError: broker away"),
        ("WARNING", "commit of 1 offset(s) failed (query q), retrying with the next batch: KafkaCommitError: broker away"),
        ("DEBUG", "committed {('t', 0): 7}"),
        (
            "ERROR",
            "commit of query q refused: CommitNotAuthorizedError: committing: not authorized: grant READ on Group:g (literal) to this principal",
        ),
        ("WARNING", "commit of query q refused, the pipeline stops reading: CommitFencedError: a newer owner fenced the id"),
    ]
    held = ProgressCommitter(
        lambda offsets, generation: (_ for _ in ()).throw(CommitHeldError("waits for the handover")), lambda: 7
    )
    held.track("h", [("t", 0)])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="spark_lag_assign.consume.committer"):
        assert not held.record("h", [end(p0=3)])
        assert not held.retry("h")
    assert held.failures == 2
    assert [r.getMessage() for r in caplog.records] == [
        "commit of 1 offset(s) waits (query h): CommitHeldError: waits for the handover"
    ] * 2


def test_a_batch_commits_only_its_own_partitions_own_offsets_forward_whatever_else_it_reports() -> None:
    """A query may read other sources too (their offsets are not Kafka's), report no offset
    for a partition yet (-1), or repeat an older report: none of that is committed."""
    group = Group()
    c = committer(group)
    c.track("q", [("t", 0), ("t", 1)])
    assert c.record("q", [end(p0=0)])  # nothing read yet, and the group says so: offset 0 is committed
    assert group.calls == [({("t", 0): 0}, 7)]
    assert c.record("q", ["not a Kafka source", None, end(p0=-1), end(p0=5), json.dumps({"u": {"0": 9}})])
    assert group.calls[1:] == [({("t", 0): 5}, 7)]
    assert c.record("q", [end(p0=4, p1=-1)])  # behind what was committed, and still nothing for t-1
    assert len(group.calls) == 2
    assert not c.record("other", [end(p0=6)]) and len(group.calls) == 2  # not tracked: nothing


def test_a_committers_producer_is_closed_briefly_after_a_failure_and_a_close_that_fails_is_no_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broker = Broker()
    commit = fenced_commit(monkeypatch, broker)
    commit.open()
    commit.allow(new_query=True)
    broker.fail_next = 1
    with pytest.raises(KafkaCommitError):
        commit({("t", 0): 1}, 1)
    assert broker.closes == [1]  # the broken producer is dropped at once, never reused

    def broken(self: FakeProducer, timeout: float | None = None) -> None:
        raise OSError("socket already closed")

    monkeypatch.setattr(FakeProducer, "close", broken)
    commit.open()
    with caplog.at_level(logging.DEBUG, logger="spark_lag_assign.consume.kafka_commit"):
        commit.close()  # closing a broken client must not hide why it broke: a debug line, no error
    assert commit.lost
    (record,) = [r for r in caplog.records if r.name == "spark_lag_assign.consume.kafka_commit"]
    assert (record.levelname, record.getMessage()) == ("DEBUG", "closing the committer's producer failed")
    assert record.exc_info is not None and isinstance(record.exc_info[1], OSError)


def test_the_lease_margin_defaults_to_a_tenth_of_the_lease_within_bounds_and_is_checked() -> None:
    from spark_lag_assign.consume.protocol import Handover

    assert [Handover("A", "A1", lease=lease).margin for lease in (2.0, 8.0, 30.0, 100.0)] == [0.5, 1.0, 3.0, 10.0]
    assert Handover("A", "A1", lease=30.0, margin=0.0).margin == 0.0
    assert Handover("A", "A1", lease=30.0, margin=9.0).margin == 9.0  # just below a third
    assert Handover("A", "A1", lease=0.9).margin == 0.225  # a lease under a second is a lease
    with pytest.raises(ValueError, match=r"^lease must be positive, not 0$"):
        Handover("A", "A1", lease=0)
    with pytest.raises(ValueError, match=r"^margin 10.0 must be below a third of the lease 30.0$"):
        Handover("A", "A1", lease=30.0, margin=10.0)
    with pytest.raises(ValueError, match=r"^margin -0.5 must be below a third of the lease 30.0$"):
        Handover("A", "A1", lease=30.0, margin=-0.5)


def test_commit_ids_are_named_by_the_store_and_a_name_that_could_collide_is_refused() -> None:
    from spark_lag_assign.consume.kafka_commit import commit_id, commit_namespace
    from spark_lag_assign.errors import ConfigError

    assert commit_id("orders", "b") == "spark-lag-assign.orders.commit.b"
    assert commit_namespace("orders_eu-2") == "spark-lag-assign.orders_eu-2.commit."
    for name in ("orders.eu", "orders.commit.b", "", "-x", "a" * 101, "héllo"):
        with pytest.raises(ConfigError) as err:
            commit_id(name, "b")
        assert str(err.value) == (
            f"store name {name!r} cannot name the pipelines' commit ids (spark-lag-assign.NAME.commit.CONSUMER): "
            "use letters, digits, '_' and '-', at most 100, starting with a letter or digit (a plan directory's name is "
            "its last path element)"
        )
