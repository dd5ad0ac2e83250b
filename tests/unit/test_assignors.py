"""One suite for every strategy of the registry: the invariants (``core.invariants``) on random groups.

Every case ends with ``check_assignment``, the checker production runs before a plan is
written; the checker itself is tested at the bottom against hand-broken assignments.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

import spark_lag_assign as sla
from spark_lag_assign.assignors import roundrobin
from spark_lag_assign.assignors.base import GroupProblem
from spark_lag_assign.assignors.frontend import run
from spark_lag_assign.errors import InputError, InvariantError, StrategyError
from tests.oracles import ring_walk

NAMES = list(sla.STRATEGIES)

# "t10" < "t2" and "Orders" < "orders": names where lexicographic and natural order disagree
TOPICS = ["t0", "t1", "t2", "t10", "orders", "Orders", "a.b-c_d"]
CONSUMERS = ["c0", "c1", "c2", "c10", "C0", "host-1-9f3a", "host-10-0b7c", "host-2-77aa"]
DEPARTED = ["gone-a", "gone-b"]
SEEDS = st.integers(0, 2**32)
GHOST_TOPIC = "no-partitions"  # subscribed to, but absent from the lags

Subscriptions = dict[str, list[str]]
Group = tuple[pd.DataFrame, Subscriptions, "pd.DataFrame | None", int]


# ---------------------------------------------------------------------------------------------
# generators


# Hypothesis draws the shape of a case (topics, sizes, kind of lag, who reads what); the bulk
# values come from a numpy generator seeded by one drawn integer, which keeps generation
# cheap and every case reproducible.


def lag_values(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "zero":
        return np.zeros(n, dtype=np.int64)
    if kind == "equal":
        return np.full(n, int(rng.integers(1, 10**6)), dtype=np.int64)
    values = rng.integers(0, 1_000, size=n, dtype=np.int64)
    if kind == "skewed":
        # a few partitions hold nearly all of the backlog, as after a stuck consumer
        values[rng.choice(n, size=min(n, 2), replace=False)] = rng.integers(10**9, 10**12, size=min(n, 2))
    return values


@st.composite
def lag_frames(draw: st.DrawFn) -> pd.DataFrame:
    rng = np.random.default_rng(draw(st.integers(0, 2**32), label="values seed"))
    frames = []
    for topic in draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=4, unique=True)):
        size = draw(st.integers(1, 12))
        # partition ids may have gaps: a snapshot can lack partitions
        gaps = draw(st.booleans())
        parts = np.sort(rng.choice(41, size=size, replace=False)) if gaps else np.arange(size)
        kind = draw(st.sampled_from(["zero", "equal", "uniform", "skewed"]))
        frames.append(pd.DataFrame({"topic": topic, "partition": parts.astype(np.int64),
                                    "lag": lag_values(kind, size, rng)}))
    return pd.concat(frames, ignore_index=True)


@st.composite
def subscription_maps(draw: st.DrawFn, topics: Sequence[str]) -> Subscriptions:
    consumers = draw(st.lists(st.sampled_from(CONSUMERS), min_size=1, max_size=6, unique=True))
    # a topic nobody reads and a subscribed topic without partitions both stay possible
    pool = [*sorted(topics), GHOST_TOPIC]
    if draw(st.booleans()):
        common = draw(st.lists(st.sampled_from(pool), max_size=len(pool), unique=True))
        return {c: list(common) for c in consumers}
    return {c: draw(st.lists(st.sampled_from(pool), max_size=len(pool), unique=True)) for c in consumers}


@st.composite
def previous_plans(draw: st.DrawFn, lags: pd.DataFrame, consumers: Sequence[str]) -> pd.DataFrame | None:
    """None, or an earlier plan over a group that has since changed: departed consumers,
    deleted partitions, and now and then a partition listed under two consumers."""
    if draw(st.booleans()):
        return None
    rng = np.random.default_rng(draw(st.integers(0, 2**32), label="previous seed"))
    owners = np.asarray(list(consumers) + DEPARTED, dtype=object)
    kept = rng.random(len(lags)) < 0.75
    rows = pd.DataFrame(
        {"consumer": owners[rng.integers(0, len(owners), size=int(kept.sum()))],
         "topic": lags["topic"].to_numpy()[kept], "partition": lags["partition"].to_numpy()[kept]}
    )
    n_extra = draw(st.integers(0, 4))
    extra = pd.DataFrame(
        {"consumer": owners[rng.integers(0, len(owners), size=n_extra)],
         "topic": np.asarray([*TOPICS, "deleted"], dtype=object)[rng.integers(0, len(TOPICS) + 1, size=n_extra)],
         "partition": rng.integers(0, 46, size=n_extra)}
    )
    # extra rows may repeat a live partition under a second owner, or name a deleted one
    return pd.concat([rows, extra], ignore_index=True).astype({"partition": np.int64})


@st.composite
def groups(draw: st.DrawFn) -> Group:
    lags = draw(lag_frames())
    subs = draw(subscription_maps(sorted(set(lags["topic"]))))
    previous = draw(previous_plans(lags, list(subs)))
    return lags, subs, previous, draw(SEEDS)


# ---------------------------------------------------------------------------------------------
# helpers


def plan(
    lags: pd.DataFrame,
    subs: Mapping[str, Sequence[str]],
    strategy: str,
    previous: pd.DataFrame | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """assign, then the invariant check every case must end with."""
    out = sla.assign(lags, subs, strategy, previous=previous, seed=seed)
    sla.check_assignment(out, lags, subs)
    return out


def subscribers(subs: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for consumer, topics in subs.items():
        for t in topics:
            out.setdefault(t, set()).add(consumer)
    return out


def counts_per_topic(out: pd.DataFrame, lags: pd.DataFrame, subs: Mapping[str, Sequence[str]]) -> dict[str, list[int]]:
    """topic -> partitions held by each of its subscribers, zeros included."""
    held = Counter(zip(out["topic"], out["consumer"]))
    return {
        t: [held[(t, c)] for c in sorted(readers)]
        for t, readers in subscribers(subs).items()
        if t in set(lags["topic"])
    }


def copy_input(group: Group) -> Group:
    lags, subs, previous, seed = group
    return lags.copy(), {c: list(t) for c, t in subs.items()}, None if previous is None else previous.copy(), seed


# ---------------------------------------------------------------------------------------------
# the registry


def test_registry_holds_exactly_the_six_strategies_of_the_design() -> None:
    assert NAMES == ["range", "roundrobin", "lag", "shuffle", "sticky", "lag-sticky", "drain"]
    assert sla.DEFAULT_STRATEGY == "lag-sticky"
    assert all(spec.name == name for name, spec in sla.STRATEGIES.items())


# ---------------------------------------------------------------------------------------------
# invariants on random groups; every case also checks the balance README promises


PER_TOPIC_BALANCED = {"range", "lag", "shuffle", "lag-sticky"}  # within one per topic, always
GROUP_BALANCED = {"roundrobin", "sticky"}  # within one over the group, when subscriptions agree


@pytest.mark.parametrize("strategy", NAMES)
@given(group=groups())
def test_plan_is_valid_balanced_and_well_formed(strategy: str, group: Group) -> None:
    lags, subs, previous, seed = group
    out = plan(lags, subs, strategy, previous, seed)

    # independently of the checker: what is left out is exactly the topics nobody reads
    read = {t for topics in subs.values() for t in topics}
    left = sla.unassigned(lags, subs)
    assert set(zip(left["topic"], left["partition"])) == {
        (t, p) for t, p in zip(lags["topic"], lags["partition"]) if t not in read
    }
    assert len(out) + len(left) == len(lags)

    # Only readers of topics with partitions may get partitions. And a reader of a topic with
    # at least one partition per reader always gets some: range, lag and shuffle deal every
    # topic over all of its readers, roundrobin walks them all in turn, and for the sticky
    # strategies another reader would hold two or more (pigeonhole), so balance moves one.
    sizes = lags.groupby("topic").size().to_dict()
    readers = subscribers(subs)
    may_work = {c for c, topics in subs.items() if any(t in sizes for t in topics)}
    must_work = {c for c, topics in subs.items() if any(sizes.get(t, 0) >= len(readers[t]) for t in topics)}
    assert must_work <= set(out["consumer"]) <= may_work

    if strategy in PER_TOPIC_BALANCED:
        for topic, counts in counts_per_topic(out, lags, subs).items():
            assert max(counts) - min(counts) <= 1, (topic, counts)
    if strategy in GROUP_BALANCED and len({frozenset(t) for t in subs.values()}) == 1:
        counts = [int((out["consumer"] == c).sum()) for c in subs]
        assert max(counts) - min(counts) <= 1, counts

    assert list(out.columns) == ["consumer", "topic", "partition", "lag"]
    assert out["partition"].dtype == np.int64 and out["lag"].dtype == np.int64
    assert all(isinstance(v, str) for v in out["consumer"]) and all(isinstance(v, str) for v in out["topic"])
    keys = list(zip(out["consumer"], out["topic"], out["partition"]))
    assert keys == sorted(keys)
    assert out.index.equals(pd.RangeIndex(len(out)))
    given_lag = {(t, p): lag for t, p, lag in zip(lags["topic"], lags["partition"], lags["lag"])}
    assert [given_lag[(t, p)] for t, p in zip(out["topic"], out["partition"])] == out["lag"].tolist()


@pytest.mark.parametrize("strategy", NAMES)
@given(group=groups(), other_seed=SEEDS)
def test_same_input_gives_the_same_plan_and_only_a_seeded_strategy_heeds_the_seed(
    strategy: str, group: Group, other_seed: int
) -> None:
    lags, subs, previous, seed = group
    kept_lags, kept_subs, kept_previous, _ = copy_input(group)
    fresh_lags, fresh_subs, fresh_previous, _ = copy_input(group)
    first = plan(lags, subs, strategy, previous, seed)
    # a strategy that declares no seed must give the same plan whatever the seed
    again = seed if sla.STRATEGIES[strategy].uses_seed else other_seed
    pd.testing.assert_frame_equal(sla.assign(fresh_lags, fresh_subs, strategy, fresh_previous, again), first)
    # an assignor that sorted or annotated its input in place would break the caller's frames
    pd.testing.assert_frame_equal(lags, kept_lags)
    assert subs == kept_subs
    if previous is not None:
        pd.testing.assert_frame_equal(previous, kept_previous)


@pytest.mark.parametrize("strategy", NAMES)
@given(group=groups(), data=st.data())
def test_plan_ignores_input_order_and_stale_entries_of_the_previous_plan(
    strategy: str, group: Group, data: st.DataObject
) -> None:
    lags, subs, previous, seed = group
    expected = plan(lags, subs, strategy, previous, seed)
    rows = data.draw(st.permutations(range(len(lags))), label="lag rows")
    keys = data.draw(st.permutations(sorted(subs)), label="consumer keys")
    mixed_subs = {c: data.draw(st.permutations(subs[c]), label=f"topics of {c}") for c in keys}
    # consumers that left and partitions that were deleted since: to be ignored, not an error;
    # with no previous plan at all these rows alone must change nothing either
    stale = pd.DataFrame(
        {
            "consumer": ["gone-a", "gone-b", sorted(subs)[0], "gone-a"],
            "topic": [lags["topic"].iloc[0], lags["topic"].iloc[-1], "deleted", lags["topic"].iloc[0]],
            "partition": [int(lags["partition"].iloc[0]), int(lags["partition"].iloc[-1]), 0, 999],
        }
    )
    noisy = stale if previous is None else pd.concat([previous, stale], ignore_index=True)
    noisy = noisy.iloc[data.draw(st.permutations(range(len(noisy))), label="previous rows")]
    got = sla.assign(lags.iloc[list(rows)], mixed_subs, strategy, noisy, seed)
    pd.testing.assert_frame_equal(got, expected)


# ---------------------------------------------------------------------------------------------
# edge cases every strategy must survive, named so a failure says which


def frame(*rows: tuple[str, int, int]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=["topic", "partition", "lag"])


EDGES: dict[str, tuple[pd.DataFrame, Subscriptions]] = {
    "all lags zero": (frame(*[("t0", p, 0) for p in range(5)]), {"c0": ["t0"], "c1": ["t0"]}),
    "one partition holds all the lag": (
        frame(("t0", 0, 10**12), *[("t0", p, 0) for p in range(1, 6)]),
        {"c0": ["t0"], "c1": ["t0"], "c2": ["t0"]},
    ),
    "more consumers than partitions": (frame(("t0", 0, 5), ("t0", 1, 7)), {f"c{i}": ["t0"] for i in range(5)}),
    "a single consumer": (frame(("t0", 0, 5), ("t1", 3, 7)), {"solo": ["t0", "t1"]}),
    "a topic nobody reads": (frame(("t0", 0, 5), ("t1", 0, 7)), {"c0": ["t0"], "c1": ["t0"]}),
    "a consumer reading nothing": (frame(("t0", 0, 5), ("t0", 1, 7)), {"c0": ["t0"], "idle": []}),
    "only topics without partitions": (frame(("t0", 0, 5)), {"c0": ["elsewhere"]}),
    "no partitions at all": (
        pd.DataFrame({"topic": pd.Series([], dtype=object), "partition": pd.Series([], dtype=np.int64),
                      "lag": pd.Series([], dtype=np.int64)}),
        {"c0": ["t0"]},
    ),
}


@pytest.mark.parametrize("strategy", NAMES)
@pytest.mark.parametrize("edge", list(EDGES))
def test_edge_cases_give_valid_plans(strategy: str, edge: str) -> None:
    lags, subs = EDGES[edge]
    out = plan(lags, subs, strategy)
    read = {t for topics in subs.values() for t in topics}
    assert sorted(zip(out["topic"], out["partition"])) == sorted(
        (t, p) for t, p in zip(lags["topic"], lags["partition"]) if t in read
    )


# ---------------------------------------------------------------------------------------------
# bad input: one exception type per failure, a one-line message naming it


GOOD_LAGS = frame(("t0", 0, 10), ("t0", 1, 20), ("t1", 0, 5))
GOOD_SUBS: Subscriptions = {"c0": ["t0", "t1"], "c1": ["t0"]}


def one_line(err: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(err.value)
    assert message and "\n" not in message
    return message


def test_unknown_strategy_is_refused_with_the_list_of_valid_names() -> None:
    with pytest.raises(StrategyError) as err:
        sla.assign(GOOD_LAGS, GOOD_SUBS, "least-loaded")
    message = one_line(err)
    assert "least-loaded" in message
    assert all(name in message for name in NAMES)


@pytest.mark.parametrize("strategy", NAMES)
@pytest.mark.parametrize(
    ("lags", "subs", "needle"),
    [
        (frame(("t0", 0, 10), ("t0", 1, -1)), GOOD_SUBS, "negative lag -1 for t0-1"),
        (pd.DataFrame({"topic": ["t0", "t0"], "partition": [0, 1], "lag": [3, None]}), GOOD_SUBS, "missing lag for t0-1"),
        (pd.DataFrame({"topic": ["t0", "t0"], "partition": [0, 1], "lag": [np.nan, 3.0]}), GOOD_SUBS, "missing lag for t0-0"),
        (frame(("t0", 0, 10), ("t1", 0, 1), ("t0", 0, 10)), GOOD_SUBS, "t0-0 appears more than once"),
        (GOOD_LAGS, {}, "no consumers"),
    ],
    ids=["negative lag", "lag None", "lag NaN", "duplicate partition", "no consumers"],
)
def test_malformed_input_is_refused_with_a_one_line_input_error(
    strategy: str, lags: pd.DataFrame, subs: Subscriptions, needle: str
) -> None:
    with pytest.raises(InputError) as err:
        sla.assign(lags, subs, strategy)
    assert needle in one_line(err)


@pytest.mark.parametrize("strategy", NAMES)
def test_an_option_the_strategy_does_not_take_is_refused(strategy: str) -> None:
    with pytest.raises(StrategyError) as err:
        sla.assign(GOOD_LAGS, GOOD_SUBS, strategy, no_such_option=1)
    message = one_line(err)
    assert "no_such_option" in message and strategy in message


# ---------------------------------------------------------------------------------------------
# roundrobin: the vectorised path is the general path, and it is fast


def test_roundrobin_docstring_example_carries_the_ring_across_topics() -> None:
    lags = frame(*[("t0", p, 0) for p in range(2)], *[("t1", p, 0) for p in range(4)])
    out = plan(lags, {c: ["t0", "t1"] for c in ("C0", "C1", "C2")}, "roundrobin")
    # a ring restarting at C0 for t1 would give C0 three partitions and C2 one
    assert list(zip(out["consumer"], out["topic"], out["partition"])) == [
        ("C0", "t0", 0), ("C0", "t1", 1), ("C1", "t0", 1), ("C1", "t1", 2), ("C2", "t1", 0), ("C2", "t1", 3),
    ]


@given(lags=lag_frames(), n=st.integers(1, 7))
def test_roundrobin_shortcut_for_identical_subscriptions_agrees_with_the_ring_walk(lags: pd.DataFrame, n: int) -> None:
    lags = lags.sort_values(["topic", "partition"]).reset_index(drop=True)
    topics = sorted(set(lags["topic"]))
    consumers = [f"c{i}" for i in range(n)]
    problem = GroupProblem(
        topics=lags["topic"].to_numpy(dtype=object),
        partitions=lags["partition"].to_numpy(dtype=np.int64),
        lags=lags["lag"].to_numpy(dtype=np.int64),
        subscriptions=dict.fromkeys(consumers, topics),
        consumers=consumers,
    )
    assert run(roundrobin.STRATEGY, problem) == ring_walk(problem)


def test_roundrobin_plans_a_million_partitions_over_a_thousand_consumers() -> None:
    # how fast is the scale benchmark's claim (tests/bench/scale.py), not a unit test's
    n_topics, per_topic, n_consumers = 1_000, 1_000, 1_000
    names = np.array([f"topic-{i:04d}" for i in range(n_topics)], dtype=object)
    consumers = [f"host-{i:04d}" for i in range(n_consumers)]
    problem = GroupProblem(
        topics=np.repeat(names, per_topic),
        partitions=np.tile(np.arange(per_topic, dtype=np.int64), n_topics),
        lags=np.ones(n_topics * per_topic, dtype=np.int64),
        subscriptions={c: list(names) for c in consumers},
        consumers=consumers,
    )
    owners = run(roundrobin.STRATEGY, problem)
    # 1,000 partitions per topic and 1,000 consumers: the ring lines up topic by topic
    assert owners[:3] == ["host-0000", "host-0001", "host-0002"]
    assert owners[per_topic] == "host-0000" and owners[-1] == "host-0999"
    assert set(Counter(owners).values()) == {n_topics * per_topic // n_consumers}


# ---------------------------------------------------------------------------------------------
# shuffle: reproducible for a seed, different across seeds, no favourite consumer


MANY_TOPICS = frame(*[(f"topic-{t:02d}", p, 1) for t in range(40) for p in range(5)])
HOSTS: Subscriptions = {f"host-{i}-{u}": sorted(set(MANY_TOPICS["topic"])) for i, u in enumerate("abc")}


def test_shuffle_is_reproducible_for_a_seed_and_varies_with_it() -> None:
    plans = [plan(MANY_TOPICS, HOSTS, "shuffle", seed=s) for s in range(6)]
    pd.testing.assert_frame_equal(plans[0], plan(MANY_TOPICS, HOSTS, "shuffle", seed=0))
    distinct = {tuple(zip(p["consumer"], p["topic"], p["partition"])) for p in plans}
    # 40 topics with 3! orders each: two seeds agreeing everywhere would be a broken seed
    assert len(distinct) == len(plans)


def test_shuffle_spreads_each_topics_extra_partitions_over_all_hosts() -> None:
    """Seed 002: 40 topics of 5 partitions over 3 hosts; Range gives both extras of every
    topic to the first two hosts, so the third gets 40 fewer partitions."""
    ranged = Counter(plan(MANY_TOPICS, HOSTS, "range")["consumer"])
    assert ranged[sorted(HOSTS)[2]] == 40
    for seed in range(3):
        counts = Counter(plan(MANY_TOPICS, HOSTS, "shuffle", seed=seed)["consumer"])
        # 200 partitions, extras random: each host gets about 66; 40 would mean a favourite
        assert min(counts.values()) >= 55 and max(counts.values()) <= 78, counts


# ---------------------------------------------------------------------------------------------
# the checker itself: it must catch what a broken assignor would produce


def assignment(*rows: tuple[str, str, int]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=["consumer", "topic", "partition"])


CHECK_LAGS = frame(("t0", 0, 1), ("t0", 1, 1), ("t1", 0, 1), ("t9", 0, 1))
CHECK_SUBS: Subscriptions = {"c0": ["t0", "t1"], "c1": ["t0"]}  # nobody reads t9


def test_checker_accepts_a_valid_assignment_and_an_unread_topic_left_out() -> None:
    sla.check_assignment(assignment(("c0", "t0", 0), ("c1", "t0", 1), ("c0", "t1", 0)), CHECK_LAGS, CHECK_SUBS)


@pytest.mark.parametrize(
    ("rows", "needle"),
    [
        ((("c0", "t0", 0), ("c1", "t0", 0), ("c1", "t0", 1), ("c0", "t1", 0)), "t0-0 is assigned more than once"),
        ((("c0", "t0", 0), ("c0", "t1", 0)), "unassigned, e.g. t0-1"),
        ((("c0", "t0", 0), ("c1", "t0", 1), ("c1", "t1", 0)), "c1, which does not subscribe to t1"),
        ((("c0", "t0", 0), ("c1", "t0", 1), ("ghost", "t1", 0)), "unknown consumer(s) ghost"),
        ((("c0", "t0", 0), ("c1", "t0", 1), ("c0", "t1", 0), ("c0", "t1", 7)), "do not exist or are not subscribed"),
        ((("c0", "t0", 0), ("c1", "t0", 1), ("c0", "t1", 0), ("c0", "t9", 0)), "does not subscribe to t9"),
    ],
    ids=["twice", "missing", "non-subscriber", "unknown consumer", "nonexistent partition", "unread topic"],
)
def test_checker_rejects_broken_assignments(rows: tuple[tuple[str, str, int], ...], needle: str) -> None:
    with pytest.raises(InvariantError) as err:
        sla.check_assignment(assignment(*rows), CHECK_LAGS, CHECK_SUBS)
    assert needle in one_line(err)


@given(st.lists(st.tuples(st.sampled_from(["t0", "t1"]), st.integers(0, 3)), max_size=10))
def test_the_checker_finds_what_a_set_of_the_assigned_partitions_finds(rows: list[tuple[str, int]]) -> None:
    # the checker counts keys where they are dense and sorts them otherwise: either way its
    # verdict is this plain one (t0 and t1 have partitions 0-2; c0 reads both)
    lags = frame(*((t, p, 1) for t in ("t0", "t1") for p in range(3)))
    expected = {(t, p) for t in ("t0", "t1") for p in range(3)}
    if len(set(rows)) < len(rows):
        needle: str | None = "more than once"
    elif expected - set(rows):
        needle = "unassigned"
    elif set(rows) - expected:
        needle = "do not exist or are not subscribed"
    else:
        needle = None
    got = assignment(*(("c0", t, p) for t, p in rows))
    if needle is None:
        sla.check_assignment(got, lags, {"c0": ["t0", "t1"]})
        return
    with pytest.raises(InvariantError, match=needle):
        sla.check_assignment(got, lags, {"c0": ["t0", "t1"]})
