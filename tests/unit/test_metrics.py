"""The plan metrics (``core.quality``) on small plans whose numbers are worked out by hand."""

from __future__ import annotations

import pandas as pd
import pytest

import spark_lag_assign as sla
from spark_lag_assign.core.quality import moved, per_consumer, quality, topic_spread


def plan(*rows: tuple[str, str, int, int]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=["consumer", "topic", "partition", "lag"])


def previous(*rows: tuple[str, str, int]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=["consumer", "topic", "partition"])


EMPTY = pd.DataFrame(
    {
        "consumer": pd.Series([], dtype=object),
        "topic": pd.Series([], dtype=object),
        "partition": pd.Series([], dtype="int64"),
        "lag": pd.Series([], dtype="int64"),
    }
)

# C0 reads t0 and t1, C1 reads t0, C2 reads t1 and holds nothing, C3 reads nothing at all.
SUBS = {"C0": ["t0", "t1"], "C1": ["t0"], "C2": ["t1"], "C3": []}
MIXED = plan(
    ("C0", "t0", 0, 100),
    ("C0", "t0", 1, 50),
    ("C0", "t1", 0, 30),
    ("C1", "t0", 2, 20),
)


def test_per_consumer_lists_every_consumer_sorted_with_zeros_for_idle_ones() -> None:
    table = per_consumer(MIXED, ["C3", "C1", "C2", "C0"])
    assert table.index.tolist() == ["C0", "C1", "C2", "C3"]
    assert table["partitions"].tolist() == [3, 1, 0, 0]
    assert table["lag"].tolist() == [180, 20, 0, 0]


def test_quality_of_a_mixed_plan_with_idle_consumers() -> None:
    q = quality(MIXED, SUBS)
    assert (q.consumers, q.partitions, q.total_lag) == (4, 4, 200)
    # 3 partitions for C0, none for C2 and C3: idle consumers count
    assert q.count_spread == 3
    # t0 among C0, C1: 2 vs 1; t1 among C0, C2: 1 vs 0 (C1 and C3 do not read t1)
    assert q.topic_spread == 1
    assert q.max_lag == 180
    assert q.mean_lag == pytest.approx(50.0)  # 200 over 4 consumers
    assert q.lag_imbalance == pytest.approx(3.6)  # 180 / 50
    # LB = max(200 / 4, largest partition 100) = 100
    assert q.lower_bound == pytest.approx(100.0)
    assert q.optimality == pytest.approx(1.8)
    assert q.moved is None  # no previous plan given


def test_topic_spread_counts_only_the_topics_subscribers() -> None:
    # t0 split 2/2 between its readers; C2 does not read t0, so its zero of t0 is no imbalance
    p = plan(("C0", "t0", 0, 1), ("C0", "t0", 1, 1), ("C1", "t0", 2, 1), ("C1", "t0", 3, 1), ("C2", "t1", 0, 1))
    subs = {"C0": ["t0"], "C1": ["t0"], "C2": ["t1"]}
    assert topic_spread(p, subs) == 0
    assert quality(p, subs).count_spread == 1


def test_topic_spread_counts_a_subscriber_holding_none_of_the_topic_as_zero() -> None:
    p = plan(("C0", "t0", 0, 1), ("C0", "t0", 1, 1), ("C0", "t0", 2, 1), ("C1", "t0", 3, 1), ("C2", "t1", 0, 1))
    # C2 reads t0 too but holds none of it: 3 - 0
    assert topic_spread(p, {"C0": ["t0"], "C1": ["t0"], "C2": ["t0", "t1"]}) == 3
    # without C2 among t0's readers the worst topic is t0 at 3 - 1
    assert topic_spread(p, {"C0": ["t0"], "C1": ["t0"], "C2": ["t1"]}) == 2


