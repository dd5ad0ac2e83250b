"""The previous plan is read by one rule and checked once, on every path (``core.previous``).

The pure path (``assign``'s problem), the Spark job's (``job._previous_owner``, the column
that goes to Spark) and the DataFrame transform's (``previous_table``, which
``with_previous_owner`` joins the rows to; ``tests/spark/test_transforms.py`` runs it in Spark)
must give each partition the same previous owner, and that owner is the one a plain reading
of the rule gives: the smallest id among the listings of consumers still in the group that
still subscribe to the topic, with a usable partition number, of a partition that still exists.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

import spark_lag_assign as sla
from spark_lag_assign import assignors
from spark_lag_assign.core import previous as previous_plan
from spark_lag_assign.core.limits import PARTITION_LIMIT
from spark_lag_assign.core.previous import previous_table
from spark_lag_assign.core.subscriptions import validate_subscriptions
from spark_lag_assign.spark import job

CONSUMERS = ["a", "b", "c", "d"]
TOPICS = ["t0", "t1", "t2", "t3"]  # the previous plan may name "t9" too: a topic that is gone
#: partition numbers a stale or broken plan may hold: negative, beyond int32, not whole, missing
ODD_PARTITIONS = [-1, PARTITION_LIMIT, PARTITION_LIMIT + 3, 2**40, 2.5, None]

Key = tuple[str, int]


@st.composite
def cases(draw: st.DrawFn) -> tuple[pd.DataFrame, dict[str, list[str]], pd.DataFrame]:
    """(rows [topic, partition, lag] in any order, subscriptions, previous plan)."""
    members = draw(st.lists(st.sampled_from(CONSUMERS), min_size=1, unique=True))
    subs = {c: draw(st.lists(st.sampled_from(TOPICS), min_size=1, unique=True)) for c in members}  # some unread
    keys = [(t, p) for t in TOPICS for p in draw(st.lists(st.integers(0, 7), unique=True, max_size=5))]
    keys = draw(st.permutations(keys))
    rows = pd.DataFrame({"topic": [t for t, _ in keys], "partition": [p for _, p in keys], "lag": 1})
    rows = rows.astype({"topic": object, "partition": np.int64, "lag": np.int64})
    where = st.tuples(
        st.sampled_from([*TOPICS, "t9"]),
        st.one_of(st.integers(0, 9), st.sampled_from(ODD_PARTITIONS)),  # 8, 9: partitions that are gone
    )
    if keys:  # mostly partitions that still exist
        where = st.one_of(st.sampled_from(keys), where)
    owners = st.lists(st.sampled_from([*CONSUMERS, "gone"]), min_size=1, max_size=4)  # "gone", non-members: left
    listed = [(c, t, p) for (t, p), cs in draw(st.lists(st.tuples(where, owners), min_size=1, max_size=12)) for c in cs]
    listed = draw(st.permutations(listed))  # a partition's listings anywhere in the plan
    previous = pd.DataFrame(listed, columns=["consumer", "topic", "partition"])
    if all(isinstance(p, int) for _, _, p in listed):
        previous = previous.astype({"partition": np.int64})  # a plan's own column, as assignment_frame gives it
    return rows, subs, previous


def _usable(p: Any) -> bool:
    return p is not None and not (isinstance(p, float) and math.isnan(p)) and p == math.floor(p) and 0 <= p < PARTITION_LIMIT


def oracle(rows: pd.DataFrame, subs: dict[str, list[str]], previous: pd.DataFrame) -> dict[Key, str | None]:
    """The rule, read plainly: per row, the smallest eligible consumer that lists it."""
    best: dict[Key, str] = {}
    for c, t, p in previous.itertuples(index=False):
        if c in subs and t in subs[c] and _usable(p):
            key = (t, int(p))
            if key not in best or c < best[key]:
                best[key] = c
    return {(t, int(p)): best.get((t, int(p))) for t, p in zip(rows["topic"], rows["partition"])}


def pure(rows: pd.DataFrame, subs: dict[str, list[str]], previous: pd.DataFrame) -> dict[Key, str | None]:
    """The previous owners ``assign`` hands a strategy; None for the rows of unread topics,
    which it does not plan."""
    got: dict[Key, str | None] = {(t, int(p)): None for t, p in zip(rows["topic"], rows["partition"])}
    group = assignors.problem(rows, subs, "sticky", previous=previous)
    codes = group.codes()
    topics = np.asarray(codes.index.topics, dtype=object)[codes.row_topic]
    names = [None if c < 0 else codes.index.names[c] for c in codes.previous]
    got.update({(t, int(p)): n for t, p, n in zip(topics, group.partitions, names)})
    return got


def spark_job(rows: pd.DataFrame, subs: dict[str, list[str]], previous: pd.DataFrame) -> dict[Key, str | None]:
    """The column the job sends to Spark with its offsets."""
    offsets = rows[["topic", "partition"]]
    owners = job._previous_owner(offsets, previous, validate_subscriptions(subs), job._topics(offsets))
    assert owners.index.equals(offsets.index)
    return {(t, int(p)): o for t, p, o in zip(offsets["topic"], offsets["partition"], owners)}


def transform(rows: pd.DataFrame, subs: dict[str, list[str]], previous: pd.DataFrame) -> dict[Key, str | None]:
    """What ``with_previous_owner`` joins the rows to, joined the same way (a left join)."""
    table = previous_table(previous, subs)
    assert not table.duplicated(["topic", "partition"]).any()  # one owner per partition
    joined = rows[["topic", "partition"]].merge(table.astype({"partition": np.int64}), on=["topic", "partition"], how="left")
    return {(t, int(p)): (None if pd.isna(c) else c) for t, p, c in zip(joined["topic"], joined["partition"], joined["consumer"])}


@given(cases())
def test_every_path_gives_each_partition_the_previous_owner_of_the_one_rule(
    case: tuple[pd.DataFrame, dict[str, list[str]], pd.DataFrame],
) -> None:
    rows, subs, previous = case
    want = oracle(rows, subs, previous)
    assert pure(rows, subs, previous) == want
    assert spark_job(rows, subs, previous) == want
    assert transform(rows, subs, previous) == want


@given(cases())
def test_the_search_path_reads_rows_in_any_order_as_the_table_does(
    case: tuple[pd.DataFrame, dict[str, list[str]], pd.DataFrame],
) -> None:
    # beyond a dense table's size the rows are found by a binary search; the job's offsets
    # need not be sorted, the lags ``assign`` reads are
    rows, subs, previous = case
    want = oracle(rows, subs, previous)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(previous_plan, "DENSE_PER_ROW", 0)
        patch.setattr(previous_plan, "DENSE_FLOOR", 0)
        assert pure(rows, subs, previous) == spark_job(rows, subs, previous) == transform(rows, subs, previous) == want


@given(cases(), st.randoms(use_true_random=False))
def test_the_order_of_the_previous_plans_rows_does_not_matter(
    case: tuple[pd.DataFrame, dict[str, list[str]], pd.DataFrame], random: Any
) -> None:
    rows, subs, previous = case
    order = list(range(len(previous)))
    random.shuffle(order)
    shuffled = previous.iloc[order].reset_index(drop=True)
    assert spark_job(rows, subs, shuffled) == spark_job(rows, subs, previous) == pure(rows, subs, shuffled)


def test_the_smallest_eligible_id_keeps_a_partition_even_when_a_smaller_one_left_or_unsubscribed() -> None:
    # the case the job once read differently: it took the smallest id first, then dropped it
    rows = pd.DataFrame({"topic": ["t0", "t0"], "partition": [0, 1], "lag": [1, 1]})
    subs = {"b": ["t0"], "c": ["t0"], "a": ["t1"]}
    previous = pd.DataFrame({"consumer": ["c", "a", "b", "gone", "c"], "topic": "t0", "partition": [0, 0, 0, 1, 1]})
    want = {("t0", 0): "b", ("t0", 1): "c"}
    assert pure(rows, subs, previous) == spark_job(rows, subs, previous) == transform(rows, subs, previous) == want


@pytest.mark.parametrize(
    ("previous", "message"),
    [
        ([("a", "t0", 0)], "previous plan must be a pandas DataFrame, not list"),
        (pd.DataFrame({"consumer": ["a"], "partition": [0]}), "previous plan: missing column[(]s[)] topic"),
    ],
)
def test_a_malformed_previous_plan_is_refused_in_one_line_on_every_path(previous: Any, message: str) -> None:
    rows = pd.DataFrame({"topic": ["t0"], "partition": [0], "lag": [1]})
    subs = {"a": ["t0"]}
    for path in (pure, spark_job, transform):
        with pytest.raises(sla.InputError, match=message):
            path(rows, subs, previous)
