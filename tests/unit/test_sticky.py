"""KIP-54 sticky assignment (seed 004): worked examples by hand, properties over random
sequences of rebalances, and a differential test against kafka-python's sticky assignor.

The expectations come from the seed's rules worked out on paper, from a brute-force search
over every possible assignment, or from kafka-python; never from this assignor's output.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
import pytest
from hypothesis import given, strategies as st

import spark_lag_assign as sla
from spark_lag_assign.core.quality import moved
from tests.peers import KafkaPythonSticky

Subscriptions = Mapping[str, Sequence[str]]


def lags(sizes: Mapping[str, int]) -> pd.DataFrame:
    rows = [(t, p, 1) for t in sorted(sizes) for p in range(sizes[t])]
    return pd.DataFrame(rows, columns=["topic", "partition", "lag"])


def frame(plan: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """{"C0": ["a0", "b1"]} -> DataFrame[consumer, topic, partition] (one-letter topics)."""
    rows = [(c, tp[0], int(tp[1:])) for c, tps in plan.items() for tp in tps]
    return pd.DataFrame(rows, columns=["consumer", "topic", "partition"])


def as_plan(assignment: pd.DataFrame) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c, t, p in zip(assignment["consumer"], assignment["topic"], assignment["partition"]):
        out.setdefault(c, []).append(f"{t}{p}")
    return {c: sorted(v) for c, v in sorted(out.items())}


def sticky(sizes: Mapping[str, int], subs: Subscriptions, previous: pd.DataFrame | None = None) -> pd.DataFrame:
    out = sla.assign(lags(sizes), subs, "sticky", previous=previous)
    sla.check_assignment(out, lags(sizes), subs)
    return out


def counts(assignment: pd.DataFrame, subs: Subscriptions) -> dict[str, int]:
    held = Counter(assignment["consumer"])
    return {c: held[c] for c in sorted(subs)}


def score(n: Mapping[str, int]) -> int:
    """KIP-54's balance score, the plain way: every pair of consumers once."""
    return sum(abs(n[a] - n[b]) for a, b in itertools.combinations(sorted(n), 2))


def spread(n: Mapping[str, int]) -> int:
    return max(n.values()) - min(n.values())


def improving_chain(assignment: pd.DataFrame, subs: Subscriptions) -> tuple[str, str] | None:
    """(a, b) if partitions can be passed hand to hand from a to b (each hand holding a topic
    the next one subscribes to) while b holds two or more fewer than a; else None."""
    n = counts(assignment, subs)
    holds: dict[str, set[str]] = {c: set() for c in subs}
    for c, t in zip(assignment["consumer"], assignment["topic"]):
        holds[c].add(t)
    for a in sorted(subs):
        seen, todo = {a}, deque([a])
        while todo:
            x = todo.popleft()
            for y in sorted(subs):
                if y not in seen and holds[x] & set(subs[y]):
                    if n[a] - n[y] >= 2:
                        return a, y
                    seen.add(y)
                    todo.append(y)
    return None


# -- worked examples ---------------------------------------------------------------------------

ALL3 = ["a", "b", "c"]


def test_docstring_example_first_assignment_then_a_leave_then_a_join() -> None:
    sizes = {"a": 3, "b": 2, "c": 2}
    # 7 partitions, 3 consumers: quotas 3, 2, 2, dealt round-robin in (topic, partition) order
    first = sticky(sizes, {"C0": ALL3, "C1": ALL3, "C2": ALL3})
    assert as_plan(first) == {"C0": ["a0", "b0", "c1"], "C1": ["a1", "b1"], "C2": ["a2", "c0"]}
    # quotas 4 and 3, the extra to C0 (it held more); C1's a1 and b1 fill C0 and C2 up
    second = sticky(sizes, {"C0": ALL3, "C2": ALL3}, first)
    assert as_plan(second) == {"C0": ["a0", "a1", "b0", "c1"], "C2": ["a2", "b1", "c0"]}
    assert moved(second, first, {"C0": ALL3, "C2": ALL3}) == 2
    # quotas 3, 2, 2: C0 gives up a1 (its second a); C2's three are each within or one over
    # their topic's share; of b1 and c0 (equally over) its rotation gives up c0
    third = sticky(sizes, {"C0": ALL3, "C2": ALL3, "C3": ALL3}, second)
    assert as_plan(third) == {"C0": ["a0", "b0", "c1"], "C2": ["a2", "b1"], "C3": ["a1", "c0"]}
    assert moved(third, second, {"C0": ALL3, "C2": ALL3, "C3": ALL3}) == 2


