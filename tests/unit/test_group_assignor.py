"""The kafka-python assignors of ``spark_lag_assign.group``, driven without a broker.

``SimulatedGroup`` passes every subscription and assignment through kafka-python's own
encoders, so these tests see what a real leader sees; the planner's pure ``assign`` is the
reference for every plan (the plugin must add nothing of its own).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

import spark_lag_assign as sla
from spark_lag_assign.core.quality import quality
from spark_lag_assign.group import (
    CooperativeLagStickyAssignor,
    CooperativeStickyAssignor,
    GroupLagMonitor,
    LagAssignor,
    LagSnapshot,
    LagStickyAssignor,
    RangeAssignor,
    StaticLags,
    StickyAssignor,
    assignor_class,
    decode_user_data,
    encode_user_data,
)
from spark_lag_assign.group.assignor import planner_ids
from spark_lag_assign.group.simulate import Round, SimulatedGroup

LOGGER = "spark_lag_assign.group.assignor"


def lag_table(sizes: dict[str, list[int]]) -> pd.DataFrame:
    return pd.DataFrame(
        [(t, p, lag) for t, lags in sizes.items() for p, lag in enumerate(lags)], columns=["topic", "partition", "lag"]
    )


def plan_of(owned: dict[str, frozenset[tuple[str, int]]], lags: pd.DataFrame) -> pd.DataFrame:
    rows = pd.DataFrame([(c, t, p) for c, tps in owned.items() for t, p in tps], columns=["consumer", "topic", "partition"])
    return rows.merge(lags, on=["topic", "partition"]).sort_values(["consumer", "topic", "partition"]).reset_index(drop=True)


def group_of(cls: type, sizes: dict[str, list[int]], names: list[str], **kw: object) -> tuple[SimulatedGroup, StaticLags]:
    lags = StaticLags(lag_table(sizes))
    group = SimulatedGroup({t: len(v) for t, v in sizes.items()})
    for name in names:
        group.join(name, cls(lags, **kw), list(sizes), instance_id=name)
    return group, lags


# -- the seeds' rule, exactly ------------------------------------------------------------------


def test_seed_000_example_through_the_group_protocol() -> None:
    group, _ = group_of(LagAssignor, {"t0": [100_000, 50_000, 60_000]}, ["C0", "C1"])
    got = group.rebalance().assignment
    assert got == {"C0": {("t0", 0)}, "C1": {("t0", 1), ("t0", 2)}}


@pytest.mark.parametrize("strategy", ["lag", "lag-sticky", "sticky", "range", "roundrobin", "shuffle"])
@pytest.mark.parametrize("seed", range(4))
def test_every_plan_is_the_pure_functions_plan(strategy: str, seed: int) -> None:
    """No second implementation: the leader's plan is ``sla.assign`` of the same input,
    including the previous plan the members reported."""
    rng = np.random.default_rng(seed)
    sizes = {f"t{i}": rng.integers(0, 10_000, size=int(rng.integers(1, 9))).tolist() for i in range(int(rng.integers(1, 4)))}
    names = [f"c{i}" for i in range(int(rng.integers(1, 5)))]
    subs = {n: sorted(rng.choice(list(sizes), size=int(rng.integers(1, len(sizes) + 1)), replace=False).tolist()) for n in names}
    cls = assignor_class(strategy)
    lags = StaticLags(lag_table(sizes))
    group = SimulatedGroup({t: len(v) for t, v in sizes.items()})
    for n in names:
        group.join(n, cls(lags), subs[n], instance_id=n)
    previous = None
    for step in range(3):
        if step == 2:
            group.join("late", cls(lags), list(sizes), instance_id="late")
        keys = {n: n for n in group.members}  # conforming ids in the order of the keys (all "0:<name>")
        want = sla.assign(lag_table(sizes), {keys[n]: m.topics for n, m in group.members.items()}, strategy, previous)
        got = group.rebalance().assignment
        assert (
            plan_of({keys[n]: got[n] for n in got}, lag_table(sizes))
            .drop(columns="lag")
            .equals(want.drop(columns="lag").reset_index(drop=True))
        )
        previous = want


# -- lags: a snapshot as it stands, or count balance -------------------------------------------


def test_lag_sticky_balances_lag_and_count() -> None:
    sizes = {"t": [1200, 1100, 1000, 900, 800, 700, 600, 500, 400, 300, 200, 100]}
    group, _ = group_of(LagStickyAssignor, sizes, ["a", "b", "c"])
    got = group.rebalance().assignment
    q = quality(plan_of(got, lag_table(sizes)), {n: ["t"] for n in got})
    assert q.optimality <= 1.05 and q.count_spread <= 1


def test_without_a_snapshot_it_balances_by_count_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    group = SimulatedGroup({"t": 6})
    for n in ["a", "b", "c"]:
        group.join(n, LagStickyAssignor(), ["t"])  # the class form: no lag source
    with caplog.at_level(logging.INFO, LOGGER):
        got = group.rebalance().assignment
    assert sorted(len(v) for v in got.values()) == [2, 2, 2]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "balancing by partition count" in warnings[0].getMessage()
    leader = group.members["a"].assignor
    assert leader.last is not None and not leader.last.lagged


def test_a_stale_snapshot_is_not_used(caplog: pytest.LogCaptureFixture) -> None:
    stale = StaticLags(lag_table({"t": [1000, 0, 0, 0]}), taken=time.monotonic() - 3600)
    group = SimulatedGroup({"t": 4})
    for n in ["a", "b"]:
        group.join(n, LagAssignor(stale, max_age_s=60), ["t"])
    with caplog.at_level(logging.WARNING, LOGGER):
        group.rebalance()
    assert "3600 s old" in caplog.text
    assert group.members["a"].assignor.last.lagged is False


def test_partitions_missing_from_the_snapshot_count_as_zero() -> None:
    group = SimulatedGroup({"t": 4, "new": 2})
    lags = StaticLags(lag_table({"t": [10, 20, 30, 40]}))
    group.join("a", LagAssignor(lags), ["t", "new"])
    group.rebalance()
    assert "2 partition(s) not in it" in group.members["a"].assignor.last.lag_source


class BlockedReader:
    """An offsets reader stuck in I/O until released."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.returned = threading.Event()

    def __call__(self, topics: object) -> pd.DataFrame:
        self.entered.set()
        self.release.wait(10)
        self.returned.set()
        raise TimeoutError("released")


