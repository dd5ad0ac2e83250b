"""The front end of ``assign``: input refused in one line, the rules for a
previous plan and for consumer ids, and the fast paths held to the plain ones.

The fast paths (grouped columns hashed once per run, dense lookup tables, closed forms for
range and roundrobin, sticky's packed keys) only pay off on large inputs, so each test here
either builds an input big enough to take them or turns the switch by hand, and compares
with the path it replaces.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

import spark_lag_assign as sla
from spark_lag_assign import assignors
from spark_lag_assign.assignors import range as range_, roundrobin, sticky_rows
from spark_lag_assign.assignors.base import GroupProblem
from spark_lag_assign.assignors.frontend import run
from spark_lag_assign.core import previous as previous_plan
from spark_lag_assign.core.ids import CONSUMER_ID_PATTERN, check_consumer_id
from spark_lag_assign.core.limits import ENGINE_LOAD_LIMIT
from spark_lag_assign.core.quality import exact_sum, moved
from spark_lag_assign.core.subscriptions import (
    SubscriptionIndex,
    distinct,
    factorize,
    run_starts,
    strictly_increasing,
    validate_subscriptions,
)
from spark_lag_assign.errors import InputError
from tests.oracles import TOPIC_RULES, per_topic, range_topic, ring_walk
from tests.unit.test_assignors import NAMES, Group, groups, lag_frames, one_line, subscription_maps

# ---------------------------------------------------------------------------------------------
# numbers that would wrap, or are not numbers: one InputError line naming the row


def lags_with(col: str, values: Any) -> pd.DataFrame:
    lags = pd.DataFrame({"topic": ["t0", "t0", "t0"], "partition": [0, 1, 2], "lag": [5, 6, 7]})
    lags[col] = values
    return lags


@pytest.mark.parametrize(
    ("col", "values", "needle"),
    [
        ("lag", np.array([5, 2**63, 7], dtype=np.uint64), "lag 9223372036854775808 for t0-1 is 2^63 or more"),
        ("lag", [5, 2**64 + 1, 7], "lag 18446744073709551617 for t0-1 is 2^63 or more"),
        ("lag", [5.0, float("inf"), 7.0], "lag inf for t0-1 is infinite"),
        ("lag", [5.0, 6.5, 7.0], "lag 6.5 for t0-1 is not whole"),
        ("lag", [5.0, 2.0**63, 7.0], "for t0-1 is 2^63 or more"),
        ("lag", [2**62, 2**62, 7], "the total lag 9,223,372,036,854,775,815 is 2^63 or more"),
        ("partition", [0, 2**31, 2], "partition 2147483648 for a row of topic t0 is 2^31 or more"),
        ("partition", [0.0, float("-inf"), 2.0], "partition -inf for a row of topic t0 is infinite"),
        ("partition", [0, 1, None], "missing partition for a row of topic t0"),
    ],
    ids=[
        "uint64 lag",
        "huge int lag",
        "inf lag",
        "fractional lag",
        "float 2^63 lag",
        "total wraps",
        "partition 2^31",
        "partition -inf",
        "partition None",
    ],
)
@pytest.mark.parametrize("strategy", ["range", "sticky", "lag-sticky"])
def test_numbers_that_would_wrap_or_are_not_integers_are_refused_in_one_line(
    strategy: str, col: str, values: list[object], needle: str
) -> None:
    with pytest.raises(InputError) as err:
        sla.assign(lags_with(col, values), {"c0": ["t0"]}, strategy)
    assert needle in one_line(err)


def test_the_largest_exact_total_is_accepted_and_kept_exactly() -> None:
    lags = lags_with("lag", [2**62, 2**62 - 8, 7])  # total 2^63 - 1
    out = sla.assign(lags, {"c0": ["t0"], "c1": ["t0"]}, "range")
    assert [int(v) for v in out["lag"]] == [2**62, 2**62 - 8, 7]
    assert sum(int(v) for v in out["lag"]) == 2**63 - 1


@pytest.mark.parametrize("strategy", ["lag-sticky", "drain"])
def test_the_lag_balancing_engine_takes_totals_up_to_its_one_limit_and_names_it_beyond(strategy: str) -> None:
    """lag-sticky and drain add a lag to a load before comparing: ENGINE_LOAD_LIMIT is theirs,
    checked on the exact total (a float sum would round 2^62 - 1 up to the limit)."""
    subs = {"c0": ["t0"], "c1": ["t0"]}
    below = sla.assign(lags_with("lag", [2**61, 2**61 - 1, 0]), subs, strategy)
    assert set(below["consumer"]) == {"c0", "c1"}
    with pytest.raises(InputError) as err:
        sla.assign(lags_with("lag", [2**61, 2**61, 0]), subs, strategy)
    assert "the total lag 4,611,686,018,427,387,904 is 2^62 or more" in one_line(err)
    assert ENGINE_LOAD_LIMIT == 2**62


@given(st.lists(st.integers(0, 2**63 - 1), max_size=40))
def test_exact_total_never_wraps(values: list[int]) -> None:
    assert exact_sum(np.asarray(values, dtype=np.int64)) == sum(values)


# ---------------------------------------------------------------------------------------------
# a previous plan that lists a partition twice: the smallest consumer id keeps it


def test_a_partition_listed_twice_in_the_previous_plan_stays_with_the_smallest_consumer() -> None:
    lags = pd.DataFrame({"topic": "t0", "partition": range(4), "lag": 1})
    subs = {"c0": ["t0"], "c1": ["t0"]}
    # c1 lists t0-0 too; read as c0's, c0 holds {0, 1} and c1 {2, 3}: balanced, nothing moves
    previous = pd.DataFrame({"consumer": ["c1", "c0", "c0", "c1", "c1"], "topic": "t0", "partition": [0, 0, 1, 2, 3]})
    for rows in ([0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [1, 0, 3, 2, 4]):
        shuffled = previous.iloc[rows]
        for strategy in ("sticky", "lag-sticky", "drain"):
            plan = sla.assign(lags, subs, strategy, previous=shuffled)
            assert plan.groupby("consumer")["partition"].apply(list).to_dict() == {"c0": [0, 1], "c1": [2, 3]}
            # the metric reads a duplicate the same way, so it reports no move that did not happen
            assert moved(plan, shuffled, subs) == 0


def test_previous_codes_keep_the_smallest_eligible_consumer_of_a_duplicate() -> None:
    index = SubscriptionIndex({"a": ["t0"], "b": ["t0", "t1"], "c": ["t1"]}, ["t0", "t1"])
    rows_topic = np.array([0, 0, 1], dtype=np.int64)  # t0-0, t0-1, t1-0
    rows_partition = np.array([0, 1, 0], dtype=np.int64)
    previous = pd.DataFrame(
        {
            "consumer": ["c", "b", "a", "gone", "c", "b", "c"],
            "topic": ["t0", "t0", "t0", "t0", "t1", "t1", "t1"],
            "partition": [0, 0, 0, 1, 0, 0, 0],
        }
    )
    # t0-0: c does not read t0, so a (smaller than b) keeps it; t0-1: only a departed owner;
    # t1-0: b and c, listed three times
    assert assignors.previous_codes(previous, rows_topic, rows_partition, index).tolist() == [0, -1, 1]


# ---------------------------------------------------------------------------------------------
# consumer ids: the one rule of spark_lag_assign.core.ids (tests/unit/test_consumer_ids.py
# checks every entry point against it); ASCII, so Python's order is Java's (UTF-16)


@pytest.mark.parametrize("consumer", ["host-\U0001f600", "\U00010000", "a\ud800b", "\udfff", "hôte-1", "节点-7", "\uffff"])
def test_ids_outside_ascii_are_refused_in_one_line(consumer: str) -> None:
    with pytest.raises(InputError) as err:
        check_consumer_id(consumer)
    assert "invalid consumer id" in one_line(err) and "\n" not in one_line(err)
    with pytest.raises(InputError):
        sla.assign(lags_with("lag", [1, 2, 3]), {consumer: ["t0"], "c0": ["t0"]}, "range")


@given(st.lists(st.from_regex(CONSUMER_ID_PATTERN[1:-1], fullmatch=True), min_size=1, max_size=6, unique=True))
def test_accepted_ids_sort_the_same_by_code_point_and_by_utf16_code_unit(ids: list[str]) -> None:
    for consumer in ids:
        check_consumer_id(consumer)
    assert sorted(ids) == sorted(ids, key=lambda c: c.encode("utf-16-be"))
    # range gives the extra partition to the first id in Java's order
    lags = pd.DataFrame({"topic": "t0", "partition": range(len(ids) + 1), "lag": 1})
    out = sla.assign(lags, {c: ["t0"] for c in ids}, "range")
    java_first = min(ids, key=lambda c: c.encode("utf-16-be"))
    assert out["consumer"].value_counts()[java_first] == 2 if len(ids) > 1 else True


# ---------------------------------------------------------------------------------------------
# subscriptions: validated once, kinds shared


def test_validated_subscriptions_share_one_list_per_kind_and_keep_every_rule() -> None:
    same = ["b", "a", "a"]
    subs = validate_subscriptions({"c2": same, "c1": same, "c0": ["a", "b"], "c3": []})
    assert list(subs) == ["c0", "c1", "c2", "c3"]
    assert subs["c0"] == ["a", "b"] and subs["c0"] is subs["c1"] is subs["c2"]
    assert distinct(subs) == {("a", "b"): ["c0", "c1", "c2"], (): ["c3"]}
    # equal lists in different objects are one kind, members in the mapping's order
    assert distinct({"x": ["t"], "y": ["u"], "z": ["t"]}) == {("t",): ["x", "z"], ("u",): ["y"]}
    for bad in ({"c0": ["a", ""]}, {"c0": ["a", 5]}, {"c0": "a"}, {" c0": ["a"]}):
        with pytest.raises(InputError):
            validate_subscriptions(bad)  # type: ignore[arg-type]


@given(
    st.dictionaries(
        st.sampled_from(["c0", "c1", "c2", "c3", "c4", "c5"]),
        st.integers(0, 3),
        min_size=1,
    ),
    st.lists(st.lists(st.sampled_from(["t0", "t1", "t2"]), max_size=4), min_size=4, max_size=4),
)
def test_the_kinds_validation_records_are_the_kinds_of_its_result(owners: dict[str, int], lists: list[list[str]]) -> None:
    # consumers given the same list object, equal lists in other objects, interleaved in id order
    subs = validate_subscriptions({c: lists[k] for c, k in owners.items()})
    plain = {c: list(topics) for c, topics in subs.items()}
    assert distinct(subs) == distinct(plain)
    for members in distinct(subs).values():
        assert all(subs[c] is subs[members[0]] for c in members)
    again = pickle.loads(pickle.dumps(subs))  # as Spark ships it to its workers
    assert again == subs and distinct(again) == distinct(subs) and validate_subscriptions(again) is again


def test_subscription_index_classes_group_topics_by_their_readers() -> None:
    index = SubscriptionIndex({"a": ["t1", "t2"], "b": ["t1", "t2", "t3"], "c": ["t3"]}, ["t0", "t1", "t2", "t3"])
    assert list(index.topics) == ["t0", "t1", "t2", "t3"]
    assert index.topic_class.tolist() == [-1, 0, 0, 1]  # t0: nobody
    assert [m.tolist() for m in index.class_members] == [[0, 1], [1, 2]]
    assert index.allowed.tolist() == [[False, True, True, False], [False, True, True, True], [False, False, False, True]]


# ---------------------------------------------------------------------------------------------
# the fast paths against the plain ones


def big_lags(rng: np.random.Generator, n_topics: int, sizes: tuple[int, ...]) -> pd.DataFrame:
    """Topics of the given sizes (cycled), grouped by topic: large enough for the run paths."""
    names = [f"t{t:03d}" for t in range(n_topics)]
    counts = [sizes[t % len(sizes)] for t in range(n_topics)]
    return pd.DataFrame(
        {
            "topic": np.repeat(np.asarray(names, dtype=object), counts),
            "partition": np.concatenate([np.arange(c) for c in counts]),
            "lag": rng.integers(0, 100, size=sum(counts)),
        }
    )


@pytest.mark.parametrize("strategy", NAMES)
def test_grouped_unsorted_large_input_plans_as_its_sorted_copy(strategy: str) -> None:
    rng = np.random.default_rng(7)
    lags = big_lags(rng, 30, (40, 7, 13))
    subs = {f"c{i}": sorted(set(lags["topic"]))[i % 3 :] for i in range(9)}
    first = sla.assign(lags, subs, strategy)
    # topics in reverse blocks (runs, but not sorted), partitions reversed within each
    flipped = lags.iloc[::-1].reset_index(drop=True)
    previous = first.sample(frac=1.0, random_state=3).reset_index(drop=True)
    expected = sla.assign(lags, subs, strategy, previous=previous)
    pd.testing.assert_frame_equal(sla.assign(flipped, subs, strategy, previous=previous), expected)
    # the previous plan grouped by consumer (as assign writes it) or shuffled: the same
    pd.testing.assert_frame_equal(sla.assign(lags, subs, strategy, previous=first), expected)
    ordered = lags.sort_values(["topic", "partition"]).reset_index(drop=True)
    assert assignors.owners(ordered, subs, strategy, previous=first).tolist() == (
        expected.sort_values(["topic", "partition"])["consumer"].tolist()
    )


def test_the_previous_plan_is_matched_the_same_through_a_table_and_a_search(monkeypatch: pytest.MonkeyPatch) -> None:
    lags = pd.DataFrame({"topic": ["t0", "t0", "t1"], "partition": [0, 1_000_000, 5], "lag": [1, 2, 3]})
    subs = {"c0": ["t0", "t1"], "c1": ["t0", "t1"]}
    previous = pd.DataFrame(
        {"consumer": ["c1", "c0", "c1", "c0"], "topic": ["t0", "t0", "t1", "t9"], "partition": [0, 1_000_000, 5, 0]}
    )
    table = sla.assign(lags, subs, "sticky", previous=previous)
    monkeypatch.setattr(previous_plan, "DENSE_PER_ROW", 0)
    monkeypatch.setattr(previous_plan, "DENSE_FLOOR", 0)
    searched = sla.assign(lags, subs, "sticky", previous=previous)
    pd.testing.assert_frame_equal(searched, table)
    assert moved(table, previous, subs) == 0


def hand_built(lags: pd.DataFrame, subs: dict[str, list[str]], previous: pd.DataFrame | None) -> GroupProblem:
    """The problem as a caller of the assignors builds it, without the front end's codes."""
    read = {t for topics in subs.values() for t in topics}
    rows = lags[lags["topic"].isin(read)].sort_values(["topic", "partition"]).reset_index(drop=True)
    owner: list[str | None] = [None] * len(rows)
    if previous is not None:
        held = {
            (t, int(p)): c
            for c, t, p in sorted(zip(previous["consumer"], previous["topic"], previous["partition"]), reverse=True)
        }
        owner = [held.get((t, int(p))) for t, p in zip(rows["topic"], rows["partition"])]
        owner = [c if c in subs and t in subs[c] else None for c, t in zip(owner, rows["topic"])]
    return GroupProblem(
        topics=rows["topic"].to_numpy(dtype=object),
        partitions=rows["partition"].to_numpy(dtype=np.int64),
        lags=rows["lag"].to_numpy(dtype=np.int64),
        subscriptions={c: sorted(set(t)) for c, t in subs.items()},
        consumers=sorted(subs),
        previous=owner,
    )


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky"])
@given(group=groups())
def test_a_hand_built_problem_and_the_front_ends_give_the_same_owners(strategy: str, group: Group) -> None:
    lags, subs, previous, seed = group
    spec = sla.STRATEGIES[strategy]
    mine = assignors.problem(lags, subs, strategy, previous=previous, seed=seed)
    theirs = hand_built(lags, subs, previous)
    assert assignors.run(spec, theirs) == assignors.run(spec, mine)
    assert assignors.run_codes(spec, mine).tolist() == mine.codes().index.consumer_codes(assignors.run(spec, mine)).tolist()