def test_first_assignment_is_round_robin_over_topics_then_partitions() -> None:
    got = sticky({"a": 3, "b": 3}, {"C0": ["a", "b"], "C1": ["a", "b"]})
    assert as_plan(got) == {"C0": ["a0", "a2", "b1"], "C1": ["a1", "b0", "b2"]}


def test_a_leaving_consumers_partitions_are_spread_and_every_other_partition_stays() -> None:
    sizes = {"a": 5, "b": 4, "c": 3}
    subs = dict.fromkeys(("C0", "C1", "C2", "C3"), ALL3)
    before = sticky(sizes, subs)
    assert set(counts(before, subs).values()) == {3}
    after = sticky(sizes, dict.fromkeys(("C0", "C2", "C3"), ALL3), before)
    assert counts(after, {"C0": [], "C2": [], "C3": []}) == {"C0": 4, "C2": 4, "C3": 4}
    joined = before.merge(after, on=["topic", "partition"], suffixes=("_before", "_after"))
    stayed = joined[joined["consumer_before"] != "C1"]
    assert (stayed["consumer_before"] == stayed["consumer_after"]).all()
    assert moved(after, before, dict.fromkeys(("C0", "C2", "C3"), ALL3)) == 3


def test_a_joining_consumer_gets_its_fair_share_and_nothing_else_moves() -> None:
    sizes = {"a": 6, "b": 4}
    old = {c: ["a", "b"] for c in ("C0", "C1", "C2")}
    before = sticky(sizes, old)
    assert sorted(counts(before, old).values()) == [3, 3, 4]
    new = {**old, "C3": ["a", "b"]}
    after = sticky(sizes, new, before)
    # 10 over 4 is 2 or 3 each; C3 starts empty so it needs 2, and 2 is all that moves
    assert sorted(counts(after, new).values()) == [2, 2, 3, 3]
    assert counts(after, new)["C3"] == 2
    assert moved(after, before, new) == 2


def test_added_partitions_go_where_there_is_room_and_no_old_partition_moves() -> None:
    subs = {"C0": ["a", "b"], "C1": ["a", "b"]}
    before = sticky({"a": 4, "b": 4}, subs)
    assert as_plan(before) == {"C0": ["a0", "a2", "b0", "b2"], "C1": ["a1", "a3", "b1", "b3"]}
    after = sticky({"a": 7, "b": 4}, subs, before)
    # quotas 6 and 5 (the tie on previous counts goes to C0); both hold two a's, so the new
    # a4, a5, a6 are dealt C0, C1, C0
    assert as_plan(after) == {"C0": ["a0", "a2", "a4", "a6", "b0", "b2"], "C1": ["a1", "a3", "a5", "b1", "b3"]}
    assert moved(after, before, subs) == 0


def test_a_deleted_topic_moves_only_what_rebalancing_needs() -> None:
    before = frame({"C0": ["a0", "a1", "a2"], "C1": ["b0", "b1", "b2"], "C2": ["c0", "c1", "c2"]})
    subs = {c: ["a", "c"] for c in ("C0", "C1", "C2")}
    after = sticky({"a": 3, "c": 3}, subs, before)
    # C1 is left empty; 6 over 3 is 2 each: C0 and C2 give up their third (least needed) one
    assert as_plan(after) == {"C0": ["a0", "a1"], "C1": ["a2", "c2"], "C2": ["c0", "c1"]}
    assert moved(after, before, subs) == 2


def test_a_created_topic_is_split_evenly_and_nothing_old_moves() -> None:
    before = frame({"C0": ["a0", "b0"], "C1": ["a1", "b1"]})
    subs = {"C0": ["a", "b", "c"], "C1": ["a", "b", "c"]}
    after = sticky({"a": 2, "b": 2, "c": 4}, subs, before)
    assert as_plan(after) == {"C0": ["a0", "b0", "c0", "c2"], "C1": ["a1", "b1", "c1", "c3"]}


def lagged(rows: Mapping[str, int]) -> pd.DataFrame:
    """{"t0": 60, ...} -> lags of topic t (one-letter topic, partition number after it)."""
    return pd.DataFrame([(tp[0], int(tp[1:]), lag) for tp, lag in rows.items()], columns=["topic", "partition", "lag"])


