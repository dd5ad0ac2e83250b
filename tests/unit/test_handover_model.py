"""The handover protocol explored by hypothesis, with the faults a cluster has made common.

The model is a small world: a claims log (one ordered log, as a store is), plan
generations, a model broker with per-consumer commit ids (a transactional id per
consumer: opening a producer or fencing takes a new epoch, and a producer whose epoch is
not the newest is refused), the group's committed offsets, partitions that keep growing,
sinks that keep every record they were given (multisets: a record read twice is there
twice), and pipelines (processes) each driving the real decision code:

- ``Handover`` (``spark_lag_assign.consume.protocol``): every decision of the follower;
- ``FencedGroupCommit`` with its ``CommitGate`` (``consume.kafka_commit``, ``consume.gate``):
  the committer, over a model producer of the model broker;
- ``ProgressCommitter`` (``consume.committer``): progress reports to commits, forward only.

What a process does between decisions is the follower's glue (``perform``), as thin as
``PlanFollower``'s. Hypothesis chooses the schedule, and the dangerous ones are rules of
their own so that they happen in most examples, not by luck:

- takeovers: a reader paused past its lease while the plan moves its partitions, the
  successor fences it and reads, then the reader resumes *while the successor reads*; in
  variants its producer was lost before the pause (a failed commit), it had decided to
  reopen it and was paused before doing so, or a broker outage longer than the lease hit
  while its commits were in flight, or it first renewed late (within its lease) while the
  successor waited on a view read before the renewal, or it renewed while a read of the
  successor ran, which showed the renewal, or it was paused right after a renewal that the
  successor read at once, and the successor acts the moment its own clock says the lease
  ran out (with the holder's clock slow and the successor's fast, only the margin keeps the
  holder's own deadline first: without it, I1 fails); every other takeover, the successor is then
  replaced by a new incarnation (its fence notes must outlive it);
- a decision taken now and performed later (a process paused between ``next()`` and its
  effect), for every kind of action;
- each process's clock runs at its own rate, within ``DRIFT`` of real time;
- claim reads delivered late, out of order (an older view after a newer one), and showing
  records written after the read began;
- progress reports delivered late by the listener thread, after a stop or a lapse;
- commits that fail, whose acknowledgement is lost (applied, reported failed), and a
  producer closed by a failure and reopened only through the handover;
- broker outages (of Kafka and the store together, or of Kafka alone beside a store that
  still takes renewals), crashes, restarts while the old incarnation is only paused.

Invariants, checked after every step (violations are collected when they happen):
  I1 exclusive reading: no two pipelines whose leases are valid by their own clocks have a
     running query on the same partition (a paused pipeline with a valid lease counts).
  I2 a pipeline whose lease lapsed stops its query without committing at its first own
     step (environment assumption, as in a real driver: its loop runs at least once
     between two micro-batches, so it completes at most one batch past its lease).
  I3 the group's committed offset of a partition never goes backwards.
  I4 nothing is lost: every offset below a committed offset reached a sink.
  I5 liveness: once plans stop changing and every pipeline runs, every partition is read by
     its owner and the group's commits reach the end offsets.
  I6 commits come from the partition's newest reader: once a query started reading a
     partition, no commit of an earlier query on it is accepted (what a replaced pipeline
     commits is refused; this is what makes I3 hold across handovers).
  D  duplicates are bounded: a record is read twice only if an earlier query read it after
     its last accepted commit; a query that stopped with a successful final commit leaves
     nothing read and uncommitted (at most the interrupted batch is read twice at a move).
  I7 no live holder is fenced: while a pipeline reads (or holds a final commit) under a
     lease its own clock says is valid, no claim that counts (any pipeline's with "self"
     fencing, the fencer's with "service") newly records a fence of a claim version of its
     stint (one its ``fenced_by`` would act on), and no fence of such a version is done. A
     fence is only justified by a read that began a whole lease after the version was first
     seen and still shows it; within the drift the margin covers, that read began after the
     holder's own deadline, and a holder past its deadline stays lapsed until it stops. A
     note decided on an older view (the holder renewed since) would stop a reader whose lease
     runs: I1 alone does not see that, the holder stops in time and nobody reads beside it.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hypothesis import HealthCheck, event, settings, strategies as st, target
from hypothesis.control import currently_in_test_context
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from spark_lag_assign.consume.committer import ProgressCommitter
from spark_lag_assign.consume.fencer import FenceCommits, FencerCore, NoteFence, fence_done
from spark_lag_assign.consume.kafka_commit import FencedGroupCommit
from spark_lag_assign.consume.protocol import (
    AllowCommits,
    Exit,
    Fence,
    FinishCommit,
    Handover,
    OpenCommits,
    ReadClaims,
    ReadPlan,
    Start,
    Stop,
    Wait,
    Write,
)
from spark_lag_assign.errors import CommitFencedError, CommitHeldError, KafkaCommitError
from spark_lag_assign.store.base import FENCER, ClaimRecord

CONSUMERS = ("A", "B", "C")
PARTITIONS = (("t", 0), ("t", 1), ("t", 2), ("u", 0))
LEASE = 10.0
MARGIN = 1.0
#: every process's clock runs at a rate within 1 +- DRIFT of real time; the margin covers
#: (1 + DRIFT) / (1 - DRIFT) <= LEASE / (LEASE - MARGIN), i.e. DRIFT up to ~5.2% here
DRIFT = 0.04
MAX_PROCS = 8
MAX_GENERATIONS = 10
MAX_RECORDS = 3  # one micro-batch reads at most this many records of a partition
TAKEOVERS = ("plain", "lost-producer", "reopen-decided", "outage", "kafka-outage", "late-renewal", "slow-read", "tight")
#: the takeovers that move the plan, pause the holder and pace the successor themselves
STAGED = ("late-renewal", "slow-read", "tight")

TP = tuple[str, int]
STEPS = itertools.count()  # every rule run, over all examples: the summary reports it
EXAMPLES = itertools.count()
#: in how many examples each dangerous moment happened (printed by tests/unit/conftest.py)
COVERAGE: Counter[str] = Counter()


@dataclass
class Stint:
    """One query's reading of its partitions, from its start to its stop."""

    sid: int
    proc: int
    generation: int
    tps: frozenset[TP]
    start: dict[TP, int]
    pos: dict[TP, int]
    accepted: dict[TP, int] = field(default_factory=dict)  # the furthest accepted commit of it
    resent: Counter[TP] = field(default_factory=Counter)  # records a sink's retry wrote again (a lost acknowledgement)
    ended: bool = False


@dataclass
class Query:
    qid: str
    generation: int
    holds: frozenset[TP]
    stint: Stint