@given(lags=lag_frames(), data=st.data())
def test_roundrobin_in_one_step_per_run_of_topics_equals_the_ring_walk(lags: pd.DataFrame, data: st.DataObject) -> None:
    subs = data.draw(subscription_maps(sorted(set(lags["topic"]))))
    problem = hand_built(lags, subs, None)
    assert run(roundrobin.STRATEGY, problem) == ring_walk(problem)


@given(lags=lag_frames(), data=st.data())
def test_range_for_the_whole_group_equals_range_topic_by_topic(lags: pd.DataFrame, data: st.DataObject) -> None:
    subs = data.draw(subscription_maps(sorted(set(lags["topic"]))))
    problem = hand_built(lags, subs, None)
    assert sla.assignors.run(range_.STRATEGY, problem) == per_topic(range_topic, problem)


@given(lags=lag_frames(), data=st.data(), seed=st.integers(-(2**63), 2**63 - 1))
def test_every_per_topic_strategy_equals_its_oracle_topic_by_topic(lags: pd.DataFrame, data: st.DataObject, seed: int) -> None:
    # the one signature (codes for the whole group) against each rule as its source states it
    subs = data.draw(subscription_maps(sorted(set(lags["topic"]))))
    problem = hand_built(lags, subs, None).replace(seed=seed)
    assert sorted(TOPIC_RULES) == sorted(n for n, spec in sla.STRATEGIES.items() if spec.scope == "topic")
    for name, rule in TOPIC_RULES.items():
        assert sla.assignors.run(sla.STRATEGIES[name], problem) == per_topic(rule, problem), name


