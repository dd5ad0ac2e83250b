"""The follower's own lease checks, without Spark or a broker.

The handover's state machine (``consume/protocol.py``) decides whether a lease is valid; the
follower carries what its other threads saw to it and acts on its answer. Three places do
that, and each is a way to read or write past the lease if it is wrong: a sink's
``write_batch`` (a batch that completes after a pause past the lease), the lease guard thread
(it stops the query at the lapse while the loop is blocked in a store or Kafka call), and
the loop's ``_observe`` step (refused commits, a lost producer, a lapse the guard acted on,
a query that ended by itself). These tests drive the real ``PlanFollower`` and
``RunningQuery`` with a real ``Handover`` and a query stand-in; ``make test-mutation`` runs
them against every mutant of that glue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spark_lag_assign.consume import PlanFollower
from spark_lag_assign.consume.protocol import Handover
from spark_lag_assign.errors import CommitFencedError, KafkaCommitError, ReadNotAuthorizedError
from spark_lag_assign.store.base import ClaimRecord
from tests.unit.test_follower_input import follower as input_follower

P = ("t", 0)
LEASE = 30.0
DEADLINE = LEASE - 3.0  # the default margin of a 30 s lease: a tenth of it


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Query:
    """What the follower reads of a streaming query: its ids, whether it runs, its error."""

    runs = 0

    def __init__(self, error: BaseException | None = None) -> None:
        Query.runs += 1
        self.id = "query-1"
        self.runId = f"run-{Query.runs}"
        self.isActive = True
        self.error = error
        self.stops = 0

    def stop(self) -> None:
        self.stops += 1
        self.isActive = False

    def exception(self) -> BaseException | None:
        return self.error


class Producer:
    """The committer's producer as the follower sees it: lost or not, and what it was asked to write."""

    def __init__(self, lost: bool = False) -> None:
        self.lost = lost
        self.writes: list[tuple[Any, ...]] = []

    def write(self, offsets: Any, generation: int, topic: str | None, records: Any) -> None:
        self.writes.append((dict(offsets), generation, topic, records))


def reading_core() -> Handover:
    """A state machine that claimed t-0 at 0.0 (own clock) and reads it under generation 4."""
    core = Handover("A", "inc-a", lease=LEASE)
    core.wrote(ClaimRecord("A", "inc-a", 1, 4, frozenset({P}), LEASE), sent_at=0.0)
    core.started(4, frozenset({P}))
    assert core.deadline() == DEADLINE
    return core


def follower(tmp_path: Path, clock: Clock, core: Handover | None = None) -> PlanFollower:
    f = input_follower(tmp_path, lease=LEASE, clock=clock)
    f._core = core
    return f


# -- a sink's write_batch


def test_a_batch_within_the_lease_goes_to_the_producer_under_the_generation_read(tmp_path: Path) -> None:
    clock = Clock()
    f = follower(tmp_path, clock, reading_core())
    f.commits.producer = producer = Producer()  # type: ignore[assignment]
    clock.now = DEADLINE - 0.01
    assert f.lease_valid()
    f.write_batch({P: 12}, "out", ["r"])
    assert producer.writes == [({P: 12}, 4, "out", ["r"])]


@pytest.mark.parametrize(
    "case", ["at the deadline", "long past it", "not reading", "a newer incarnation took the id", "no state machine"]
)
def test_a_batch_after_the_lease_or_without_one_is_refused_and_nothing_is_written(tmp_path: Path, case: str) -> None:
    clock = Clock()
    core: Handover | None = reading_core()
    assert core is not None
    clock.now = {"at the deadline": DEADLINE, "long past it": 10 * LEASE}.get(case, 1.0)
    if case == "not reading":
        core.stopped("ok")
    elif case == "a newer incarnation took the id":
        core.zombie = True
    elif case == "no state machine":
        core = None
    f = follower(tmp_path, clock, core)
    f.commits.producer = producer = Producer()  # type: ignore[assignment]
    assert not f.lease_valid()
    with pytest.raises(CommitFencedError, match=r"^A reads nothing under a valid lease now: the batch is not written$"):
        f.write_batch({P: 12}, "out", ["r"])
    assert producer.writes == []


def test_a_batch_without_the_followers_own_producer_is_refused_in_one_line(tmp_path: Path) -> None:
    clock = Clock()
    f = follower(tmp_path, clock, reading_core())
    with pytest.raises(KafkaCommitError, match=r"^write_batch needs the follower's own Kafka committer \(commit=None\)$"):
        f.write_batch({P: 12}, "out", ["r"])


# -- the lease guard thread's body, one round at a time