def test_assign_never_waits_for_a_lag_read_in_progress() -> None:
    reader = BlockedReader()
    monitor = GroupLagMonitor(None, "g", topics=["t"], reader=reader)
    try:
        assert reader.entered.wait(5)
        group = SimulatedGroup({"t": 8})
        for n in ["a", "b"]:
            group.join(n, LagStickyAssignor(monitor), ["t"])
        got = group.rebalance().assignment
        # the read is still stuck in I/O: a rebalance that waited for it would have returned
        # only after the reader gave up (and set ``returned``)
        assert not reader.returned.is_set()
        assert sorted(len(v) for v in got.values()) == [4, 4]
    finally:
        reader.release.set()
        monitor.close()


def test_the_monitor_computes_lags_with_the_reset_rule_and_learns_topics() -> None:
    seen: list[list[str]] = []

    def reader(topics: list[str]) -> pd.DataFrame:
        seen.append(list(topics))
        rows = [(t, 0, 5, 105, None) for t in topics] + [(t, 1, 0, 50, 20) for t in topics]
        frame = pd.DataFrame(rows, columns=["topic", "partition", "beginning_offset", "end_offset", "committed_offset"])
        frame["committed_offset"] = frame["committed_offset"].astype("Int64")
        return frame

    with GroupLagMonitor(None, "g", reset="earliest", interval_s=60, reader=reader) as monitor:
        assert monitor.snapshot() is None
        LagAssignor(monitor).metadata({"b", "a"})  # a member's join tells the monitor its topics
        assert monitor.wait_ready(5)
        snap = monitor.snapshot()
        assert snap is not None
        assert snap.lags.values.tolist() == [["a", 0, 100], ["a", 1, 30], ["b", 0, 100], ["b", 1, 30]]
    assert seen[0] == ["a", "b"]