@pytest.mark.parametrize("sizes", [(5,), (3, 8), (1, 2, 40)])
def test_range_patterns_over_many_topics_equal_the_formula_and_the_per_topic_rule(sizes: tuple[int, ...]) -> None:
    lags = big_lags(np.random.default_rng(1), 64, sizes)
    names = sorted(set(lags["topic"]))
    subs = {f"c{i}": names[i % 2 :: 1 + i % 3] or names for i in range(7)}
    problem = hand_built(lags, subs, None)
    starts, ends = problem.topic_bounds()
    codes = problem.codes()
    classes = codes.index.topic_class[codes.row_topic[starts]]
    patterned = range_.assign_codes(problem)
    formula = range_._by_formula(problem, starts, ends - starts, classes)
    assert patterned.tolist() == formula.tolist()
    assert codes.index.names[patterned].tolist() == per_topic(range_topic, problem)


def churn(rng: np.random.Generator) -> tuple[pd.DataFrame, dict[str, list[str]], pd.DataFrame]:
    """A group with varied lags, then one where two consumers joined and one left."""
    lags = big_lags(rng, 12, (9, 30, 4))
    lags["lag"] = rng.integers(0, 10, size=len(lags)) * rng.integers(1, 1000, size=len(lags))
    names = sorted(set(lags["topic"]))
    subs = {f"c{i}": names if i % 2 else names[: 6 + i] for i in range(6)}
    first = sla.assign(lags, subs, "sticky")
    later = {c: t for c, t in subs.items() if c != "c1"} | {"d0": names, "d1": names[3:]}
    return first, later, lags


