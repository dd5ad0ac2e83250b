"""Sizing for a deadline: equal to a brute force over every subset size with ``drain``, on small
groups; the worked example; producers that outrun the group; durations."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from spark_lag_assign import assign, cli
from spark_lag_assign.config import parse_duration
from spark_lag_assign.errors import ConfigError
from spark_lag_assign.sizing import makespan, order, size


def brute_force(
    lags: pd.DataFrame, subs: dict[str, list[str]], read: dict[str, float], deadline: float, produce: pd.DataFrame | None
) -> int | None:
    """Every size from one up, the fastest pipelines (ties by id), each planned with drain and
    played forward with its own arithmetic: the first size that drains by the deadline."""
    ranked = sorted(read, key=lambda c: (-read[c], c))
    for n in range(1, len(ranked) + 1):
        chosen = ranked[:n]
        options: dict[str, object] = {"read_rates": {c: read[c] for c in chosen}}
        if produce is not None:
            options["produce_rates"] = produce
        plan = assign(lags, {c: subs[c] for c in chosen}, "drain", **options)
        worst = 0.0
        for c in chosen:
            mine = plan[plan["consumer"] == c]
            lag = float(mine["lag"].sum())
            p = 0.0 if produce is None else float(mine.merge(produce, on=["topic", "partition"])["produce_rate"].sum())
            spare = read[c] - p
            t = 0.0 if lag == 0 and spare >= 0 else (lag / spare if spare > 0 else math.inf)
            worst = max(worst, t)
        if worst <= deadline:
            return n
    return None


@st.composite
def groups(draw: st.DrawFn) -> tuple[pd.DataFrame, dict[str, float], pd.DataFrame | None, float]:
    partitions = draw(st.integers(1, 8))
    lags = pd.DataFrame(
        {
            "topic": "t0",
            "partition": range(partitions),
            "lag": draw(st.lists(st.integers(0, 5_000), min_size=partitions, max_size=partitions)),
        }
    )
    consumers = draw(st.integers(1, 5))
    read = {f"c{i}": float(draw(st.sampled_from([50, 100, 100, 200, 300]))) for i in range(consumers)}
    produce = None
    if draw(st.booleans()):
        produce = pd.DataFrame(
            {
                "topic": "t0",
                "partition": range(partitions),
                "produce_rate": draw(st.lists(st.sampled_from([0.0, 5.0, 20.0, 60.0]), min_size=partitions, max_size=partitions)),
            }
        )
    if draw(st.booleans()):
        deadline = float(draw(st.sampled_from([1, 5, 10, 20, 40, 80, 200])))
    else:
        # near what the k fastest could do on capacity alone: the sizes where the answer turns
        # (a fixed deadline mostly asks for one pipeline or for none)
        k = draw(st.integers(min(2, consumers), consumers))
        spare = sum(sorted(read.values(), reverse=True)[:k]) - (0.0 if produce is None else float(produce["produce_rate"].sum()))
        slack = draw(st.sampled_from([0.95, 1.05, 1.3, 2.0]))
        deadline = max(1.0, float(lags["lag"].sum()) / max(spare, 1.0) * slack)
    return lags, read, produce, deadline


# the brute force plans every size: half the profile's examples (100 under ci); the deadlines
# near the turning sizes make them count (27 of the 100 ask for two or more pipelines, where the
# fixed deadlines alone gave 12 of 200)
@settings(max_examples=max(1, settings().max_examples // 2))
@given(groups())
def test_the_answer_equals_a_brute_force_over_every_size(
    group: tuple[pd.DataFrame, dict[str, float], pd.DataFrame | None, float],
) -> None:
    lags, read, produce, deadline = group
    subs = {c: ["t0"] for c in read}
    got = size(lags, subs, read, deadline, produce)
    assert got.needed == brute_force(lags, subs, read, deadline, produce)
    if got.needed is not None:
        assert got.pipelines == tuple(order(read)[: got.needed])
        assert got.drain_needed is not None and got.drain_needed <= deadline
        assert got.bound is not None and got.bound <= got.needed  # capacity alone never asks for more


def test_the_worked_example() -> None:
    lags = pd.DataFrame({"topic": "t0", "partition": [0, 1, 2], "lag": [600, 300, 300]})
    subs = {c: ["t0"] for c in "ABC"}
    got = size(lags, subs, {"A": 100, "B": 200, "C": 100}, 5.0)
    assert (got.needed, got.pipelines, got.drain_needed, got.drain_configured, got.bound) == (2, ("B", "A"), 4.5, 3.0, 2)
    assert got.describe() == (
        "drain within 5.0 s: 2 pipeline(s) needed (B, A), draining in 4.5 s; 3 configured pipeline(s) drain in 3.0 s"
    )


def test_pinned_pipelines_come_first_whatever_their_speed() -> None:
    lags = pd.DataFrame({"topic": "t0", "partition": [0, 1, 2], "lag": [600, 300, 300]})
    subs = {c: ["t0"] for c in "ABC"}
    got = size(lags, subs, {"A": 100, "B": 200, "C": 100}, 5.0, pinned=["C"])
    assert got.pipelines[0] == "C" and got.needed == 2 and got.pipelines == ("C", "B")


def test_producers_outrunning_the_group_are_said_with_by_how_much() -> None:
    lags = pd.DataFrame({"topic": "t0", "partition": [0, 1], "lag": [10, 10]})
    produce = pd.DataFrame({"topic": "t0", "partition": [0, 1], "produce_rate": [150.0, 100.0]})
    got = size(lags, {"A": ["t0"], "B": ["t0"]}, {"A": 100, "B": 100}, 3600.0, produce)
    assert (got.needed, got.outrun, math.isinf(got.drain_configured)) == (None, 50.0, True)
    assert "producers append 50.0 records/s more than all of them read" in got.describe()
    assert got.as_json()["drain_seconds_configured"] is None and got.as_json()["produce_excess"] == 50.0


def test_a_topic_no_chosen_pipeline_reads_never_drains() -> None:
    lags = pd.DataFrame({"topic": ["a", "b"], "partition": [0, 0], "lag": [100, 100]})
    subs = {"fast": ["a"], "slow": ["b"]}
    got = size(lags, subs, {"fast": 1000, "slow": 10}, 20.0)
    assert (got.needed, got.pipelines) == (2, ("fast", "slow"))  # fast alone leaves b unread
    plan = assign(lags, subs, "drain", read_rates={"fast": 1000, "slow": 10})
    assert makespan(plan, {"fast": 1000, "slow": 10}, None) == 10.0


@pytest.mark.parametrize(
    ("text", "seconds"), [("45m", 2700), ("1h30m", 5400), ("90s", 90), ("1.5h", 5400), ("3600", 3600), (120, 120)]
)
def test_durations(text: str | int, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["-5m", "soon", "0", "1h30", "", "5 m x", "inf", True])
def test_bad_durations_are_one_line(text: object) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_duration(text, "--drain-within")
    assert str(caught.value).startswith("--drain-within: ") and "\n" not in str(caught.value)


def test_simulate_answers_the_deadline_question_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    offsets = tmp_path / "now.csv"
    offsets.write_text("topic,partition,beginning_offset,end_offset,committed_offset\nt0,0,0,600,0\nt0,1,0,300,0\nt0,2,0,300,0\n")
    rates = tmp_path / "rates.csv"
    rates.write_text("consumer,records_per_second\nA,100\nB,200\nC,100\n")
    common = ["simulate", "--offsets", str(offsets), "--consumers", "A,B,C", "--rates", str(rates), "--strategies", "drain"]
    assert cli.main([*common, "--drain-within", "5s"]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == (
        "drain within 5.0 s: 2 pipeline(s) needed (B, A), draining in 4.5 s; 3 configured pipeline(s) drain in 3.0 s"
    )
    assert cli.main([*common, "--drain-within=-1m"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "spark-lag-assign: error: --drain-within: '-1m' is negative: a deadline is a time from now (e.g. 45m)"
    assert cli.main([*common, "--drain-within", "5s", "--pinned", "Z"]) == 1
    assert capsys.readouterr().err.strip() == "spark-lag-assign: error: --pinned: pinned pipeline(s) not in the group: Z"


@pytest.mark.parametrize("seed", range(6))
def test_on_small_bench_like_groups_the_answer_is_within_one_pipeline_of_the_capacity_bound(seed: int) -> None:
    """``make bench``'s sizing workloads (tests/bench/sizing_bench.py) made small: skewed lags on
    6 pipelines, equal or 2x-apart rates, producers at 20% and 60% of capacity, deadlines 1.25x to
    4x the whole group's lower bound. Where some number of the 6 drains in time, it is never
    below the capacity bound and at most one above (seed 3 has cases at +1); where none does
    (seed 3, equal rates, 60%, 1.25x), the bound asks for all 6, so the answer (7 or more) is
    not known to break "within one" from this group."""
    from spark_lag_assign.testing import workloads
    from tests.bench import drain as drain_bench, rates_bench, sizing_bench

    gaps = []
    for speeds in rates_bench.SPEEDS:
        for load in (0.2, 0.6):
            lags, subs = workloads.skewed(topics=8, consumers=6, max_partitions=12, seed=seed)
            rates = rates_bench.read_rates(list(subs), drain_bench.consumer_rate(lags, len(subs)), speeds)
            produced = rates_bench.produce_rates(lags, sum(rates.values()), min(rates.values()), load, seed)
            for factor in (1.25, 2.0, 4.0):
                deadline = factor * sizing_bench.bound_time(lags, rates, produced)
                got = size(lags, subs, rates, deadline, produced)
                bound = sizing_bench.capacity_bound(lags, rates, produced, deadline)
                assert bound is not None and got.bound == bound
                if got.needed is None:
                    assert bound == got.configured and got.drain_configured > deadline
                    continue
                assert got.drain_needed is not None and got.drain_needed <= deadline
                gaps.append(got.needed - bound)
    assert len(gaps) >= 11 and min(gaps) >= 0 and max(gaps) <= 1, gaps