@dataclass
class Proc:
    pid: int
    consumer: str
    incarnation: str
    core: Handover
    rate: float  # this process's clock: base + rate * real time
    base: float
    sink: str  # "files" (records land when read) or "kafka" (records and offsets in one transaction)
    fc: FencedGroupCommit = field(init=False)
    committer: ProgressCommitter = field(init=False)
    alive: bool = True
    paused: bool = False
    exited: str | None = None
    query: Query | None = None
    pending_final: Query | None = None  # a stopped query whose final commit waits for a producer
    decided: object = None  # an action decided by next() and not yet performed
    reports: list[tuple[str, str]] = field(default_factory=list)  # (query id, endOffset JSON) not yet delivered
    stints: dict[str, Stint] = field(default_factory=dict)  # query id -> what that query read
    refused: bool = False  # the committer's on_refused was called (the follower's flag)
    committing: Stint | None = None  # whose offsets the committer is sending now
    fate: str = "ok"  # what the next commit_transaction meets: ok | fail | ack-lost
    seq: int = 0
    batches_past_lease: int = 0  # batches completed after the lease lapsed, since the loop last ran
    ended: bool = False  # the running query ended by itself (failed); the loop has not seen it yet
    clock_t: float = 0.0  # the final commit's own retry clock (ProgressCommitter)

    @property
    def runs(self) -> bool:
        return self.alive and not self.paused and self.exited is None


@dataclass
class World:
    now: float = 0.0  # real time
    down: bool = False  # the broker is away: every Kafka and store call fails
    kafka_down: bool = False  # only the Kafka broker is away; the store (HDFS) works
    plans: list[dict[TP, str]] = field(default_factory=list)  # generation g is plans[g - 1]
    members: list[set[str]] = field(default_factory=list)
    log: list[ClaimRecord] = field(default_factory=list)
    log_times: list[float] = field(default_factory=list)  # real time each record was appended
    id_owner: dict[str, str] = field(default_factory=dict)  # consumer id -> incarnation allowed to write claims
    epoch: dict[str, int] = field(default_factory=dict)  # consumer -> newest epoch of its commit id
    committed: dict[TP, int] = field(default_factory=dict)
    end: dict[TP, int] = field(default_factory=lambda: dict.fromkeys(PARTITIONS, 5))
    sink: dict[TP, Counter[int]] = field(default_factory=lambda: {tp: Counter() for tp in PARTITIONS})
    stints: list[Stint] = field(default_factory=list)
    newest: dict[TP, int] = field(default_factory=dict)  # partition -> the newest stint that started on it

    def view(self, upto: int) -> dict[str, ClaimRecord | str]:
        newest: dict[str, ClaimRecord | str] = {}
        for record in self.log[:upto]:
            newest[record.consumer] = record
        return newest

    def read_began(self, upto: int) -> float:
        """A read to the end that returned ``log[:upto]`` began before ``log[upto]`` was appended."""
        return self.log_times[upto] if upto < len(self.log) else self.now

    def assignment(self, generation: int, consumer: str) -> frozenset[TP] | None:
        plan = self.plans[generation - 1]
        if consumer not in set(plan.values()) and consumer not in self.members[generation - 1]:
            return None
        return frozenset(tp for tp, owner in plan.items() if owner == consumer)


class ModelProducer:
    """The model broker's side of kafka-python's transactional producer, for ``FencedGroupCommit``."""

    def __init__(self, model: HandoverModel, proc: Proc) -> None:
        self.model, self.proc = model, proc
        self.epoch: int | None = None
        self.offsets: dict[TP, int] = {}
        self.records: list[bytes] = []

    def init_transactions(self) -> None:
        from kafka.errors import KafkaConnectionError

        w, c = self.model.world, self.proc.consumer
        if w.down or w.kafka_down:
            raise KafkaConnectionError("the broker is away")
        w.epoch[c] = w.epoch.get(c, 0) + 1
        self.epoch = w.epoch[c]

    def begin_transaction(self) -> None:
        self.offsets, self.records = {}, []

    def send(self, topic: str, key: bytes | None = None, value: bytes = b"") -> None:
        self.records.append(value)

    def send_offsets_to_transaction(self, offsets: dict[Any, Any], group: str) -> None:
        self.offsets = {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}

    def commit_transaction(self) -> None:
        from kafka.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError

        w, proc = self.model.world, self.proc
        fate, proc.fate = proc.fate, "ok"
        if w.down or w.kafka_down or fate == "fail":
            raise KafkaConnectionError("the broker is away")
        if self.epoch != w.epoch.get(proc.consumer, 0):
            self.model.seen("a replaced pipeline's commit is refused")
            raise KafkaError("ProducerFencedError: a newer producer of this transactional id exists")
        self.model.apply_commit(proc, self.offsets, self.records)
        if fate == "ack-lost":
            self.model.seen("a commit's acknowledgement is lost")
            raise KafkaTimeoutError("commit_transaction did not complete")

    def close(self, timeout: float | None = None) -> None:
        pass


def _ends(positions: dict[TP, int]) -> str:
    """A progress report's endOffset JSON."""
    out: dict[str, dict[str, int]] = {}
    for (t, p), o in sorted(positions.items()):
        out.setdefault(t, {})[str(p)] = o
    return json.dumps(out)