class Rounds:
    """The guard's ``done`` event, played round by round: before each round it runs the next
    step (which may move the clock or check what the last round did); once the steps are
    done it ends the guard. It keeps each wait's timeout (the guard's round)."""

    def __init__(self, *steps: Callable[[], object]) -> None:
        self.steps = list(steps)
        self.timeouts: list[float] = []

    def wait(self, timeout: float) -> bool:
        self.timeouts.append(timeout)
        if len(self.timeouts) > len(self.steps):
            return True
        self.steps[len(self.timeouts) - 1]()
        return False


def guard(f: PlanFollower, core: Handover, clock: Clock, *steps: Callable[[], object]) -> Rounds:
    done = Rounds(*steps)
    f.running.guard(core, clock, done)  # type: ignore[arg-type]
    return done


def test_the_guard_stops_the_query_at_the_lapse_once_and_the_loop_learns_it(tmp_path: Path) -> None:
    clock, core = Clock(), reading_core()
    f = follower(tmp_path, clock, core)
    f.running.query = query = Query()  # type: ignore[assignment]
    restarted = Query()

    def before_the_deadline() -> None:
        clock.now = DEADLINE - 0.01

    def at_the_deadline() -> None:
        assert query.stops == 0 and not f.running.lapse_stopped()
        clock.now = DEADLINE

    def winding_down() -> None:
        assert query.stops == 1 and f.running.lapse_stopped()
        query.isActive = True  # still winding down: the guard does not stop that run again

    def a_new_run() -> None:  # a new run while the lease is still lapsed
        assert query.stops == 1
        f.running.query = restarted  # type: ignore[assignment]
        assert not f.running.lapse_stopped()

    guard(f, core, clock, before_the_deadline, at_the_deadline, winding_down, a_new_run)
    assert restarted.stops == 1 and f.running.lapse_stopped()


@pytest.mark.parametrize("case", ["the query ended by itself", "no query", "the state machine reads nothing"])
def test_the_guard_leaves_alone_what_the_loop_handles(tmp_path: Path, case: str) -> None:
    """A query that ended by itself is the loop's to judge (``query_ended``); one that the state
    machine no longer reads under is being stopped by the loop already."""
    clock, core = Clock(), reading_core()
    f = follower(tmp_path, clock, core)
    query = Query()
    if case == "the query ended by itself":
        query.isActive = False
    if case != "no query":
        f.running.query = query  # type: ignore[assignment]
    if case == "the state machine reads nothing":
        core.stopped("ok")
    clock.now = 10 * LEASE
    guard(f, core, clock, lambda: None, lambda: None, lambda: None)
    assert query.stops == 0 and not f.running.lapse_stopped()


@pytest.mark.parametrize("lease", [2.0, LEASE])
def test_the_guard_looks_at_the_lease_well_within_the_margin_the_lease_keeps(tmp_path: Path, lease: float) -> None:
    """The default margin (a tenth of the lease, at least 1 s, at most a quarter of it) is
    what a pipeline stops reading before its lease runs out by its own clock; the guard acts
    on a lapse at most one round after it, so from a 2 s lease up a round is at most a
    quarter of that margin."""
    core = Handover("A", "inc-a", lease=lease)
    assert core.margin is not None
    done = guard(follower(tmp_path, Clock(), core), core, Clock(), lambda: None, lambda: None, lambda: None)
    assert len(done.timeouts) == 4 and max(done.timeouts) <= core.margin / 4


# -- the loop's step that carries the other threads' observations to the state machine


def test_a_commit_refused_for_want_of_an_acl_ends_the_run_with_that_error(tmp_path: Path) -> None:
    clock, core = Clock(), reading_core()
    f = follower(tmp_path, clock, core)
    f.commits.denied = denied = KafkaCommitError("no WRITE on TransactionalId")  # type: ignore[assignment]
    with pytest.raises(KafkaCommitError) as err:
        f._observe(core)
    assert err.value is denied


def test_a_stop_request_reaches_the_state_machine(tmp_path: Path) -> None:
    clock, core = Clock(), reading_core()
    f = follower(tmp_path, clock, core)
    f._observe(core)
    assert core.ending is None
    f.stop()
    f._observe(core)
    assert core.ending == "stopped"


@pytest.mark.parametrize("reads", [True, False])
def test_a_refused_commit_is_the_state_machines_once_and_only_while_it_reads(tmp_path: Path, reads: bool) -> None:
    clock, core = Clock(), reading_core()
    if not reads:
        core.stopped("ok")
    f = follower(tmp_path, clock, core)
    f.commits.refused.set()
    f._observe(core)
    assert core.commit_refused is reads
    assert not f.commits.refused.is_set()  # acted on: a later refusal sets it again


