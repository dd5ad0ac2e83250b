"""``lag``'s ``assign_codes`` (rounds over all topics at once) against the oracle (the seeds'
heap, topic by topic: ``tests/oracles.py``): the same owner for every partition of every group."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np
import pandas as pd
from hypothesis import given, strategies as st

import spark_lag_assign as sla
from spark_lag_assign.assignors import lagbased, problem, run
from spark_lag_assign.assignors.base import GroupProblem
from tests.oracles import lag_topic, per_topic


@contextmanager
def min_round_rows(value: int) -> Iterator[None]:
    old = lagbased.MIN_ROUND_ROWS
    lagbased.MIN_ROUND_ROWS = value
    try:
        yield
    finally:
        lagbased.MIN_ROUND_ROWS = old


def oracle_codes(group: GroupProblem) -> np.ndarray:
    """The oracle's owners as consumer codes."""
    return group.codes().index.consumer_codes(np.asarray(per_topic(lag_topic, group), dtype=object))


def same_as_reference(group: GroupProblem) -> None:
    expected = oracle_codes(group)
    # 0: every round vectorised; the default; huge: every topic of more than one round on the heap
    for threshold in (0, lagbased.MIN_ROUND_ROWS, 10**9):
        with min_round_rows(threshold):
            got = lagbased.assign_codes(group)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, expected, err_msg=f"MIN_ROUND_ROWS={threshold}")
    assert run(lagbased.STRATEGY, group) == per_topic(lag_topic, group)


@st.composite
def groups(draw: st.DrawFn) -> tuple[pd.DataFrame, dict[str, list[str]]]:
    n_topics = draw(st.integers(1, 6))
    n_consumers = draw(st.integers(1, 7))
    topics = [f"t{i}" for i in range(n_topics)]
    consumers = draw(st.permutations([f"c{i:02d}" for i in range(n_consumers)]))
    if draw(st.booleans()):  # everyone reads everything
        subs = {c: list(topics) for c in consumers}
    else:
        subs = {c: draw(st.lists(st.sampled_from(topics), unique=True, max_size=n_topics)) for c in consumers}
    # few distinct lags make many ties; wide ones make few
    lag_values = draw(st.sampled_from([st.integers(0, 2), st.integers(0, 10), st.integers(0, 2**40)]))
    rows = []
    for topic in topics:
        size = draw(st.integers(1, 40))
        numbers = draw(st.lists(st.integers(0, 200), min_size=size, max_size=size, unique=True))
        rows += [(topic, p, draw(lag_values)) for p in numbers]
    frame = pd.DataFrame(rows, columns=["topic", "partition", "lag"])
    if draw(st.booleans()):
        frame = frame.sort_values(["topic", "partition"], ignore_index=True)
    return frame, subs


@given(groups())
def test_assign_codes_matches_the_heap_topic_by_topic(case: tuple[pd.DataFrame, dict[str, list[str]]]) -> None:
    lags, subs = case
    if not any(subs.values()):
        subs = {**subs, "c99": ["t0"]}
    same_as_reference(problem(lags, subs, "lag"))


@given(
    st.integers(1, 5),  # consumers
    st.lists(st.integers(1, 60), min_size=1, max_size=8),  # partitions per topic
    st.integers(0, 3),  # lag range: mostly ties
    st.integers(0, 2**32),
)
def test_everyone_reads_everything_with_many_ties(consumers: int, sizes: list[int], top: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    names = [f"t{i}" for i in range(len(sizes))]
    lags = pd.DataFrame({
        "topic": np.repeat(names, sizes),
        "partition": np.concatenate([np.arange(s) for s in sizes]),
        "lag": rng.integers(0, top + 1, sum(sizes)),
    })
    subs = {f"c{i}": names for i in range(consumers)}
    same_as_reference(problem(lags, subs, "lag"))


def frame(rows: Sequence[tuple[str, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["topic", "partition", "lag"])


def plan(lags: pd.DataFrame, subs: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    out = sla.assign(lags, subs, "lag")
    return {c: [f"{t}p{p}" for t, p in zip(g["topic"], g["partition"])] for c, g in out.groupby("consumer")}


def test_the_seeds_worked_example() -> None:
    lags = frame([("t0", 0, 100_000), ("t0", 1, 50_000), ("t0", 2, 60_000)])
    subs = {"C0": ["t0"], "C1": ["t0"]}
    assert plan(lags, subs) == {"C0": ["t0p0"], "C1": ["t0p1", "t0p2"]}
    same_as_reference(problem(lags, subs, "lag"))


def test_one_consumer_and_one_huge_topic_takes_no_round_per_partition() -> None:
    lags = frame([("t", p, p % 7) for p in range(50_000)])
    group = problem(lags, {"c": ["t"]}, "lag")
    assert (lagbased.assign_codes(group) == 0).all()
    two = problem(lags, {"a": ["t"], "b": ["t"]}, "lag")  # 25,000 rounds of two: the heap
    np.testing.assert_array_equal(lagbased.assign_codes(two), oracle_codes(two))


def test_topics_of_many_rounds_beside_topics_of_few() -> None:
    rng = np.random.default_rng(7)
    sizes = [3, 500, 5, 40, 2_000, 7, 1]
    names = [f"t{i}" for i in range(len(sizes))]
    lags = pd.DataFrame({
        "topic": np.repeat(names, sizes),
        "partition": np.concatenate([np.arange(s) for s in sizes]),
        "lag": rng.integers(0, 50, sum(sizes)),
    })
    subs = {"a": names, "b": names[:5], "c": names[2:], "d": names, "e": names[1:2]}
    same_as_reference(problem(lags, subs, "lag"))


def test_assign_is_unchanged_at_100_000_partitions() -> None:
    from tests.bench import scale

    lags, subs = scale.group(100_000, 100)
    group = problem(lags, subs, "lag")
    np.testing.assert_array_equal(lagbased.assign_codes(group), oracle_codes(group))
    got = sla.assign(lags, subs, "lag")
    expected = pd.DataFrame({"consumer": per_topic(lag_topic, group), "topic": group.topics,
                             "partition": group.partitions, "lag": group.lags})
    expected = expected.sort_values(["consumer", "topic", "partition"], ignore_index=True)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), expected, check_dtype=False)


def test_lags_too_large_for_one_sort_key() -> None:
    # four topics and a lag of 2^61: topic x (lag + 1) does not fit in int64, so a two-key sort
    rows = [("a", 0, 5), ("a", 1, 2**61), ("a", 2, 5), ("a", 3, 3), ("a", 4, 5)]
    rows += [(t, p, p % 2) for t, size in (("b", 7), ("c", 2), ("d", 6)) for p in range(size)]
    subs = {"x": ["a", "b", "d"], "y": ["a", "c"], "z": ["a", "b", "c", "d"]}
    same_as_reference(problem(frame(rows), subs, "lag"))