def test_with_different_lags_a_giver_gives_up_its_most_typical_partition() -> None:
    # average lag 125 / 6 = 20.8. Each holder gives one partition to C2; of C0's 60, 10 and 5
    # the 10 is nearest the average (5 is 15.8 away, 60 is 39.2), and of C1's 40, 10 and 0 also
    # the 10: C2 gets 20 and nobody keeps more than 65. By row order alone C2 would get t2 and
    # t5 (5 in all) and C0 keep 70.
    table = lagged({"t0": 60, "t1": 10, "t2": 5, "t3": 40, "t4": 10, "t5": 0})
    before = frame({"C0": ["t0", "t1", "t2"], "C1": ["t3", "t4", "t5"]})
    after = sla.assign(table, {"C0": ["t"], "C1": ["t"], "C2": ["t"]}, "sticky", previous=before)
    assert as_plan(after) == {"C0": ["t0", "t2"], "C1": ["t3", "t5"], "C2": ["t1", "t4"]}


def test_with_different_lags_the_heaviest_moving_partition_goes_to_the_least_loaded() -> None:
    # C0 leaves; C1 (lag 30) and C2 (lag 10) take one each: t0 (50) goes to C2, t1 (5) to C1,
    # so the most anyone holds is 60, where the order of the rows would have given C1 80
    table = lagged({"t0": 50, "t1": 5, "t2": 20, "t3": 10, "t4": 6, "t5": 4})
    before = frame({"C0": ["t0", "t1"], "C1": ["t2", "t3"], "C2": ["t4", "t5"]})
    after = sla.assign(table, {"C1": ["t"], "C2": ["t"]}, "sticky", previous=before)
    assert as_plan(after) == {"C1": ["t1", "t2", "t3"], "C2": ["t0", "t4", "t5"]}


@given(st.integers(0, 10_000))
def test_lags_only_choose_between_equally_good_partitions(seed: int) -> None:
    """Counts per consumer and the number of moves are what they are with equal lags."""
    rng = random.Random(seed)
    sizes = {f"t{i}": rng.randint(1, 12) for i in range(rng.randint(1, 5))}
    consumers = [f"c{i}" for i in range(rng.randint(1, 6))]
    subs = {c: sorted(rng.sample(sorted(sizes), rng.randint(1, len(sizes)))) for c in consumers}
    flat = lags(sizes)
    skewed = flat.assign(lag=[int(rng.paretovariate(1.2) * 100) for _ in range(len(flat))])
    earlier = sla.assign(flat, {c: sorted(sizes) for c in [*consumers, "c9"][1:]}, "sticky")
    with_lag = sla.assign(skewed, subs, "sticky", previous=earlier)
    without = sla.assign(flat, subs, "sticky", previous=earlier)
    assert counts(with_lag, subs) == counts(without, subs)
    assert moved(with_lag, earlier, subs) == moved(without, earlier, subs)


def test_differing_subscriptions_only_the_shared_topic_balances() -> None:
    sizes = {"x": 4, "y": 2}
    subs = {"C0": ["x"], "C1": ["x", "y"], "C2": ["y"]}
    first = sticky(sizes, subs)
    # C2 can only read y, so it takes both; C0 and C1 share x
    assert as_plan(first) == {"C0": ["x0", "x2"], "C1": ["x1", "x3"], "C2": ["y0", "y1"]}
    after = sticky(sizes, {"C0": ["x"], "C1": ["x", "y"]}, first)
    # C1 must take y0 and y1, then 6 over 2 is 3 each: C1 hands one x to C0. x3 is C1's
    # second x, further over x's share than x1, so it goes. Three moves, the least possible.
    assert as_plan(after) == {"C0": ["x0", "x2", "x3"], "C1": ["x1", "y0", "y1"]}
    assert moved(after, first, {"C0": ["x"], "C1": ["x", "y"]}) == 3


