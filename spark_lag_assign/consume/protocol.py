"""The handover protocol as a pure state machine: what one pipeline does next, given what it knows.

``Handover`` holds one pipeline's (one consumer id's) view of the world: the newest plan
generation it has seen, the claims it has read from the store, its own last claim, and
whether its query is reading. ``next(now)`` names the one action to take; the driver
(``spark_lag_assign.consume.follower.PlanFollower`` in production, the model in
``tests/unit/test_handover_model.py`` under hypothesis) performs it and reports the outcome
with the ``saw_*`` / ``wrote`` / ``started`` / ``stopped`` ... methods. Nothing here does
I/O or reads a clock: ``now`` is always given, in seconds of the pipeline's own monotonic
clock, and every decision is a function of the inputs so far.

The protocol's rules, and why (``spark_lag_assign.consume`` numbers the steps):

- Claim before you read, then look. A pipeline writes a claim naming the partitions it
  wants, then reads every claim to the end (the store is one ordered log per group), and
  only then decides. Of two pipelines that want one partition, the one that writes second
  sees the first, so they can never both decide the partition is free.
- The newest generation wins. A claim of a newer generation than the one you act on means
  you are stale: read the plan again, never proceed. A claim of an older generation that
  names a partition you want is an earlier owner: wait until it releases it (a claim
  without it) or its lease runs out.
- Leases are measured by the reader, from when a read that showed a claim record first
  *returned* (a read to the end may show records written while it ran, so its start is
  no bound on when they were written): a holder whose record a read that *began* a whole
  lease later still shows unchanged is gone (a view that was merely delivered late proves
  nothing). The holder measures the same lease from just before its last write and stops
  reading ``margin`` seconds before it runs out, so it stops before anyone can take over;
  a renewal whose write returns only after that point extends nothing (it may have landed
  after a successor's read began).
- Taking over from a holder whose lease ran out first records the fence in our own claim
  (``fences``: the holder and the claim version we saw run out), then fences its offset
  commits (the broker refuses them from then on), then starts from the group's committed
  offsets.
- A fence is only a fence if nothing can quietly undo it, and a pipeline undoes its
  successor's fence whenever it opens a producer of its commit id (``init_transactions``
  takes a new epoch). So every producer is opened through the same check, at a start and
  after a failure closed the old one: open it first (``OpenCommits``), then read every claim
  in a read that begins after the open, and allow commits (``Start`` / ``AllowCommits``)
  only if no claim records a fence of this incarnation since the version it started from,
  and our lease still runs. Why the order closes the race: a successor writes its fence
  note before it fences; if our read does not show the note, the note's write returned
  after our read began, so the successor's fence comes after our open and refuses our
  commits; if it shows the note, we stop. A committer never opens a producer by itself
  (``spark_lag_assign.consume.gate``). A renewal that falls due goes out before the next
  attempt to reopen: a broker outage that fails the reopens need not lapse a lease the
  store (a directory, HDFS) can still renew.
- Who fences: with the plan's ``fencing`` "self" the pipeline taking over fences the holder
  itself (and every pipeline may fence every other); with "service" it asks the fencer
  (``spark_lag_assign.consume.fencer``), which checks for itself that the holder's lease ran
  out, notes the fence in its own record, fences, and says so. Then only the fencer's notes
  stop a pipeline (``fence_authority``): a note another pipeline writes is a request, and no
  pipeline can make another stop by writing one. Each pipeline trusts notes by the rule of the
  newest plan it has seen, so the rule must not change while pipelines run: the planner
  refuses a plan that changes it (``plan.guard.check_fencing``) unless told that every
  pipeline is stopped.
- A new incarnation of a pipeline (a restarted driver) treats its predecessor like any
  other holder: what the predecessor claimed stays claimed until its lease runs out. It
  also carries the predecessor's fence notes on (``took_over``): a note dropped by a
  restart would let the fenced holder reopen its producer unseen and undo the fence.
  A holder the view does not show keeps its note (``still_fenced``): the first claim of a
  new incarnation is written before it has read anything.
- A pipeline keeps reading a partition across generations only while its lease never
  lapsed; any lapse, refused commit or fencing sends it back through the whole check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from spark_lag_assign.consume.actions import (
    NOTHING,
    Action,
    AllowCommits,
    Blocker,
    Exit,
    Fence,
    FinishCommit,
    Holds,
    OpenCommits,
    ReadClaims,
    ReadPlan,
    Start,
    Stop,
    Wait,
    Write,
    names,
)
from spark_lag_assign.store.base import ClaimRecord, Version


def still_fenced(view: Mapping[str, ClaimRecord | str], holder: str, version: Version) -> bool:
    """Should a fence of ``holder``'s claim ``version`` still be noted? Until the view shows
    that incarnation of it stopped reading (a newer claim of it that is not a reading one) or
    replaced by a newer incarnation. Kept that long, a fenced pipeline that reopens its
    producer learns it was replaced even if its clock let it believe its lease still ran."""
    record = view.get(holder)
    if not isinstance(record, ClaimRecord):  # not shown (nothing read yet) or unreadable: it may still read
        return True
    return (
        record.incarnation == version[0]
        and (record.version == version or record.state in ("reading", "stopping"))
    )


def returned_by(began: float, returned_at: float | None) -> float:
    """When a store call that began at ``began`` returned (own clock; None: at once). What the
    call shows or did may date from any moment while it ran, so a lease that it dates counts
    from here, never from ``began``: the later of the two."""
    return began if returned_at is None else max(began, returned_at)


def date_claims(
    first_seen: dict[tuple[str, Version], float], view: Mapping[str, ClaimRecord | str], read_at: float,
    returned_at: float | None,
) -> None:  # fmt: skip
    """Date each claim of ``view`` (a read to the end of the store that began at ``read_at``
    and returned at ``returned_at``) into ``first_seen``, keyed by (consumer, version): a claim
    written while the read ran may be that new, so its lease counts from the read's return,
    and the earliest return that showed it stands. The one dating rule of ``Handover`` and of
    the fencer (``fencer.FencerCore``)."""
    returned = returned_by(read_at, returned_at)
    for consumer, record in view.items():
        if isinstance(record, ClaimRecord):  # an unreadable record has no lease to date
            key = (consumer, record.version)
            first_seen[key] = min(first_seen.get(key, returned), returned)


# -- the state machine ----------------------------------------------------------------------


@dataclass
class Reading:
    generation: int
    holds: Holds


@dataclass
class Handover:
    """One pipeline's side of the handover protocol (see the module docstring).

    ``lease``: seconds within which this pipeline stops reading after its last claim write,
    if it cannot write another; others wait that long before they take over from it.
    ``margin``: how much earlier than that it stops, for clock-rate differences and the
    time a stop takes. Claims that hold partitions are renewed every ``lease / 3``.
    ``handover_timeout``: how long to wait for earlier owners before giving up.
    ``until_drained``: an idle assignment ends the run (``availableNow`` pipelines).
    """

    consumer: str
    incarnation: str
    lease: float = 30.0
    margin: float | None = None
    handover_timeout: float = 300.0
    until_drained: bool = False
    retry: float = 1.0  # pause after a failed write before the next attempt
    fence_authority: str | None = None  # None: any claim's notes count; else only this claim's (the fencer's)

    # what it has seen
    plan_generation: int = 0
    assignment: Holds | None = NOTHING  # None: the newest plan does not name this consumer
    view: Mapping[str, ClaimRecord | str] = field(default_factory=dict)
    view_read_at: float = float("-inf")  # when the read that gave ``view`` began (own clock)
    # when a read that showed each (consumer, version) first returned (own clock): leases count from there
    first_seen: dict[tuple[str, Version], float] = field(default_factory=dict)
    view_is_fresh: bool = False  # read after our last successful write
    predecessor: ClaimRecord | None = None
    predecessor_since: float = 0.0

    # what it did
    written: ClaimRecord | None = None
    sent_at: float = 0.0  # own clock just before the last successful write was sent
    reading: Reading | None = None
    fenced: set[tuple[str, Version]] = field(default_factory=set)
    fence_intents: dict[str, Version] = field(default_factory=dict)  # holders we fence, noted in our claims
    waiting_since: float | None = None
    retry_at: float = 0.0
    ending: str | None = None  # why the run ends once the query is stopped and released
    blockers: tuple[Blocker, ...] = ()  # what the run ended waiting for (handover-timeout)
    zombie: bool = False
    commit_refused: bool = False
    lease_lapsed: bool = False  # a renewal went out after the lease ran out: it revives nothing
    outcome: Exit | None = None

    # the committer's producer (module docstring: opened only through the check)
    commits: Version | None = None  # the claim version it was opened under; None: no producer
    commits_opened_at: float = float("inf")  # own clock when it was opened
    commits_checked: bool = False  # a claims read that began after the open
    commits_allowed: bool = False
    commits_since: int = 0  # fence notes against our versions from this seq on replace us
    final_pending: Reading | None = None  # a stopped query whose final commit waits for a producer

    def __post_init__(self) -> None:
        if not self.lease > 0:
            raise ValueError(f"lease must be positive, not {self.lease!r}")
        if self.margin is None:
            self.margin = min(max(1.0, 0.1 * self.lease), self.lease / 4)
        if not 0 <= self.margin < self.lease / 3:
            raise ValueError(f"margin {self.margin!r} must be below a third of the lease {self.lease!r}")

    # -- observations -----------------------------------------------------------------------

    def took_over(self, predecessor: ClaimRecord | None, now: float) -> None:
        """This incarnation took the consumer id over; ``predecessor`` is the claim it replaced.
        Its fence notes go on in our claims (module docstring)."""
        if predecessor is not None and predecessor.incarnation != self.incarnation:
            self.predecessor, self.predecessor_since = predecessor, now
            for holder, version in predecessor.fences.items():
                self.fence_intents.setdefault(holder, version)

    def saw_plan(self, generation: int, assignment: Holds | None) -> None:
        """A plan generation and this consumer's partitions in it (None: it is not in the plan)."""
        if generation > self.plan_generation:
            self.plan_generation, self.assignment = generation, assignment

    def saw_claims(self, view: Mapping[str, ClaimRecord | str], read_at: float, returned_at: float | None = None) -> None:
        """Every consumer's newest claim, from a read to the end of the store that began at
        ``read_at`` and returned at ``returned_at`` (own clock; default: at once): it shows
        everything written before it began, and maybe some of what was written while it ran.
        Reads may arrive out of order: a view older than the last one (its read began
        earlier) still dates the records it shows, and is otherwise ignored: deciding on it
        would forget what the newer one showed (a fence note, say)."""
        date_claims(self.first_seen, view, read_at, returned_at)
        if read_at < self.view_read_at:
            return
        self.view, self.view_read_at = dict(view), read_at
        mine = self.view.get(self.consumer)
        if (isinstance(mine, ClaimRecord) and mine.incarnation != self.incarnation
                and (self.predecessor is None or mine.version != self.predecessor.version)):
            self.zombie = True  # a newer incarnation took our id over
        self.view_is_fresh = self.written is None or (
            isinstance(mine, ClaimRecord) and mine.version == self.written.version
        )
        if self.commits is not None and read_at >= self.commits_opened_at:
            self.commits_checked = True

    def wrote(self, record: ClaimRecord, sent_at: float, returned_at: float | None = None) -> None:
        """Our claim write succeeded; ``sent_at`` is our clock just before it was sent,
        ``returned_at`` once it returned (default: at once).

        A pipeline paused between deciding to renew and sending the renewal may send it after
        its lease ran out, and a slow write may land after it ran out; by then a successor may
        have taken over (its read began before the renewal landed), so that renewal must not
        let the running query go on: the lease stays lapsed until the query has stopped."""
        returned = returned_by(sent_at, returned_at)
        if (self.reading is not None or self.final_pending is not None) and returned >= self.deadline():
            self.lease_lapsed = True
        self.written, self.sent_at = record, sent_at
        self.view_is_fresh = False
        self.retry_at = 0.0

    def write_failed(self, *, fenced: bool, now: float) -> None:
        """The write failed (it may or may not have been stored); fenced: another incarnation
        owns the id, so we are the zombie."""
        if fenced:
            self.zombie = True
        self.retry_at = now + self.retry

    def fenced_commits(self, consumer: str, version: Version) -> None:
        """The commits of ``consumer`` (whose claim had ``version``) are fenced now."""
        self.fenced.add((consumer, version))

    def commits_opened(self, version: Version, now: float) -> None:
        """The committer's producer was opened under our claim ``version``; ``now``: own clock
        once the open returned (only reads that begin from then on check it)."""
        self.commits, self.commits_opened_at = version, now
        self.commits_checked = self.commits_allowed = False
        if self.reading is None and self.final_pending is None:  # a new stint starts from this version
            self.commits_since = version[1]

    def commits_lost(self) -> None:
        """A failure closed the committer's producer: only this machine may open another."""
        self.commits, self.commits_opened_at = None, float("inf")
        self.commits_checked = self.commits_allowed = False

    def commits_allowed_now(self) -> None:
        """The driver let the reopened producer's commits go (``AllowCommits``)."""
        self.commits_allowed = True

    def started(self, generation: int, holds: Holds) -> None:
        self.reading = Reading(generation, holds)
        self.waiting_since = None
        self.commits_allowed = True

    def stopped(self, commit: str) -> None:
        """The query stopped (or a waiting final commit ended) and the committer's producer was
        closed; commit: "ok", "skipped" (not asked), "refused" (fenced: another owner took
        over), "held" (it waits for a new producer: ``FinishCommit`` retries it) or "failed"
        (Kafka kept failing: what was read is not committed)."""
        stint = self.reading or self.final_pending
        self.reading = None
        self.commit_refused = False
        self.lease_lapsed = False
        self.commits_lost()
        self.final_pending = stint if commit == "held" else None
        if commit == "failed":  # never release what is read but not committed: the lease runs out instead
            self.outcome = Exit("commit-failed")

    def refused_commit(self) -> None:
        """A micro-batch's commit was refused: someone took over (our lease lapsed)."""
        self.commit_refused = True

    def query_ended(self, failed: bool, now: float) -> bool:
        """The query ended by itself: drained (``availableNow``) or failed. False when our
        lease had lapsed by then (a pause of this whole process made its Kafka calls time
        out): the lapse stops it, and that is no end of the run."""
        if now >= self.deadline():
            return False
        self.ending = self.ending or ("failed" if failed else "drained")
        return True

    def request_stop(self) -> None:
        self.ending = self.ending or "stopped"

    # -- derived ---------------------------------------------------------------------------

    @property
    def renew_every(self) -> float:
        return self.lease / 3

    def deadline(self) -> float:
        """Own clock at which our lease lapses (we must not be reading by then)."""
        if self.written is None or self.lease_lapsed:
            return float("-inf")
        assert self.margin is not None
        return self.sent_at + self.written.lease - self.margin

    def lease_valid(self, now: float) -> bool:
        """May this pipeline write what it reads now? It reads, no newer incarnation took its
        id, and its lease has not lapsed by its own clock."""
        return self.reading is not None and not self.zombie and now < self.deadline()

    def may_start(self, now: float) -> bool:
        """After preparing a start (reading offsets): is most of a lease still ahead?"""
        return now < self.deadline() - self.renew_every

    def predecessor_holds(self, now: float) -> Holds:
        """What our predecessor claimed, while its lease (by our clock) has not run out."""
        p = self.predecessor
        if p is None or now >= self.predecessor_since + p.lease:
            return NOTHING
        return p.holds

    def fenced_by(self) -> str | None:
        """Another consumer (or the fencer) whose claim records a fence of our commits since
        ``commits_since``; with a ``fence_authority``, only its notes count."""
        for holder in sorted(self.view):
            record = self.view[holder]
            if holder == self.consumer or not isinstance(record, ClaimRecord):
                continue
            if self.fence_authority is not None and holder != self.fence_authority:
                continue
            noted = record.fences.get(self.consumer)
            if noted is not None and noted[0] == self.incarnation and noted[1] >= self.commits_since:
                return holder
        return None

    def _fence_notes(self) -> tuple[tuple[str, Version], ...]:
        """The fences our claims carry (or, with a fencer, ask for): ``still_fenced``."""
        return tuple((h, v) for h, v in sorted(self.fence_intents.items()) if still_fenced(self.view, h, v))

    def _write(self, generation: int, holds: Holds, state: str, now: float) -> Write | Wait:
        if now < self.retry_at:
            return Wait(self.retry_at, "retrying a failed claim write")
        return Write(generation, holds, state, self._fence_notes())

    def _claimed(self, generation: int, holds: Holds, state: str | None = None) -> bool:
        w = self.written
        return w is not None and w.generation == generation and w.holds == holds and (state is None or w.state == state)

    # -- the decision ------------------------------------------------------------------------

    def next(self, now: float) -> Action:
        """The one thing to do now."""
        if self.outcome is not None:
            return self.outcome
        # 1. Never read past our lease, nor once replaced: stop, and commit nothing.
        if self.reading is not None:
            why = self._replaced(now)
            if why is not None:
                return Stop(False, why)
        # 2. A final commit that waits for a producer: reopen it through the check, or drop it.
        if self.final_pending is not None:
            return self._finish(now)
        if self.zombie:
            return self._exit("fenced")
        # 3. A running query whose producer a failure closed: reopen it through the check, once
        #    a renewal that is due went out. The reopen waits on the broker that failed the
        #    commit; while that broker is away a store of its own (a directory, HDFS) still
        #    takes renewals, and a lease lapsed behind failing reopens would stop the query and
        #    make the next one read again every batch read since the last commit. A renewal
        #    that failed and waits for its retry does not hold the reopen up meanwhile.
        if self.reading is not None and not self.commits_allowed and (
            now < self.sent_at + self.renew_every or now < self.retry_at
        ):
            return self._reopen()
        extra = self.predecessor_holds(now)
        generation, target = self.plan_generation, self.assignment

        if self.ending is not None:  # stop(), the query ended by itself, or we gave up waiting
            if self.reading is not None:
                return Stop(True, f"the run ends ({self.ending})")
            if self.written is not None and self.written.holds != extra:
                return self._write(self.written.generation, extra, "released", now)
            return self._exit(self.ending, self.blockers)

        if target is None:  # the plan no longer names us: release and leave
            if self.reading is not None:
                return Stop(True, f"generation {generation} does not name this consumer")
            if not self._claimed(generation, extra, "left"):
                return self._write(generation, extra, "left", now)
            return self._exit("left")

        if self.reading is not None:
            return self._while_reading(self.reading, generation, target, extra, now)
        return self._acquire(generation, target, extra, now)

    def _exit(self, reason: str, blockers: tuple[Blocker, ...] = ()) -> Exit:
        self.outcome = Exit(reason, blockers)
        return self.outcome

    def _replaced(self, now: float) -> str | None:
        """Why a pipeline that reads (or holds a final commit) must stop at once, if it must."""
        if now >= self.deadline():
            return "the lease lapsed (no claim written for too long)"
        if self.zombie:
            return "a newer incarnation of this consumer took over"
        if self.commit_refused:
            return "a commit was refused: another pipeline took over"
        holder = self.fenced_by()
        if holder is not None:
            return f"{holder} fenced this pipeline's commits: by its clock our lease had run out"
        return None

    def _reopen(self) -> Action:
        """Open a producer, read the claims after it, then allow commits (step 1 checked the rest)."""
        assert self.written is not None  # reading implies a claim
        if self.commits is None:
            return OpenCommits(self.written.version)
        if not self.commits_checked:
            return ReadClaims()
        return AllowCommits()

    def _finish(self, now: float) -> Action:
        pending = self.final_pending
        assert pending is not None and self.written is not None
        why = self._replaced(now)
        if why is not None:  # whatever the stopped query read stays uncommitted: a successor reads it again
            return Stop(False, f"the final commit is dropped: {why}")
        if now >= self.sent_at + self.renew_every:
            return self._write(self.written.generation, self.written.holds, "stopping", now)
        if not self.commits_allowed:
            return self._reopen()
        return FinishCommit(pending.generation)

    def _while_reading(self, reading: Reading, generation: int, target: Holds, extra: Holds, now: float) -> Action:
        if generation > reading.generation and target != reading.holds:
            return Stop(True, f"generation {generation} moves partitions")
        holds = reading.holds | extra
        renew_at = self.sent_at + self.renew_every
        if not self._claimed(generation, holds, "reading") or now >= renew_at:
            return self._write(generation, holds, "reading", now)
        if self._newest_claim_on(reading.holds) > generation:
            return ReadPlan(generation, renew_at)  # someone acts on a plan we have not seen: catch up
        return Wait(min(renew_at, self.deadline()), "reading")

    def _newest_claim_on(self, partitions: Holds) -> int:
        """The newest generation of another consumer's claim that names one of ``partitions``."""
        newest = 0
        for holder, record in self.view.items():
            if holder != self.consumer and isinstance(record, ClaimRecord) and record.holds & partitions:
                newest = max(newest, record.generation)
        return newest

    def _acquire(self, generation: int, target: Holds, extra: Holds, now: float) -> Action:
        """Step 4: claim ``target`` (and ``extra``, held over from a previous incarnation) and
        wait, fence or start. Long because it is one ordered list of conditions, the first that
        holds deciding the action; the order is the protocol's argument and reads top to bottom."""
        wanted = target | extra
        state = "waiting" if target else "idle"
        if not self._claimed(generation, wanted):
            return self._write(generation, wanted, state, now)
        if not target:
            if self.until_drained:
                return self._exit("idle")
            if extra:
                assert self.predecessor is not None
                return Wait(self.predecessor_since + self.predecessor.lease, "idle; the predecessor's lease runs")
            return Wait(now + self.renew_every, "idle")
        renew_at = self.deadline() - self.renew_every  # start only with most of a lease ahead
        if now >= renew_at:
            return self._write(generation, wanted, state, now)
        if not self.view_is_fresh:
            return ReadClaims()
        if self.commits is None:  # notes against the claim we stand on count, older ones do not
            assert self.written is not None
            self.commits_since = self.written.seq
        if self.fenced_by() is not None:  # someone saw this claim's lease run out: claim anew, reopen
            self.commits_lost()
            return Write(generation, wanted, state, self._fence_notes()) if now >= self.retry_at else Wait(self.retry_at, "retrying a failed claim write")

        blockers: list[Blocker] = []
        for holder in sorted(self.view):
            if holder == self.consumer:
                continue
            record = self.view[holder]
            if isinstance(record, str):  # cannot be read: it may hold anything, for ever
                blockers.append(Blocker(holder, None, target, None, record))
                continue
            overlap = record.holds & target
            if not overlap:
                continue
            if record.generation > generation:
                return ReadPlan(generation, renew_at)  # we are stale: never proceed
            expires = self.first_seen[(holder, record.version)] + record.lease
            if self.view_read_at >= expires:  # a read a whole lease later still shows it: gone
                if (holder, record.version) not in self.fenced:
                    if self.waiting_since is None:
                        self.waiting_since = now
                    if now - self.waiting_since >= self.handover_timeout:  # a fence that never succeeds ends the wait too
                        who = "the fencer did not fence it" if self.fence_authority else "fencing it kept failing"
                        self.ending = "handover-timeout"
                        self.blockers = (Blocker(holder, record.generation, overlap, expires, f"its lease ran out; {who}"),)
                        return self.next(now)
                    self.fence_intents[holder] = record.version
                    assert self.written is not None
                    if self.written.fences.get(holder) != record.version:
                        return self._write(generation, wanted, state, now)  # the note first, then the fence
                    return Fence(holder, record.version)
                continue
            detail = f"{record.state or 'claimed'}, lease until +{expires - now:.1f}s"
            blockers.append(Blocker(holder, record.generation, overlap, expires, detail))
        if any(b.expires is not None and b.expires <= now for b in blockers):
            return ReadClaims()  # a lease ran out since our last read: a read from now can prove it
        if extra & target:  # fenced when we took the id over, so our own clock suffices
            assert self.predecessor is not None
            expires = self.predecessor_since + self.predecessor.lease
            blockers.append(
                Blocker(f"{self.consumer} (previous incarnation)", self.predecessor.generation, extra & target, expires, "its lease runs")
            )
        if not blockers:
            self.waiting_since = None
            if self.commits is None:
                assert self.written is not None
                return OpenCommits(self.written.version)
            if not self.commits_checked:
                return ReadClaims()
            return Start(generation, target)
        if self.waiting_since is None:
            self.waiting_since = now
        if now - self.waiting_since >= self.handover_timeout:
            self.ending, self.blockers = "handover-timeout", tuple(blockers)
            return self.next(now)
        until = min(
            [b.expires for b in blockers if b.expires is not None]
            + [renew_at, self.waiting_since + self.handover_timeout]
        )
        return Wait(max(until, now), "waiting for earlier owners", tuple(blockers))


__all__ = [
    "Action",
    "AllowCommits",
    "Blocker",
    "Exit",
    "Fence",
    "FinishCommit",
    "Handover",
    "Holds",
    "OpenCommits",
    "ReadClaims",
    "ReadPlan",
    "Start",
    "Stop",
    "Wait",
    "Write",
    "names",
    "still_fenced",
]
