"""lag-sticky, the default strategy: its three priorities and the numbers it is held to.

(a) counts: per topic within one among the topic's readers, always; across the group within
one where subscriptions are identical, and otherwise no consumer two above one that could
take one of its extras. (b) lag balanced over the whole group. (c) sticky to the previous
plan, unless balance drifts past the tolerance. Every plan here goes through ``assign``,
which runs the invariant checker before it returns; the property tests run it once more.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from functools import cache

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

import spark_lag_assign as sla
from spark_lag_assign.assignors import lagsticky
from spark_lag_assign.assignors.base import GroupProblem
from spark_lag_assign.assignors.frontend import run
from spark_lag_assign.core.invariants import check_assignment
from spark_lag_assign.core.quality import quality
from spark_lag_assign.errors import InputError, StrategyError
from spark_lag_assign.testing import workloads as w

Subscriptions = Mapping[str, Sequence[str]]
SEEDS = range(7)


def plan(
    lags: pd.DataFrame,
    subs: Subscriptions,
    previous: pd.DataFrame | None = None,
    strategy: str = "lag-sticky",
    **options: object,
) -> pd.DataFrame:
    return sla.assign(lags, subs, strategy, previous, **options)


def frame(*rows: tuple[str, int, int]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=["topic", "partition", "lag"])


def owners(out: pd.DataFrame) -> dict[tuple[str, int], str]:
    return {(t, int(p)): c for c, t, p in zip(out["consumer"], out["topic"], out["partition"])}


def loads(out: pd.DataFrame, subs: Subscriptions) -> dict[str, int]:
    got = out.groupby("consumer")["lag"].sum()
    return {c: int(got.get(c, 0)) for c in subs}


def moved(before: pd.DataFrame, after: pd.DataFrame) -> set[tuple[str, int]]:
    old, new = owners(before), owners(after)
    return {k for k in new if k in old and old[k] != new[k]}


def counts(out: pd.DataFrame, subs: Subscriptions) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """Partitions per consumer, and per topic per reader, zeros included."""
    total = out.groupby("consumer").size()
    per = out.groupby(["topic", "consumer"]).size()
    topics = sorted({t for ts in subs.values() for t in ts} & set(out["topic"]))
    by_topic = {t: {c: int(per.get((t, c), 0)) for c in subs if t in subs[c]} for t in topics}
    return {c: int(total.get(c, 0)) for c in subs}, by_topic


def assert_count_rules(out: pd.DataFrame, subs: Subscriptions) -> None:
    """(a), checked from the plan alone: every topic split within one among its readers; then
    no consumer two partitions above another that reads a topic the first holds an extra of
    (with identical subscriptions that is: the whole group within one)."""
    total, by_topic = counts(out, subs)
    for topic, per_reader in by_topic.items():
        assert max(per_reader.values()) - min(per_reader.values()) <= 1, (topic, per_reader)
    if len({tuple(sorted(ts)) for ts in subs.values()}) == 1:
        assert max(total.values()) - min(total.values()) <= 1, total
        return
    for giver in subs:
        for taker in subs:
            if total[giver] < total[taker] + 2:
                continue
            for topic, per_reader in by_topic.items():
                if taker in per_reader and giver in per_reader:
                    assert per_reader[giver] <= per_reader[taker], (giver, taker, topic, total)


# ---------------------------------------------------------------------------------------------
# hand-worked examples


DOC_LAGS = frame(("t0", 0, 60), ("t0", 1, 10), ("t0", 2, 10), ("t1", 0, 50), ("t1", 1, 40), ("t1", 2, 5))
DOC_SUBS = {c: ["t0", "t1"] for c in ("C0", "C1", "C2")}


def test_the_docstring_example_from_scratch() -> None:
    out = plan(DOC_LAGS, DOC_SUBS)
    # one partition of each topic per consumer; t0 first (it holds the heaviest), then t1's
    # heaviest to the least loaded: 50 -> C1 (10), 40 -> C2 (10), 5 -> C0 (60)
    assert owners(out) == {
        ("t0", 0): "C0",
        ("t1", 2): "C0",
        ("t0", 1): "C1",
        ("t1", 0): "C1",
        ("t0", 2): "C2",
        ("t1", 1): "C2",
    }
    assert loads(out, DOC_SUBS) == {"C0": 65, "C1": 60, "C2": 50}
    # the seeds' assignor hands C0 the heaviest partition of both topics
    assert max(loads(plan(DOC_LAGS, DOC_SUBS, strategy="lag"), DOC_SUBS).values()) == 110


def test_the_docstring_example_join_moves_one_partition() -> None:
    before = plan(DOC_LAGS, DOC_SUBS)
    subs = {**DOC_SUBS, "C3": ["t0", "t1"]}
    after = plan(DOC_LAGS, subs, before)
    # C3 must get one partition (6 for 4); C0 gives t1p2 (5), which keeps it at its fair
    # share of 43.75 or above, and then the heaviest consumer sits at the bound, 60
    assert moved(before, after) == {("t1", 2)}
    assert owners(after)[("t1", 2)] == "C3"
    assert loads(after, subs) == {"C0": 60, "C1": 60, "C2": 50, "C3": 5}


def test_seed_000_ends_with_one_consumer_on_the_biggest_partition() -> None:
    lags = frame(("t0", 0, 100_000), ("t0", 1, 50_000), ("t0", 2, 60_000))
    subs = {"C0": ["t0"], "C1": ["t0"]}
    out = plan(lags, subs)
    # someone holds two of the three: the lightest pair is 50k + 60k = 110k, the other 100k
    assert sorted(loads(out, subs).values()) == [100_000, 110_000]
    single = [c for c, n in counts(out, subs)[0].items() if n == 1]
    assert [owners(out)[("t0", 0)]] == single


# ---------------------------------------------------------------------------------------------
# (a) counts


WORKLOADS = {
    "uniform": lambda seed: w.uniform(topics=40, partitions=12, consumers=8, seed=seed),
    "skewed": lambda seed: w.skewed(seed=seed),
    "seed002": lambda seed: w.seed002(seed=seed),
}


@pytest.mark.parametrize("name", list(WORKLOADS))
@pytest.mark.parametrize("seed", [0, 1])
def test_counts_stay_within_one_per_topic_and_over_the_group_through_churn(name: str, seed: int) -> None:
    lags, subs = WORKLOADS[name](seed)
    out = plan(lags, subs)
    assert_count_rules(out, subs)
    topic = sorted(subs[next(iter(subs))])[0]
    steps = [
        ("join", lambda lg, s: (lg, w.join(s, seed=seed))),
        ("leave", lambda lg, s: (lg, w.leave(s, seed=seed))),
        ("partitions added", lambda lg, s: (w.add_partitions(lg, topic, 5, seed=seed), s)),
        ("topic appears", lambda lg, s: w.add_topic(lg, s, "zz-new", 7, seed=seed)),
        ("lags drift", lambda lg, s: (w.drift(lg, 0.3, seed=seed), s)),
    ]
    for label, step in steps:
        lags, subs = step(lags, subs)
        out = plan(lags, subs, out)
        try:
            assert_count_rules(out, subs)
        except AssertionError as err:
            raise AssertionError(f"after '{label}': {err}") from err


@pytest.mark.parametrize("seed", SEEDS)
def test_with_different_subscriptions_no_consumer_keeps_an_extra_another_could_take(seed: int) -> None:
    lags, subs = w.mixed_subscriptions(topics=10, consumers=6, reads=0.4, seed=seed)
    out = plan(lags, subs)
    assert_count_rules(out, subs)
    assert_count_rules(plan(lags, w.leave(subs, seed=seed), out), w.leave(subs, seed=seed))


# ---------------------------------------------------------------------------------------------
# (b) balance: the targets on skewed backlogs and on seed 002's group


@cache
def optimality(workload: str, strategy: str, seed: int) -> float:
    lags, subs = {"skewed": w.skewed, "seed002": w.seed002}[workload](seed=seed)
    return quality(plan(lags, subs, strategy=strategy), subs).optimality


def medians(workload: str) -> dict[str, float]:
    return {s: statistics.median(optimality(workload, s, seed) for seed in SEEDS) for s in ("lag-sticky", "lag", "range")}


def test_on_skewed_backlogs_the_heaviest_consumer_is_within_5_percent_of_the_bound() -> None:
    got = medians("skewed")
    # the workload is the hard case it claims to be: the seeds' strategies are far off
    assert got["lag"] > 3.0 and got["range"] > 1.3, got
    assert got["lag-sticky"] <= 1.05, got
    for seed in SEEDS:
        assert optimality("skewed", "lag-sticky", seed) < min(optimality("skewed", s, seed) for s in ("lag", "range"))


def test_on_seed_002s_group_the_median_is_within_15_percent_of_the_bound() -> None:
    got = medians("seed002")
    assert got["lag-sticky"] <= 1.15, got
    assert got["lag-sticky"] < min(got["lag"], got["range"]), got


def test_the_balance_is_over_the_whole_group_not_topic_by_topic() -> None:
    # every topic has one heavy partition; per topic the first consumer would take them all
    lags = frame(*[(f"t{i}", p, 1_000 if p == 0 else 1) for i in range(4) for p in range(4)])
    subs = {c: [f"t{i}" for i in range(4)] for c in ("a", "b", "c", "d")}
    got = loads(plan(lags, subs), subs)
    assert sorted(got.values()) == [1_003] * 4
    assert max(loads(plan(lags, subs, strategy="lag"), subs).values()) == 4_000


# ---------------------------------------------------------------------------------------------
# (c) stickiness


def join_ratio(lags: pd.DataFrame, subs: Subscriptions, seed: int) -> float:
    before = plan(lags, subs)
    joined = w.join(subs, seed=seed)
    after = plan(lags, joined, before)
    assert_count_rules(after, joined)
    # the newcomer must end with at least its share by count, all of which moved to it
    need = len(lags) // len(joined)
    newcomer = (set(joined) - set(subs)).pop()
    assert (after["consumer"] == newcomer).sum() >= need
    return len(moved(before, after)) / need


@pytest.mark.parametrize("name", ["uniform", "skewed"])
def test_a_join_moves_at_most_half_again_the_newcomers_share(name: str) -> None:
    for seed in range(4):
        lags, subs = WORKLOADS[name](seed)
        assert join_ratio(lags, subs, seed) <= 1.5, seed


def test_a_join_on_seed_002s_group_moves_at_most_half_again_the_newcomers_share_at_the_median() -> None:
    # seed 002's plans can sit well above the bound because of the counts; a join that frees
    # them may let balance (which comes first) move more than the newcomer's share
    ratios = [join_ratio(*w.seed002(seed=seed), seed) for seed in range(5)]
    assert statistics.median(ratios) <= 1.5, ratios


@pytest.mark.parametrize(("name", "low", "high"), [("uniform", 0.8, 1.2), ("skewed", 0.5, 1.2)])
def test_the_partitions_a_join_forces_out_carry_about_the_newcomers_share_of_lag(name: str, low: float, high: float) -> None:
    # a huge tolerance leaves only the moves the counts force. Every old consumer sits above
    # the new fair share (total / (C+1)) by about total / (C(C+1)), and sheds its heaviest
    # partitions that fit in that excess, so the newcomer collects about one fair share; had
    # they shed their lightest, it would get a fraction of it
    for seed in range(3):
        lags, subs = WORKLOADS[name](seed)
        joined = w.join(subs, seed=seed)
        newcomer = (set(joined) - set(subs)).pop()
        after = plan(lags, joined, plan(lags, subs), tolerance=10.0)
        share = loads(after, joined)[newcomer] / (lags["lag"].sum() / len(joined))
        assert low <= share <= high, (seed, share)


def with_lags(out: pd.DataFrame, lags: pd.DataFrame) -> pd.DataFrame:
    return out[["consumer", "topic", "partition"]].merge(lags, on=["topic", "partition"])


@pytest.mark.parametrize("seed", range(4))
def test_a_plan_within_tolerance_comes_back_unchanged(seed: int) -> None:
    lags, subs = w.skewed(seed=seed)
    before = plan(lags, subs)
    later = w.drift(lags, 0.02, seed=seed + 100)
    # the premise, measured independently: under the new lags the old plan is within 5%
    assert quality(with_lags(before, later), subs).optimality <= 1.05
    after = plan(later, subs, before)
    assert moved(before, after) == set()


def unbalanced(lags: pd.DataFrame, subs: Subscriptions, victim: str) -> pd.DataFrame:
    """A plan with valid counts but ``victim`` holding the heaviest partition of every topic
    it reads a partition of: swap it with whatever ``victim`` held there."""
    out = plan(lags, subs).copy()
    for _topic, rows in out.groupby("topic").groups.items():
        rows = list(rows)
        heavy = max(rows, key=lambda r: (out.at[r, "lag"], -out.at[r, "partition"]))
        mine = [r for r in rows if out.at[r, "consumer"] == victim]
        if mine and out.at[heavy, "consumer"] != victim:
            out.at[heavy, "consumer"], out.at[mine[0], "consumer"] = victim, out.at[heavy, "consumer"]
    return out


def test_a_plan_beyond_tolerance_is_rebalanced_and_a_huge_tolerance_keeps_it() -> None:
    lags, subs = w.skewed(seed=3)
    victim = sorted(subs)[0]
    before = unbalanced(lags, subs, victim)
    assert_count_rules(before, subs)
    fresh = quality(plan(lags, subs), subs)
    assert quality(before, subs).optimality > 2 * fresh.optimality
    after = plan(lags, subs, before)
    assert quality(after, subs).max_lag <= 1.05 * fresh.max_lag
    assert 0 < len(moved(before, after)) < len(lags) / 2
    # counts are valid, so with a tolerance beyond its imbalance the plan is kept as it is
    kept = plan(lags, subs, before, tolerance=10.0)
    assert moved(before, kept) == set()


def test_a_search_stopped_by_max_swaps_keeps_its_progress_instead_of_a_plan_from_scratch() -> None:
    lags, subs = w.skewed(seed=3)
    before = unbalanced(lags, subs, min(subs))
    rebalanced = plan(lags, subs, before)
    # unbounded, the search gets there by itself; three steps cannot, and their plan is kept:
    # at most two partitions moved per step, and the heaviest consumer only ever got lighter
    assert len(moved(before, rebalanced)) > 6
    capped = plan(lags, subs, before, max_swaps=3)
    assert_count_rules(capped, subs)
    assert 0 < len(moved(before, capped)) <= 6
    assert quality(rebalanced, subs).max_lag < quality(capped, subs).max_lag < quality(before, subs).max_lag


@pytest.mark.parametrize(("name", "tolerance"), [("uniform", 0.05), ("skewed", 1.0)])
def test_when_a_consumer_leaves_only_its_partitions_move(name: str, tolerance: float) -> None:
    # with fewer readers every quota grows, so every other partition can keep its owner
    for seed in range(3):
        lags, subs = WORKLOADS[name](seed)
        before = plan(lags, subs, tolerance=tolerance)
        left = w.leave(subs, seed=seed)
        gone = (set(subs) - set(left)).pop()
        after = plan(lags, left, before, tolerance=tolerance)
        assert moved(before, after) == {k for k, c in owners(before).items() if c == gone}, seed


def test_invalid_previous_entries_are_ignored() -> None:
    lags, subs = w.skewed(seed=1)
    before = plan(lags, subs)
    reader = sorted(subs)[0]
    junk = pd.DataFrame(
        {
            "consumer": ["departed", reader, reader, "departed"],
            "topic": ["topic000", "deleted-topic", "topic000", "topic001"],
            "partition": [0, 0, 9_999, 1],
        }
    )
    after = plan(lags, subs, pd.concat([junk, before[["consumer", "topic", "partition"]]], ignore_index=True))
    assert moved(before, after) == set()
    pd.testing.assert_frame_equal(after, before)


def test_a_consumer_that_stops_reading_a_topic_gives_up_exactly_that_topic() -> None:
    lags, subs = w.uniform(topics=6, partitions=12, consumers=4, seed=2)
    before = plan(lags, subs)
    quitter = sorted(subs)[1]
    narrowed = {c: [t for t in ts if not (c == quitter and t == "topic003")] for c, ts in subs.items()}
    after = plan(lags, narrowed, before)
    assert_count_rules(after, narrowed)
    theirs = {k for k, c in owners(before).items() if c == quitter and k[0] == "topic003"}
    assert theirs and theirs <= moved(before, after)
    assert not ((after["consumer"] == quitter) & (after["topic"] == "topic003")).any()


# ---------------------------------------------------------------------------------------------
# options


@pytest.mark.parametrize(
    "options",
    [
        {"tolerance": -0.1},
        {"tolerance": "0.1"},
        {"tolerance": True},
        {"max_swaps": 1.5},
        {"max_swaps": -1},
        {"max_swaps": True},
        {"balance": 1},
    ],
)
def test_invalid_options_are_refused(options: dict[str, object]) -> None:
    with pytest.raises(StrategyError):
        plan(DOC_LAGS, DOC_SUBS, **options)


def test_a_total_lag_that_would_overflow_the_loads_is_refused() -> None:
    huge = frame(*[("t0", p, 2**61) for p in range(3)])
    with pytest.raises(InputError, match=r"is 2\^62 or more, where the loads of lag-sticky and drain could wrap"):
        plan(huge, {"a": ["t0"], "b": ["t0"]})


def test_the_options_are_declared_with_their_defaults() -> None:
    assert sla.STRATEGIES["lag-sticky"].options == ("tolerance", "max_swaps")
    assert lagsticky.options({}) == (0.05, 1_000)


def test_without_swaps_counts_hold_and_the_search_can_only_have_helped() -> None:
    lags, subs = w.skewed(seed=5)
    rough = plan(lags, subs, max_swaps=0)
    assert_count_rules(rough, subs)
    # a step is only taken if it lowers the higher of two loads, so the maximum never grows
    assert quality(plan(lags, subs), subs).max_lag <= quality(rough, subs).max_lag


# ---------------------------------------------------------------------------------------------
# properties on random groups


TOPICS = ["t0", "t1", "t2", "t10", "orders"]
CONSUMERS = ["c0", "c1", "c2", "c10", "host-1-9f3a", "host-2-77aa"]


@st.composite
def groups(draw: st.DrawFn) -> tuple[pd.DataFrame, dict[str, list[str]], pd.DataFrame | None]:
    rows: list[tuple[str, int, int]] = []
    for topic in draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True)):
        n = draw(st.integers(1, 12))
        kind = draw(st.sampled_from(["zero", "small", "skewed"]))
        for p in range(n):
            lag = 0 if kind == "zero" else draw(st.integers(0, 1_000))
            if kind == "skewed" and draw(st.integers(0, 3)) == 0:
                lag = draw(st.integers(10**9, 10**12))
            rows.append((topic, p, lag))
    lags = frame(*rows)
    consumers = draw(st.lists(st.sampled_from(CONSUMERS), min_size=1, max_size=6, unique=True))
    topics = sorted(set(lags["topic"]))
    if draw(st.booleans()):
        subs = dict.fromkeys(consumers, topics)
    else:
        subs = {c: draw(st.lists(st.sampled_from(topics), max_size=len(topics), unique=True)) for c in consumers}
    previous = None
    if draw(st.booleans()):
        pool = [*consumers, "departed"]
        previous = lags[["topic", "partition"]].assign(consumer=[draw(st.sampled_from(pool)) for _ in range(len(lags))])
    return lags, subs, previous


@given(group=groups())
def test_any_group_gets_a_valid_plan_within_the_count_rules(group: tuple) -> None:
    lags, subs, previous = group
    out = plan(lags, subs, previous)
    sla.check_assignment(out, lags, subs)
    assert_count_rules(out, subs)


@given(group=groups())
def test_the_same_input_gives_the_same_plan_and_a_plan_is_its_own_next_plan(group: tuple) -> None:
    lags, subs, previous = group
    out = plan(lags, subs, previous)
    pd.testing.assert_frame_equal(out, plan(lags, subs, previous))
    # a plan handed back as the previous one is valid and as balanced as lag-sticky makes it
    pd.testing.assert_frame_equal(plan(lags, subs, out), out)


@given(group=groups())
def test_with_identical_subscriptions_the_search_never_raises_the_heaviest_load(group: tuple) -> None:
    lags, subs, _ = group
    topics = sorted(set(lags["topic"]))
    same = dict.fromkeys(subs, topics)
    # from the same start, a step is taken only if it lowers the load of the heaviest consumer
    assert quality(plan(lags, same), same).max_lag <= quality(plan(lags, same, max_swaps=0), same).max_lag


# ---------------------------------------------------------------------------------------------
# speed


def problem(lags: pd.DataFrame, subs: Subscriptions) -> GroupProblem:
    """The generators' frames are already sorted and typed, so build the problem directly."""
    return GroupProblem(
        topics=lags["topic"].to_numpy(dtype=object),
        partitions=lags["partition"].to_numpy(),
        lags=lags["lag"].to_numpy(),
        subscriptions=subs,
        consumers=sorted(subs),
    )