def test_balance_passes_along_a_chain_where_no_single_move_helps() -> None:
    # C0 reads only t1, C2 only t0; C1 both. Balance needs C0 -> C1 (a t1) and C1 -> C2 (t0).
    sizes = {"t0": 1, "t1": 2}
    subs = {"C0": ["t1"], "C1": ["t0", "t1"], "C2": ["t0"]}
    ours = sticky(sizes, subs)
    assert counts(ours, subs) == {"C0": 1, "C1": 1, "C2": 1}
    # kafka-python stops at KIP-54's local notion of balance: C0 holds both t1 partitions and
    # C2 nothing, yet no single move helps (C2 can only take t0, held by C1 with just one)
    theirs = KafkaPythonSticky().assign(lags(sizes), subs)
    sla.check_assignment(theirs, lags(sizes), subs)
    assert counts(theirs, subs) == {"C0": 2, "C1": 1, "C2": 0}
    assert improving_chain(theirs, subs) == ("C0", "C2")


def test_a_swap_between_consumers_one_apart_keeps_more_partitions_at_the_same_balance() -> None:
    # C0 reads only a, so it keeps a0; the other 11 split 3/3/3/2. C2 holds four d's and
    # only C1 also reads d: one goes to C1 (d5, C2's fourth d, the most over its share).
    # C1 is then at 5 and its b's can go only to C4. Three moves, the least possible: C2
    # must give one and the newcomer C4 must get two. Giving C4 one of C3's c's instead
    # balances as well, but costs a fourth move.
    before = frame({"C0": ["a0"], "C1": ["b0", "b1", "d0", "d2"], "C2": ["d1", "d3", "d4", "d5"], "C3": ["c0", "c1", "c2"]})
    subs = {"C0": ["a"], "C1": ["b", "c", "d"], "C2": ["a", "c", "d"], "C3": ["a", "c"], "C4": ["a", "b", "c"]}
    after = sticky({"a": 1, "b": 2, "c": 3, "d": 6}, subs, before)
    assert as_plan(after) == {
        "C0": ["a0"],
        "C1": ["d0", "d2", "d5"],
        "C2": ["d1", "d3", "d4"],
        "C3": ["c0", "c1", "c2"],
        "C4": ["b0", "b1"],
    }
    assert moved(after, before, subs) == 3


@pytest.mark.parametrize(
    ("sizes", "subs", "before"),
    [
        # identical subscriptions, counts within one: clustered by topic, but nothing to gain
        ({"a": 3, "b": 3}, {"C0": ["a", "b"], "C1": ["a", "b"]}, {"C0": ["a0", "a1", "a2"], "C1": ["b0", "b1", "b2"]}),
        # a spread of two that no move can narrow: each consumer reads its own topic only
        ({"x": 3, "y": 1}, {"C0": ["x"], "C1": ["y"]}, {"C0": ["x0", "x1", "x2"], "C1": ["y0"]}),
        # moving x1 to C1 only swaps the counts (2, 1 -> 1, 2): no better balance, so no move
        ({"x": 2, "y": 1}, {"C0": ["x"], "C1": ["x", "y"]}, {"C0": ["x0", "x1"], "C1": ["y0"]}),
    ],
)
def test_no_partition_moves_unless_balance_improves(
    sizes: dict[str, int], subs: dict[str, list[str]], before: dict[str, list[str]]
) -> None:
    after = sticky(sizes, subs, frame(before))
    assert as_plan(after) == before


def test_previous_owners_that_left_or_unsubscribed_and_deleted_partitions_are_ignored() -> None:
    before = frame({"C0": ["a0", "b0", "z0"], "C1": ["a1", "b1"], "GONE": ["a2"]})
    subs = {"C0": ["a"], "C1": ["a", "b"]}
    after = sticky({"a": 3, "b": 2}, subs, before)
    # C0 no longer reads b, z is gone, GONE left: 5 partitions; C1 must take b0 (2 b's +
    # a1 = 3), so C0 keeps a0 and takes a2
    assert as_plan(after) == {"C0": ["a0", "a2"], "C1": ["a1", "b0", "b1"]}


def test_the_same_input_gives_the_same_plan_whatever_the_order_of_consumers() -> None:
    sizes = {"a": 7, "b": 5, "c": 2}
    subs = {"C2": ["a", "b"], "C0": ["a", "c"], "C1": ["b", "c"], "C3": ["a"]}
    first = sticky(sizes, subs)
    again = sticky(sizes, dict(sorted(subs.items())))
    pd.testing.assert_frame_equal(first, again)
    shuffled = lags(sizes).sample(frac=1, random_state=3)
    pd.testing.assert_frame_equal(sla.assign(shuffled, subs, "sticky"), first)