@pytest.mark.parametrize(("opened", "lost", "still_open"), [(True, True, False), (True, False, True)])
def test_a_lost_producer_is_reported_so_that_only_the_handover_reopens_it(
    tmp_path: Path, opened: bool, lost: bool, still_open: bool
) -> None:
    clock, core = Clock(), reading_core()
    if opened:
        core.commits_opened((("A", 1)), now=0.5)  # type: ignore[arg-type]
    f = follower(tmp_path, clock, core)
    f.commits.producer = Producer(lost=lost)  # type: ignore[assignment]
    f._observe(core)
    assert (core.commits is not None) is still_open


def test_a_query_the_guard_stopped_is_a_lapse_not_an_end_of_the_run(tmp_path: Path) -> None:
    clock, core = Clock(), reading_core()
    f = follower(tmp_path, clock, core)
    f.running.query = query = Query()  # type: ignore[assignment]
    f.running._lapse_stopped.add(query.runId)
    query.isActive = False
    clock.now = 1.0  # even if a renewal since made the lease look valid again
    f._observe(core)
    assert core.lease_lapsed and core.ending is None and f._failure is None


@pytest.mark.parametrize(
    ("now", "error", "ending"),
    [(1.0, None, "drained"), (1.0, RuntimeError("the sink failed"), "failed"), (DEADLINE, RuntimeError("timed out"), None)],
)
def test_a_query_that_ended_by_itself_ends_the_run_only_within_the_lease(
    tmp_path: Path, now: float, error: BaseException | None, ending: str | None
) -> None:
    """Past the lease its end is a pause of the whole process (its Kafka calls timed out on
    resuming): the lapse stops it and the pipeline claims again; its error is no failure."""
    clock, core = Clock(), reading_core()
    f = follower(tmp_path, clock, core)
    f.running.query = query = Query(error)  # type: ignore[assignment]
    clock.now = now
    f._observe(core)
    assert core.ending is None and f._failure is None  # it still runs
    query.isActive = False
    f._observe(core)
    assert core.ending == ending
    assert f._failure is (error if ending == "failed" else None)


def test_a_query_that_ended_after_a_refused_commit_is_no_end_of_the_run(tmp_path: Path) -> None:
    """A refused ``write_batch`` ends the query with an error: the refusal, not a failure."""
    clock, core = Clock(), reading_core()
    f = follower(tmp_path, clock, core)
    f.running.query = Query(CommitFencedError("refused"))  # type: ignore[assignment]
    f.running.query.isActive = False  # type: ignore[union-attr]
    f.commits.refused.set()
    clock.now = 1.0
    f._observe(core)
    assert core.commit_refused and core.ending is None and f._failure is None


def test_a_query_the_cluster_refused_ends_the_run_with_the_acl_it_needs(tmp_path: Path) -> None:
    """Spark's Kafka source ends the query with the Java client's error, which names the topic
    but no ACL: the run ends with one line naming it, under the generation read."""
    clock, core = Clock(), reading_core()
    f = follower(tmp_path, clock, core)
    java = RuntimeError("org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: [t]")
    f.running.query = query = Query(java)  # type: ignore[assignment]
    query.isActive = False
    clock.now = 1.0
    f._observe(core)
    assert core.ending == "failed"
    assert isinstance(f._failure, ReadNotAuthorizedError)
    assert str(f._failure) == "A reading under generation 4: not authorized: grant READ on Topic:t (literal) to this principal"


# -- what the operator reads: each line names the pipeline and what happened


def test_the_lines_a_lapse_and_a_failure_leave(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="spark_lag_assign.consume")
    clock, core = Clock(), reading_core()
    f = follower(tmp_path, clock, core)
    for error, now in ((RuntimeError("boom\nat Java"), DEADLINE), (None, DEADLINE), (RuntimeError("the sink failed"), 1.0)):
        f.running.query = query = Query(error)  # type: ignore[assignment]
        query.isActive = False
        clock.now = now
        f._observe(core)
    f.running.query = Query()  # type: ignore[assignment]
    clock.now = DEADLINE
    guard(f, core, clock, lambda: None)
    assert f.running.lapse_stopped()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "A: the query ended while its lease had lapsed: RuntimeError: boom at Java"),
        ("WARNING", "A: the query ended while its lease had lapsed: no error"),
        ("ERROR", "A: the query of generation 4 failed: the sink failed"),
        ("WARNING", "A: the lease lapsed while the loop waited: stopping the query"),
    ]
