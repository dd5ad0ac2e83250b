"""The handover protocol's hard cases, each played step by step in the model world of
``test_handover_model`` (which hypothesis explores at random): a pause across generations
shorter and longer than the lease, a pause before the first claim, a restart while the old
incarnation is only paused, skipped generations, a crash and restart."""

from __future__ import annotations

from spark_lag_assign.consume.protocol import Blocker, Exit, Handover, ReadClaims, ReadPlan, Start, Stop, Wait, Write
from spark_lag_assign.store.base import ClaimRecord
from tests.unit.test_handover_model import CONSUMERS, LEASE, PARTITIONS, HandoverModel, Proc, _Fixed

P = ("t", 0)


def world(owners: dict[tuple[str, int], str], *consumers: str) -> tuple[HandoverModel, dict[str, Proc]]:
    model = HandoverModel()
    publish(model, owners)
    procs = {c: model.spawn(c, copy_predecessor=False) for c in consumers}
    return model, procs


def publish(model: HandoverModel, owners: dict[tuple[str, int], str]) -> int:
    full = {tp: owners.get(tp, "A") for tp in PARTITIONS}
    model.world.plans.append(full)
    model.world._members.append(set(CONSUMERS))  # every pipeline stays in the group (some idle)
    return len(model.world.plans)


def settle(model: HandoverModel, proc: Proc, *, see: bool = True) -> object:
    """Let one pipeline see the newest plan and claims, then act until it has to wait."""
    w = model.world
    if see:
        g = len(w.plans)
        proc.core.saw_plan(g, w.assignment(g, proc.consumer))
        proc.seen_upto = len(w.log)
        proc.core.saw_claims(w.view(proc.seen_upto), w.now)
    action: object = None
    for _ in range(30):
        action = proc.core.next(w.now)
        if isinstance(action, Wait) or proc.exited:
            return action
        model.perform(proc, _Fixed())
    raise AssertionError(f"{proc.incarnation} never waits: {action}")


def batch(model: HandoverModel, proc: Proc, records: int = 2) -> str:
    """One micro-batch of ``proc``: reads, sinks, commits; returns the commit's outcome."""
    w, q = model.world, proc.query
    assert q is not None
    for tp in sorted(q.holds):
        upto = min(w.end[tp], q.positions[tp] + records)
        w.sinked[tp].update(range(q.positions[tp], upto))
        q.positions[tp] = upto
    result = model.commit(proc)
    if result == "refused":
        proc.core.refused_commit()
    return result


def reading(proc: Proc) -> frozenset[tuple[str, int]]:
    return proc.query.holds if proc.query is not None else frozenset()


def check(model: HandoverModel) -> None:
    model.one_live_reader_per_partition()
    model.nothing_lost()
    model.nothing_violated()


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
    check(model)


def test_a_pause_longer_than_the_lease_lets_another_take_over_and_refuses_the_late_batch() -> None:
    model, procs = world({P: "A"}, "A", "B")
    a, b = procs["A"], procs["B"]
    settle(model, a), settle(model, b)
    batch(model, a)
    a.paused = True
    publish(model, {P: "B"})
    settle(model, b)
    assert P not in reading(b)  # A's lease is still valid
    model.world.now += LEASE + 0.1  # A stays paused past its lease
    action = settle(model, b)
    assert P in reading(b), action
    assert model.world.commit_epoch["A"] == a.query.token + 1  # type: ignore[union-attr]  # B fenced A's commits before it started
    model.world.end[P] += 6
    assert batch(model, b) == "ok"
    b_commit = model.world.committed[P]
    publish(model, {P: "A"})  # and back to A, while A is still paused
    a.paused = False
    assert batch(model, a) == "refused"  # the one batch A completes after it resumes
    assert model.world.committed[P] == b_commit  # ... is never committed
    # A notices at once: its lease lapsed, so it stops without committing and starts over
    assert isinstance(a.core.next(model.world.now), Stop)
    settle(model, a, see=False)
    assert P not in reading(a)
    settle(model, b)  # B sees generation 3, commits and releases t-0
    assert P not in reading(b)
    model.world.now += 1
    settle(model, a)
    assert P in reading(a) and a.query is not None and a.query.positions[P] == model.world.committed[P]
    check(model)


def test_a_pipeline_paused_before_its_first_claim_never_reads_a_partition_moved_away() -> None:
    model, procs = world({P: "C"}, "D")
    c = model.spawn("C", copy_predecessor=False)  # C has read generation 1 (t-0 is C's) ...
    c.paused = True  # ... and is paused before it writes any claim
    publish(model, {P: "D"})
    settle(model, procs["D"])
    assert P in reading(procs["D"])  # nobody claims t-0: D reads it
    c.paused = False
    c.core.saw_claims(model.world.view(len(model.world.log)), model.world.now)
    # C acts on generation 1: it claims t-0, then sees D's newer claim and never starts
    for _ in range(5):
        action = c.core.next(model.world.now)
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
    assert new.query is not None and new.query.positions[P] >= committed
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


def test_an_unreadable_claim_blocks_and_a_long_wait_ends_with_a_report() -> None:
    core = Handover("B", "B1", lease=10, handover_timeout=30)
    core.saw_plan(2, frozenset({P}))
    assert core.next(0.0) == Write(2, frozenset({P}), "waiting")
    core.wrote(ClaimRecord("B", "B1", 1, 2, frozenset({P}), 10.0, "waiting"), sent_at=0.0)
    assert core.next(0.0) == ReadClaims()
    mine = ClaimRecord("B", "B1", 1, 2, frozenset({P}), 10.0, "waiting")
    core.saw_claims({"B": mine, "A": "claims/A/000003.json: not JSON"}, read_at=0.0)
    wait = core.next(1.0)
    assert isinstance(wait, Wait) and wait.blockers == (Blocker("A", None, frozenset({P}), None, "claims/A/000003.json: not JSON"),)
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
    assert core.next(0.1) == Start(1, frozenset({P}))
    assert isinstance(core.next(6.0), Write)  # too close to its deadline (8.5): renew first