def test_many_consumers_on_many_topics_stay_balanced_and_move_the_minimum() -> None:
    sizes = {f"t{i:03d}": 100 for i in range(100)}
    names = sorted(sizes)
    subs = {f"c{i:03d}": names for i in range(100)}
    first = sticky(sizes, subs)
    assert set(counts(first, subs).values()) == {100}
    # every topic is split one partition per consumer: round-robin over topic then partition
    assert first.groupby(["topic", "consumer"]).size().max() == 1
    joined = {**subs, "new": names}
    second = sticky(sizes, joined, first)
    assert set(counts(second, joined).values()) == {99, 100}
    assert moved(second, first, joined) == 99
    # the newcomer's 99 come one from each of 99 consumers, all but the one keeping 100
    taken = second[second["consumer"] == "new"].merge(first, on=["topic", "partition"], suffixes=("", "_before"))
    assert taken["consumer_before"].nunique() == 99


# -- random sequences of rebalances ----------------------------------------------------------


@dataclass
class World:
    """Topics with their sizes and who subscribes to what, changed one event at a time."""

    sizes: dict[str, int]
    subs: dict[str, list[str]]
    identical: bool
    serial: Iterator[int] = field(default_factory=itertools.count)

    def topics(self) -> list[str]:
        return sorted(self.sizes)

    def pick(self, mask: int) -> list[str]:
        """A non-empty subset of the topics, from the bits of ``mask``."""
        names = self.topics()
        chosen = [t for i, t in enumerate(names) if mask >> i & 1]
        return chosen or [names[mask % len(names)]]

    def apply(self, event: str, i: int, n: int) -> None:
        names = self.topics()
        if event == "join":
            self.subs[f"c{next(self.serial):02d}"] = names if self.identical else self.pick(i)
        elif event == "leave" and len(self.subs) > 1:
            del self.subs[sorted(self.subs)[i % len(self.subs)]]
        elif event == "grow":
            self.sizes[names[i % len(names)]] += n
        elif event == "create":
            topic = f"t{next(self.serial):02d}"
            self.sizes[topic] = n
            for k, c in enumerate(sorted(self.subs)):
                if self.identical or (i >> k & 1) or k == i % len(self.subs):
                    self.subs[c] = sorted({*self.subs[c], topic})
        elif event == "delete" and len(names) > 1:
            gone = names[i % len(names)]
            del self.sizes[gone]
            for c in self.subs:
                self.subs[c] = [t for t in self.subs[c] if t != gone] or [t for t in names if t != gone][:1]
        elif event == "resubscribe" and not self.identical:
            self.subs[sorted(self.subs)[n % len(self.subs)]] = self.pick(i)


def new_world(sizes: Sequence[int], consumers: int, identical: bool, masks: Sequence[int] = ()) -> World:
    world = World({}, {}, identical)
    for size in sizes:
        world.sizes[f"t{next(world.serial):02d}"] = size
    for k in range(consumers):
        world.subs[f"c{next(world.serial):02d}"] = (
            world.topics() if identical else world.pick(masks[k % len(masks)] if masks else k + 1)
        )
    return world


def minimum_moves(previous: pd.DataFrame | None, world: World) -> int:
    """The fewest moves of any plan with counts within one, identical subscriptions: partitions
    of consumers that left must move; of the rest, each consumer keeps at most its quota
    (N // C, or one more for N % C of them, best given to those that held the most)."""
    if previous is None:
        return 0
    exists = {(t, p) for t, n in world.sizes.items() for p in range(n)}
    prev = [(c, (t, p)) for c, t, p in zip(previous["consumer"], previous["topic"], previous["partition"])]
    prev = [(c, tp) for c, tp in prev if tp in exists]
    forced = sum(1 for c, _ in prev if c not in world.subs)
    held = Counter(c for c, _ in prev if c in world.subs)
    q, r = divmod(len(exists), len(world.subs))
    over = [held[c] - q for c in world.subs if held[c] > q]
    return forced + sum(over) - min(r, len(over))


