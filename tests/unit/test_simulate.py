"""The drain simulation on plans small enough to work out by hand (times in seconds)."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

import spark_lag_assign as sla
from spark_lag_assign.core.draintime import produce_rates, simulate
from spark_lag_assign.errors import InputError


def lags(*rows: tuple[str, int, int]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=["topic", "partition", "lag"])


def plan(*rows: tuple[str, str, int]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=["consumer", "topic", "partition"])


def rates(*rows: tuple[str, int, float]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=["topic", "partition", "produce_rate"])


def offsets(*rows: tuple[str, int, int]) -> pd.DataFrame:
    """Snapshots where only the end offset matters: beginning 0, committed 0."""
    return pd.DataFrame(
        [(t, p, 0, end, 0) for t, p, end in rows],
        columns=["topic", "partition", "beginning_offset", "end_offset", "committed_offset"],
    )


def test_one_consumer_one_partition_drains_at_its_rate() -> None:
    d = simulate(lags(("t", 0, 1000)), plan(("c", "t", 0)), rate=100)
    assert d.time_to_drain == pytest.approx(10.0)  # 1000 messages at 100/s
    assert d.consumers.loc["c", "time_to_drain"] == pytest.approx(10.0)
    assert d.total_lag([0, 4, 10, 20]).tolist() == pytest.approx([1000, 600, 0, 0])
    assert d.peak_partition_lag == 1000
    assert d.never_drains == []


def test_two_partitions_share_the_rate_until_the_smaller_one_empties() -> None:
    d = simulate(lags(("t", 0, 100), ("t", 1, 300)), plan(("c", "t", 0), ("c", "t", 1)), rate=100)
    # 50/s each: p0 is empty after 2 s (p1 at 200), then p1 has all 100/s: 2 s more
    by_partition = d.partitions.set_index("partition")["time_to_drain"]
    assert by_partition[0] == pytest.approx(2.0)
    assert by_partition[1] == pytest.approx(4.0)
    assert d.time_to_drain == pytest.approx(4.0)


def test_producers_faster_than_the_consumer_never_drain_and_it_is_said() -> None:
    d = simulate(lags(("t", 0, 100)), plan(("c", "t", 0)), rate=100, produce_rates=rates(("t", 0, 150)))
    assert math.isinf(d.time_to_drain)
    assert d.never_drains == ["c"]
    assert math.isinf(d.peak_total_lag) and math.isinf(d.peak_partition_lag)
    assert math.isinf(d.lower_bound)
    # 50/s more appended than read
    assert d.total_lag([0, 10]).tolist() == pytest.approx([100, 600])


def test_producers_exactly_as_fast_keep_the_backlog_forever() -> None:
    d = simulate(lags(("t", 0, 100)), plan(("c", "t", 0)), rate=100, produce_rates=rates(("t", 0, 100)))
    assert d.never_drains == ["c"]
    assert d.peak_total_lag == 100  # it does not grow either
    assert d.total_lag([0, 50]).tolist() == pytest.approx([100, 100])


def test_time_to_drain_of_the_plan_is_the_slowest_consumer() -> None:
    d = simulate(
        lags(("t", 0, 1000), ("t", 1, 300)),
        plan(("c0", "t", 0), ("c1", "t", 1)),
        rate=100,
        consumers=["c0", "c1", "idle"],
    )
    assert d.consumers["time_to_drain"].to_dict() == pytest.approx({"c0": 10.0, "c1": 3.0, "idle": 0.0})
    assert d.time_to_drain == pytest.approx(10.0)
    # after 3 s c1 is done and c0 has 700 left
    assert d.total_lag([3]).tolist() == pytest.approx([700])


def test_a_caught_up_partition_takes_only_what_is_appended_to_it() -> None:
    d = simulate(
        lags(("t", 0, 0), ("t", 1, 700)),
        plan(("c", "t", 0), ("c", "t", 1)),
        rate=100,
        produce_rates=rates(("t", 0, 30), ("t", 1, 0)),
    )
    # p0 needs 30/s, less than half of 100, so p1 gets 70/s: 10 s
    by_partition = d.partitions.set_index("partition")
    assert by_partition.loc[1, "time_to_drain"] == pytest.approx(10.0)
    assert by_partition.loc[0, "time_to_drain"] == 0.0
    assert by_partition.loc[0, "peak_lag"] == 0.0
    assert d.time_to_drain == pytest.approx(10.0)


def test_a_hot_partition_grows_behind_a_backlog_on_the_same_consumer() -> None:
    d = simulate(
        lags(("t", 0, 0), ("t", 1, 300), ("t", 2, 300)),
        plan(("c", "t", 0), ("c", "t", 1), ("c", "t", 2)),
        rate=120,
        produce_rates=rates(("t", 0, 90), ("t", 1, 0), ("t", 2, 0)),
    )
    # p0 wants 90/s, more than a third of 120: everyone gets 40/s. p1 and p2 empty at 7.5 s,
    # while p0 grew by 50/s to 375; then p0 has the whole 120/s: 375 / 30 = 12.5 s more
    by_partition = d.partitions.set_index("partition")
    assert by_partition["time_to_drain"].tolist() == pytest.approx([20.0, 7.5, 7.5])
    assert by_partition.loc[0, "peak_lag"] == pytest.approx(375.0)
    assert d.peak_partition_lag == pytest.approx(375.0)
    # the consumer's total falls at 120 - 90 = 30/s: 600 / 30
    assert d.time_to_drain == pytest.approx(20.0)
    assert d.peak_total_lag == 600


def test_rates_per_consumer() -> None:
    d = simulate(
        lags(("t", 0, 100), ("t", 1, 100)),
        plan(("slow", "t", 0), ("fast", "t", 1)),
        rate={"slow": 50, "fast": 200},
    )
    assert d.consumers["time_to_drain"].to_dict() == pytest.approx({"fast": 0.5, "slow": 2.0})


def test_lower_bound_is_the_even_share_or_the_largest_partition_read_alone() -> None:
    data = lags(("t", 0, 900), ("t", 1, 100))
    apart = simulate(data, plan(("a", "t", 0), ("b", "t", 1)), rate=100)
    together = simulate(data, plan(("a", "t", 0), ("a", "t", 1)), rate=100, consumers=["a", "b"])
    # max(1000 / 200, 900 / 100)
    assert apart.lower_bound == pytest.approx(9.0) == together.lower_bound
    assert apart.time_to_drain == pytest.approx(9.0)
    assert together.time_to_drain == pytest.approx(10.0)


def test_the_lag_column_of_an_assignment_is_ignored() -> None:
    stale = plan(("c", "t", 0)).assign(lag=[1])
    assert simulate(lags(("t", 0, 500)), stale, rate=100).time_to_drain == pytest.approx(5.0)


def test_works_on_what_assign_returns() -> None:
    data = lags(("t", 0, 600), ("t", 1, 200), ("t", 2, 200))
    assignment = sla.assign(data, {"c0": ["t"], "c1": ["t"]}, strategy="lag")
    # lag: 600 to c0, then 200 to c1, then 200 to c1 (fewest partitions of t first)
    d = simulate(data, assignment, rate=100)
    assert d.consumers["time_to_drain"].to_dict() == pytest.approx({"c0": 6.0, "c1": 4.0})


@pytest.mark.parametrize("rate", [0, -5, float("nan"), float("inf"), "fast", None])
def test_a_rate_that_is_not_a_positive_number_is_refused(rate: object) -> None:
    with pytest.raises(InputError, match="rate"):
        simulate(lags(("t", 0, 1)), plan(("c", "t", 0)), rate=rate)  # type: ignore[arg-type]


def test_a_missing_rate_for_one_consumer_is_refused() -> None:
    with pytest.raises(InputError, match="no consumption rate for consumer 'b'"):
        simulate(lags(("t", 0, 1), ("t", 1, 1)), plan(("a", "t", 0), ("b", "t", 1)), rate={"a": 10})


def test_an_assigned_partition_missing_from_the_lags_is_refused() -> None:
    with pytest.raises(InputError, match="t-7 is not in the lags"):
        simulate(lags(("t", 0, 1)), plan(("c", "t", 0), ("c", "t", 7)), rate=10)


def test_a_partition_assigned_twice_is_refused() -> None:
    with pytest.raises(InputError, match="t-0 is assigned more than once"):
        simulate(lags(("t", 0, 1)), plan(("a", "t", 0), ("b", "t", 0)), rate=10)


def test_missing_columns_and_negative_lags_are_refused() -> None:
    with pytest.raises(InputError, match="missing column"):
        simulate(lags(("t", 0, 1)).drop(columns="lag"), plan(("c", "t", 0)), rate=10)
    with pytest.raises(InputError, match="lag"):
        simulate(lags(("t", 0, -1)), plan(("c", "t", 0)), rate=10)


def test_bad_produce_rates_are_refused() -> None:
    with pytest.raises(InputError, match="invalid rate"):
        simulate(lags(("t", 0, 1)), plan(("c", "t", 0)), rate=10, produce_rates=rates(("t", 0, -1.0)))
    with pytest.raises(InputError, match="no rate for the assigned partition t-0"):
        simulate(lags(("t", 0, 1)), plan(("c", "t", 0)), rate=10, produce_rates=rates(("u", 0, 1.0)))


def test_produce_rates_from_two_snapshots() -> None:
    got = produce_rates(offsets(("t", 0, 1000), ("t", 1, 50)), offsets(("t", 0, 1600), ("t", 1, 50)), interval=10)
    assert got["produce_rate"].tolist() == pytest.approx([60.0, 0.0])


def test_produce_rates_refuse_what_cannot_be_a_rate() -> None:
    with pytest.raises(InputError, match="went back from 1000 to 10"):
        produce_rates(offsets(("t", 0, 1000)), offsets(("t", 0, 10)), interval=10)
    with pytest.raises(InputError, match="t-1 is in the later snapshot only"):
        produce_rates(offsets(("t", 0, 1)), offsets(("t", 0, 1), ("t", 1, 5)), interval=10)
    with pytest.raises(InputError, match="interval"):
        produce_rates(offsets(("t", 0, 1)), offsets(("t", 0, 1)), interval=0)


@given(
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 40)), min_size=1, max_size=12),
    st.integers(1, 500),
)
def test_the_replay_agrees_with_the_closed_form(parts: list[tuple[int, int]], rate: int) -> None:
    """Every partition's replayed drain time is at most the consumer's, and the last one equals it."""
    data = lags(*[("t", i, lag) for i, (lag, _) in enumerate(parts)])
    produced = rates(*[("t", i, float(r)) for i, (_, r) in enumerate(parts)])
    d = simulate(data, plan(*[("c", "t", i) for i in range(len(parts))]), rate=rate, produce_rates=produced)
    consumer = d.consumers.loc["c", "time_to_drain"]
    last = d.partitions["time_to_drain"].max()
    if math.isinf(consumer):
        assert math.isinf(last)
    else:
        assert last == pytest.approx(consumer, rel=1e-9, abs=1e-9)
        assert (d.partitions["peak_lag"] >= d.partitions["lag"]).all()
    # the total at any time is the sum of the partitions' lags, never negative
    assert (d.total_lag(np.linspace(0, 100, 11)) >= 0).all()


def test_importing_the_simulation_pulls_in_no_spark() -> None:
    code = (
        "import sys, spark_lag_assign.core.draintime\nprint(sorted(m for m in sys.modules if m.startswith(('pyspark', 'py4j'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_consumer_totals_past_int64_are_exact_and_the_bound_is_right() -> None:
    big = 2**62 + 1  # + 1: a float total would round it away
    backlog = lags(("t", 0, big), ("t", 1, big), ("t", 2, big), ("t", 3, big))
    assert backlog["lag"].dtype == "int64"
    d = simulate(backlog, plan(("a", "t", 0), ("a", "t", 1), ("b", "t", 2), ("b", "t", 3)), rate=2.0**40)
    assert d.consumers["lag"].tolist() == [2**63 + 2, 2**63 + 2]  # int64 sums would wrap to negative
    assert d.backlog == 2**64 + 4
    # each consumer drains ~2**63 at 2**40/s; the group cannot beat ~2**64 over 2 * 2**40/s: optimal
    assert d.time_to_drain == pytest.approx(2.0**23)
    assert d.time_to_drain / d.lower_bound == pytest.approx(1.0)
    from spark_lag_assign.core.draintime import consumer_table

    assert "9,223,372,036,854,775,810" in consumer_table(d)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (lags(("t", 0, -1)), r"t-0 has lag -1; a lag is a whole number of messages in \[0, 2\^63\)"),
        # assign refuses a lag of 1.5 ("not whole"): so does the drain-time model
        (pd.DataFrame({"topic": ["t"], "partition": [0], "lag": [1.5]}), r"t-0 has lag 1.5; a lag is a whole number"),
        (pd.DataFrame({"topic": ["t"], "partition": [0.5], "lag": [1]}), "partition 0.5 of t is not a partition number"),
        (pd.DataFrame({"topic": ["t"], "partition": [0], "lag": [math.inf]}), "t-0 has lag inf"),
        (pd.DataFrame({"topic": ["t"], "partition": [0], "lag": [math.nan]}), "t-0 has lag nan"),
        (
            pd.DataFrame({"topic": ["t"], "partition": [0], "lag": pd.Series([2**63], dtype=object)}),
            "t-0 has lag 9223372036854775808",
        ),
        (lags(("t", 2**31, 5)), "partition 2147483648 of t is not a partition number"),
    ],
)
def test_a_lag_or_partition_out_of_kafkas_ranges_is_one_line(frame: pd.DataFrame, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        simulate(frame, plan(("c", "t", int(frame["partition"].iloc[0]))), rate=10)
    assert "\n" not in str(err.value)