def test_topic_spread_is_the_worst_topic_not_the_sum() -> None:
    p = plan(
        ("C0", "a", 0, 0),
        ("C0", "a", 1, 0),
        ("C1", "a", 2, 0),  # a: 2 vs 1
        ("C0", "b", 0, 0),
        ("C0", "b", 1, 0),
        ("C0", "b", 2, 0),
        ("C1", "b", 3, 0),  # b: 3 vs 1
    )
    assert topic_spread(p, {"C0": ["a", "b"], "C1": ["a", "b"]}) == 2


def test_topic_spread_ignores_a_topic_listed_twice_by_one_consumer() -> None:
    p = plan(("C0", "t0", 0, 1), ("C1", "t0", 1, 1))
    assert topic_spread(p, {"C0": ["t0", "t0"], "C1": ["t0"]}) == 0


def test_a_single_huge_partition_sets_the_lower_bound() -> None:
    # no plan can beat the consumer that must hold the 1,000 partition: optimal at 1.0
    p = plan(("C0", "t0", 0, 1_000), ("C1", "t0", 1, 10), ("C1", "t0", 2, 10))
    q = quality(p, {"C0": ["t0"], "C1": ["t0"]})
    assert q.lower_bound == pytest.approx(1_000.0)  # > 1,020 / 2
    assert q.optimality == pytest.approx(1.0)
    assert q.lag_imbalance == pytest.approx(1_000 / 510)


def test_the_even_share_sets_the_lower_bound_when_partitions_are_small() -> None:
    p = plan(("C0", "t0", 0, 30), ("C0", "t0", 1, 30), ("C1", "t0", 2, 20), ("C2", "t0", 3, 10))
    q = quality(p, {c: ["t0"] for c in ("C0", "C1", "C2")})
    assert q.lower_bound == pytest.approx(30.0)  # 90 / 3 = 30 = largest partition 30
    assert q.max_lag == 60
    assert q.optimality == pytest.approx(2.0)
    assert q.lag_imbalance == pytest.approx(2.0)


def test_zero_lag_everywhere_is_perfectly_balanced_and_optimal() -> None:
    p = plan(("C0", "t0", 0, 0), ("C0", "t0", 1, 0), ("C1", "t0", 2, 0))
    q = quality(p, {"C0": ["t0"], "C1": ["t0"]})
    assert (q.total_lag, q.max_lag, q.mean_lag, q.lower_bound) == (0, 0, 0.0, 0.0)
    assert (q.lag_imbalance, q.optimality) == (1.0, 1.0)
    assert q.count_spread == 1


def test_an_empty_plan_has_zero_spread_and_counts_every_consumer() -> None:
    q = quality(EMPTY, {"C0": ["t0"], "C1": []}, previous=previous(("C0", "t0", 0)))
    assert (q.consumers, q.partitions, q.total_lag, q.count_spread, q.topic_spread) == (2, 0, 0, 0, 0)
    assert (q.lag_imbalance, q.optimality) == (1.0, 1.0)
    assert q.moved == 0


def test_movement_counts_changed_owners_including_a_departed_consumers_partitions() -> None:
    before = previous(
        ("C0", "t0", 0),
        ("C0", "t0", 1),  # -> C1: moved
        ("C1", "t0", 2),
        ("Cgone", "t1", 0),  # its owner left the group: moved to C0
        ("C1", "t9", 0),  # deleted since: not in the new plan, not a move
    )
    after = plan(
        ("C0", "t0", 0, 5),
        ("C1", "t0", 1, 5),
        ("C1", "t0", 2, 5),
        ("C0", "t1", 0, 5),
        ("C0", "t0", 3, 5),  # new partition: nobody owned it, not a move
    )
    assert moved(after, before, {"C0": ["t0", "t1"], "C1": ["t0"]}) == 2
    assert quality(after, {"C0": ["t0", "t1"], "C1": ["t0"]}, previous=before).moved == 2