@pytest.mark.parametrize("seed", range(4))
def test_sticky_picks_the_same_partitions_to_give_up_by_maxima_packed_keys_or_sorting(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, later, lags = churn(np.random.default_rng(seed))
    plans = [sla.assign(lags, later, "sticky", previous=first)]
    monkeypatch.setattr(sticky_rows, "_FEW_DROPS", 0)  # sort the packed keys instead of taking maxima
    plans.append(sla.assign(lags, later, "sticky", previous=first))
    monkeypatch.setattr(sticky_rows, "_PACK_LIMIT", 0)  # sort by the keys in turn, unpacked
    monkeypatch.setattr(sticky_rows, "_DENSE_PER_ROW", 0)  # held counts from sorted keys, not a table
    monkeypatch.setattr(sticky_rows, "_DENSE_FLOOR", 0)
    plans.append(sla.assign(lags, later, "sticky", previous=first))
    for plan in plans[1:]:
        pd.testing.assert_frame_equal(plan, plans[0])
    assert moved(plans[0], first, later) > 0


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "lag"])
def test_a_categorical_topic_column_plans_as_the_plain_one(strategy: str) -> None:
    lags = big_lags(np.random.default_rng(5), 12, (9, 70))
    subs = {f"c{i}": sorted(set(lags["topic"]))[i:] for i in range(5)}
    # categories unsorted and one without rows: neither may change the plan
    categories = ["zz-unused", *sorted(set(lags["topic"]), reverse=True)]
    coded = lags.assign(topic=pd.Categorical(lags["topic"], categories=categories)).iloc[::-1]
    pd.testing.assert_frame_equal(sla.assign(coded, subs, strategy), sla.assign(lags, subs, strategy))
    with pytest.raises(InputError) as err:
        sla.assign(coded.assign(topic=pd.Categorical([None] * len(coded), categories=categories)), subs, strategy)
    assert "column topic must hold non-empty strings" in one_line(err)