class HandoverModel(RuleBasedStateMachine):
    lease: ClassVar[float] = LEASE
    margin: ClassVar[float] = MARGIN
    drift: ClassVar[float] = DRIFT
    exclusive: ClassVar[bool] = True  # check I1 and I2 (they rest on clocks within the margin)
    service: ClassVar[bool] = False  # the plan's fencing is "service": a fencer fences, pipelines ask

    def __init__(self) -> None:
        super().__init__()
        self.world = World()
        self.procs: list[Proc] = []
        self.incarnations = itertools.count(1)
        self.queries = itertools.count(1)
        self.violations: list[str] = []
        self.moments: set[str] = set()
        self.fences = 0
        self.takeovers = 0
        self.fencer = FencerCore()
        self.fencer_seq = 0
        self.fencer_rate = 1.0
        self.first_variant = 0

    # -- helpers ----------------------------------------------------------------------------

    def seen(self, what: str) -> None:
        """A dangerous moment happened in this example (counted once per example)."""
        if what not in self.moments:
            self.moments.add(what)
            if currently_in_test_context():  # the scripted scenarios drive the model outside hypothesis
                event(what)

    def own(self, proc: Proc, real: float | None = None) -> float:
        """``proc``'s clock at real time ``real`` (now by default)."""
        return proc.base + proc.rate * (self.world.now if real is None else real)

    def real(self, proc: Proc, own: float) -> float:
        return (own - proc.base) / proc.rate

    def live(self, proc: Proc) -> bool:
        """Reading, with a lease that its own clock says is valid."""
        return proc.alive and proc.query is not None and self.own(proc) < proc.core.deadline()

    def spawn(self, consumer: str, copy_predecessor: bool, rate: float = 1.0, sink: str = "files") -> Proc:
        w = self.world
        incarnation = f"{consumer}{next(self.incarnations)}"
        w.id_owner[consumer] = incarnation  # taking the id over fences every older claim writer
        predecessor = w.view(len(w.log)).get(consumer)
        assert predecessor is None or isinstance(predecessor, ClaimRecord)
        core = Handover(
            consumer, incarnation, lease=self.lease, margin=self.margin, handover_timeout=1e9,
            fence_authority=FENCER if self.service else None,
        )  # fmt: skip
        proc = Proc(len(self.procs), consumer, incarnation, core, rate, float(len(self.procs)) * 1000.0, sink)
        proc.fc = FencedGroupCommit("model", "group", f"commit.{consumer}", consumer, producer_factory=lambda: ModelProducer(self, proc))
        proc.committer = ProgressCommitter(
            proc.fc, lambda: self.stint_generation(proc), lambda query_id: setattr(proc, "refused", True),
            clock=lambda: proc.clock_t, sleep=lambda s: setattr(proc, "clock_t", proc.clock_t + s),
        )  # fmt: skip
        if predecessor is not None and copy_predecessor:  # a directory store fences by writing a copy
            proc.seq = 1
            copy = ClaimRecord(consumer, incarnation, 1, predecessor.generation, predecessor.holds, predecessor.lease, "taken over", dict(predecessor.fences))
            self.append(copy)
        core.took_over(predecessor, self.own(proc))
        if w.plans:
            g = len(w.plans)
            core.saw_plan(g, w.assignment(g, consumer))
        self.procs.append(proc)
        return proc

    def stint_generation(self, proc: Proc) -> int:
        q = proc.query or proc.pending_final
        return q.generation if q is not None else 0

    def append(self, record: ClaimRecord) -> None:
        w = self.world
        if record.consumer == FENCER or not self.service:  # with a fencer, a pipeline's note is only a request
            for holder, version in sorted(record.fences.items()):
                self.no_live_holder_fenced(record.incarnation, "notes a fence of", holder, version)
        w.log.append(record)
        w.log_times.append(w.now)

    def no_live_holder_fenced(self, by: str, what: str, holder: str, version: tuple[str, int]) -> None:
        """I7, checked as a fence is noted or done: ``holder``'s claim ``version`` belongs to no
        stint that still reads (or holds a final commit) under a lease valid by its own clock."""
        if not self.exclusive:  # it rests on the clocks, as I1 does
            return
        for p in self.procs:
            core = p.core
            if (
                p.alive and p.consumer == holder and p.incarnation == version[0] and version[1] >= core.commits_since
                and (core.reading is not None or core.final_pending is not None) and self.own(p) < core.deadline()
            ):  # fmt: skip
                self.violations.append(
                    f"I7: {by} {what} {holder}'s claim {version} at {self.world.now} while {p.incarnation} reads under a "
                    f"lease valid by its own clock ({self.own(p):.2f} < deadline {core.deadline():.2f})"
                )

    def apply_commit(self, proc: Proc, offsets: dict[TP, int], records: list[bytes]) -> None:
        """An accepted commit: the model broker applies it, and the invariants judge it."""
        w, stint = self.world, proc.committing
        assert stint is not None, "a commit outside any query"
        before = dict(stint.accepted)
        for tp, offset in sorted(offsets.items()):
            if w.newest.get(tp) != stint.sid:
                self.violations.append(f"I6: {proc.incarnation} committed {tp}@{offset} after a newer query started reading it")
            if offset < w.committed.get(tp, 0):
                self.violations.append(f"I3: {proc.incarnation} moved {tp} back to {offset} from {w.committed[tp]}")
            w.committed[tp] = offset
            stint.accepted[tp] = max(offset, stint.accepted.get(tp, 0))
        for value in records:
            tp_text, offset_text = value.decode().rsplit("@", 1)
            t, p = tp_text.rsplit("-", 1)
            tp, offset = (t, int(p)), int(offset_text)
            if offset < before.get(tp, 0):
                stint.resent[tp] += 1
            w.sink[tp][offset] += 1

    def observe(self, proc: Proc) -> None:
        """What ``PlanFollower._observe`` carries into the state machine before each decision."""
        core = proc.core
        if proc.refused:
            proc.refused = False
            if core.reading is not None:
                core.refused_commit()
        if core.commits is not None and proc.fc.lost:
            core.commits_lost()
        if proc.ended and proc.query is not None and core.reading is not None and not core.commit_refused:
            proc.ended = False
            if core.query_ended(True, self.own(proc)):
                self.seen("a query fails by itself: the run ends")

    def commit_through(self, proc: Proc, stint: Stint, call: Any) -> Any:
        proc.committing = stint
        try:
            return call()
        finally:
            proc.committing = None

    def final_commit(self, proc: Proc, query: Query, ends: list[str]) -> str:
        """``PipelineCommits.final`` (``consume/commits.py``): ok | refused | held | failed."""
        try:
            self.commit_through(proc, query.stint, lambda: proc.committer.finish(query.qid, ends, timeout=2.0))
        except CommitFencedError:
            return "refused"
        except CommitHeldError:
            return "held"
        except KafkaCommitError:
            return "failed"
        return "ok"

    def end_stint(self, proc: Proc, query: Query, result: str) -> None:
        stint = query.stint
        stint.ended = True
        if result == "ok":  # D: a committing stop leaves nothing read and uncommitted
            for tp in stint.tps:
                if max(stint.start[tp], stint.accepted.get(tp, 0)) < stint.pos[tp]:
                    self.violations.append(
                        f"D: {proc.incarnation} stopped with a commit but left {tp} {stint.accepted.get(tp)}..{stint.pos[tp]} uncommitted"
                    )

    def perform(self, proc: Proc, data: Any) -> None:
        """One iteration of the follower's loop: observe, decide (or take the decision made
        before a pause), act, report the outcome to the state machine."""
        core = proc.core
        proc.batches_past_lease = 0
        self.observe(proc)
        if proc.decided is not None:
            action, proc.decided = proc.decided, None
        else:
            action = core.next(self.own(proc))
            lapsed = proc.query is not None and self.own(proc) >= core.deadline()
            if self.exclusive and lapsed and not (isinstance(action, Stop) and not action.commit):
                self.violations.append(f"I2: {proc.incarnation}'s lease lapsed and its next step is {action!r}, not a stop without commit")
        self.act(proc, action, data)

    def act(self, proc: Proc, action: object, data: Any) -> None:
        w, core = self.world, proc.core
        now = self.own(proc)
        if isinstance(action, Write):
            if w.down:
                core.write_failed(fenced=False, now=now)
                return
            if w.id_owner[proc.consumer] != proc.incarnation:
                core.write_failed(fenced=True, now=now)
                return
            fate = data.draw(st.sampled_from(("ok", "ok", "ok", "ok", "ack-lost", "lost")), label="write fate")
            if fate == "lost":
                core.write_failed(fenced=False, now=now)
                return
            if core.reading is not None and not core.commits_allowed:
                self.seen("a renewal goes out while the producer waits to be reopened")
            proc.seq += 1
            record = ClaimRecord(
                proc.consumer, proc.incarnation, proc.seq, action.generation, action.holds, self.lease, action.state, dict(action.fences)
            )
            self.append(record)
            if fate == "ok":
                core.wrote(record, sent_at=now)
            else:
                core.write_failed(fenced=False, now=now)
        elif isinstance(action, ReadClaims):
            if not w.down:
                core.saw_claims(w.view(len(w.log)), now)
        elif isinstance(action, ReadPlan | Wait):
            if not w.down and w.plans:  # the follower's wait: a poll of the plan, then a read of the claims
                g = len(w.plans)
                core.saw_plan(g, w.assignment(g, proc.consumer))
                core.saw_claims(w.view(len(w.log)), now)
        elif isinstance(action, Fence):
            if w.down or (w.kafka_down and not self.service):
                return
            if self.service:  # the fencer fences; the pipeline waits for its record to say so
                if fence_done(core.view.get(FENCER), action.consumer, action.version):
                    core.fenced_commits(action.consumer, action.version)
                else:
                    core.saw_claims(w.view(len(w.log)), now)
                return
            self.seen("a successor fences a lapsed holder's commits")
            self.no_live_holder_fenced(proc.incarnation, "fences", action.consumer, action.version)
            self.fences += 1
            w.epoch[action.consumer] = w.epoch.get(action.consumer, 0) + 1
            core.fenced_commits(action.consumer, action.version)
        elif isinstance(action, OpenCommits):
            try:
                proc.fc.open()
            except KafkaCommitError:
                return
            if core.reading is not None or core.final_pending is not None:
                self.seen("a producer closed by a failure is reopened through the handover")
            core.commits_opened(action.version, self.own(proc))
        elif isinstance(action, AllowCommits):
            proc.fc.allow(new_query=False)
            core.commits_allowed_now()
        elif isinstance(action, FinishCommit):
            query = proc.pending_final
            result = "skipped"
            if query is not None:
                result = self.final_commit(proc, query, [])
                self.seen(f"a held final commit is retried: {result}")
                if result != "held":
                    proc.pending_final = None
                    self.end_stint(proc, query, result)
            proc.fc.close()
            core.stopped(result)
        elif isinstance(action, Start):
            self.start(proc, action)
        elif isinstance(action, Stop):
            self.stop_query(proc, action)
        elif isinstance(action, Exit):
            assert proc.query is None, f"{proc.incarnation} exits while reading"
            proc.exited = action.reason
        else:  # pragma: no cover - a new action the model does not know
            raise AssertionError(f"unknown action {action!r}")

    def start(self, proc: Proc, action: Start) -> None:
        w, core = self.world, proc.core
        if w.down or w.kafka_down:  # reading the group's offsets failed: the state machine asks again
            return
        positions = {tp: w.committed.get(tp, 0) for tp in action.holds}  # a checkpoint of its own: the group's offsets
        if not core.may_start(self.own(proc)):
            return
        for tp in action.holds:
            readers = [o.incarnation for o in self.procs if o is not proc and self.live(o) and tp in o.query.holds]  # type: ignore[union-attr]
            if readers and self.exclusive:
                self.violations.append(f"I1: {proc.incarnation} starts {tp} while {readers} read it")
        proc.fc.allow(new_query=True)
        stint = Stint(len(w.stints), proc.pid, action.generation, action.holds, dict(positions), dict(positions))
        w.stints.append(stint)
        for tp in action.holds:
            w.newest[tp] = stint.sid
        qid = f"q{next(self.queries)}"
        proc.committer.track(qid, action.holds)
        proc.stints[qid] = stint
        proc.query = Query(qid, action.generation, action.holds, stint)
        proc.ended = False
        core.started(action.generation, action.holds)
        if any(o.consumer != proc.consumer and o.alive and o.paused and o.query and o.query.holds & action.holds for o in self.procs):
            self.seen("a successor reads beside a paused holder")

    def stop_query(self, proc: Proc, action: Stop) -> None:
        core, query = proc.core, proc.query
        result = "skipped"
        if query is not None:
            if action.commit:
                result = self.final_commit(proc, query, [_ends(query.stint.pos)])
            else:
                proc.committer.untrack(query.qid)
            proc.query = None
            if result == "held":
                proc.pending_final = query
                self.seen("a final commit waits for the handover to reopen the producer")
            else:
                self.end_stint(proc, query, result)
        elif proc.pending_final is not None:
            proc.committer.untrack(proc.pending_final.qid)
            self.end_stint(proc, proc.pending_final, "skipped")
            proc.pending_final = None
        proc.fc.close()
        core.stopped(result)

    def fencer_acts(self) -> None:
        """One step of the fencer (``spark-lag-assign fencer``): read every claim, then act."""
        w, core = self.world, self.fencer
        if w.down or w.kafka_down:
            return
        now = self.fencer_rate * w.now
        core.saw_claims(w.view(len(w.log)), now)
        action = core.next(now)
        if isinstance(action, NoteFence):
            self.fencer_seq += 1
            record = ClaimRecord(FENCER, "F", self.fencer_seq, 0, frozenset(), 3600.0, action.state, dict(action.fences))
            self.append(record)
            core.wrote(record)
        elif isinstance(action, FenceCommits):
            self.seen("the fencer fences a lapsed holder's commits for its successor")
            self.no_live_holder_fenced("the fencer", "fences", action.consumer, action.version)
            self.fences += 1
            w.epoch[action.consumer] = w.epoch.get(action.consumer, 0) + 1
            core.fenced(action.consumer, action.version)

    @precondition(lambda self: self.service)
    @rule()
    def fencer_step(self) -> None:
        self.fencer_acts()

    def pick(self, data: st.DataObject, candidates: list[Proc], label: str) -> Proc:
        return data.draw(st.sampled_from(candidates), label=label)

    def settle(self, proc: Proc, data: Any, steps: int = 20) -> None:
        """A pipeline acts until it has to wait."""
        for _ in range(steps):
            if proc.exited or not proc.runs:
                return
            if proc.decided is None and isinstance(proc.core.next(self.own(proc)), Wait):
                return
            self.perform(proc, data)

    def run_batch(self, proc: Proc, data: Any, *, report_now: bool) -> None:
        """A micro-batch of ``proc``'s query: its records reach the sink and its progress report
        goes to the listener (delivered now or later); a Kafka sink commits records and offsets
        in one transaction instead (``PlanFollower.write_batch``)."""
        w, q = self.world, proc.query
        assert q is not None
        lapsed = self.own(proc) >= proc.core.deadline()
        if lapsed:
            self.seen("a pipeline completes a batch past its lease")
        positions = dict(q.stint.pos)
        read: dict[TP, range] = {}
        for tp in sorted(q.holds):
            n = data.draw(st.sampled_from((MAX_RECORDS, 1, 0, 2)), label="records")  # the first is what generation favours
            read[tp] = range(positions[tp], min(w.end[tp], positions[tp] + n))
            positions[tp] = read[tp].stop
        if proc.sink == "kafka":
            records = [f"{t}-{p}@{o}".encode() for (t, p), r in sorted(read.items()) for o in r]
            offsets = {tp: positions[tp] for tp in q.holds if read[tp]}
            if not records:
                return
            if not proc.core.lease_valid(self.own(proc)):  # PlanFollower.write_batch refuses it before Kafka
                proc.ended = True  # the sink raised: the query fails
                return
            try:
                self.commit_through(proc, q.stint, lambda: proc.fc.write(offsets, q.generation, "sink", [(None, r) for r in records]))
            except CommitFencedError:
                proc.refused = True  # write_batch reports it to the follower; the batch fails
                return
            except KafkaCommitError:
                return  # nothing of it is visible; Spark runs the batch again
            proc.committer.committed_elsewhere(offsets)
        else:
            for tp, r in read.items():
                w.sink[tp].update(r)
        q.stint.pos = positions
        proc.reports.append((q.qid, _ends(positions)))
        if report_now:
            self.deliver(proc)
        if lapsed:
            proc.batches_past_lease += 1

    def deliver(self, proc: Proc) -> None:
        """The listener hands the oldest progress report to the committer."""
        if not proc.reports:
            return
        qid, ends = proc.reports.pop(0)
        if not proc.committer.tracked(qid):
            self.seen("a late progress report of a stopped query is ignored")
            return
        self.commit_through(proc, proc.stints[qid], lambda: proc.committer.record(qid, [ends]))

    # -- rules ------------------------------------------------------------------------------

    @initialize(data=st.data())
    def first_plan(self, data: st.DataObject) -> None:
        self.publish(data)
        for consumer in CONSUMERS[:2]:
            self.spawn(consumer, False, data.draw(self.rates(), label="clock rate"), data.draw(st.sampled_from(("files", "kafka")), label="sink"))

    def rates(self) -> st.SearchStrategy[float]:
        return st.sampled_from((1.0 - self.drift, 1.0, 1.0 + self.drift))

    @precondition(lambda self: len(self.world.plans) < MAX_GENERATIONS)
    @rule(data=st.data())
    def publish(self, data: st.DataObject) -> None:
        """The planner publishes a generation: any non-empty set of members, any owners."""
        members = data.draw(st.lists(st.sampled_from(CONSUMERS), min_size=1, max_size=3, unique=True), label="members")
        owners = {tp: data.draw(st.sampled_from(sorted(members)), label=f"owner of {tp}") for tp in PARTITIONS}
        self.world.plans.append(owners)
        self.world.members.append(set(members))

    @precondition(lambda self: len(self.world.plans) < MAX_GENERATIONS and any(p.query for p in self.procs))
    @rule(data=st.data())
    def publish_move(self, data: st.DataObject) -> None:
        """The planner moves one partition that a pipeline is reading to another consumer."""
        proc = self.pick(data, [p for p in self.procs if p.query], "reader")
        assert proc.query is not None
        tp = data.draw(st.sampled_from(sorted(proc.query.holds)), label="partition")
        to = data.draw(st.sampled_from([c for c in CONSUMERS if c != proc.consumer]), label="new owner")
        self.move({tp}, to, proc.consumer)

    def move(self, tps: set[TP], to: str, keep: str) -> None:
        w = self.world
        w.plans.append({**w.plans[-1], **dict.fromkeys(tps, to)})
        w.members.append(set(w.members[-1]) | {to, keep})

    @precondition(lambda self: any(p.runs for p in self.procs))
    @rule(data=st.data())
    def see_plan(self, data: st.DataObject) -> None:
        """A pipeline's watcher delivers some newer generation (maybe not the newest)."""
        proc = self.pick(data, [p for p in self.procs if p.runs], "pipeline")
        latest = len(self.world.plans)
        if proc.core.plan_generation < latest:
            g = data.draw(st.integers(proc.core.plan_generation + 1, latest), label="generation")
            proc.core.saw_plan(g, self.world.assignment(g, proc.consumer))

    @precondition(lambda self: any(p.runs for p in self.procs))
    @rule(data=st.data())
    def see_claims(self, data: st.DataObject) -> None:
        """A claims read that began some time ago is delivered: any prefix of the log, an older
        one than the pipeline last saw included (reads overtaken by later reads), and the
        last ``during`` records it shows written while it ran (it began before them)."""
        w = self.world
        proc = self.pick(data, [p for p in self.procs if p.runs], "pipeline")
        upto = data.draw(st.integers(0, len(w.log)), label="claims read up to")
        during = data.draw(st.integers(0, upto), label="records written while the read ran")
        if upto < len(w.log):
            self.seen("a claims view arrives late or out of order")
        began = w.read_began(upto)
        if during:
            self.seen("a claims read shows records written while it ran")
            began = w.log_times[upto - during - 1] if upto > during else 0.0  # the log held upto - during records
        proc.core.saw_claims(w.view(upto), self.own(proc, began), self.own(proc))

    @precondition(lambda self: any(p.runs for p in self.procs))
    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        """One iteration of one pipeline's loop: the finest interleaving."""
        self.perform(self.pick(data, [p for p in self.procs if p.runs], "pipeline"), data)

    @precondition(lambda self: any(p.runs for p in self.procs))
    @rule(data=st.data())
    def run(self, data: st.DataObject) -> None:
        """A pipeline acts until it has to wait (what it mostly does between two events)."""
        self.settle(self.pick(data, [p for p in self.procs if p.runs], "pipeline"), data, 12)

    @precondition(lambda self: any(p.runs and p.decided is None for p in self.procs))
    @rule(data=st.data())
    def decide(self, data: st.DataObject) -> None:
        """A pipeline decides, and is paused or slowed before it acts on the decision."""
        proc = self.pick(data, [p for p in self.procs if p.runs and p.decided is None], "pipeline")
        self.observe(proc)
        action = proc.core.next(self.own(proc))
        if not isinstance(action, Wait | Exit):
            proc.decided = action
            if data.draw(st.booleans(), label="paused before acting"):
                proc.paused = True

    def can_batch(self, proc: Proc) -> bool:
        lapsed = self.own(proc) >= proc.core.deadline()
        return (
            proc.runs and proc.query is not None and not proc.ended and not self.world.down
            and not (lapsed and proc.batches_past_lease >= 1)
        )  # fmt: skip

    @precondition(lambda self: any(p.runs and p.query and not p.ended for p in self.procs))
    @rule(data=st.data(), really=st.sampled_from((False,) * 3 + (True,)))
    def query_fails(self, data: st.DataObject, really: bool) -> None:
        """A query ends by itself (a failed sink, Spark's own error); rarely."""
        if really:
            self.pick(data, [p for p in self.procs if p.runs and p.query and not p.ended], "pipeline").ended = True

    @precondition(lambda self: any(self.can_batch(p) for p in self.procs))
    @rule(data=st.data(), report_now=st.sampled_from((True, True, False)))
    def batch(self, data: st.DataObject, report_now: bool) -> None:
        """A micro-batch completes."""
        self.run_batch(self.pick(data, [p for p in self.procs if self.can_batch(p)], "pipeline"), data, report_now=report_now)

    @precondition(lambda self: any(p.runs and p.reports for p in self.procs))
    @rule(data=st.data(), fate=st.sampled_from(("ok", "ok", "ok", "fail", "ack-lost")))
    def report(self, data: st.DataObject, fate: str) -> None:
        """The listener delivers a progress report late; its commit meets ``fate``."""
        proc = self.pick(data, [p for p in self.procs if p.runs and p.reports], "pipeline")
        if proc.reports[0][0] != (proc.query.qid if proc.query else None):
            self.seen("a progress report arrives after its query stopped")
        qid, ends = proc.reports[0]
        if fate != "ok":
            self.seen(f"a commit meets a broker fault: {fate}")
        proc.reports.pop(0)
        proc.fate = fate
        self.commit_through(proc, proc.stints[qid], lambda: proc.committer.record(qid, [ends]))
        proc.fate = "ok"

    @precondition(lambda self: any(p.runs and p.query for p in self.procs))
    @rule(data=st.data())
    def idle_retry(self, data: st.DataObject) -> None:
        """The listener's idle event retries what is pending."""
        proc = self.pick(data, [p for p in self.procs if p.runs and p.query], "pipeline")
        assert proc.query is not None
        self.commit_through(proc, proc.query.stint, lambda: proc.committer.retry(proc.query.qid))  # type: ignore[union-attr]

    @rule(n=st.integers(1, 3))
    def produce(self, n: int) -> None:
        for tp in PARTITIONS:
            self.world.end[tp] += n

    @rule(dt=st.sampled_from((0.5, 0.5, 1.0, 1.0, 2.0, 3.5, 7.0, 12.0, 25.0)))
    def tick(self, dt: float) -> None:
        self.world.now += dt

    @precondition(lambda self: any(p.runs for p in self.procs))
    @rule(data=st.data())
    def pause(self, data: st.DataObject) -> None:
        self.pick(data, [p for p in self.procs if p.runs], "pipeline").paused = True

    @precondition(lambda self: any(p.alive and p.paused for p in self.procs))
    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        self.pick(data, [p for p in self.procs if p.alive and p.paused], "pipeline").paused = False

    @precondition(lambda self: any(p.alive and p.exited is None for p in self.procs))
    @rule(data=st.data(), really=st.sampled_from((False,) * 2 + (True,)))
    def crash(self, data: st.DataObject, really: bool) -> None:
        if really:
            proc = self.pick(data, [p for p in self.procs if p.alive and p.exited is None], "pipeline")
            proc.alive, proc.query, proc.pending_final = False, None, None

    @precondition(lambda self: len(self.procs) < MAX_PROCS)
    @rule(data=st.data(), consumer=st.sampled_from(CONSUMERS), copy_predecessor=st.booleans())
    def restart(self, data: st.DataObject, consumer: str, copy_predecessor: bool) -> None:
        """A driver (re)starts, possibly while its old incarnation is only paused."""
        self.spawn(consumer, copy_predecessor, data.draw(self.rates(), label="clock rate"), data.draw(st.sampled_from(("files", "kafka")), label="sink"))

    @precondition(lambda self: any(p.runs for p in self.procs))
    @rule(data=st.data(), really=st.sampled_from((False,) * 4 + (True,)))
    def stop(self, data: st.DataObject, really: bool) -> None:
        """An operator stops a pipeline (rarely: it ends that pipeline's part in the run)."""
        if really:
            self.pick(data, [p for p in self.procs if p.runs], "pipeline").core.request_stop()

    @precondition(lambda self: not self.world.down)
    @rule()
    def outage(self) -> None:
        """The broker goes away (every Kafka and store call fails until it is back)."""
        self.world.down = True

    @precondition(lambda self: self.world.down)
    @rule(dt=st.sampled_from((0.5, 3.0, 15.0)))
    def back(self, dt: float) -> None:
        self.world.now += dt
        self.world.down = False

    # -- the dangerous schedule, made common --------------------------------------------------

    def takeover_candidates(self) -> list[Proc]:
        return [p for p in self.procs if p.runs and p.query is not None and p.decided is None]

    def fail_a_commit(self, proc: Proc) -> None:
        """A micro-batch whose commit fails (a broker fault): the failure closes the producer."""
        q = proc.query
        assert q is not None
        for tp in q.holds:
            self.world.end[tp] += MAX_RECORDS
        proc.fate = "fail"
        self.run_batch(proc, _Fixed(), report_now=True)
        proc.fate = "ok"

    def can_take_over(self) -> bool:
        w = self.world
        return len(w.plans) < MAX_GENERATIONS and not w.down and not w.kafka_down and bool(self.takeover_candidates())

    @precondition(can_take_over)
    @rule(data=st.data())
    def takeover(self, data: st.DataObject) -> None:
        """The dangerous schedule (``take_over``). Its variants take turns within an example,
        from a drawn first one, so that every example with a few takeovers has each kind:

        plain           paused past its lease (a GC pause, SIGSTOP), a batch's report still queued;
        lost-producer   a commit failed and closed its producer before the pause;
        reopen-decided  ... and it had decided to reopen the producer when it was paused;
        outage          not paused: the broker is away for longer than the lease while its
                        commits are in flight;
        kafka-outage    only Kafka is away (the store, HDFS, is not) while a commit fails: its
                        reopens fail while its renewals go through; then it is paused.
        late-renewal    the plan moves its partitions first; it renews late but within its
                        lease while the successor waits on a view read before the renewal, and
                        the successor's next step falls a whole lease after it first saw the
                        old claim (``renew_late``); then it is paused.
        slow-read       the plan moves its partitions first; it renews while a read of the
                        successor runs, which shows the renewal, and is paused; the successor's
                        next step falls a whole lease after that read began (``read_slowly``).
        tight           the plan moves its partitions first; it renews and is paused at once,
                        the successor reads the renewal at once and then steps a tenth of a
                        second at a time: it acts the moment its own clock says the lease ran
                        out, and only the margin keeps the holder's own deadline before that
                        (``renew_then_pause``; the holder's clock may run slow, the successor's fast).

        Then, in any variant, the successor may crash once it reads and a new incarnation
        take its id over: the fence notes must outlive the incarnation that wrote them.
        """
        if self.takeovers == 0:
            self.first_variant = data.draw(st.integers(0, len(TAKEOVERS) - 1), label="first takeover")
        how = TAKEOVERS[(self.first_variant + self.takeovers) % len(TAKEOVERS)]
        self.takeovers += 1
        self.take_over(data, how)

    @precondition(can_take_over)
    @rule(data=st.data())
    def another_takeover(self, data: st.DataObject) -> None:
        """The same rule again: hypothesis picks among rules evenly, this doubles its share."""
        self.takeover(data)

    @precondition(lambda self: any(p.runs and p.query for p in self.procs) and len(self.world.plans) < MAX_GENERATIONS)
    @rule(data=st.data())
    def move_with_a_failing_final_commit(self, data: st.DataObject) -> None:
        """The plan moves a partition away from a reader whose final commit meets a broker fault."""
        proc = self.pick(data, [p for p in self.procs if p.runs and p.query], "reader")
        assert proc.query is not None
        tp = data.draw(st.sampled_from(sorted(proc.query.holds)), label="partition")
        to = data.draw(st.sampled_from([c for c in CONSUMERS if c != proc.consumer]), label="new owner")
        self.move({tp}, to, proc.consumer)
        g = len(self.world.plans)
        proc.core.saw_plan(g, self.world.assignment(g, proc.consumer))
        if self.can_batch(proc):
            self.run_batch(proc, data, report_now=False)
        proc.fate = "fail"
        self.settle(proc, data, 3)
        proc.fate = "ok"

    def take_over(self, data: st.DataObject, how: str) -> None:
        """A reader loses its lease while the plan moves its partitions; the successor fences it
        and reads; then the reader resumes while the successor reads the same partitions."""
        w = self.world
        candidates = self.takeover_candidates()
        live = [p for p in candidates if self.live(p)]  # a holder whose lease still runs: the dangerous one
        a = self.pick(data, live or candidates, "holder")
        assert a.query is not None
        holds = a.query.holds
        self.seen(f"takeover ({how})")
        if self.can_batch(a):
            self.run_batch(a, data, report_now=False)  # its report is still in the listener's queue
        if how in STAGED:
            moved = data.draw(st.sets(st.sampled_from(sorted(holds)), min_size=1), label="moved")
            to = data.draw(st.sampled_from([c for c in CONSUMERS if c != a.consumer]), label="successor")
            self.move(moved, to, a.consumer)  # the holder's watcher has not delivered it yet
            if how == "late-renewal":
                self.renew_late(data, a, to)
            elif how == "slow-read":
                self.read_slowly(data, a, to)
            else:
                self.renew_then_pause(data, a, to)
            a.paused = True
        if how in ("lost-producer", "reopen-decided"):
            self.fail_a_commit(a)
            if how == "reopen-decided" and a.fc.lost:
                self.observe(a)
                decided = a.core.next(self.own(a))
                if isinstance(decided, OpenCommits):
                    a.decided = decided
        if how == "kafka-outage":
            w.kafka_down = True
            self.deliver(a)
            if not a.fc.lost and self.can_batch(a):
                self.fail_a_commit(a)
            for _ in range(data.draw(st.integers(1, 8), label="outage steps")):
                w.now += data.draw(st.sampled_from((0.5, 1.0, 2.0, 3.5)), label="outage dt")
                self.settle(a, data, data.draw(st.integers(1, 6), label="outage settle"))
            w.kafka_down = False
            for _ in range(data.draw(st.integers(0, 6), label="steps after")):
                if a.runs:
                    w.now += data.draw(st.sampled_from((0.0, 0.5, 2.0, 3.5, 5.0)), label="dt after")
                    self.perform(a, data)
            if a.runs and data.draw(st.booleans(), label="decide before pause"):
                self.observe(a)
                a.decided = a.core.next(self.own(a))
            a.paused = True
        elif how == "outage":
            w.down = True
            self.deliver(a)  # its commit fails: the producer is gone
            self.settle(a, data)  # its renewals fail; it stops once its lease lapses
            w.now = max(w.now, self.real(a, a.core.deadline()) + 1.0)  # time never goes back
            self.settle(a, data)
            w.down = False
        elif how not in STAGED:
            a.paused = True
        if self.exclusive and how != "tight":  # past the lease by any pipeline's clock
            lapse = self.real(a, a.core.deadline()) if a.core.deadline() > float("-inf") else w.now
            w.now = max(w.now, lapse + self.lease * 1.2 + 0.5)
        # with wild clocks the successor's loop below alone decides when the lease ran out: a
        # holder with a slow clock still believes in its lease when it resumes (the notes stop it)
        if how not in STAGED:
            moved = data.draw(st.sets(st.sampled_from(sorted(holds)), min_size=1), label="moved")
            to = data.draw(st.sampled_from([c for c in CONSUMERS if c != a.consumer]), label="successor")
            self.move(moved, to, a.consumer)
        b = next((p for p in self.procs if p.consumer == to and p.runs), None)
        if b is None:
            b = self.spawn(to, False, data.draw(self.rates(), label="clock rate"), data.draw(st.sampled_from(("files", "kafka")), label="sink"))
        step = 0.1 if how == "tight" else 1.0
        for _ in range(int(60 / step)):  # the successor's loop runs, a step at a time, until it reads what it gained
            if self.service:
                self.fencer_acts()
            self.settle(b, _Fixed(), 30)
            if (b.query is not None and moved <= b.query.holds) or not b.runs:
                break
            self.perform(b, _Fixed())  # its wait: a poll of the plan, a read of the claims
            w.now += step
        if b.query is not None and moved <= b.query.holds:
            self.seen("a successor reads what it took over")
            if self.can_batch(b):
                self.run_batch(b, _Fixed(), report_now=True)
            if len(self.procs) < MAX_PROCS and self.takeovers % 2 == 1:  # every other takeover, not left to the draw
                self.seen("a successor that fenced is replaced by a new incarnation")
                b.alive, b.query, b.pending_final = False, None, None
                b = self.spawn(to, self.takeovers % 4 == 1, data.draw(self.rates(), label="clock rate"))
                self.settle(b, _Fixed(), 30)
        for tp in holds:  # producers keep writing: whatever the holder reads next is new
            w.end[tp] += MAX_RECORDS
        a.paused = False
        # as it resumes, the holder's stream thread may complete a batch before its loop runs
        order = data.draw(st.sampled_from(("batch, report", "batch, report later", "loop first")), label="on resuming")
        if order != "loop first" and self.can_batch(a):
            self.run_batch(a, _Fixed(), report_now=order == "batch, report")

    def waiting_successor(self, data: st.DataObject, to: str) -> Proc:
        """``to``'s pipeline (the running owner of its id, never a zombie; else a new one),
        once it saw the newest plan and acted until it waits: it claims, reads the holder's
        claim and waits for it."""
        w = self.world
        b = next((p for p in self.procs if p.incarnation == w.id_owner.get(to) and p.runs), None)
        if b is None:
            b = self.spawn(to, False, data.draw(self.rates(), label="clock rate"), data.draw(st.sampled_from(("files", "kafka")), label="sink"))
        g = len(w.plans)
        b.core.saw_plan(g, w.assignment(g, to))
        self.settle(b, _Fixed(), 30)
        return b

    def renew_late(self, data: st.DataObject, a: Proc, to: str) -> None:
        """The ``late-renewal`` takeover's first part, once the plan has moved some of ``a``'s
        partitions to ``to``: ``a`` renews, ``to``'s pipeline claims, reads ``a``'s claim and
        waits for it, renews its own claim and reads again (``a``'s claim is still the old
        one), then ``a`` renews late but within its lease, and ``to``'s next step falls a
        whole lease (by its clock) after it first saw the old claim, on the view read before
        the renewal. That view cannot prove the lease ran out: it must read again, never note
        a fence of (nor fence) a holder whose lease still runs (I7)."""
        w = self.world
        w.now = max(w.now, self.real(a, a.core.sent_at + a.core.renew_every))  # its renewal falls due
        self.settle(a, _Fixed())
        if a.query is None or not a.runs or a.core.written is None or not self.live(a):
            return
        version = a.core.written.version
        b = self.waiting_successor(data, to)
        seen = b.core.first_seen.get((a.consumer, version))
        if seen is None or not b.runs or b.decided is not None:
            return
        w.now = max(w.now, self.real(b, b.core.deadline() - b.core.renew_every))
        self.settle(b, _Fixed(), 30)  # it renews its own claim and reads again
        renew = (w.now + self.real(a, a.core.deadline())) / 2
        if not (b.runs and a.runs and self.live(a) and renew > w.now):
            return
        w.now = renew
        self.perform(a, _Fixed())  # the late renewal, within the holder's lease
        w.now = max(w.now, self.real(b, seen + self.lease))
        if b.runs and b.decided is None and a.core.written is not None and a.core.written.version != version:
            self.seen("a successor decides a lease after it first saw a claim renewed since")
            self.perform(b, _Fixed())

    def renew_then_pause(self, data: st.DataObject, a: Proc, to: str) -> None:
        """The ``tight`` takeover's first part, once the plan has moved some of ``a``'s
        partitions to ``to``: ``to``'s pipeline claims, reads ``a``'s claim and waits for it;
        ``a``'s renewal falls due and goes out, and ``a`` is paused right after (by the caller);
        ``to`` reads the renewal at once. Its loop then steps a tenth of a second at a time, so
        it may act a lease after that read by its own clock, while a slow clock keeps ``a``'s
        own deadline later than it would be in real time: the margin is what keeps ``a``'s
        deadline first (I1 at ``to``'s start; without the margin a slow holder is still live)."""
        w = self.world
        b = self.waiting_successor(data, to)
        w.now = max(w.now, self.real(a, a.core.sent_at + a.core.renew_every))  # its renewal falls due
        if not (b.runs and b.decided is None and a.runs and a.query is not None and self.live(a) and a.decided is None):
            return
        version = a.core.written.version if a.core.written is not None else None
        self.perform(a, _Fixed())  # the renewal
        if a.core.written is None or a.core.written.version == version or not self.live(a):
            return
        self.seen("a successor waits on a holder paused right after its renewal")
        b.core.saw_claims(w.view(len(w.log)), self.own(b))  # it reads the renewal at once

    def read_slowly(self, data: st.DataObject, a: Proc, to: str) -> None:
        """The ``slow-read`` takeover's first part, once the plan has moved some of ``a``'s
        partitions to ``to``: ``to``'s pipeline claims, reads ``a``'s claim and waits for it;
        another read of it begins; ``a`` renews while that read runs (more than the margin
        after it began) and is paused; the read returns showing the renewal; ``to``'s next
        steps fall a whole lease (by its clock) after the read began. Counted from the start
        of the read, ``a``'s lease would be over while ``a`` may still read (I7)."""
        w = self.world
        w.now = max(w.now, self.real(a, a.core.sent_at + a.core.renew_every))  # its renewal falls due
        self.settle(a, _Fixed())
        b = self.waiting_successor(data, to)
        if not (b.runs and b.decided is None and a.runs and a.query is not None and self.live(a)):
            return
        began = self.own(b)
        # the next renewal falls due three margins after the read began: beyond what drift covers
        w.now = max(w.now + 3 * self.margin, self.real(a, a.core.sent_at + a.core.renew_every))
        version = a.core.written.version if a.core.written is not None else None
        self.settle(a, _Fixed())
        if a.core.written is None or a.core.written.version == version or not self.live(a):
            return
        a.paused = True
        w.now += data.draw(st.sampled_from((0.1, 2.0)), label="the read returns after")
        if not b.runs:
            return
        b.core.saw_claims(w.view(len(w.log)), began, self.own(b))
        self.seen("a successor's read shows a renewal written while it ran")
        w.now = max(w.now, self.real(b, began + self.lease) + 0.05)
        self.settle(b, _Fixed(), 30)

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def count_steps(self) -> None:
        next(STEPS)

    @invariant()
    def nothing_violated(self) -> None:
        assert not self.violations, self.violations

    @invariant()
    def one_live_reader_per_partition(self) -> None:
        if not self.exclusive:
            return
        for tp in PARTITIONS:
            readers = [p.incarnation for p in self.procs if self.live(p) and tp in p.query.holds]  # type: ignore[union-attr]
            assert len(readers) <= 1, f"I1: {tp} is read by {readers} at {self.world.now}"

    @invariant()
    def nothing_lost(self) -> None:
        w = self.world
        for tp, position in w.committed.items():
            missing = [o for o in range(position) if w.sink[tp][o] == 0]
            assert not missing, f"I4: {tp} committed at {position} but offsets {missing[:5]} reached no sink"

    @invariant()
    def duplicates_bounded(self) -> None:
        w = self.world
        for tp in PARTITIONS:
            twice = sum(n - 1 for n in w.sink[tp].values() if n > 1)
            excess = sum(
                max(0, s.pos[tp] - max(s.start[tp], s.accepted.get(tp, 0))) + s.resent[tp] for s in w.stints if tp in s.tps
            )
            assert twice <= excess, f"D: {tp} has {twice} records read twice, more than the {excess} read past accepted commits"

    def teardown(self) -> None:
        """I5: with plans settled, the broker up and every pipeline running, the group catches up."""
        try:
            self.liveness()
        finally:
            next(EXAMPLES)  # hypothesis' examples only: the scripted ones never tear down
            if self.takeovers >= len(TAKEOVERS):
                self.moments.add(f"{len(TAKEOVERS)} or more takeovers (every kind)")
            for moment in self.moments:
                COVERAGE[moment] += 1
            if currently_in_test_context():
                target(float(self.fences), label="fences in one example")

    def liveness(self) -> None:
        w = self.world
        if not w.plans or self.violations:
            return
        latest = len(w.plans)
        owners = w.plans[latest - 1]
        w.down = False
        w.kafka_down = False
        for proc in self.procs:
            proc.paused = False
        for _ in range(400):
            if self.service:
                for _ in range(3):
                    self.fencer_acts()
            for consumer in sorted(w.members[latest - 1]):  # a supervisor restarts what ended
                if not any(p.consumer == consumer and p.runs for p in self.procs):
                    self.spawn(consumer, copy_predecessor=False)
            for proc in list(self.procs):
                if not proc.runs:
                    continue
                proc.core.saw_plan(latest, w.assignment(latest, proc.consumer))
                proc.core.saw_claims(w.view(len(w.log)), self.own(proc))
                self.settle(proc, _Fixed(), 20)
                if proc.query is not None and proc.runs:
                    q = proc.query
                    for tp in sorted(q.holds):
                        w.sink[tp].update(range(q.stint.pos[tp], w.end[tp]))
                        q.stint.pos[tp] = w.end[tp]
                    proc.reports.append((q.qid, _ends(q.stint.pos)))
                    while proc.reports:
                        self.deliver(proc)
            self.one_live_reader_per_partition()
            self.nothing_violated()
            self.nothing_lost()
            self.duplicates_bounded()
            done = all(
                any(p.runs and p.consumer == owner and p.query is not None and tp in p.query.holds for p in self.procs)
                and w.committed.get(tp, 0) == w.end[tp]
                for tp, owner in owners.items()
            )
            if done:
                return
            w.now += 1.0
        reading = {p.incarnation: (p.exited, p.query and sorted(p.query.holds)) for p in self.procs}
        raise AssertionError(f"I5: no progress to the plan {owners} (commits {w.committed}, ends {w.end}): {reading}")