def test_movement_takes_the_previous_owner_by_the_rule_every_assignor_reads_a_previous_plan_by() -> None:
    """t0-0 listed under Agone (left the group) and C1: the owner by the rule is C1, so a plan
    that keeps it on C1 moved nothing, and one that gives it to C0 moved one."""
    before = previous(("Agone", "t0", 0), ("C1", "t0", 0))
    subs = {"C0": ["t0"], "C1": ["t0"]}
    assert moved(plan(("C1", "t0", 0, 5)), before, subs) == 0
    assert moved(plan(("C0", "t0", 0, 5)), before, subs) == 1
    kept = sla.assign(pd.DataFrame({"topic": ["t0"], "partition": [0], "lag": [5]}), subs, "sticky", previous=before)
    assert kept["consumer"].tolist() == ["C1"] and quality(kept, subs, previous=before).moved == 0


def test_movement_against_an_identical_or_empty_previous_plan_is_zero() -> None:
    assert moved(MIXED, MIXED[["consumer", "topic", "partition"]], SUBS) == 0
    assert moved(MIXED, previous(), SUBS) == 0
    assert moved(MIXED, None, SUBS) == 0
    assert quality(MIXED, SUBS, previous=previous()).moved == 0


def test_movement_does_not_depend_on_the_row_order_of_the_previous_plan() -> None:
    # t0-0 listed under both C1 and C0; the new plan gives it to C0
    after = plan(("C0", "t0", 0, 1))
    before = previous(("C1", "t0", 0), ("C0", "t0", 0))
    subs = {"C0": ["t0"], "C1": ["t0"]}
    assert moved(after, before, subs) == moved(after, before.iloc[::-1], subs) == 0


# -- totals past int64: four partitions of lag 2**62 add up to 2**64 ---------------------

BIG = 2**62
HUGE = plan(("C0", "t0", 0, BIG), ("C0", "t0", 1, BIG), ("C1", "t0", 2, BIG), ("C1", "t0", 3, BIG - 1))


def test_totals_past_int64_are_exact_never_wrapped() -> None:
    assert HUGE["lag"].dtype == "int64"  # each lag fits; int64 sums of them wrap to negative numbers
    table = per_consumer(HUGE, ["C0", "C1", "idle"])
    assert table["lag"].tolist() == [2**63, 2**63 - 1, 0]
    q = quality(HUGE, {"C0": ["t0"], "C1": ["t0"], "idle": ["t0"]})
    assert q.total_lag == 2**64 - 1
    assert q.max_lag == 2**63
    assert q.mean_lag == pytest.approx((2**64 - 1) / 3)
    # LB = total / 3 > largest partition 2**62: max / LB = 2**63 / ((2**64 - 1) / 3) = 1.5
    assert q.optimality == pytest.approx(1.5)
    assert q.lag_imbalance == pytest.approx(1.5)


def test_exact_sums_agree_with_python_ints_on_int64_extremes() -> None:
    from spark_lag_assign.core.quality import exact_sum, exact_sums

    values = [2**63 - 1, 2**63 - 1, -(2**63), 5, 0, 2**62]
    assert exact_sum(pd.Series(values, dtype="int64")) == sum(values)
    keys = ["a", "b", "a", "b", "c", "a"]
    assert exact_sums(pd.Series(keys), pd.Series(values, dtype="int64")) == {
        "a": 2**63 - 1 - 2**63 + 2**62,
        "b": 2**63 - 1 + 5,
        "c": 0,
    }
    assert exact_sum(pd.Series([2**64, 1], dtype=object)) == 2**64 + 1  # Python ints stay Python ints


def test_a_lag_that_is_no_whole_number_is_refused_by_the_exact_sum() -> None:
    from spark_lag_assign.core.quality import exact_sum
    from spark_lag_assign.errors import InputError

    assert exact_sum(pd.Series([1.0, 2.0])) == 3
    with pytest.raises(InputError, match="whole number"):
        exact_sum(pd.Series([1.5]))