# ---------------------------------------------------------------------------------------------
# the front end's cheap paths: what they skip is never needed, what they build is the same


def copied(values: np.ndarray) -> np.ndarray:
    """The same strings, each row its own object (as a frame built from numpy strings holds them)."""
    return np.array(["".join(list(v)) for v in values], dtype=object)


@pytest.mark.parametrize("strategy", [n for n, spec in sla.STRATEGIES.items() if spec.assign_codes is not None])
def test_a_strategy_on_codes_never_makes_the_columns_of_strings(monkeypatch: pytest.MonkeyPatch, strategy: str) -> None:
    # a million topics and owners' names cost tens of milliseconds that such strategies never use
    lags = big_lags(np.random.default_rng(4), 7, (40, 9))
    subs = {f"c{i}": sorted(set(lags["topic"]))[i % 3 :] for i in range(5)}
    plan = sla.assign(lags, subs, "range")
    later = {**subs, "c9": sorted(set(lags["topic"]))}

    def refuse(self: GroupProblem) -> Any:
        raise AssertionError("a column of strings was made")

    built = assignors.problem(lags, later, strategy, previous=plan)
    assert built._topics is None  # left to be made from the codes, and so are the owners' names
    assert (built._previous is None) == sla.STRATEGIES[strategy].uses_previous
    monkeypatch.setattr(GroupProblem, "_topics_of_codes", property(refuse))
    monkeypatch.setattr(GroupProblem, "_previous_of_codes", property(refuse))
    got = sla.assign(lags, later, strategy, previous=plan)
    assert len(got) == len(lags)