def best_possible(world: World, previous: pd.DataFrame | None) -> tuple[int, int]:
    """(balance score, moves) of the best plan by exhaustive search: the lowest score, then
    the fewest moves among plans with that score."""
    cons = sorted(world.subs)
    rows = [(t, p) for t in world.topics() for p in range(world.sizes[t]) if any(t in s for s in world.subs.values())]
    owner = {}
    if previous is not None:
        owner = {(t, p): c for c, t, p in previous[["consumer", "topic", "partition"]].itertuples(index=False)}
    options = [[c for c in cons if t in world.subs[c]] for t, _ in rows]
    best = None
    for choice in itertools.product(*options):
        n = Counter(choice)
        key = (score({c: n[c] for c in cons}), sum(1 for tp, c in zip(rows, choice) if tp in owner and owner[tp] != c))
        if best is None or key < best:
            best = key
    assert best is not None
    return best


EVENTS = ["join", "leave", "grow", "create", "delete"]
ALL_EVENTS = [*EVENTS, "resubscribe"]
events = st.lists(st.tuples(st.sampled_from(EVENTS), st.integers(0, 63), st.integers(1, 6)), min_size=1, max_size=5)


@given(sizes=st.lists(st.integers(1, 8), min_size=1, max_size=4), consumers=st.integers(1, 5), events=events)
def test_identical_subscriptions_stay_within_one_and_move_only_what_balance_needs(
    sizes: list[int], consumers: int, events: list[tuple[str, int, int]]
) -> None:
    world = new_world(sizes, consumers, identical=True)
    previous = None
    for step in [None, *events]:
        if step is not None:
            world.apply(*step)
        got = sticky(world.sizes, world.subs, previous)
        assert spread(counts(got, world.subs)) <= 1
        assert (0 if previous is None else moved(got, previous, world.subs)) == minimum_moves(previous, world)
        previous = got


@given(
    sizes=st.lists(st.integers(1, 2), min_size=1, max_size=3),
    masks=st.lists(st.integers(1, 7), min_size=1, max_size=3),
    events=st.lists(st.tuples(st.sampled_from(ALL_EVENTS), st.integers(0, 63), st.integers(1, 2)), max_size=4),
)
def test_differing_subscriptions_get_the_best_balance_with_the_fewest_moves(
    sizes: list[int], masks: list[int], events: list[tuple[str, int, int]]
) -> None:
    world = new_world(sizes, len(masks), identical=False, masks=masks)
    previous = None
    for step in [None, *events]:
        if step is not None:
            too_big = sum(world.sizes.values()) >= 5 or len(world.subs) >= 3
            if step[0] in ("join", "grow", "create") and too_big:
                continue  # keep the exhaustive search small
            world.apply(*step)
        got = sticky(world.sizes, world.subs, previous)
        n = counts(got, world.subs)
        assert (score(n), 0 if previous is None else moved(got, previous, world.subs)) == best_possible(world, previous)
        previous = got


@given(
    sizes=st.lists(st.integers(1, 12), min_size=2, max_size=6),
    masks=st.lists(st.integers(1, 63), min_size=2, max_size=7),
    events=st.lists(st.tuples(st.sampled_from(ALL_EVENTS), st.integers(0, 63), st.integers(1, 40)), max_size=4),
)
def test_differing_subscriptions_leave_no_chain_that_would_improve_balance(
    sizes: list[int], masks: list[int], events: list[tuple[str, int, int]]
) -> None:
    world = new_world(sizes, len(masks), identical=False, masks=masks)
    previous = None
    for step in [None, *events]:
        if step is not None:
            world.apply(*step)
        got = sticky(world.sizes, world.subs, previous)
        assert improving_chain(got, world.subs) is None
        previous = got


# -- against kafka-python ----------------------------------------------------------------------


def rebalances(seed: int, identical: bool, steps: int = 6) -> Iterator[World]:
    """A seeded random group and the states after each of ``steps`` random events."""
    rng = random.Random(seed)
    world = new_world(
        [rng.randint(1, 6) for _ in range(rng.randint(1, 4))],
        rng.randint(1, 4),
        identical,
        [rng.randint(1, 15) for _ in range(4)],
    )
    yield world
    kinds = EVENTS if identical else ALL_EVENTS
    for _ in range(steps):
        world.apply(rng.choice(kinds), rng.randint(0, 63), rng.randint(1, 5))
        yield world


def changed(new: pd.DataFrame, old: pd.DataFrame | None) -> int:
    """Partitions in both plans whose owner differs (metrics.moved, without pandas joins)."""
    if old is None:
        return 0
    before = {(t, p): c for c, t, p in zip(old["consumer"], old["topic"], old["partition"])}
    return sum(1 for c, t, p in zip(new["consumer"], new["topic"], new["partition"]) if before.get((t, p), c) != c)