def test_a_failing_monitor_logs_once_and_keeps_trying(caplog: pytest.LogCaptureFixture) -> None:
    calls = []

    def reader(topics: object) -> pd.DataFrame:
        calls.append(1)
        raise ConnectionError("broker down")

    with (
        caplog.at_level(logging.WARNING, "spark_lag_assign.group.lagsource"),
        GroupLagMonitor(None, "g", topics=["t"], interval_s=0.02, reader=reader) as monitor,
    ):
        deadline = time.monotonic() + 5
        while len(calls) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert monitor.snapshot() is None
    assert len(calls) >= 4
    assert len([r for r in caplog.records if "cannot read lags" in r.getMessage()]) == 1


# -- never fail the rebalance ------------------------------------------------------------------


def test_a_failing_strategy_falls_back_to_roundrobin(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import spark_lag_assign.group.assignor as module

    real = module.plan_assign

    def broken(lags: pd.DataFrame, subs: object, strategy: str = "lag-sticky", *a: object, **k: object) -> pd.DataFrame:
        if strategy != "roundrobin":
            raise RuntimeError("boom")
        return real(lags, subs, strategy, *a, **k)

    monkeypatch.setattr(module, "plan_assign", broken)
    group, _ = group_of(LagStickyAssignor, {"t": [5, 4, 3, 2]}, ["a", "b"])
    with caplog.at_level(logging.ERROR, LOGGER):
        got = group.rebalance().assignment
    assert got == {"a": {("t", 0), ("t", 2)}, "b": {("t", 1), ("t", 3)}}
    assert group.members["a"].assignor.last.fallback == "RuntimeError: boom"


def test_when_even_the_fallback_fails_everyone_gets_nothing_rather_than_a_stuck_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import spark_lag_assign.group.assignor as module

    monkeypatch.setattr(module, "plan_assign", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    group, _ = group_of(LagStickyAssignor, {"t": [5, 4]}, ["a", "b"])
    assert group.rebalance().assignment == {"a": frozenset(), "b": frozenset()}


@pytest.mark.parametrize(
    "garbage",
    [b"\x00\x07" + b"\x00" * 8, b"\x00\x01\x00", encode_user_data([("t", 0)], 3) + b"junk"],
    ids=["unknown-version", "truncated", "trailing"],
)
def test_a_member_with_bad_user_data_owns_nothing_and_the_rest_stay(garbage: bytes, caplog: pytest.LogCaptureFixture) -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    group, _ = group_of(StickyAssignor, {"t": [1] * 6}, ["a", "b", "c"])
    before = group.rebalance().assignment
    with caplog.at_level(logging.WARNING, LOGGER):
        after = group.rebalance(mangle={"b": ConsumerProtocolSubscription(version=0, topics=["t"], user_data=garbage)})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "owns nothing" in warnings[0] and "b-" in warnings[0]
    # a and c keep theirs; b's two partitions are free, and b (empty) takes them back by count
    assert after.assignment["a"] == before["a"] and after.assignment["c"] == before["c"]
    assert group.members["a"].assignor.last.bad_members == (group.members["b"].member_id,)


# -- stickiness survives a leader change -------------------------------------------------------


@pytest.mark.parametrize("cls", [StickyAssignor, LagStickyAssignor, CooperativeStickyAssignor])
def test_a_new_leader_keeps_the_plan(cls: type) -> None:
    sizes = {"t0": [50, 40, 30, 20, 10, 5], "t1": [7, 6, 5]}
    group, lags = group_of(cls, sizes, ["a", "b", "c"])
    group.settle(leader="a")
    before = group.owned()
    group.leave("a")  # the leader leaves; c, which never led, leads now
    group.join("d", cls(lags), list(sizes), instance_id="d")
    group.settle(leader="c")
    after = group.owned()
    kept = sum(len(before[n] & after[n]) for n in ("b", "c"))
    moved = sum(len(before[n] - after[n]) for n in ("b", "c"))
    assert kept > 0 and moved <= 1, (before, after)  # a's 3 partitions go to d; at most one more moves for balance
    assert set().union(*after.values()) == {(t, p) for t, v in sizes.items() for p in range(len(v))}


def test_a_restarted_member_with_a_stale_claim_loses_to_the_current_owner() -> None:
    group, lags = group_of(StickyAssignor, {"t": [1] * 4}, ["a", "b"])
    group.rebalance()
    stale = group.members["a"].assignor.metadata({"t"})  # a's report from generation 1
    group.rebalance()
    group.leave("a")
    group.rebalance()  # generation 3: b holds all four
    group.join("a", StickyAssignor(lags), ["t"], instance_id="a")
    rnd = group.rebalance(mangle={"a": stale})
    assert len(rnd.assignment["a"]) == len(rnd.assignment["b"]) == 2


# -- cooperative: revoke, then assign ----------------------------------------------------------


@pytest.mark.parametrize(
    "cls", [CooperativeLagStickyAssignor, CooperativeStickyAssignor, assignor_class("lag", cooperative=True)]
)
def test_cooperative_never_hands_over_a_held_partition(cls: type) -> None:
    sizes = {"t0": [900, 800, 700, 100, 50, 20, 10, 5], "t1": [300, 200, 100, 1]}
    group, lags = group_of(cls, sizes, ["a", "b"])
    every = {(t, p) for t, v in sizes.items() for p in range(len(v))}
    events = [("join", "c"), ("join", "d"), ("leave", "a"), ("join", "e"), ("leave", "c")]
    for n, (kind, name) in enumerate(events):
        rounds = group.settle()
        assert all(not r.handed_over_while_held for r in rounds), n
        assert len(rounds) <= 2, n  # moves complete in the second round
        assert set().union(*group.owned().values()) == every
        if kind == "join":
            group.join(name, cls(lags), list(sizes), instance_id=name)
        else:
            group.leave(name)


def test_cooperative_second_round_completes_the_first_rounds_target_even_if_lags_change() -> None:
    sizes = {"t": [100, 90, 80, 70, 60, 50]}
    table = lag_table(sizes)

    class Flipping(StaticLags):
        """A snapshot that changes completely between the two rounds."""

        def __init__(self) -> None:
            super().__init__(table)
            self.calls = 0

        def snapshot(self):  # type: ignore[no-untyped-def]
            self.calls += 1
            if self.calls > 1:
                return StaticLags(table.assign(lag=table["lag"].to_numpy()[::-1].copy())).snapshot()
            return super().snapshot()

    group = SimulatedGroup({"t": 6})
    flipping = Flipping()
    group.join("a", CooperativeLagStickyAssignor(flipping), ["t"], instance_id="a")
    group.settle()
    group.join("b", CooperativeLagStickyAssignor(flipping), ["t"], instance_id="b")
    first, second = group.settle(leader="a")
    assert first.revoked["a"] and not first.assignment["b"]
    assert second.assignment["b"] == first.revoked["a"] and not any(second.revoked.values())


def test_a_join_while_moves_are_in_flight_keeps_what_the_first_round_promised() -> None:
    """KIP-54 sticky, so that only counts matter: a owns t-0..t-2; c joins and a gives up t-2
    for it; d joins before the second round. The eager protocol ends with t-2 at c and d
    taking t-1; so must the cooperative one (replanned from a's half-done state it sent t-2
    to d and took t-1 from a for c)."""
    sizes = {"t": [1, 1, 1]}
    group, lags = group_of(CooperativeStickyAssignor, sizes, ["a"])
    group.settle()
    group.join("c", CooperativeStickyAssignor(lags), ["t"], instance_id="c")
    first = group.rebalance()
    assert first.revoked["a"] == {("t", 2)} and not first.assignment["c"]
    group.join("d", CooperativeStickyAssignor(lags), ["t"], instance_id="d")  # before the second round
    rounds = group.settle()
    assert not any(r.handed_over_while_held for r in rounds)
    assert group.owned() == {"a": {("t", 0)}, "c": {("t", 2)}, "d": {("t", 1)}}
    eager, eager_lags = group_of(StickyAssignor, sizes, ["a"])
    for name in ("", "c", "d"):
        if name:
            eager.join(name, StickyAssignor(eager_lags), ["t"], instance_id=name)
        eager.settle()
    assert group.owned() == eager.owned()


def test_a_new_leader_plans_from_the_target_its_predecessor_promised() -> None:
    sizes = {"t": [100, 90, 80, 70, 60, 50]}
    group, lags = group_of(CooperativeLagStickyAssignor, sizes, ["a", "b"])
    group.settle(leader="a")
    group.join("c", CooperativeLagStickyAssignor(lags), ["t"], instance_id="c")
    first = group.rebalance(leader="a")
    assert first.revoked["a"] and first.revoked["b"] and not first.assignment["c"]
    group.leave("a")  # the leader dies with the target in its memory; c's promises live on in c
    rounds = group.settle(leader="b")
    assert not any(r.handed_over_while_held for r in rounds)
    eager, eager_lags = group_of(LagStickyAssignor, sizes, ["a", "b"])
    eager.settle(leader="a")
    eager.join("c", LagStickyAssignor(eager_lags), ["t"], instance_id="c")
    eager.settle(leader="a")
    eager.leave("a")
    eager.settle(leader="b")
    assert group.owned() == eager.owned()


def test_a_target_that_a_later_round_overtook_is_not_handed_out_again() -> None:
    """a made a target and b completed it; the lags then changed and b, leading, moved
    partitions. When a leads the same group again, with the same lags as b, its old target is
    history: nothing moves."""
    table = lag_table({"t": [170, 127, 102, 54, 62, 9]})
    lags = ShiftingLags(table)
    group = SimulatedGroup({"t": 6})
    for name in ("a", "b"):
        group.join(name, CooperativeLagStickyAssignor(lags, options={"tolerance": 0.0}), ["t"], instance_id=name)
    group.settle(leader="a")
    group.join("c", CooperativeLagStickyAssignor(lags, options={"tolerance": 0.0}), ["t"], instance_id="c")
    group.rebalance(leader="a")  # a remembers this round's target
    group.settle(leader="b")  # b completes it
    target = group.owned()
    lags.shift = 1
    group.settle(leader="b")
    assert group.owned() != target  # b moved partitions for the new lags
    now = group.owned()
    again = group.rebalance(leader="a")
    assert group.owned() == now and not any(again.revoked.values())


class ShiftingLags:
    """A lag source whose table a test rotates between rebalances: ``shift`` moves every
    topic's lags that many partitions on, so the heavy partitions change places."""

    def __init__(self, table: pd.DataFrame) -> None:
        self.table = table
        self.shift = 0

    def watch(self, topics: object) -> None:
        pass

    def snapshot(self) -> LagSnapshot | None:
        rotated = self.table.assign(lag=self.table.groupby("topic")["lag"].transform(lambda s: np.roll(s.to_numpy(), self.shift)))
        return StaticLags(rotated).snapshot()


#: one change of the group: (join / leave / leader, the joiner's topics, whether the next
#: change comes while this one's moves are still in flight, the lags' shift from now on)
Change = tuple[str, list[str], bool, int]


@st.composite
def group_histories(draw: st.DrawFn) -> tuple[str, dict[str, list[int]], list[list[str]], list[Change]]:
    strategy = draw(st.sampled_from(["lag-sticky", "sticky", "lag"]))
    sizes = draw(
        st.dictionaries(st.sampled_from(["t0", "t1"]), st.lists(st.integers(0, 5_000), min_size=1, max_size=6), min_size=1)
    )
    topics = st.lists(st.sampled_from(sorted(sizes)), min_size=1, unique=True).map(sorted)
    first = draw(st.lists(topics, min_size=1, max_size=3))
    changes = draw(
        st.lists(
            st.tuples(st.sampled_from(["join", "leave", "leader"]), topics, st.booleans(), st.integers(0, 2)),
            min_size=1,
            max_size=4,
        )
    )
    return strategy, sizes, first, changes


def play(
    strategy: str, cooperative: bool, sizes: dict[str, list[int]], first: list[list[str]], changes: list[Change]
) -> tuple[list[Round], list[dict[str, frozenset[tuple[str, int]]]]]:
    """Every round, and the assignment at every stable state, of a group living through
    ``changes``: one state after the first settling and one per change, None for a change
    that a cooperative group never settled (the next change arrived mid-move)."""
    cls = assignor_class(strategy, cooperative=cooperative)
    lags = ShiftingLags(lag_table(sizes))
    group = SimulatedGroup({t: len(v) for t, v in sizes.items()})
    for i, topics in enumerate(first):
        group.join(f"m{i}", cls(lags), topics, instance_id=f"m{i}")
    rounds = group.settle()
    stable: list[dict[str, frozenset[tuple[str, int]]] | None] = [group.owned()]
    for i, (kind, topics, in_flight, shift) in enumerate(changes):
        lags.shift = shift
        if kind == "join" or len(group.members) == 1:  # every change changes the group
            group.join(f"j{i}", cls(lags), topics, instance_id=f"j{i}")
        else:  # the first member leads every round: "leader" takes the leader away
            group.leave(next(iter(group.members)) if kind == "leader" else list(group.members)[-1])
        if cooperative and in_flight and i < len(changes) - 1:
            rounds.append(group.rebalance())  # one round only: the next change arrives mid-move
            stable.append(None)
        else:
            rounds.extend(group.settle())
            stable.append(group.owned())
    return rounds, stable


def moves(stable: list[dict[str, frozenset[tuple[str, int]]]]) -> int:
    """Owner changes between consecutive stable states, summed."""
    total = 0
    for before, after in itertools.pairwise(stable):
        owner = {tp: n for n, tps in before.items() for tp in tps}
        total += sum(owner.get(tp) != n for n, tps in after.items() for tp in tps)
    return total


@given(group_histories())
def test_cooperative_ends_where_eager_ends_and_moves_no_more(
    history: tuple[str, dict[str, list[int]], list[list[str]], list[Change]],
) -> None:
    """The same changes to the same group with the same lags: the cooperative protocol must
    land on the eager protocol's assignment, never hand over a held partition, and move no
    more partitions between its stable states (it has fewer of them when a change arrives
    mid-move: that one's transient state is never reached, and the eager group's is then left
    out of its count too, so that both are counted over the same states)."""
    strategy, sizes, first, changes = history
    _, eager = play(strategy, False, sizes, first, changes)
    rounds, cooperative = play(strategy, True, sizes, first, changes)
    assert not any(r.handed_over_while_held for r in rounds)
    assert not any(rounds[-1].revoked.values())  # the last change's moves completed
    assert cooperative[-1] == eager[-1]
    both = [(c, e) for c, e in zip(cooperative, eager, strict=True) if c is not None]
    assert moves([c for c, _ in both]) <= moves([e for _, e in both])


def test_cooperative_metadata_carries_owned_partitions_and_generation() -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    group, _ = group_of(CooperativeStickyAssignor, {"t": [1] * 3, "u": [1]}, ["a"])
    group.rebalance()
    wire = ConsumerProtocolSubscription.decode(group.members["a"].assignor.metadata({"t"}).encode())
    assert wire.version == 2 and wire.generation_id == 1 and wire.user_data in (b"", None)
    # u is no longer read: it is revoked before the join, so it is not claimed
    assert [(e.topic, sorted(e.partitions)) for e in wire.owned_partitions] == [("t", [0, 1, 2])]


def test_a_promise_travels_in_the_assignment_and_comes_back_in_the_subscription(caplog: pytest.LogCaptureFixture) -> None:
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

    group, lags = group_of(CooperativeStickyAssignor, {"t": [1] * 4}, ["a"])
    group.settle()
    group.join("b", CooperativeStickyAssignor(lags), ["t"], instance_id="b")
    first = group.rebalance()
    assert first.assignment["b"] == frozenset() and len(first.revoked["a"]) == 2
    wire = ConsumerProtocolSubscription.decode(group.members["b"].assignor.metadata({"t"}).encode())
    assert wire.generation_id == first.generation
    assert decode_user_data(wire.user_data) == (first.generation, sorted(first.revoked["a"]))
    # a is promised nothing: it sends no user data
    assert ConsumerProtocolSubscription.decode(group.members["a"].assignor.metadata({"t"}).encode()).user_data in (b"", None)
    # an assignment whose promises cannot be read costs the promises, never the join
    member = CooperativeStickyAssignor(lags)
    with caplog.at_level(logging.WARNING, LOGGER):
        member.on_assignment(ConsumerProtocolAssignment(1, [("t", [0])], b"\x00\x07junk"), 9)
    assert "unreadable" in caplog.text
    assert ConsumerProtocolSubscription.decode(member.metadata({"t"}).encode()).user_data in (b"", None)


def test_eager_and_cooperative_cannot_be_mixed_in_one_consumer() -> None:
    from kafka.coordinator.assignors.abstract import RebalanceProtocol

    assert LagStickyAssignor().supported_protocols() == [RebalanceProtocol.EAGER]
    assert CooperativeLagStickyAssignor().supported_protocols() == [RebalanceProtocol.COOPERATIVE]
    assert len({c.name for c in (LagAssignor, LagStickyAssignor, StickyAssignor, RangeAssignor, CooperativeStickyAssignor)}) == 5


def test_unknown_options_and_a_monitor_without_a_cluster_are_refused() -> None:
    LagStickyAssignor(options={"tolerance": 0.1})
    with pytest.raises(sla.ConfigError, match="bootstrap_servers or a reader"):
        GroupLagMonitor(None, "g", start=False)
    with pytest.raises(sla.StrategyError, match="no option max_swaps"):
        StickyAssignor(options={"max_swaps": 3})


def test_static_members_come_first_for_range() -> None:
    group = SimulatedGroup({"t": 3})
    group.join("dyn", RangeAssignor(), ["t"])
    group.join("stat", RangeAssignor(), ["t"], instance_id="zzz")
    got = group.rebalance().assignment
    assert got == {"stat": {("t", 0), ("t", 1)}, "dyn": {("t", 2)}}


# -- member ids the consumer-id rule refuses: numbered in order, the plan unchanged -------------

#: member ids (``<client_id>-<uuid>``) and instance ids clients really send, none a valid
#: consumer id (spark_lag_assign.core.ids): dots, spaces, ':' in the keys, beyond U+FFFF, 300 long
ODD_DYNAMIC = [
    "kafka-python-3.0.12",  # kafka-python's default client id
    "my app.1",
    "consumer-orders.v2-1",  # a Java client's, group "orders.v2"
    "节点 7",
    "\U00010000-high",  # before U+E000 in Java's order (UTF-16), after it by code point
    "\ue000-private",
    "x" * 300,
]
ODD_STATIC = ["host a", "host.b"]
LATE = "late joiner.9"  # joins later, between the others in Java's order


def _java_rank(names: list[str]) -> dict[str, int]:
    ordered = sorted(names, key=lambda n: n.encode("utf-16-be"))
    return {n: i for i, n in enumerate(ordered)}


def _twin_groups(cls: type, sizes: dict[str, list[int]]) -> tuple[SimulatedGroup, SimulatedGroup, dict[str, str]]:
    """The same group twice: odd member and instance ids, and conforming ones in the same order
    (Java's); joined in the same order. Returns both and odd name -> twin name."""
    lags = StaticLags(lag_table(sizes))
    odd, twin = SimulatedGroup({t: len(v) for t, v in sizes.items()}), SimulatedGroup({t: len(v) for t, v in sizes.items()})
    dynamic, static = _java_rank([*ODD_DYNAMIC, LATE]), _java_rank(ODD_STATIC)
    names = {LATE: f"d{dynamic[LATE]}"}
    topics = list(sizes)
    for i, name in enumerate(ODD_STATIC + ODD_DYNAMIC):
        subscribed = topics if i % 3 else topics[:1]
        if name in static:
            names[name] = f"s{static[name]}"
            odd.join(name, cls(lags), subscribed, instance_id=name)
            twin.join(names[name], cls(lags), subscribed, instance_id=names[name])
        else:
            names[name] = f"d{dynamic[name]}"
            odd.join(name, cls(lags), subscribed)
            twin.join(names[name], cls(lags), subscribed)
    return odd, twin, names


@pytest.mark.parametrize("cooperative", [False, True], ids=["eager", "cooperative"])
@pytest.mark.parametrize("strategy", ["range", "roundrobin", "lag", "shuffle", "sticky", "lag-sticky", "drain"])
def test_member_ids_outside_the_consumer_id_rule_plan_as_conforming_ones_in_the_same_order(
    strategy: str, cooperative: bool
) -> None:
    cls = assignor_class(strategy, cooperative=cooperative)
    sizes = {"t0": [900, 10, 500, 40, 70, 300, 5, 0, 60], "t1": [100, 200, 300, 400, 50, 60, 70], "t2": [7, 8, 9]}
    odd, twin, names = _twin_groups(cls, sizes)
    lags = StaticLags(lag_table(sizes))
    for step in range(3):
        if step == 1:  # a member joins: sticky strategies start from what the members own
            odd.join(LATE, cls(lags), list(sizes))
            twin.join(names[LATE], cls(lags), list(sizes))
        if step == 2:  # one leaves
            odd.leave("my app.1")
            twin.leave(names["my app.1"])
        got, want = odd.settle(), twin.settle()
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert {names[n]: tps for n, tps in g.assignment.items()} == dict(w.assignment), (step, strategy)
        leader = odd.members[next(iter(odd.members))].assignor
        assert leader.last is not None and leader.last.fallback is None  # the strategy planned, not the fallback


def test_planner_ids_follow_javas_order_and_keep_one_width() -> None:
    ids = planner_ids(["1:\ue000", "1:\U00010000", "0:host a", *(f"1:m{i}" for i in range(9))])
    assert ids["0:host a"] == "m00" and ids["1:\U00010000"] < ids["1:\ue000"]  # UTF-16: a surrogate pair first
    assert len({len(v) for v in ids.values()}) == 1 and sorted(ids.values()) == [f"m{i:02d}" for i in range(12)]
    assert planner_ids([]) == {} and planner_ids(["1:only"]) == {"1:only": "m0"}


def test_a_member_subscribed_to_nothing_and_topics_without_metadata() -> None:
    group = SimulatedGroup({"t": 2})
    group.join("a", LagStickyAssignor(), [])
    group.join("b", LagStickyAssignor(), ["t", "gone"])
    got = group.rebalance().assignment
    assert got == {"a": frozenset(), "b": {("t", 0), ("t", 1)}}


def test_the_group_package_and_its_job_import_no_spark() -> None:
    import subprocess
    import sys
    from pathlib import Path

    job = Path(__file__).resolve().parents[2] / "jobs" / "kafka_python_consumer.py"
    code = (
        "import runpy, sys\n"
        "import spark_lag_assign.group, spark_lag_assign.group.simulate\n"
        f"runpy.run_path({str(job)!r}, run_name='not_main')\n"
        "print(sorted(m for m in sys.modules if m.startswith(('pyspark', 'py4j'))))"
    )
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