@pytest.mark.parametrize("make", [lambda: w.uniform(100, 100, 12), lambda: w.skewed(topics=400, consumers=24)])
def test_ten_thousand_partitions_get_a_valid_plan(make) -> None:  # type: ignore[no-untyped-def]
    # how fast is the scale benchmark's claim (tests/bench/scale.py), not a unit test's
    lags, subs = make()
    assert len(lags) >= 10_000
    got = run(lagsticky.STRATEGY, problem(lags, subs))
    assert len(got) == len(lags)
    check_assignment(lags.assign(consumer=got), lags, subs)


def test_a_million_partitions_for_a_thousand_consumers_come_out_even() -> None:
    lags, subs = w.uniform(topics=10_000, partitions=100, consumers=1_000, seed=0)
    got = run(lagsticky.STRATEGY, problem(lags, subs))  # its time: tests/bench/scale.py
    index = {c: i for i, c in enumerate(sorted(subs))}
    owner = np.fromiter((index[c] for c in got), dtype=np.int64, count=len(got))
    per_consumer = np.bincount(owner, minlength=len(subs))
    assert per_consumer.min() == per_consumer.max() == 1_000
    # 100 partitions per topic over 1,000 readers: nobody holds two of one topic
    topic = np.repeat(np.arange(10_000), 100)
    assert len(np.unique(topic * 1_000 + owner)) == len(owner)
    total = np.zeros(len(subs), dtype=np.int64)
    np.add.at(total, owner, lags["lag"].to_numpy())
    assert total.max() <= 1.05 * max(total.sum() / len(subs), lags["lag"].max())