@pytest.mark.parametrize("strategy", ["range", "sticky", "lag-sticky"])
def test_a_problem_of_the_front_end_holds_the_topics_and_previous_owners_of_a_hand_built_one(strategy: str) -> None:
    lags = big_lags(np.random.default_rng(2), 9, (30, 11))
    subs = {f"c{i}": sorted(set(lags["topic"]))[i:] for i in range(4)}
    mine = assignors.problem(lags, subs, strategy)
    theirs = hand_built(lags, subs, None)
    assert mine.topics.tolist() == theirs.topics.tolist() and len(mine.topics) == len(theirs.topics)
    again = assignors.problem(lags, subs, strategy).replace(options={})
    assert again.topics.tolist() == theirs.topics.tolist() and again.encoded is not None
    assert pickle.loads(pickle.dumps(mine)).topics.tolist() == theirs.topics.tolist()
    with pytest.raises(AttributeError):
        mine.topics = theirs.topics  # type: ignore[misc]
    # a copy with other consumers drops the codes, which number the old ones
    other = assignors.problem(lags, subs, strategy).replace(consumers=sorted(subs)[:2])
    assert other.encoded is None and other.topics.tolist() == theirs.topics.tolist()
    # the previous owners' names too: none without a plan, the plan's (still subscribed) with one
    assert len(mine.previous) == 0
    plan = sla.assign(lags, subs, "range").sample(frac=0.7, random_state=5)
    later = {**subs, "c9": sorted(set(lags["topic"]))}
    mine = assignors.problem(lags, later, strategy, previous=plan)
    theirs = hand_built(lags, later, plan)
    if not sla.STRATEGIES[strategy].uses_previous:
        assert len(mine.previous) == 0 and mine.codes().previous.max() == -1
    else:
        assert list(mine.previous) == list(theirs.previous)


def test_runs_are_found_the_same_whether_rows_share_their_objects_or_not() -> None:
    names = np.array(["t1", "t0", "t2", "t0"], dtype=object)
    shared = names[np.repeat([0, 1, 2, 3, 3], [70, 1, 40, 30, 20])]  # the last run given in two parts
    shared[100] = "t" + str(2)  # an equal value in another object, inside a run
    assert run_starts(shared) is not None and run_starts(shared).tolist() == [0, 70, 71, 111]
    for other in (copied(shared), shared.copy(), np.asarray(list(shared), dtype=object)):
        assert run_starts(other).tolist() == [0, 70, 71, 111]
    assert run_starts(shared[::2]).tolist() == [0, 35, 36, 56]  # not contiguous: compared by value
    assert run_starts(copied(np.array([f"t{i}" for i in range(100)], dtype=object))) is None  # short runs


@given(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=8), st.integers(64, 300), st.randoms())
def test_factorize_numbers_names_as_pandas_does_whether_or_not_they_share_objects(
    names: list[str | None], n: int, rnd: Any
) -> None:
    # a few objects repeated, with an equal value in a second object here and there
    pool = np.asarray(names, dtype=object)
    values = pool[np.asarray([rnd.randrange(len(pool)) for _ in range(n)])]
    for i in range(0, n, 37):
        values[i] = None if values[i] is None else "".join(values[i])
    for array in (values, np.array([v if v is None else "".join(v) for v in values], dtype=object)):
        codes, uniques = factorize(array)
        want_codes, want_uniques = pd.factorize(array)
        assert codes.tolist() == want_codes.tolist() and list(uniques) == list(want_uniques)