@dataclass(frozen=True)
class Step:
    """One rebalance, four ways: each assignor from its own previous plan, and each from the other's."""

    ours: tuple[int, int]  # (balance score, moves), ours from our previous plan
    theirs: tuple[int, int]  # kafka-python from its previous plan
    ours_from_theirs: tuple[int, int]  # ours from kafka-python's previous plan
    theirs_from_ours: tuple[int, int]  # kafka-python from our previous plan


@functools.cache
def race(seed: int, identical: bool) -> tuple[Step, ...]:
    peer = KafkaPythonSticky()
    ours = theirs = None
    steps = []
    for generation, world in enumerate(rebalances(seed, identical), start=1):
        table = lags(world.sizes)
        # assign() checks the invariants of our plans itself; kafka-python's are checked here
        plans = {
            "ours": sla.assign(table, world.subs, "sticky", previous=ours),
            "theirs": peer.assign(table, world.subs, theirs, generation=generation),
            "ours_from_theirs": sla.assign(table, world.subs, "sticky", previous=theirs),
            "theirs_from_ours": peer.assign(table, world.subs, ours, generation=generation),
        }
        sla.check_assignment(plans["theirs"], table, world.subs)
        sla.check_assignment(plans["theirs_from_ours"], table, world.subs)
        start = {"ours": ours, "theirs": theirs, "ours_from_theirs": theirs, "theirs_from_ours": ours}
        steps.append(Step(**{k: (score(counts(plan, world.subs)), changed(plan, start[k])) for k, plan in plans.items()}))
        ours, theirs = plans["ours"], plans["theirs"]
    return tuple(steps)


SEEDS = range(10)
KINDS = pytest.mark.parametrize("identical", [True, False], ids=["identical", "differing"])


@KINDS
@pytest.mark.parametrize("seed", SEEDS)
def test_every_step_is_at_least_as_balanced_as_kafka_python(seed: int, identical: bool) -> None:
    for n, step in enumerate(race(seed, identical)):
        assert step.ours[0] <= step.theirs[0], f"step {n}"
        assert step.ours_from_theirs[0] <= step.theirs[0], f"step {n}"
        assert step.ours[0] <= step.theirs_from_ours[0], f"step {n}"


@KINDS
@pytest.mark.parametrize("seed", SEEDS)
def test_from_the_same_previous_plan_no_more_moves_than_kafka_python(seed: int, identical: bool) -> None:
    """Like for like: both assignors answer the same question; where kafka-python ends less
    balanced it may move less, and balance comes first."""
    for n, step in enumerate(race(seed, identical)):
        if step.ours_from_theirs[0] == step.theirs[0]:
            assert step.ours_from_theirs[1] <= step.theirs[1], f"step {n}, from kafka-python's plan"
        if step.ours[0] == step.theirs_from_ours[0]:
            assert step.ours[1] <= step.theirs_from_ours[1], f"step {n}, from our plan"


@pytest.mark.parametrize("seed", SEEDS)
def test_identical_subscriptions_no_more_moves_than_kafka_python_over_a_sequence(seed: int) -> None:
    steps = race(seed, True)
    assert sum(s.ours[1] for s in steps) <= sum(s.theirs[1] for s in steps)


def test_differing_subscriptions_sequences_drift_apart_and_a_step_can_cost_us_more() -> None:
    """Fed their own plans, the two assignors drift apart, and what a consumer happens to hold
    decides what a later event costs: per-sequence totals do not compare like for like.

    Differing seed 5: after event 4 both split 15 partitions 8/7 over c04 and c05;
    kafka-python gives c05 all of t02, we spread every topic over both (which pays off when
    a topic is deleted). Event 5: c04 drops t02, so its partitions of t02 must move, and
    kafka-python's c04 holds none. From the same plan both move the same.
    """
    split, narrow = race(5, False)[4:6]
    assert split.ours == split.theirs == (1, 7)
    assert narrow.ours[0] == narrow.theirs[0]
    assert narrow.ours[1] > narrow.theirs[1] == 0
    assert narrow.ours_from_theirs == narrow.theirs
    assert narrow.theirs_from_ours == narrow.ours