class _Fixed:
    """A stand-in for hypothesis' data object in fair schedules: every write and commit succeeds."""

    def draw(self, strategy: st.SearchStrategy[object], label: str = "") -> object:
        if "fate" in label:
            return "ok"
        if label == "records":
            return MAX_RECORDS
        return False


class WildClocks(HandoverModel):
    """Clocks far beyond what the margin covers (half and twice real time): exclusive reading
    (I1, I2) rests on the clocks and is not checked here, but what is committed must stay
    safe without them (I3, I4, I6, D, I5): epochs and the fence notes in the store alone."""

    exclusive: ClassVar[bool] = False

    def rates(self) -> st.SearchStrategy[float]:
        return st.sampled_from((0.5, 1.0, 2.0))


class ServiceFencing(HandoverModel):
    """The plan's fencing is "service": no pipeline fences another; the fencer, with a clock
    of its own, fences on a pipeline's request once it saw the lease run out itself, and only
    its notes stop a pipeline."""

    service: ClassVar[bool] = True

    @initialize(rate=st.sampled_from((1.0 - DRIFT, 1.0, 1.0 + DRIFT)))
    def fencer_clock(self, rate: float) -> None:
        self.fencer_rate = rate


MODEL_SETTINGS = settings(
    stateful_step_count=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
HandoverModel.TestCase.settings = MODEL_SETTINGS
WildClocks.TestCase.settings = MODEL_SETTINGS
ServiceFencing.TestCase.settings = MODEL_SETTINGS
test_handover_protocol = HandoverModel.TestCase
test_commits_stay_safe_whatever_the_clocks = WildClocks.TestCase
test_the_fencer_fences_on_the_pipelines_behalf = ServiceFencing.TestCase
