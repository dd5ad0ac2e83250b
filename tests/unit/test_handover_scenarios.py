"""The handover protocol's hard cases, each played step by step in the model world of
``test_handover_model`` (which hypothesis explores at random): a pause across generations
shorter and longer than the lease, a pause before the first claim, a restart while the old
incarnation is only paused, skipped generations, a crash and restart; and the committer's
producer: closed by a failure while its holder's successor takes over, reopened only
through the handover, a renewal sent after the lease ran out, a final commit that waits."""

from __future__ import annotations

from typing import Any

import pytest

from spark_lag_assign.consume.protocol import (
    AllowCommits,
    Blocker,
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
from spark_lag_assign.store.base import FENCER, ClaimRecord
from tests.unit.test_handover_model import CONSUMERS, LEASE, MAX_RECORDS, PARTITIONS, HandoverModel, Proc, _ends, _Fixed

P = ("t", 0)


class Records(_Fixed):
    """A fair schedule whose micro-batches read ``n`` records of each partition."""

    def __init__(self, n: int) -> None:
        self.n = n

    def draw(self, strategy: object, label: str = "") -> object:
        return self.n if label == "records" else super().draw(strategy, label)  # type: ignore[arg-type]


def world(owners: dict[tuple[str, int], str], *consumers: str) -> tuple[HandoverModel, dict[str, Proc]]:
    model = HandoverModel()
    publish(model, owners)
    procs = {c: model.spawn(c, copy_predecessor=False) for c in consumers}
    return model, procs


def publish(model: HandoverModel, owners: dict[tuple[str, int], str]) -> int:
    full = {tp: owners.get(tp, "A") for tp in PARTITIONS}
    model.world.plans.append(full)
    model.world.members.append(set(CONSUMERS))  # every pipeline stays in the group (some idle)
    return len(model.world.plans)


def settle(model: HandoverModel, proc: Proc, *, see: bool = True) -> object:
    """Let one pipeline see the newest plan and claims, then act until it has to wait."""
    w = model.world
    if see:
        g = len(w.plans)
        proc.core.saw_plan(g, w.assignment(g, proc.consumer))
        proc.core.saw_claims(w.view(len(w.log)), model.own(proc))
    action: object = None
    for _ in range(30):
        action = proc.decided or proc.core.next(model.own(proc))
        if isinstance(action, Wait) or proc.exited:
            return action
        model.perform(proc, _Fixed())
    raise AssertionError(f"{proc.incarnation} never waits: {action}")


def batch(model: HandoverModel, proc: Proc, records: int = 2, fate: str = "ok") -> str:
    """One micro-batch of ``proc`` whose progress report the listener hands over at once;
    what became of its commit: ok | refused | held | failed | nothing."""
    before = dict(model.world.committed)
    proc.reports.clear()
    proc.fate = fate
    model.run_batch(proc, Records(records), report_now=True)
    proc.fate = "ok"
    if proc.refused:
        return "refused"
    if model.world.committed != before:
        return "ok"
    if proc.fc.lost:
        return "failed" if fate == "fail" else "held"
    return "nothing"


def reading(proc: Proc) -> frozenset[tuple[str, int]]:
    return proc.query.holds if proc.query is not None else frozenset()


def check(model: HandoverModel) -> None:
    model.one_live_reader_per_partition()
    model.nothing_lost()
    model.duplicates_bounded()
    model.nothing_violated()


def take_over(model: HandoverModel, a: Proc, b: Proc) -> None:
    """With ``a`` paused past its lease, the plan gives t-0 to ``b``, which fences ``a`` and reads."""
    publish(model, {P: b.consumer})
    settle(model, b)
    assert P not in reading(b)  # a's lease is still valid
    model.world.now += LEASE + 0.1
    settle(model, b)
    assert P in reading(b)


def test_a_pause_shorter_than_the_lease_across_a_move_away_and_back_reads_nothing_twice() -> None:
    model, procs = world({P: "A"}, "A", "B")
    a, b = procs["A"], procs["B"]
    settle(model, a), settle(model, b)
    assert P in reading(a) and P not in reading(b)
    assert batch(model, a) == "ok"
    a.paused = True  # A is stopped (GC, slow host) while the plan moves t-0 to B and back
    publish(model, {P: "B"})
    model.world.now += 2
    wait = settle(model, b)
    assert isinstance(wait, Wait) and [x.holder for x in wait.blockers] == ["A"]  # B waits for A
    assert P not in reading(b)
    publish(model, {P: "A"})
    model.world.now += 2
    settle(model, b)  # B sees that it lost t-0 before it read it, and lets go
    record = model.world.view(len(model.world.log))["B"]
    assert isinstance(record, ClaimRecord) and P not in record.holds
    a.paused = False
    model.world.now += 1
    settle(model, a)  # A skipped generation 2 entirely and keeps reading
    assert P in reading(a) and a.core.written is not None and a.core.written.generation == 3
    assert batch(model, a) == "ok"
    assert sum(n - 1 for n in model.world.sink[P].values()) == 0
    check(model)


def test_a_pause_longer_than_the_lease_lets_another_take_over_and_refuses_the_late_batch() -> None:
    model, procs = world({P: "A"}, "A", "B")
    a, b = procs["A"], procs["B"]
    settle(model, a), settle(model, b)
    batch(model, a)
    epoch = model.world.epoch["A"]
    a.paused = True
    take_over(model, a, b)
    assert model.world.epoch["A"] == epoch + 1  # B fenced A's commits before it started
    note = model.world.view(len(model.world.log))["B"]
    assert isinstance(note, ClaimRecord) and note.fences["A"] == a.core.written.version  # type: ignore[union-attr]
    model.world.end[P] += 6
    assert batch(model, b) == "ok"
    b_commit = model.world.committed[P]
    publish(model, {P: "A"})  # and back to A, while A is still paused
    a.paused = False
    assert batch(model, a) == "refused"  # the one batch A completes after it resumes
    assert model.world.committed[P] == b_commit  # ... is never committed
    # A notices at once: its lease lapsed, so it stops without committing and starts over
    assert a.core.next(model.own(a)) == Stop(False, "the lease lapsed (no claim written for too long)")
    settle(model, a, see=False)
    assert P not in reading(a)
    settle(model, b)  # B sees generation 3, commits and releases t-0
    assert P not in reading(b)
    model.world.now += 1
    settle(model, a)
    assert P in reading(a) and a.query is not None and a.query.stint.start[P] == model.world.committed[P]
    check(model)


def test_a_pipeline_paused_before_its_first_claim_never_reads_a_partition_moved_away() -> None:
    model, procs = world({P: "C"}, "D")
    c = model.spawn("C", copy_predecessor=False)  # C has read generation 1 (t-0 is C's) ...
    c.paused = True  # ... and is paused before it writes any claim
    publish(model, {P: "D"})
    settle(model, procs["D"])
    assert P in reading(procs["D"])  # nobody claims t-0: D reads it
    c.paused = False
    c.core.saw_claims(model.world.view(len(model.world.log)), model.own(c))
    # C acts on generation 1: it claims t-0, then sees D's newer claim and never starts
    for _ in range(5):
        action = c.core.next(model.own(c))
        if isinstance(action, ReadPlan | Wait):
            break
        model.perform(c, _Fixed())
    assert isinstance(action, ReadPlan) and P not in reading(c)
    settle(model, c)
    assert P not in reading(c)
    check(model)


def test_a_restart_while_the_old_incarnation_is_paused_waits_out_its_lease_and_fences_it() -> None:
    model, procs = world({P: "A"}, "A")
    old = procs["A"]
    settle(model, old)
    batch(model, old)
    old.paused = True
    new = model.spawn("A", copy_predecessor=False)  # the cluster restarts the driver elsewhere
    wait = settle(model, new)
    assert isinstance(wait, Wait) and P not in reading(new)
    assert any("previous incarnation" in x.holder for x in wait.blockers)
    model.world.now += LEASE + 0.1
    settle(model, new)
    assert P in reading(new)
    old.paused = False
    assert batch(model, old) == "refused"  # its producer was fenced when the new one opened
    settle(model, old, see=False)
    assert old.exited == "fenced" and old.query is None
    check(model)


def test_a_crashed_pipeline_is_replaced_after_its_lease_from_its_last_commit() -> None:
    model, procs = world({P: "A"}, "A")
    old = procs["A"]
    settle(model, old)
    batch(model, old, records=3)
    committed = model.world.committed[P]
    old.alive, old.query = False, None  # SIGKILL
    new = model.spawn("A", copy_predecessor=True)  # a directory store fences by writing a copy
    settle(model, new)
    assert P not in reading(new)
    model.world.now += LEASE + 0.1
    settle(model, new)
    assert new.query is not None and new.query.stint.start[P] == committed
    check(model)


def test_skipped_generations_never_let_two_pipelines_read_at_once() -> None:
    model, procs = world({P: "A"}, "A", "B", "C")
    for p in procs.values():
        settle(model, p)
    publish(model, {P: "B"})
    settle(model, procs["B"])  # B claims t-0 at generation 2 and waits for A
    publish(model, {P: "C"})
    publish(model, {P: "B"})
    settle(model, procs["C"], see=False)  # C has not seen 3 or 4
    settle(model, procs["C"])  # now it has: generation 4 gives t-0 back to B
    settle(model, procs["A"])  # A sees 4: stops, commits, releases
    settle(model, procs["B"])
    assert P in reading(procs["B"]) and P not in reading(procs["A"]) | reading(procs["C"])
    check(model)


# -- the committer's producer ---------------------------------------------------------------


def test_a_failed_commit_never_undoes_a_successors_fence() -> None:
    """The schedule of a real defect: A commits; a broker fault fails its next commit and
    closes its producer; A's lease lapses; B fences A and commits further; A's listener then
    hands over a report. The committer must hold it, never open a producer by itself."""
    model, procs = world({P: "A"}, "A", "B")
    a, b = procs["A"], procs["B"]
    settle(model, a), settle(model, b)
    assert batch(model, a) == "ok"
    assert batch(model, a, fate="fail") == "failed" and a.fc.lost
    a.paused = True  # it passed its lease check, then paused before acting on anything
    take_over(model, a, b)
    model.world.end[P] += 6
    assert batch(model, b, records=6) == "ok"
    b_commit = model.world.committed[P]
    a.paused = False
    epoch = model.world.epoch["A"]
    a.reports.append((a.query.qid, _ends(a.query.stint.pos)))  # type: ignore[union-attr]
    model.deliver(a)
    assert model.world.committed[P] == b_commit and model.world.epoch["A"] == epoch  # held: no new epoch
    assert isinstance(a.core.next(model.own(a)), Stop)
    settle(model, a, see=False)
    assert P not in reading(a) and model.world.committed[P] == b_commit
    check(model)


def test_a_producer_a_failure_closed_is_reopened_only_through_the_check() -> None:
    model, procs = world({P: "A"}, "A")
    a = procs["A"]
    settle(model, a)
    assert batch(model, a, fate="fail") == "failed"
    assert batch(model, a) == "held"  # the committer waits, and never opens a producer itself
    model.observe(a)
    version = a.core.written.version  # type: ignore[union-attr]
    model.world.now += 1.0
    assert a.core.next(model.own(a)) == OpenCommits(version)
    model.perform(a, _Fixed())
    assert a.core.next(model.own(a)) == ReadClaims()  # only a read that began after the open checks it
    # a read that began after the last one but before the open, delivered after it
    assert a.core.view_read_at < model.own(a) - 0.5
    a.core.saw_claims(model.world.view(len(model.world.log)), model.own(a) - 0.5, model.own(a))
    assert a.core.view_read_at == model.own(a) - 0.5  # taken as the newest view, yet no check of the open
    assert a.core.next(model.own(a)) == ReadClaims()
    model.perform(a, _Fixed())
    assert a.core.next(model.own(a)) == AllowCommits()
    model.perform(a, _Fixed())
    assert batch(model, a) == "ok" and model.world.committed[P] == a.query.stint.pos[P]  # type: ignore[union-attr]
    check(model)


def test_a_reopen_decided_before_a_pause_learns_of_the_successor_from_the_read_after_it() -> None:
    """A decided to reopen its producer, then paused past its lease; B fenced it and reads.
    A's late open takes a new epoch, undoing B's fence: the read after the open must stop it."""
    model, procs = world({P: "A"}, "A", "B")
    a, b = procs["A"], procs["B"]
    settle(model, a), settle(model, b)
    batch(model, a, fate="fail")
    model.observe(a)
    a.decided = a.core.next(model.own(a))
    assert isinstance(a.decided, OpenCommits)
    a.paused = True
    take_over(model, a, b)
    a.paused = False
    model.perform(a, _Fixed())  # the open: A's epoch is the newest again
    assert model.world.epoch["A"] > 0 and a.fc.gate.state == "held"
    action = a.core.next(model.own(a))
    assert isinstance(action, Stop) and not action.commit
    settle(model, a, see=False)
    assert P not in reading(a) and batch(model, b) == "ok"
    check(model)


def test_a_fence_note_stops_a_reader_whose_clock_says_its_lease_still_runs() -> None:
    """Clocks can be wrong: B judged A's lease over while A's clock says it is not. The note
    B wrote before fencing is what A's check after a reopen finds."""
    a = Handover("A", "A1", lease=10, margin=1)
    a.saw_plan(1, frozenset({P}))
    claim = ClaimRecord("A", "A1", 1, 1, frozenset({P}), 10.0, "waiting")
    a.wrote(claim, sent_at=0.0)
    a.saw_claims({"A": claim}, read_at=0.0)
    assert a.next(0.1) == OpenCommits(("A1", 1))
    a.commits_opened(("A1", 1), 0.2)
    a.saw_claims({"A": claim}, read_at=0.3)
    assert a.next(0.4) == Start(1, frozenset({P}))
    a.started(1, frozenset({P}))
    renewal = ClaimRecord("A", "A1", 2, 1, frozenset({P}), 10.0, "reading")
    a.wrote(renewal, sent_at=0.5)
    a.commits_lost()
    assert a.next(1.0) == OpenCommits(("A1", 2))
    a.commits_opened(("A1", 2), 1.1)
    fenced_by_b = ClaimRecord("B", "B1", 4, 2, frozenset({P}), 10.0, "waiting", {"A": ("A1", 1)})
    a.saw_claims({"A": renewal, "B": fenced_by_b}, read_at=1.2)
    action = a.next(1.3)
    assert isinstance(action, Stop) and not action.commit and "B fenced" in action.reason
    # a note about an older stint of ours, or another incarnation, does not stop this one
    a2 = Handover("A", "A1", lease=10, margin=1, commits_since=3)
    a2.saw_claims({"B": ClaimRecord("B", "B1", 4, 2, frozenset({P}), 10.0, "waiting", {"A": ("A1", 2)})}, read_at=0.0)
    assert a2.fenced_by() is None
    a2.saw_claims({"B": ClaimRecord("B", "B1", 4, 2, frozenset({P}), 10.0, "waiting", {"A": ("A0", 9)})}, read_at=0.0)
    assert a2.fenced_by() is None
    a2.saw_claims({"B": ClaimRecord("B", "B1", 4, 2, frozenset({P}), 10.0, "waiting", {"A": ("A1", 3)})}, read_at=0.0)
    assert a2.fenced_by() == "B"


def test_a_successor_notes_the_fence_in_its_claim_before_it_fences() -> None:
    b = Handover("B", "B1", lease=10, margin=1)
    b.saw_plan(2, frozenset({P}))
    held = ClaimRecord("A", "A1", 7, 1, frozenset({P}), 10.0, "reading")
    assert b.next(0.0) == Write(2, frozenset({P}), "waiting")
    mine = ClaimRecord("B", "B1", 1, 2, frozenset({P}), 10.0, "waiting")
    b.wrote(mine, sent_at=0.0)
    b.saw_claims({"A": held, "B": mine}, read_at=0.0)
    assert isinstance(b.next(0.5), Wait)
    assert b.next(6.0) == Write(2, frozenset({P}), "waiting")  # B renews its own claim meanwhile
    mine = ClaimRecord("B", "B1", 2, 2, frozenset({P}), 10.0, "waiting")
    b.wrote(mine, sent_at=6.0)
    b.saw_claims({"A": held, "B": mine}, read_at=10.0)  # a read a whole lease later still shows A's version 7
    assert b.next(10.0) == Write(2, frozenset({P}), "waiting", (("A", ("A1", 7)),))
    noted = ClaimRecord("B", "B1", 3, 2, frozenset({P}), 10.0, "waiting", {"A": ("A1", 7)})
    b.wrote(noted, sent_at=10.1)
    assert b.next(10.1) == ReadClaims()
    b.saw_claims({"A": held, "B": noted}, read_at=10.2)
    assert b.next(10.2).__class__.__name__ == "Fence"
    # the note stays while A's incarnation still claims to read, and goes once it stopped
    b.fenced_commits("A", ("A1", 7))
    b.saw_claims({"A": ClaimRecord("A", "A1", 8, 1, frozenset({P}), 10.0, "reading"), "B": noted}, read_at=10.3)
    assert b._fence_notes() == (("A", ("A1", 7)),)
    b.saw_claims({"A": ClaimRecord("A", "A1", 9, 1, frozenset(), 10.0, "waiting"), "B": noted}, read_at=10.4)
    assert b._fence_notes() == ()
    b.saw_claims({"A": ClaimRecord("A", "A2", 1, 1, frozenset({P}), 10.0, "reading"), "B": noted}, read_at=10.5)
    assert b._fence_notes() == ()


def test_a_renewal_sent_after_the_lease_ran_out_does_not_revive_it() -> None:
    """A decided to renew, paused past its lease, then sent the renewal: the query stops."""
    a = Handover("A", "A1", lease=9, margin=0.5)
    a.saw_plan(1, frozenset({P}))
    first = ClaimRecord("A", "A1", 1, 1, frozenset({P}), 9.0, "waiting")
    a.wrote(first, sent_at=0.0)
    a.commits_opened(("A1", 1), 0.0)
    a.saw_claims({"A": first}, read_at=0.0)
    a.started(1, frozenset({P}))
    renew = a.next(3.5)
    assert isinstance(renew, Write) and renew.state == "reading"
    late = ClaimRecord("A", "A1", 2, 1, frozenset({P}), 9.0, "reading")
    a.wrote(late, sent_at=20.0)  # sent long after its deadline (8.5)
    assert not a.lease_valid(20.1)
    assert a.next(20.1) == Stop(False, "the lease lapsed (no claim written for too long)")
    a.stopped("skipped")
    assert a.deadline() == 20.0 + 9.0 - 0.5  # once stopped, the new claim's lease counts again


def test_a_final_commit_that_waits_is_retried_through_a_reopened_producer_then_released() -> None:
    model, procs = world({P: "A"}, "A", "B")
    a, b = procs["A"], procs["B"]
    settle(model, a), settle(model, b)
    assert batch(model, a) == "ok"
    model.world.end[P] += MAX_RECORDS
    model.run_batch(a, Records(MAX_RECORDS), report_now=False)  # read; its report not yet handed over
    read = a.query.stint.pos[P]  # type: ignore[union-attr]
    assert read > model.world.committed[P]
    publish(model, {P: "B"})
    a.core.saw_plan(2, model.world.assignment(2, "A"))
    action = a.core.next(model.own(a))
    assert isinstance(action, Stop) and action.commit
    a.fate = "fail"  # the final commit meets a broker fault: the producer is closed, the commit waits
    model.act(a, action, _Fixed())
    assert a.pending_final is not None and a.core.final_pending is not None
    assert a.core.next(model.own(a)) == OpenCommits(a.core.written.version)  # type: ignore[union-attr]
    settle(model, a, see=False)
    assert a.pending_final is None
    assert model.world.committed[P] == read  # everything read is committed ...
    settle(model, b)
    assert P in reading(b) and b.query.stint.start[P] == read  # type: ignore[union-attr]  # ... before B starts
    assert sum(n - 1 for n in model.world.sink[P].values()) == 0
    check(model)


def test_a_final_commit_that_waits_is_dropped_once_the_lease_lapses() -> None:
    core = Handover("A", "A1", lease=9, margin=0.5)
    core.saw_plan(1, frozenset({P}))
    claim = ClaimRecord("A", "A1", 1, 1, frozenset({P}), 9.0, "reading")
    core.wrote(claim, sent_at=0.0)
    core.started(1, frozenset({P}))
    core.saw_plan(2, frozenset())
    assert core.next(1.0) == Stop(True, "generation 2 moves partitions")
    core.stopped("held")
    assert isinstance(core.next(1.5), OpenCommits)
    assert core.next(3.5) == Write(1, frozenset({P}), "stopping")  # it keeps its lease while it waits
    action = core.next(9.0)
    assert isinstance(action, Stop) and not action.commit and "dropped" in action.reason
    core.stopped("skipped")
    assert core.final_pending is None and isinstance(core.next(9.1), Write)


def test_finish_commit_is_asked_once_the_reopened_producer_is_checked() -> None:
    core = Handover("A", "A1", lease=9, margin=0.5)
    core.saw_plan(1, frozenset({P}))
    claim = ClaimRecord("A", "A1", 1, 1, frozenset({P}), 9.0, "reading")
    core.wrote(claim, sent_at=0.0)
    core.started(1, frozenset({P}))
    core.saw_plan(2, frozenset())
    core.next(1.0)
    core.stopped("held")
    core.commits_opened(("A1", 1), 1.2)
    core.saw_claims({"A": claim}, read_at=1.3)
    assert core.next(1.4) == AllowCommits()
    core.commits_allowed_now()
    assert core.next(1.5) == FinishCommit(1)


def test_an_unreadable_claim_blocks_and_a_long_wait_ends_with_a_report() -> None:
    core = Handover("B", "B1", lease=10, handover_timeout=30)
    core.saw_plan(2, frozenset({P}))
    assert core.next(0.0) == Write(2, frozenset({P}), "waiting")
    core.wrote(ClaimRecord("B", "B1", 1, 2, frozenset({P}), 10.0, "waiting"), sent_at=0.0)
    assert core.next(0.0) == ReadClaims()
    mine = ClaimRecord("B", "B1", 1, 2, frozenset({P}), 10.0, "waiting")
    core.saw_claims({"B": mine, "A": "claims/A/000003.json: not JSON"}, read_at=0.0)
    wait = core.next(1.0)
    assert isinstance(wait, Wait) and wait.blockers == (
        Blocker("A", None, frozenset({P}), None, "claims/A/000003.json: not JSON"),
    )
    assert "A's claim is unreadable" in wait.blockers[0].describe()
    for now in (4.0, 9.0, 15.0, 21.0, 27.0):  # it keeps its own claim alive meanwhile
        action = core.next(now)
        if isinstance(action, Write):
            core.wrote(ClaimRecord("B", "B1", core.written.seq + 1, 2, action.holds, 10.0, action.state), sent_at=now)  # type: ignore[union-attr]
            core.saw_claims({"B": core.written, "A": "claims/A/000003.json: not JSON"}, read_at=now)  # type: ignore[dict-item]
    action = core.next(31.0)
    assert isinstance(action, Write) and action.holds == frozenset() and action.state == "released"
    core.wrote(ClaimRecord("B", "B1", 9, 2, frozenset(), 10.0, "released"), sent_at=31.0)
    end = core.next(31.0)
    assert isinstance(end, Exit) and end.reason == "handover-timeout" and end.blockers[0].holder == "A"


def test_start_is_only_given_with_most_of_a_lease_ahead() -> None:
    core = Handover("A", "A1", lease=9, margin=0.5)
    core.saw_plan(1, frozenset({P}))
    assert isinstance(core.next(0.0), Write)
    record = ClaimRecord("A", "A1", 1, 1, frozenset({P}), 9.0, "waiting")
    core.wrote(record, sent_at=0.0)
    core.saw_claims({"A": record}, read_at=0.0)
    assert core.next(0.1) == OpenCommits(("A1", 1))
    core.commits_opened(("A1", 1), 0.1)
    core.saw_claims({"A": record}, read_at=0.1)
    assert core.next(0.1) == Start(1, frozenset({P}))
    assert core.may_start(2.9) and not core.may_start(5.5)  # preparing took too long: renew first
    assert isinstance(core.next(6.0), Write)  # too close to its deadline (8.5): renew first


def test_a_refused_commit_stops_the_reader_at_its_next_step() -> None:
    """Before it reads the claims again: the refusal itself is the news that it was replaced."""
    a = Handover("A", "A1", lease=10, margin=1)
    a.saw_plan(1, frozenset({P}))
    claim = ClaimRecord("A", "A1", 1, 1, frozenset({P}), 10.0, "reading")
    a.wrote(claim, sent_at=0.0)
    a.commits_opened(("A1", 1), 0.0)
    a.saw_claims({"A": claim}, read_at=0.0)
    a.started(1, frozenset({P}))
    assert isinstance(a.next(1.0), Wait)
    a.refused_commit()
    assert a.next(1.1) == Stop(False, "a commit was refused: another pipeline took over")


def test_a_lease_is_judged_by_when_the_view_was_read_not_by_now() -> None:
    """A view read some time ago says nothing about what was written since: a holder whose
    lease would have run out by now is read again, never fenced on the old view's word."""
    b = Handover("B", "B1", lease=10, margin=1)
    b.saw_plan(2, frozenset({P}))
    mine = ClaimRecord("B", "B1", 1, 2, frozenset({P}), 10.0, "waiting")
    b.wrote(mine, sent_at=0.0)
    held = ClaimRecord("A", "A1", 3, 1, frozenset({P}), 10.0, "reading")
    b.saw_claims({"A": held, "B": mine}, read_at=0.0)  # A's version 3, first seen at 0
    assert isinstance(b.next(0.5), Wait)
    assert b.next(5.7) == Write(2, frozenset({P}), "waiting")  # B renews its own claim
    mine = ClaimRecord("B", "B1", 2, 2, frozenset({P}), 10.0, "waiting")
    b.wrote(mine, sent_at=5.7)
    b.saw_claims({"A": held, "B": mine}, read_at=5.8)
    assert b.next(10.5) == ReadClaims()  # A may have renewed after 5.1: look before fencing
    b.saw_claims({"A": held, "B": mine}, read_at=10.6)
    assert b.next(10.7) == Write(2, frozenset({P}), "waiting", (("A", ("A1", 3)),))  # now it is proven


def reading_core(lease: float = 10, margin: float = 1, state: str = "reading") -> Handover:
    """A pipeline reading t-0 under generation 1, its claim (in ``state``) sent at 0 (deadline
    lease - margin)."""
    core = Handover("A", "A1", lease=lease, margin=margin)
    core.saw_plan(1, frozenset({P}))
    claim = ClaimRecord("A", "A1", 1, 1, frozenset({P}), float(lease), state)
    core.wrote(claim, sent_at=0.0)
    core.commits_opened(("A1", 1), 0.0)
    core.saw_claims({"A": claim}, read_at=0.0)
    core.started(1, frozenset({P}))
    return core


def test_a_renewal_that_falls_due_goes_out_between_failing_reopens() -> None:
    """A failed commit closed the producer and the broker stays away, so every reopen fails:
    the claim is still renewed when due, and the query reads on under a valid lease; once the
    broker is back the reopen goes through its check as before."""
    core = reading_core()  # claim sent at 0, renewals every 10/3, deadline 9
    core.commits_lost()
    assert core.next(3.3) == OpenCommits(("A1", 1))  # no renewal due yet: the reopen
    assert core.next(10 / 3) == Write(1, frozenset({P}), "reading")  # due exactly now: the renewal first
    core.wrote(ClaimRecord("A", "A1", 2, 1, frozenset({P}), 10.0, "reading"), sent_at=10 / 3)
    assert core.next(3.4) == OpenCommits(("A1", 2))  # the reopen again, after it
    assert core.next(8.5) == Write(1, frozenset({P}), "reading")
    core.wrote(ClaimRecord("A", "A1", 3, 1, frozenset({P}), 10.0, "reading"), sent_at=8.5)
    assert core.next(9.5) == OpenCommits(("A1", 3))  # past the first claim's deadline: no lapse
    core.commits_opened(("A1", 3), 9.6)
    assert core.next(9.7) == ReadClaims()
    core.saw_claims({"A": core.written}, read_at=9.7)
    assert core.next(9.8) == AllowCommits()


def test_a_renewal_between_the_reopen_and_its_check_still_heeds_a_fence_of_the_claim_before_it() -> None:
    """Our renewal lands between the open and the claims read that checks it: the successor's
    note names our claim from before the renewal, and it still stops us without a commit."""
    core = reading_core()
    core.commits_lost()
    assert core.next(1.0) == OpenCommits(("A1", 1))
    core.commits_opened(("A1", 1), 1.0)
    assert core.next(10 / 3) == Write(1, frozenset({P}), "reading")  # due before the check
    renewed = ClaimRecord("A", "A1", 2, 1, frozenset({P}), 10.0, "reading")
    core.wrote(renewed, sent_at=10 / 3)
    assert core.next(3.4) == ReadClaims()
    fenced_by_b = ClaimRecord("B", "B1", 1, 2, frozenset({P}), 10.0, "waiting", {"A": ("A1", 1)})
    core.saw_claims({"A": renewed, "B": fenced_by_b}, read_at=3.4)
    action = core.next(3.5)
    assert isinstance(action, Stop) and not action.commit and "B fenced" in action.reason


def test_a_renewal_that_failed_and_waits_for_its_retry_does_not_hold_the_reopen_up() -> None:
    """The store refuses writes for a while (HDFS in safe mode) while Kafka works: between
    the retries of the renewal the reopen goes on, so commits can go again before the lapse."""
    core = reading_core()  # renewals every 10/3, retries a failed write after 1 s
    core.commits_lost()
    assert core.next(3.4) == Write(1, frozenset({P}), "reading")
    core.write_failed(fenced=False, now=3.4)
    assert core.next(3.5) == OpenCommits(("A1", 1))  # not Wait: the retry is 1 s away
    core.commits_opened(("A1", 1), 3.6)
    assert core.next(3.7) == ReadClaims()
    core.saw_claims({"A": core.written}, read_at=3.7)
    assert core.next(3.8) == AllowCommits()
    core.commits_allowed_now()
    assert core.next(4.4) == Write(1, frozenset({P}), "reading")  # the retry, when it is due
    waiting = reading_core()
    waiting.commits_lost()
    waiting.write_failed(fenced=False, now=3.4)
    assert waiting.next(waiting.retry_at) == Write(1, frozenset({P}), "reading")  # the retry is due from then on


def test_a_query_that_ends_by_itself_ends_the_run_unless_the_lease_had_lapsed() -> None:
    core = reading_core()
    assert not core.query_ended(True, 9.0)  # at the deadline: a paused process's query timing out
    assert core.ending is None
    assert core.query_ended(True, 8.9)
    assert core.ending == "failed" and core.next(8.9) == Stop(True, "the run ends (failed)")
    drained = reading_core()
    assert drained.query_ended(False, 1.0) and drained.ending == "drained"
    stopping = reading_core()
    stopping.request_stop()
    assert stopping.query_ended(True, 1.0) and stopping.ending == "stopped"  # the first reason stays


def test_a_final_commit_that_kept_failing_ends_the_run_without_releasing() -> None:
    """What was read but not committed is never released: a successor would start behind it
    and read more than one batch twice. The run ends, and the claim's lease runs out instead."""
    core = reading_core()
    core.request_stop()
    assert core.next(1.0) == Stop(True, "the run ends (stopped)")
    core.stopped("failed")
    for now in (1.1, 5.0, 30.0):
        assert core.next(now) == Exit("commit-failed")
    assert core.written is not None and core.written.state == "reading"  # no release was decided


def test_a_consumer_the_plan_leaves_idle_claims_so_and_waits_or_ends() -> None:
    """Its claim says "idle"; it waits a renewal, or a predecessor's lease if that one still
    held partitions, or ends at once when it only reads until drained."""
    core = Handover("A", "A1", lease=10, margin=1)
    core.saw_plan(1, frozenset())
    assert core.next(0.0) == Write(1, frozenset(), "idle")
    claim = ClaimRecord("A", "A1", 1, 1, frozenset(), 10.0, "idle")
    core.wrote(claim, sent_at=0.0)
    core.saw_claims({"A": claim}, read_at=0.0)
    assert core.next(0.5) == Wait(0.5 + core.renew_every, "idle")
    drained = Handover("A", "A1", lease=10, margin=1, until_drained=True)
    drained.saw_plan(1, frozenset())
    drained.wrote(claim, sent_at=0.0)
    drained.saw_claims({"A": claim}, read_at=0.0)
    assert drained.next(0.5) == Exit("idle")
    restarted = Handover("A", "A2", lease=10, margin=1)
    restarted.took_over(ClaimRecord("A", "A1", 4, 1, frozenset({P}), 10.0, "reading"), 2.0)
    restarted.saw_plan(1, frozenset())
    assert restarted.next(2.0) == Write(1, frozenset({P}), "idle")  # it holds what its predecessor read
    mine = ClaimRecord("A", "A2", 5, 1, frozenset({P}), 10.0, "idle")
    restarted.wrote(mine, sent_at=2.0)
    restarted.saw_claims({"A": mine}, read_at=2.0)
    assert restarted.next(2.5) == Wait(12.0, "idle; the predecessor's lease runs")


def test_a_reader_catches_up_only_with_a_newer_claim_on_its_own_partitions() -> None:
    """Another consumer's claim under a newer generation on what we read means a plan we have
    not seen: read it. One on other partitions, or a claim that cannot be read, does not."""
    core = reading_core()
    mine = core.written
    assert mine is not None
    other = ClaimRecord("B", "B1", 2, 2, frozenset({("t", 1)}), 10.0, "waiting")
    core.saw_claims({"A": mine, "B": other, "C": "claims/C/000001.json: not JSON"}, read_at=1.0)
    assert isinstance(core.next(1.0), Wait)
    ours = ClaimRecord("B", "B1", 3, 2, frozenset({P}), 10.0, "waiting")
    core.saw_claims({"A": mine, "B": ours, "C": "claims/C/000001.json: not JSON"}, read_at=1.1)
    action = core.next(1.1)
    assert isinstance(action, ReadPlan) and action.newer_than == 1


def test_a_reopen_for_a_final_commit_still_heeds_a_fence_of_the_claim_it_read_under() -> None:
    """A final commit waits for a new producer; the claim was renewed meanwhile. A successor's
    note against the claim the query read under still drops the commit: the new producer's
    epoch must not carry what was read under a fenced claim."""
    core = reading_core()
    core.saw_plan(2, frozenset())
    assert core.next(1.0) == Stop(True, "generation 2 moves partitions")
    core.stopped("held")
    assert core.next(1.5) == OpenCommits(("A1", 1))
    renewed = ClaimRecord("A", "A1", 2, 1, frozenset({P}), 10.0, "stopping")
    core.wrote(renewed, sent_at=1.6)
    core.commits_opened(("A1", 2), 1.7)
    fence = ClaimRecord("B", "B1", 5, 2, frozenset({P}), 10.0, "waiting", {"A": ("A1", 1)})
    core.saw_claims({"A": renewed, "B": fence}, read_at=1.8)
    action = core.next(1.9)
    assert isinstance(action, Stop) and not action.commit and "dropped" in action.reason


def test_a_reader_renews_its_claim_as_reading_when_due_and_keeps_reading_a_new_generation_that_moves_nothing() -> None:
    core = reading_core(state="waiting")  # started on a claim written while it waited
    assert core.next(0.1) == Write(1, frozenset({P}), "reading")  # others see it reads now
    reading = ClaimRecord("A", "A1", 2, 1, frozenset({P}), 10.0, "reading")
    core.wrote(reading, sent_at=0.2)
    core.saw_claims({"A": reading}, read_at=0.2)
    renew_at = 0.2 + core.renew_every
    assert core.next(0.3) == Wait(min(renew_at, core.deadline()), "reading")
    assert core.next(renew_at) == Write(1, frozenset({P}), "reading")  # due exactly then
    same = ClaimRecord("B", "B1", 4, 1, frozenset({P}), 10.0, "released")  # an older holder's last word
    core.saw_claims({"A": reading, "B": same}, read_at=0.4)
    assert isinstance(core.next(0.5), Wait)  # not a newer plan: nothing to catch up with
    newer = ClaimRecord("B", "B1", 5, 2, frozenset({P}), 10.0, "waiting")
    core.saw_claims({"A": reading, "B": newer}, read_at=0.6)
    assert core.next(0.7) == ReadPlan(1, renew_at)
    core.saw_plan(2, frozenset({P}))  # the new plan leaves P with A: no stop, a new claim
    assert core.next(0.8) == Write(2, frozenset({P}), "reading")


def test_a_waiting_claim_is_renewed_when_due_and_claimed_anew_once_a_fence_names_it() -> None:
    core = Handover("A", "A1", lease=10, margin=1)
    core.saw_plan(1, frozenset({P}))
    assert core.next(0.0) == Write(1, frozenset({P}), "waiting")
    claim = ClaimRecord("A", "A1", 1, 1, frozenset({P}), 10.0, "waiting")
    core.wrote(claim, sent_at=0.0)
    holder = ClaimRecord("B", "B1", 3, 1, frozenset({P}), 10.0, "reading")
    core.saw_claims({"A": claim, "B": holder}, read_at=0.1)
    assert isinstance(core.next(0.2), Wait)  # B's lease runs
    due = core.deadline() - core.renew_every
    assert core.next(due) == Write(1, frozenset({P}), "waiting")  # renewed exactly when due
    fenced = Handover("A", "A1", lease=10, margin=1)
    fenced.saw_plan(1, frozenset({P}))
    fenced.wrote(claim, sent_at=0.0)
    note = ClaimRecord("F", "F1", 3, 0, frozenset(), 3600.0, "fencing A", {"A": ("A1", 1)})
    fenced.saw_claims({"A": claim, "F": note}, read_at=0.1)
    assert fenced.next(0.2) == Write(1, frozenset({P}), "waiting")  # its claim was fenced: claim anew
    fenced.write_failed(fenced=False, now=0.3)
    assert fenced.next(0.4) == Wait(fenced.retry_at, "retrying a failed claim write")


def waiting_core(lease: float = 10, **options: Any) -> tuple[Handover, ClaimRecord]:
    """A waits for t-0 under generation 1, its claim sent at 0."""
    core = Handover("A", "A1", lease=lease, margin=lease / 10, handover_timeout=30, **options)
    core.saw_plan(1, frozenset({P}))
    claim = ClaimRecord("A", "A1", 1, 1, frozenset({P}), float(lease), "waiting")
    core.wrote(claim, sent_at=0.0)
    return core, claim


def test_a_waiting_pipeline_names_every_blocker_and_waits_for_the_first_lease_to_run_out() -> None:
    """Blockers in holder order: an unreadable claim (for ever), each claim on our partitions
    with its state and lease by our clock; claims on other partitions are none."""
    core, mine = waiting_core()
    q = ("t", 1)
    view: dict[str, ClaimRecord | str] = {
        "A": mine,
        "B": "claims/B/000002.json: not JSON",
        "C": ClaimRecord("C", "C1", 2, 1, frozenset({q}), 10.0, "reading"),
        "D": ClaimRecord("D", "D1", 3, 1, frozenset({P}), 10.0, "reading"),
        "E": ClaimRecord("E", "E1", 4, 1, frozenset({P, q}), 8.0, ""),
    }
    core.saw_claims(view, read_at=0.1)
    renew_at = core.deadline() - core.renew_every
    assert core.next(0.2) == Wait(
        renew_at,
        "waiting for earlier owners",
        (
            Blocker("B", None, frozenset({P}), None, "claims/B/000002.json: not JSON"),
            Blocker("D", 1, frozenset({P}), 10.1, "reading, lease until +9.9s"),
            Blocker("E", 1, frozenset({P}), 8.1, "claimed, lease until +7.9s"),
        ),
    )
    short, mine = waiting_core(lease=100)
    short.saw_claims({"A": mine, "E": ClaimRecord("E", "E1", 4, 1, frozenset({P}), 3.0, "")}, read_at=0.5)
    assert short.next(3.0) == Wait(
        3.5, "waiting for earlier owners", (Blocker("E", 1, frozenset({P}), 3.5, "claimed, lease until +0.5s"),)
    )
    assert short.next(3.5) == ReadClaims()  # its lease ran out just now: a read from now proves it


def test_a_newer_claim_on_our_partitions_or_our_own_predecessor_keeps_a_waiting_pipeline_from_starting() -> None:
    stale, mine = waiting_core()
    stale.saw_claims({"A": mine, "D": ClaimRecord("D", "D1", 5, 2, frozenset({P}), 10.0, "waiting")}, read_at=0.1)
    assert stale.next(0.2) == ReadPlan(1, stale.deadline() - stale.renew_every)  # we are stale: never proceed
    restarted = Handover("A", "A2", lease=10, margin=1, handover_timeout=30)
    restarted.took_over(ClaimRecord("A", "A1", 7, 1, frozenset({P}), 10.0, "reading"), 1.0)
    restarted.saw_plan(1, frozenset({P, ("t", 1)}))  # the predecessor read only t-0 of them
    claim = ClaimRecord("A", "A2", 8, 1, frozenset({P, ("t", 1)}), 10.0, "waiting")
    restarted.wrote(claim, sent_at=1.0)
    restarted.saw_claims({"A": claim}, read_at=1.1)
    assert restarted.next(1.2) == Wait(
        restarted.deadline() - restarted.renew_every,
        "waiting for earlier owners",
        (Blocker("A (previous incarnation)", 1, frozenset({P}), 11.0, "its lease runs"),),
    )


@pytest.mark.parametrize(("authority", "who"), [(None, "fencing it kept failing"), ("fencer", "the fencer did not fence it")])
def test_a_fence_that_never_succeeds_ends_the_wait_at_the_handover_timeout(authority: str | None, who: str) -> None:
    core, mine = waiting_core(lease=100, fence_authority=authority)
    b = ClaimRecord("B", "B1", 3, 1, frozenset({P}), 10.0, "reading")
    core.saw_claims({"A": mine, "B": b}, read_at=0.5)
    core.saw_claims({"A": mine, "B": b}, read_at=10.5)  # a whole lease later: B is gone
    assert core.next(10.5) == Write(1, frozenset({P}), "waiting", (("B", ("B1", 3)),))  # the note first
    noted = ClaimRecord("A", "A1", 2, 1, frozenset({P}), 100.0, "waiting", {"B": ("B1", 3)})
    core.wrote(noted, sent_at=11.0)
    core.saw_claims({"A": noted, "B": b}, read_at=11.0)
    assert core.next(11.5) == Fence("B", ("B1", 3))
    assert core.next(40.0) == Fence("B", ("B1", 3))  # the fence has not succeeded: try again
    assert core.next(40.5) == Write(1, frozenset(), "released", (("B", ("B1", 3)),))  # 30 s after the wait began
    core.wrote(ClaimRecord("A", "A1", 3, 1, frozenset(), 100.0, "released"), sent_at=40.6)
    assert core.next(40.7) == Exit("handover-timeout", (Blocker("B", 1, frozenset({P}), 10.5, f"its lease ran out; {who}"),))


def test_a_wait_for_a_live_holder_ends_at_the_handover_timeout_counted_from_when_it_began() -> None:
    core, mine = waiting_core(lease=100)
    b = ClaimRecord("B", "B1", 3, 1, frozenset({P}), 100.0, "reading")
    core.saw_claims({"A": mine, "B": b}, read_at=19.5)
    blocker = (Blocker("B", 1, frozenset({P}), 119.5, "reading, lease until +99.5s"),)
    assert core.next(20.0) == Wait(50.0, "waiting for earlier owners", blocker)  # the timeout comes first
    assert isinstance(core.next(21.0), Wait)  # a second later: still waiting
    assert core.next(49.5) == Wait(
        50.0, "waiting for earlier owners", (Blocker("B", 1, frozenset({P}), 119.5, "reading, lease until +70.0s"),)
    )
    assert core.next(50.0) == Write(1, frozenset(), "released")  # 30 s: give up, release, then end


def test_once_nothing_blocks_the_wait_starts_afresh() -> None:
    core, mine = waiting_core(lease=100)
    b = ClaimRecord("B", "B1", 3, 1, frozenset({P}), 100.0, "reading")
    core.saw_claims({"A": mine, "B": b}, read_at=0.5)
    assert isinstance(core.next(1.0), Wait) and core.waiting_since == 1.0
    core.saw_claims({"A": mine}, read_at=2.0)  # B released
    assert core.next(2.5) == OpenCommits(("A1", 1)) and core.waiting_since is None
    core.saw_claims({"A": mine, "B": b}, read_at=3.0)  # the same claim again: its lease counts from when first seen
    assert core.next(3.5) == Wait(
        33.5, "waiting for earlier owners", (Blocker("B", 1, frozenset({P}), 100.5, "reading, lease until +97.0s"),)
    )


def test_a_reader_stops_at_its_deadline_or_when_a_newer_incarnation_or_the_fencer_replaced_it() -> None:
    core = reading_core()
    assert not isinstance(core.next(8.9), Stop)
    assert core.next(9.0) == Stop(False, "the lease lapsed (no claim written for too long)")  # exactly at the deadline
    core = reading_core()
    mine = core.written
    assert mine is not None
    newer = ClaimRecord("A", "A2", 9, 1, frozenset({P}), 10.0, "waiting")  # a restart of A took the id
    core.saw_claims({"A": newer}, read_at=1.0)
    assert core.next(1.0) == Stop(False, "a newer incarnation of this consumer took over")
    core.stopped("skipped")
    assert core.next(1.1) == Exit("fenced")
    served = Handover("A", "A1", lease=10, margin=1, fence_authority=FENCER)
    served.saw_plan(1, frozenset({P}))
    served.wrote(mine, sent_at=0.0)
    served.commits_opened(("A1", 1), 0.0)
    served.saw_claims({"A": mine}, read_at=0.0)
    served.started(1, frozenset({P}))
    request = ClaimRecord("B", "B1", 4, 1, frozenset(), 10.0, "waiting", {"A": ("A1", 1)})
    note = ClaimRecord(FENCER, "F1", 3, 0, frozenset(), 3600.0, "fencing A", {"A": ("A1", 1)})
    served.saw_claims({"A": mine, "B": request, FENCER: note}, read_at=2.0)  # B's request sorts first
    assert served.fenced_by() == FENCER and isinstance(served.next(2.0), Stop)


def test_a_reader_the_plan_drops_stops_committing_then_leaves_and_one_asked_to_stop_releases() -> None:
    core = reading_core()
    core.saw_plan(2, None)
    assert core.next(1.0) == Stop(True, "generation 2 does not name this consumer")
    core.stopped("ok")
    assert core.next(1.1) == Write(2, frozenset(), "left")
    core.wrote(ClaimRecord("A", "A1", 2, 2, frozenset(), 10.0, "left"), sent_at=1.2)
    assert core.next(1.3) == Exit("left")
    stopping = reading_core()
    stopping.request_stop()
    assert stopping.next(1.0) == Stop(True, "the run ends (stopped)")
    stopping.stopped("ok")
    assert stopping.next(1.1) == Write(1, frozenset(), "released")
    stopping.wrote(ClaimRecord("A", "A1", 2, 1, frozenset(), 10.0, "released"), sent_at=1.2)
    assert stopping.next(1.3) == Exit("stopped")


def test_leases_end_exactly_at_their_deadline() -> None:
    """A predecessor's lease, and our own: a renewal sent at the very deadline revives nothing."""
    restarted = Handover("A", "A2", lease=10, margin=1)
    restarted.took_over(ClaimRecord("A", "A1", 7, 1, frozenset({P}), 10.0, "reading"), 1.0)
    assert restarted.predecessor_holds(10.9) == frozenset({P}) and restarted.predecessor_holds(11.0) == frozenset()
    core = reading_core()
    renewal = ClaimRecord("A", "A1", 2, 1, frozenset({P}), 10.0, "reading")
    core.wrote(renewal, sent_at=core.deadline())
    assert core.next(9.5) == Stop(False, "the lease lapsed (no claim written for too long)")


def test_a_fenced_holder_no_longer_blocks_but_a_live_one_after_it_still_does() -> None:
    core, mine = waiting_core(lease=100)
    b = ClaimRecord("B", "B1", 3, 1, frozenset({P}), 10.0, "reading")
    c = ClaimRecord("C", "C1", 4, 1, frozenset({P}), 100.0, "waiting")
    core.saw_claims({"A": mine, "B": b, "C": c}, read_at=0.5)
    core.saw_claims({"A": mine, "B": b, "C": c}, read_at=10.5)  # B is gone, C is not
    assert core.next(10.5) == Write(1, frozenset({P}), "waiting", (("B", ("B1", 3)),))
    noted = ClaimRecord("A", "A1", 2, 1, frozenset({P}), 100.0, "waiting", {"B": ("B1", 3)})
    core.wrote(noted, sent_at=11.0)
    core.saw_claims({"A": noted, "B": b, "C": c}, read_at=11.0)
    assert core.next(11.0) == Fence("B", ("B1", 3))
    core.fenced_commits("B", ("B1", 3))
    assert core.next(11.5) == Wait(
        40.5, "waiting for earlier owners", (Blocker("C", 1, frozenset({P}), 100.5, "waiting, lease until +89.0s"),)
    )


def test_a_claim_made_anew_after_a_fence_keeps_its_own_fence_notes_and_retries_when_its_pause_ends() -> None:
    core, mine = waiting_core(lease=100)
    b = ClaimRecord("B", "B1", 3, 1, frozenset({P}), 10.0, "reading")
    core.saw_claims({"A": mine, "B": b}, read_at=0.5)
    core.saw_claims({"A": mine, "B": b}, read_at=10.5)
    assert core.next(10.5) == Write(1, frozenset({P}), "waiting", (("B", ("B1", 3)),))
    noted = ClaimRecord("A", "A1", 2, 1, frozenset({P}), 100.0, "waiting", {"B": ("B1", 3)})
    core.wrote(noted, sent_at=11.0)
    c = ClaimRecord("C", "C1", 5, 1, frozenset(), 10.0, "waiting", {"A": ("A1", 2)})  # C saw our lease run out
    core.saw_claims({"A": noted, "B": b, "C": c}, read_at=11.5)
    assert core.next(11.5) == Write(1, frozenset({P}), "waiting", (("B", ("B1", 3)),))  # anew, B's note kept
    core.write_failed(fenced=False, now=12.0)
    assert core.next(core.retry_at - 0.1) == Wait(core.retry_at, "retrying a failed claim write")
    assert core.next(core.retry_at) == Write(1, frozenset({P}), "waiting", (("B", ("B1", 3)),))  # exactly then


def test_a_sink_may_write_only_while_reading_under_a_valid_lease() -> None:
    core = reading_core()
    assert core.lease_valid(8.99) and not core.lease_valid(9.0)
    core.zombie = True
    assert not core.lease_valid(1.0)
    idle = Handover("A", "A1", lease=10, margin=1)
    idle.wrote(ClaimRecord("A", "A1", 1, 1, frozenset(), 10.0, "idle"), sent_at=0.0)
    assert not idle.lease_valid(1.0)  # a claim, but no query


def test_a_blocker_says_who_holds_what_under_which_generation() -> None:
    blocker = Blocker("A", 3, frozenset({("t", 1), P}), 12.0, "reading, lease until +2.0s")
    assert blocker.describe() == "A holds t-0, t-1 under generation 3 (reading, lease until +2.0s)"


def test_a_fence_note_stays_while_the_fenced_pipelines_final_commit_waits() -> None:
    """A fenced pipeline whose final commit waits for a producer renews its claim as
    "stopping" (its clock may say its lease still runs): the successor's note must stay, so
    that the check after that pipeline's reopen finds it and drops the commit."""
    b = Handover("B", "B1", lease=10, margin=1)
    b.saw_plan(2, frozenset({P}))
    held = ClaimRecord("A", "A1", 7, 1, frozenset({P}), 10.0, "reading")
    mine = ClaimRecord("B", "B1", 1, 2, frozenset({P}), 10.0, "waiting")
    b.wrote(mine, sent_at=0.0)
    b.saw_claims({"A": held, "B": mine}, read_at=0.0)
    mine = ClaimRecord("B", "B1", 2, 2, frozenset({P}), 10.0, "waiting")  # B's renewal
    b.wrote(mine, sent_at=6.0)
    b.saw_claims({"A": held, "B": mine}, read_at=10.0)  # a whole lease later: A's lease ran out
    assert b.next(10.0) == Write(2, frozenset({P}), "waiting", (("A", ("A1", 7)),))
    noted = ClaimRecord("B", "B1", 3, 2, frozenset({P}), 10.0, "waiting", {"A": ("A1", 7)})
    b.wrote(noted, sent_at=10.1)
    b.fenced_commits("A", ("A1", 7))
    stopping = ClaimRecord("A", "A1", 8, 1, frozenset({P}), 10.0, "stopping")
    b.saw_claims({"A": stopping, "B": noted}, read_at=10.3)
    assert b._fence_notes() == (("A", ("A1", 7)),)


def test_a_failed_claim_write_is_retried_only_after_the_pause() -> None:
    core = Handover("A", "A1", lease=9, margin=0.5, retry=1.0)
    core.saw_plan(1, frozenset({P}))
    assert core.next(5.0) == Write(1, frozenset({P}), "waiting")
    core.write_failed(fenced=False, now=5.0)
    assert core.next(5.5) == Wait(6.0, "retrying a failed claim write")
    assert core.next(6.0) == Write(1, frozenset({P}), "waiting")


def test_a_final_commit_that_waits_renews_its_claim_as_soon_as_a_renewal_is_due() -> None:
    """Renewals are due a third of a lease after the last write (lease 9: at 3.0), while a
    final commit waits as while reading."""
    core = Handover("A", "A1", lease=9, margin=0.5)
    core.saw_plan(1, frozenset({P}))
    claim = ClaimRecord("A", "A1", 1, 1, frozenset({P}), 9.0, "reading")
    core.wrote(claim, sent_at=0.0)
    core.started(1, frozenset({P}))
    core.saw_plan(2, frozenset())
    assert core.next(1.0) == Stop(True, "generation 2 moves partitions")
    core.stopped("held")
    assert isinstance(core.next(2.99), OpenCommits)
    assert core.next(3.0) == Write(1, frozenset({P}), "stopping")


def test_a_lease_counts_from_when_a_slow_read_returned_not_from_when_it_began() -> None:
    """A read to the end may show a renewal written while it ran: B's read began at 2.0, A
    renewed at 3.4 (its deadline 12.4 by its own clock), the read returned at 3.5 showing it.
    Counted from the read's start, A's lease would be over at 12.0 while A still reads."""
    b = Handover("B", "B1", lease=10, margin=1)
    b.saw_plan(2, frozenset({P}))
    mine = ClaimRecord("B", "B1", 1, 2, frozenset({P}), 10.0, "waiting")
    b.wrote(mine, sent_at=1.0)
    renewed = ClaimRecord("A", "A1", 5, 1, frozenset({P}), 10.0, "reading")
    b.saw_claims({"A": renewed, "B": mine}, read_at=2.0, returned_at=3.5)
    mine = ClaimRecord("B", "B1", 2, 2, frozenset({P}), 10.0, "waiting")
    b.wrote(mine, sent_at=11.9)
    b.saw_claims({"A": renewed, "B": mine}, read_at=12.05)  # a read a lease after the start still shows it
    wait = b.next(12.1)
    assert isinstance(wait, Wait) and [(x.holder, x.expires) for x in wait.blockers] == [("A", 13.5)]
    b.saw_claims({"A": renewed, "B": mine}, read_at=13.5)
    assert b.next(13.6) == Write(2, frozenset({P}), "waiting", (("A", ("A1", 5)),))  # a lease after the return


def test_a_renewal_whose_write_returns_after_the_deadline_extends_nothing() -> None:
    """Sent in time but landed late, a renewal may be newer than a successor's read that
    began before it landed: the lease it was sent under has lapsed, and the reader stops."""
    core = reading_core()  # deadline 9.0
    core.wrote(ClaimRecord("A", "A1", 2, 1, frozenset({P}), 10.0, "reading"), sent_at=3.3, returned_at=9.2)
    action = core.next(9.3)
    assert isinstance(action, Stop) and not action.commit and "lease lapsed" in action.reason
    on_time = reading_core()
    on_time.wrote(ClaimRecord("A", "A1", 2, 1, frozenset({P}), 10.0, "reading"), sent_at=3.3, returned_at=8.9)
    assert on_time.lease_valid(9.3) and on_time.deadline() == 3.3 + 10 - 1


def test_an_older_view_delivered_late_does_not_replace_a_newer_one() -> None:
    """A's post-open read showed B's fence note; a read that began before it arrives late
    without the note: deciding on it would let A's reopened producer commit."""
    a = reading_core()
    a.commits_lost()
    a.commits_opened(("A1", 1), 1.0)
    claim = ClaimRecord("A", "A1", 1, 1, frozenset({P}), 10.0, "reading")
    noted = ClaimRecord("B", "B1", 4, 2, frozenset({P}), 10.0, "waiting", {"A": ("A1", 1)})
    a.saw_claims({"A": claim, "B": noted}, read_at=1.5)
    a.saw_claims({"A": claim}, read_at=0.5, returned_at=1.6)  # began before the newer one
    assert a.fenced_by() == "B"
    action = a.next(1.7)
    assert isinstance(action, Stop) and not action.commit and "B fenced" in action.reason


def test_a_restarted_successor_carries_its_predecessors_fence_notes_into_its_first_claim() -> None:
    """B1 noted a fence of A and crashed; B2's first claim, written before it read anything,
    keeps the note: without it, A could reopen its producer, undo the fence and commit."""
    predecessor = ClaimRecord("B", "B1", 9, 2, frozenset({P}), 10.0, "reading", {"A": ("A1", 3)})
    b2 = Handover("B", "B2", lease=10, margin=1)
    b2.took_over(predecessor, 0.0)
    b2.saw_plan(2, frozenset({P}))
    assert b2.next(0.1) == Write(2, frozenset({P}), "waiting", (("A", ("A1", 3)),))
    b2.wrote(ClaimRecord("B", "B2", 1, 2, frozenset({P}), 10.0, "waiting", {"A": ("A1", 3)}), sent_at=0.1)
    gone = ClaimRecord("A", "A1", 4, 2, frozenset(), 10.0, "released")  # A stopped reading: the note may go
    b2.saw_claims({"A": gone}, read_at=0.2)
    assert b2.next(20.0) == Write(2, frozenset({P}), "waiting", ())


def test_a_successor_restarted_after_it_fenced_keeps_a_slow_clocked_holder_stopped() -> None:
    """The model's schedule: A's commit fails (its producer closed), A pauses; B fences A and
    commits further, then crashes, and B2 takes the id over. A's clock runs slow, so by it
    its lease still runs when it resumes: only the fence note, which B2 must carry on, stops
    A's reopened producer from moving the group's offset back."""
    model, procs = world({P: "A"}, "A", "B")
    model.exclusive = False  # A's clock is wrong: I1 and I7 rest on the clocks, I3 does not
    a, b = procs["A"], procs["B"]
    a.rate = 0.3
    settle(model, a), settle(model, b)
    assert batch(model, a) == "ok"
    assert batch(model, a, fate="fail") == "failed" and a.fc.lost
    a.paused = True
    publish(model, {P: "B"})
    settle(model, b)
    model.world.now += LEASE + 0.1
    settle(model, b)
    assert P in reading(b) and model.own(a) < a.core.deadline()  # by A's clock, its lease runs
    model.world.end[P] += 6
    assert batch(model, b, records=6) == "ok"
    b_commit = model.world.committed[P]
    b.alive, b.query = False, None  # B crashes; B2 takes the id over
    b2 = model.spawn("B", copy_predecessor=False)
    settle(model, b2)
    model.world.end[P] += 3
    a.paused = False
    a.reports.append((a.query.qid, _ends(a.query.stint.pos)))  # type: ignore[union-attr]
    model.deliver(a)
    model.observe(a)  # its loop learns the producer is gone: reopen it through the check
    settle(model, a, see=False)
    assert P not in reading(a) and model.world.committed[P] == b_commit
    check(model)