@pytest.mark.parametrize("huge", [False, True])
def test_the_search_index_orders_rows_by_topic_then_lag_with_ties_in_row_order(huge: bool) -> None:
    from spark_lag_assign.assignors import engine, problem
    from spark_lag_assign.assignors.engine import Search

    rng = np.random.default_rng(7)
    lag = rng.integers(0, 5, 60).astype(np.int64)  # many ties
    if huge:  # topic x (max lag + 1) would pass 2^62: the index ranks lags first
        lag[7] = 2**61
    lags = pd.DataFrame({"topic": np.repeat(["a", "b", "c"], 20), "partition": np.tile(np.arange(20), 3), "lag": lag})
    prob = problem(lags, {c: ["a", "b", "c"] for c in "xyz"}, "lag-sticky")
    group = engine.build_group(prob, list(prob.consumers))
    state = engine.State.begin(group, np.arange(len(lag), dtype=np.int64) % 3)
    search = Search(group, state)
    search._index()
    np.testing.assert_array_equal(search.by_key, np.lexsort((group.lag, group.topic)))  # lexsort is stable
    np.testing.assert_array_equal(search.key_lag, group.lag[search.by_key])


@given(seed=st.integers(0, 2**32 - 1), side=st.sampled_from(["left", "right"]), floats=st.booleans())
def test_seek_finds_in_each_window_what_a_search_of_that_window_finds(seed: int, side: str, floats: bool) -> None:
    from spark_lag_assign.assignors import engine, problem
    from spark_lag_assign.assignors.engine import Search

    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 30, 4)
    lags = pd.DataFrame(
        {
            "topic": np.repeat([f"t{i}" for i in range(4)], sizes),
            "partition": np.concatenate([np.arange(k) for k in sizes]),
            "lag": rng.integers(0, 12, int(sizes.sum())),
        }
    )
    prob = problem(lags, {c: [f"t{i}" for i in range(4)] for c in "xy"}, "lag-sticky")
    group = engine.build_group(prob, list(prob.consumers))
    search = Search(group, engine.State.begin(group, np.zeros(len(lags), dtype=np.int64)))
    search._index()
    rows = rng.integers(0, len(lags), 25)
    start, stop = group.start[group.topic[rows]], group.stop[group.topic[rows]]
    lo = start + rng.integers(0, stop - start + 1)
    hi = lo + rng.integers(0, stop - lo + 1)
    targets = rng.uniform(-2, 14, 25) if floats else rng.integers(-2, 14, 25)
    found = search._seek(lo, hi, targets, side)  # type: ignore[arg-type]
    for i in range(25):
        window = search.key_lag[lo[i] : hi[i]]
        assert found[i] == lo[i] + np.searchsorted(window, targets[i], side=side)  # type: ignore[call-overload]
