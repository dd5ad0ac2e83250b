"""The handover protocol explored by hypothesis: plan changes, pauses, crashes, restarts,
lost acknowledgements and clocks, over the real ``Handover`` state machine.

The model is a small world: a claims log (one ordered partition, as the Kafka store has),
plan generations, a Kafka group's committed offsets with per-consumer commit fencing (a
transactional id per consumer: opening a producer or fencing bumps its epoch), partitions
that keep growing, and pipelines (processes) each driving one ``Handover``. Hypothesis
chooses the interleaving: which pipeline acts, which background read delivers how much of
the store, when time jumps, who pauses, crashes or restarts (even while its old incarnation
is only paused), which writes lose their acknowledgement.

Invariants, checked after every step:
  I1 exclusive reading: no two pipelines whose leases are valid (by their own clocks) have a
     running query on the same partition (a paused pipeline with a valid lease counts).
  I2 a paused-past-its-lease pipeline may finish one micro-batch before it notices; if
     another pipeline reads that partition meanwhile, that batch's commit is refused.
  I3 the group's committed offset of a partition never goes backwards.
  I4 nothing is lost: every offset below a committed offset was written to a sink.
  I5 liveness: once plans stop changing and every pipeline runs, every partition is read by
     its owner and the group's commits reach the end offsets.

Assumption the model makes explicit: a pipeline's follower thread runs at least once
between two micro-batches of its own query (it checks its lease far more often than a
batch completes), so a lapsed pipeline completes at most one batch before it stops.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from spark_lag_assign.consume.protocol import (
    Exit,
    Fence,
    Handover,
    ReadClaims,
    ReadPlan,
    Start,
    Stop,
    Wait,
    Write,
)
from spark_lag_assign.store.base import ClaimRecord

CONSUMERS = ("A", "B", "C")
PARTITIONS = (("t", 0), ("t", 1), ("t", 2), ("u", 0))
LEASE = 10.0
MARGIN = 1.0
MAX_PROCS = 8
MAX_GENERATIONS = 10

TP = tuple[str, int]
STEPS = itertools.count()  # every rule run, over all examples: the note reports it


@dataclass
class Query:
    generation: int
    holds: frozenset[TP]
    positions: dict[TP, int]
    token: int  # the commit producer's epoch when it was opened


@dataclass
class Proc:
    pid: int
    consumer: str
    incarnation: str
    core: Handover
    alive: bool = True
    paused: bool = False
    exited: str | None = None
    query: Query | None = None
    seq: int = 0
    seen_upto: int = 0
    batches_since_step: int = 0

    @property
    def runs(self) -> bool:
        return self.alive and not self.paused and self.exited is None


@dataclass
class World:
    now: float = 0.0
    plans: list[dict[TP, str]] = field(default_factory=list)  # generation g is plans[g - 1]
    log: list[ClaimRecord] = field(default_factory=list)
    log_times: list[float] = field(default_factory=list)  # when each record was appended
    id_owner: dict[str, str] = field(default_factory=dict)  # consumer id -> incarnation allowed to write
    commit_epoch: dict[str, int] = field(default_factory=dict)
    committed: dict[TP, int] = field(default_factory=dict)
    committed_generation: dict[TP, int] = field(default_factory=dict)
    end: dict[TP, int] = field(default_factory=lambda: dict.fromkeys(PARTITIONS, 5))
    sinked: dict[TP, set[int]] = field(default_factory=lambda: {tp: set() for tp in PARTITIONS})
    checkpoints: dict[tuple[str, int], dict[TP, int]] = field(default_factory=dict)

    def view(self, upto: int) -> dict[str, ClaimRecord | str]:
        newest: dict[str, ClaimRecord | str] = {}
        for record in self.log[:upto]:
            newest[record.consumer] = record
        return newest

    def read_began(self, upto: int) -> float:
        """A read to the end that returned ``log[:upto]`` began before ``log[upto]`` was appended."""
        return self.log_times[upto] if upto < len(self.log) else self.now

    def append(self, record: ClaimRecord) -> None:
        self.log.append(record)
        self.log_times.append(self.now)

    def assignment(self, generation: int, consumer: str) -> frozenset[TP] | None:
        plan = self.plans[generation - 1]
        if consumer not in set(plan.values()) and consumer not in self.members(generation):
            return None
        return frozenset(tp for tp, owner in plan.items() if owner == consumer)

    def members(self, generation: int) -> set[str]:
        return self._members[generation - 1]

    _members: list[set[str]] = field(default_factory=list)


class HandoverModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world = World()
        self.procs: list[Proc] = []
        self.incarnations = itertools.count(1)
        self.violations: list[str] = []

    # -- helpers ----------------------------------------------------------------------------

    def live(self, proc: Proc) -> bool:
        return proc.alive and proc.query is not None and self.world.now < proc.core.deadline()

    def spawn(self, consumer: str, copy_predecessor: bool) -> Proc:
        w = self.world
        incarnation = f"{consumer}{next(self.incarnations)}"
        w.id_owner[consumer] = incarnation  # taking the id over fences every older writer
        predecessor = w.view(len(w.log)).get(consumer)
        assert predecessor is None or isinstance(predecessor, ClaimRecord)
        proc = Proc(len(self.procs), consumer, incarnation, Handover(consumer, incarnation, lease=LEASE, margin=MARGIN, handover_timeout=1e9))
        if predecessor is not None and copy_predecessor:  # a directory store fences by writing a copy
            w.append(
                ClaimRecord(consumer, incarnation, 0, predecessor.generation, predecessor.holds, predecessor.lease, "taken over")
            )
        proc.core.took_over(predecessor, w.now)
        if w.plans:
            g = len(w.plans)
            proc.core.saw_plan(g, w.assignment(g, consumer))
        self.procs.append(proc)
        return proc

    def commit(self, proc: Proc, *, lost: bool = False) -> str:
        """The query's positions to the group, as the transactional committer does."""
        w, q = self.world, proc.query
        assert q is not None and proc.core.written is not None
        generation = proc.core.written.generation
        if w.commit_epoch.get(proc.consumer, 0) != q.token:
            return "refused"  # fenced by a newer producer of this consumer's transactional id
        if any(w.committed_generation.get(tp, 0) > generation for tp in q.holds):
            return "refused"  # a newer owner committed: an older generation's commit is refused
        if lost:
            return "failed"
        for tp in sorted(q.holds):
            position = q.positions[tp]
            if position < w.committed.get(tp, 0):
                self.violations.append(f"I3: {proc.incarnation} moved {tp} back to {position} from {w.committed[tp]}")
            w.committed[tp] = position
            w.committed_generation[tp] = generation
        return "ok"

    def perform(self, proc: Proc, data: st.DataObject | _Fixed) -> None:
        """Run the core's next action, as the follower's driver would."""
        w, core = self.world, proc.core
        proc.batches_since_step = 0
        action = core.next(w.now)
        if isinstance(action, Write):
            if w.id_owner[proc.consumer] != proc.incarnation:
                note(data, "a zombie's claim write is fenced")
                core.write_failed(fenced=True, now=w.now)
                return
            fate = data.draw(st.sampled_from(("ok", "ok", "ok", "ok", "ack-lost", "lost")), label="write fate")
            if fate == "lost":
                core.write_failed(fenced=False, now=w.now)
                return
            proc.seq += 1
            record = ClaimRecord(proc.consumer, proc.incarnation, proc.seq, action.generation, action.holds, LEASE, action.state)
            w.append(record)
            if fate == "ok":
                core.wrote(record, sent_at=w.now)
            else:
                core.write_failed(fenced=False, now=w.now)
        elif isinstance(action, ReadClaims):
            proc.seen_upto = len(w.log)
            core.saw_claims(w.view(proc.seen_upto), w.now)
        elif isinstance(action, ReadPlan):
            if w.plans:
                g = len(w.plans)
                core.saw_plan(g, w.assignment(g, proc.consumer))
        elif isinstance(action, Fence):
            note(data, "a takeover fences an expired holder's commits")
            w.commit_epoch[action.consumer] = w.commit_epoch.get(action.consumer, 0) + 1
            core.fenced_commits(action.consumer, action.version)
        elif isinstance(action, Start):
            assert proc.query is None
            for tp in action.holds:
                if any(self.live(other) and tp in other.query.holds for other in self.procs if other is not proc):  # type: ignore[union-attr]
                    self.violations.append(f"I1: {proc.incarnation} starts {tp} while another live pipeline reads it")
            w.commit_epoch[proc.consumer] = w.commit_epoch.get(proc.consumer, 0) + 1  # opening our producer fences the predecessor's
            note(data, "a pipeline starts reading" + (" (a restarted incarnation)" if proc.core.predecessor else ""))
            saved = w.checkpoints.get((proc.consumer, action.generation))
            positions = {tp: (saved or {}).get(tp, w.committed.get(tp, 0)) for tp in action.holds}
            proc.query = Query(action.generation, action.holds, positions, w.commit_epoch[proc.consumer])
            core.started(action.generation, action.holds)
        elif isinstance(action, Stop):
            if action.commit and proc.query is not None:
                lost = data.draw(st.sampled_from((False,) * 9 + (True,)), label="final commit lost")
                result = self.commit(proc, lost=lost)
            else:
                result = "skipped"
            proc.query = None
            core.stopped(result)
        elif isinstance(action, Wait):
            pass
        elif isinstance(action, Exit):
            assert proc.query is None, f"{proc.incarnation} exits while reading"
            note(data, f"a pipeline exits: {action.reason}")
            proc.exited = action.reason
        else:  # pragma: no cover - a new action the model does not know
            raise AssertionError(f"unknown action {action!r}")

    def pick(self, data: st.DataObject, candidates: list[Proc], label: str) -> Proc:
        return data.draw(st.sampled_from(candidates), label=label)

    # -- rules ------------------------------------------------------------------------------

    @initialize(data=st.data())
    def first_plan(self, data: st.DataObject) -> None:
        self.publish(data)
        for consumer in CONSUMERS[:2]:
            self.spawn(consumer, copy_predecessor=False)

    @precondition(lambda self: len(self.world.plans) < MAX_GENERATIONS)
    @rule(data=st.data())
    def publish(self, data: st.DataObject) -> None:
        """The planner publishes a generation: any non-empty set of members, any owners."""
        members = data.draw(st.lists(st.sampled_from(CONSUMERS), min_size=1, max_size=3, unique=True), label="members")
        owners = {tp: data.draw(st.sampled_from(sorted(members)), label=f"owner of {tp}") for tp in PARTITIONS}
        self.world.plans.append(owners)
        self.world._members.append(set(members))

    @precondition(lambda self: len(self.world.plans) < MAX_GENERATIONS and any(p.query for p in self.procs))
    @rule(data=st.data())
    def publish_move(self, data: st.DataObject) -> None:
        """The planner moves one partition that a pipeline is reading to another consumer."""
        w = self.world
        proc = self.pick(data, [p for p in self.procs if p.query], "reader")
        assert proc.query is not None
        tp = data.draw(st.sampled_from(sorted(proc.query.holds)), label="partition")
        to = data.draw(st.sampled_from([c for c in CONSUMERS if c != proc.consumer]), label="new owner")
        owners = {**w.plans[-1], tp: to}
        w.plans.append(owners)
        w._members.append(set(w.members(len(w.plans) - 1)) | {to, proc.consumer})

    @precondition(lambda self: any(p.runs and p.query for p in self.procs))
    @rule(data=st.data())
    def pause_past_lease(self, data: st.DataObject) -> None:
        """A reading pipeline is paused (GC, a slow host) for longer than its lease."""
        proc = self.pick(data, [p for p in self.procs if p.runs and p.query], "reader")
        proc.paused = True
        self.world.now = max(self.world.now, proc.core.deadline() + LEASE + 0.5)

    @precondition(lambda self: any(p.runs for p in self.procs))
    @rule(data=st.data())
    def see_plan(self, data: st.DataObject) -> None:
        """A pipeline's background watcher delivers some newer generation (maybe not the newest)."""
        proc = self.pick(data, [p for p in self.procs if p.runs], "pipeline")
        latest = len(self.world.plans)
        if proc.core.plan_generation < latest:
            g = data.draw(st.integers(proc.core.plan_generation + 1, latest), label="generation")
            proc.core.saw_plan(g, self.world.assignment(g, proc.consumer))

    @precondition(lambda self: any(p.runs for p in self.procs))
    @rule(data=st.data())
    def see_claims(self, data: st.DataObject) -> None:
        """A background read of the claims delivers a prefix of the log (never going back)."""
        proc = self.pick(data, [p for p in self.procs if p.runs], "pipeline")
        proc.seen_upto = data.draw(st.integers(proc.seen_upto, len(self.world.log)), label="claims read up to")
        proc.core.saw_claims(self.world.view(proc.seen_upto), self.world.read_began(proc.seen_upto))

    @precondition(lambda self: any(p.runs for p in self.procs))
    @rule(data=st.data())
    def step(self, data: st.DataObject) -> None:
        """One action of one pipeline: the finest interleaving."""
        self.perform(self.pick(data, [p for p in self.procs if p.runs], "pipeline"), data)

    @precondition(lambda self: any(p.runs for p in self.procs))
    @rule(data=st.data())
    def run(self, data: st.DataObject) -> None:
        """A pipeline acts until it has to wait (what it mostly does between two events)."""
        proc = self.pick(data, [p for p in self.procs if p.runs], "pipeline")
        for _ in range(12):
            if proc.exited or isinstance(proc.core.next(self.world.now), Wait):
                break
            self.perform(proc, data)

    def can_batch(self, proc: Proc) -> bool:
        lapsed = self.world.now >= proc.core.deadline()
        return proc.runs and proc.query is not None and not (lapsed and proc.batches_since_step >= 1)

    @precondition(lambda self: any(self.can_batch(p) for p in self.procs))
    @rule(data=st.data())
    def batch(self, data: st.DataObject) -> None:
        """A micro-batch completes: records go to the sink, then the offsets are committed."""
        w = self.world
        proc = self.pick(data, [p for p in self.procs if self.can_batch(p)], "pipeline")
        q = proc.query
        assert q is not None
        lapsed = w.now >= proc.core.deadline()
        others = [o for o in self.procs if o is not proc and self.live(o) and o.query.holds & q.holds]  # type: ignore[union-attr]
        for tp in sorted(q.holds):
            n = data.draw(st.integers(0, 3), label="records")
            upto = min(w.end[tp], q.positions[tp] + n)
            w.sinked[tp].update(range(q.positions[tp], upto))
            q.positions[tp] = upto
        w.checkpoints[(proc.consumer, q.generation)] = dict(q.positions)
        result = self.commit(proc, lost=data.draw(st.sampled_from((False,) * 9 + (True,)), label="commit lost"))
        if others and not lapsed:
            self.violations.append(f"I1: {proc.incarnation} read a batch while {[o.incarnation for o in others]} read too")
        if others and lapsed and result != "refused":
            self.violations.append(f"I2: {proc.incarnation} read past its lease beside {[o.incarnation for o in others]} and its commit was {result}")
        if result == "refused":
            note(data, "a micro-batch's commit is refused")
            proc.core.refused_commit()
        if lapsed:
            note(data, "a pipeline reads one batch past its lease")
        proc.batches_since_step += 1

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
            proc.alive, proc.query = False, None

    @precondition(lambda self: len(self.procs) < MAX_PROCS)
    @rule(consumer=st.sampled_from(CONSUMERS), copy_predecessor=st.booleans())
    def restart(self, consumer: str, copy_predecessor: bool) -> None:
        """A driver (re)starts, possibly while its old incarnation is only paused."""
        self.spawn(consumer, copy_predecessor)

    @precondition(lambda self: any(p.runs for p in self.procs))
    @rule(data=st.data(), really=st.sampled_from((False,) * 4 + (True,)))
    def stop(self, data: st.DataObject, really: bool) -> None:
        """An operator stops a pipeline (rarely: it ends that pipeline's part in the run)."""
        if really:
            self.pick(data, [p for p in self.procs if p.runs], "pipeline").core.request_stop()

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def count_steps(self) -> None:
        next(STEPS)

    @invariant()
    def nothing_violated(self) -> None:
        assert not self.violations, self.violations

    @invariant()
    def one_live_reader_per_partition(self) -> None:
        for tp in PARTITIONS:
            readers = [p.incarnation for p in self.procs if self.live(p) and tp in p.query.holds]  # type: ignore[union-attr]
            assert len(readers) <= 1, f"I1: {tp} is read by {readers} at {self.world.now}"

    @invariant()
    def nothing_lost(self) -> None:
        w = self.world
        for tp, position in w.committed.items():
            missing = set(range(position)) - w.sinked[tp]
            assert not missing, f"I4: {tp} committed at {position} but offsets {sorted(missing)[:5]} reached no sink"

    def teardown(self) -> None:
        """I5: with plans settled and every pipeline running, the group catches up."""
        w = self.world
        if not w.plans or self.violations:
            return
        latest = len(w.plans)
        owners = w.plans[latest - 1]
        for proc in self.procs:
            proc.paused = False
        for _ in range(400):
            for consumer in sorted(w.members(latest)):  # a supervisor restarts what ended
                if not any(p.consumer == consumer and p.runs for p in self.procs):
                    self.spawn(consumer, copy_predecessor=False)
            for proc in list(self.procs):
                if not proc.runs:
                    continue
                proc.core.saw_plan(latest, w.assignment(latest, proc.consumer))
                proc.seen_upto = len(w.log)
                proc.core.saw_claims(w.view(proc.seen_upto), w.now)
                for _ in range(20):
                    if proc.exited or isinstance(proc.core.next(w.now), Wait):
                        break
                    self.perform(proc, _Fixed())
                if proc.query is not None and proc.runs:
                    for tp in sorted(proc.query.holds):
                        w.sinked[tp].update(range(proc.query.positions[tp], w.end[tp]))
                        proc.query.positions[tp] = w.end[tp]
                    w.checkpoints[(proc.consumer, proc.query.generation)] = dict(proc.query.positions)
                    if self.commit(proc) == "refused":
                        proc.core.refused_commit()
            self.one_live_reader_per_partition()
            self.nothing_violated()
            self.nothing_lost()
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


def note(data: object, what: str) -> None:
    """Count an interesting step in hypothesis' statistics (not in the scripted scenarios)."""
    if not isinstance(data, _Fixed):
        event(what)


class _Fixed:
    """A stand-in for hypothesis' data object in the fair schedule: every write and commit succeeds."""

    def draw(self, strategy: st.SearchStrategy[object], label: str = "") -> object:
        if "fate" in label:
            return "ok"
        return False


HandoverModel.TestCase.settings = settings(
    stateful_step_count=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_handover_protocol = HandoverModel.TestCase