@pytest.mark.parametrize("strategy", NAMES)
def test_distinct_string_objects_plan_as_shared_ones(strategy: str) -> None:
    lags = big_lags(np.random.default_rng(4), 20, (25, 9))
    subs = {f"c{i}": sorted(set(lags["topic"]))[i % 4 :] for i in range(6)}
    first = sla.assign(lags, subs, strategy)
    plain = lags.assign(topic=copied(lags["topic"].to_numpy()))
    pd.testing.assert_frame_equal(sla.assign(plain, subs, strategy), first)
    # shuffled: no runs, every value is hashed
    shuffled = lags.sample(frac=1.0, random_state=1)
    pd.testing.assert_frame_equal(sla.assign(shuffled, subs, strategy), first)
    pd.testing.assert_frame_equal(sla.assign(plain.sample(frac=1.0, random_state=1), subs, strategy), first)
    previous = first.assign(consumer=copied(first["consumer"].to_numpy()), topic=copied(first["topic"].to_numpy()))
    pd.testing.assert_frame_equal(
        sla.assign(plain, subs, strategy, previous=previous), sla.assign(lags, subs, strategy, previous=first)
    )


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "lag-sticky"])
def test_the_output_is_sorted_by_consumer_topic_partition_with_int64_columns(strategy: str) -> None:
    lags = big_lags(np.random.default_rng(6), 15, (40, 3, 17))
    subs = {f"c{i:02d}": sorted(set(lags["topic"]))[i % 5 :] for i in range(12)}
    counted = sla.assign(lags, subs, strategy)
    assert counted["consumer"].dtype == object and counted["topic"].dtype == object
    assert counted["partition"].dtype == np.int64 and counted["lag"].dtype == np.int64
    reference = counted.sort_values(["consumer", "topic", "partition"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(counted, reference)


def test_runs_of_a_topic_out_of_order_or_repeated_are_sorted_and_duplicates_found() -> None:
    def frame(parts: list[tuple[str, range]]) -> pd.DataFrame:
        topics = np.repeat(np.array([t for t, _ in parts], dtype=object), [len(r) for _, r in parts])
        partitions = np.concatenate([np.arange(r.start, r.stop, r.step) for _, r in parts])
        return pd.DataFrame({"topic": topics, "partition": partitions, "lag": partitions % 7})

    subs = {"c0": ["a", "b"], "c1": ["a", "b"], "c2": ["b"]}
    ordered = frame([("a", range(150)), ("b", range(90))])
    expected = sla.assign(ordered, subs, "sticky")
    for parts in (
        [("a", range(100)), ("b", range(90)), ("a", range(100, 150))],  # a topic in two runs
        [("b", range(90)), ("a", range(150))],  # runs out of order
        [("a", range(149, -1, -1)), ("b", range(90))],  # partitions falling within a run
        [("a", range(75, 150)), ("a", range(75)), ("b", range(90))],  # two runs of one topic, adjacent
    ):
        pd.testing.assert_frame_equal(sla.assign(frame(parts), subs, "sticky"), expected)
    for parts, shown in (
        ([("a", range(100)), ("b", range(90)), ("a", range(99, 150))], "a-99"),
        ([("a", range(150)), ("b", range(40)), ("b", range(39, 90))], "b-39"),
        ([("a", range(70)), ("a", range(69, 150)), ("b", range(90))], "a-69"),
    ):
        with pytest.raises(InputError) as err:
            sla.assign(frame(parts), subs, "sticky")
        assert f"partition {shown} appears more than once" in one_line(err)


@pytest.mark.parametrize("strategy", ["sticky", "lag-sticky", "drain"])
def test_no_previous_plan_and_an_empty_one_plan_alike(strategy: str) -> None:
    lags = big_lags(np.random.default_rng(8), 10, (30, 12))
    subs = {f"c{i}": sorted(set(lags["topic"]))[i % 3 :] for i in range(5)}
    none = sla.assign(lags, subs, strategy)
    empty = pd.DataFrame(
        {
            "consumer": pd.Series([], dtype=object),
            "topic": pd.Series([], dtype=object),
            "partition": pd.Series([], dtype=np.int64),
        }
    )
    pd.testing.assert_frame_equal(sla.assign(lags, subs, strategy, previous=empty), none)
    stale = pd.DataFrame({"consumer": ["gone"], "topic": ["t000"], "partition": [0]})  # rows, none of them eligible
    pd.testing.assert_frame_equal(sla.assign(lags, subs, strategy, previous=stale), none)


def test_the_index_takes_sorted_topics_as_they_are_and_merges_any_others() -> None:
    subs = validate_subscriptions({"a": ["t2", "t0"], "b": ["t1", "t2"]})
    for named, topics in (
        (np.array(["t0", "t1", "t2"], dtype=object), ["t0", "t1", "t2"]),  # sorted, every subscribed one
        (np.array(["t0", "t1", "t2", "t3"], dtype=object), ["t0", "t1", "t2", "t3"]),  # and one nobody reads
        (np.array(["t0", "t2"], dtype=object), ["t0", "t1", "t2"]),  # t1 missing: merged
        (np.array(["t3", "t1", "t3"], dtype=object), ["t0", "t1", "t2", "t3"]),  # unsorted, twice
        ((), ["t0", "t1", "t2"]),
    ):
        index = SubscriptionIndex(subs, named)
        assert list(index.topics) == topics
        assert index.reads.tolist() == [[t in subs[c] for t in topics] for c in ("a", "b")]
    assert validate_subscriptions({"c": ["a", "b", "c"]})["c"] == ["a", "b", "c"]
    assert validate_subscriptions({"c": ("a", "a", "b")})["c"] == ["a", "b"]
    mine = ["a", "b"]
    assert validate_subscriptions({"c": mine})["c"] is not mine  # a list of its own, never the caller's
    odd = np.empty(2, dtype=object)
    odd[:] = [np.arange(2), np.arange(2) + 1]
    for values in (["a", "b", "b"], ["b", "a"], ["a", 1.5], [None, "a"], odd):
        assert not strictly_increasing(np.asarray(values, dtype=object) if isinstance(values, list) else values)
    assert strictly_increasing(np.array(["a", "b", "c"], dtype=object)) and strictly_increasing(np.array([], dtype=object))


@pytest.mark.parametrize("bad", ["", None, float("nan"), 7])
def test_a_bad_topic_in_a_large_sorted_frame_is_refused_in_one_line(bad: object) -> None:
    lags = big_lags(np.random.default_rng(3), 6, (40,))
    lags["topic"] = lags["topic"].astype(object)
    lags.loc[lags.index[:40], "topic"] = bad  # the first topic's run
    with pytest.raises(InputError) as err:
        sla.assign(lags, {"c0": ["t001"]}, "range")
    assert "column topic must hold non-empty strings" in one_line(err)


@pytest.mark.parametrize("seed", [2.9, True, "3", None])
def test_a_seed_that_is_no_whole_number_is_refused_not_rounded(seed: object) -> None:
    """By every entry point: the DataFrame ``assign``, the Spark stage (when it is built, on the
    driver: no Spark needed to see it) and the kafka-python plugin."""
    from spark_lag_assign.group import assignor_class
    from spark_lag_assign.spark.transforms import assign_partitions, plan_partitions

    lags = pd.DataFrame({"topic": ["t", "t", "t"], "partition": [0, 1, 2], "lag": [1, 2, 3]})
    line = f"seed must be a whole number, not {seed!r}"
    with pytest.raises(sla.StrategyError) as refused:
        sla.assign(lags, {"a": ["t"], "b": ["t"]}, strategy="shuffle", seed=seed)  # type: ignore[arg-type]
    assert str(refused.value) == line
    for stage in (assign_partitions, plan_partitions):
        with pytest.raises(sla.StrategyError) as refused:
            stage({"a": ["t"]}, "shuffle", seed=seed)  # type: ignore[arg-type]
        assert str(refused.value) == line
    with pytest.raises(sla.StrategyError) as refused:
        assignor_class("shuffle")(seed=seed)  # type: ignore[arg-type]
    assert str(refused.value) == line


def test_an_option_the_strategy_does_not_take_is_refused_alike_by_every_entry_point() -> None:
    from spark_lag_assign.group import assignor_class
    from spark_lag_assign.spark.transforms import assign_partitions

    lags = pd.DataFrame({"topic": ["t", "t", "t"], "partition": [0, 1, 2], "lag": [1, 2, 3]})
    line = "strategy 'lag-sticky' takes no option speed; it takes: tolerance, max_swaps"
    with pytest.raises(sla.StrategyError) as refused:
        sla.assign(lags, {"a": ["t"]}, strategy="lag-sticky", speed=2)
    assert str(refused.value) == line
    with pytest.raises(sla.StrategyError) as refused:
        assign_partitions({"a": ["t"]}, "lag-sticky", options={"speed": 2})
    assert str(refused.value) == line
    with pytest.raises(sla.StrategyError) as refused:
        assignor_class("lag-sticky")(options={"speed": 2})
    assert str(refused.value) == line


def test_readme_s_codes_example_runs_and_gives_the_lag_rule_s_owners() -> None:
    readme = (Path(sla.__file__).parents[1] / "README.md").read_text()
    snippet = readme.split("To call it directly", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict[str, Any] = {}
    exec(snippet, scope)
    names = scope["p"].codes().index.consumers
    assert [names[c] for c in scope["owners"]] == sla.assign(scope["lags"], {"C0": ["t0"], "C1": ["t0"]}, "lag")["consumer"].tolist()
    assert [names[c] for c in scope["owners"]] == ["C0", "C1", "C1"]  # seed 000: 100,000 alone, 50,000 + 60,000
