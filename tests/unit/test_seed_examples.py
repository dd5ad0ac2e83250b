"""The worked examples of the seeds, by hand: each expected plan is copied from the seed's
text, not from a run of our code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import pytest

import spark_lag_assign as sla


def lags_of(partitions: Mapping[str, Sequence[int]]) -> pd.DataFrame:
    """topic -> lag of each partition, partitions numbered from 0."""
    rows = [(t, p, lag) for t, lags in partitions.items() for p, lag in enumerate(lags)]
    return pd.DataFrame(rows, columns=["topic", "partition", "lag"])


def sized(**topics: int) -> pd.DataFrame:
    """Topics of the given partition counts, all lags zero (the seeds' Range/RoundRobin
    examples do not involve lag)."""
    return lags_of({t: [0] * n for t, n in topics.items()})


def as_seed_writes(out: pd.DataFrame) -> dict[str, list[str]]:
    """The plan in the seeds' notation, ``{"C0": ["t0p0", "t1p1"]}``."""
    return {
        c: [f"{t}p{p}" for t, p in sorted(zip(g["topic"], g["partition"]))]
        for c, g in out.groupby("consumer", sort=True)
    }


def totals(out: pd.DataFrame) -> dict[str, int]:
    return {c: int(v) for c, v in out.groupby("consumer")["lag"].sum().items()}


def run(lags: pd.DataFrame, subs: Mapping[str, Sequence[str]], strategy: str) -> pd.DataFrame:
    out = sla.assign(lags, subs, strategy)
    sla.check_assignment(out, lags, subs)
    return out


# ---------------------------------------------------------------------------------------------
# seed 000: the lag-based assignor against Range on one skewed topic
#
# The seed lists lags t0p0 100,000, t0p1 50,000, t0p2 60,000 and Range's plan C0: [t0p0,
# t0p1], C1: [t0p2], but prints Range's totals as 160,000 / 50,000. Those totals add up
# only with t0p1 and t0p2 swapped (60,000 and 50,000); with the listed lags the same plan
# carries 150,000 / 60,000. The lag-based plan and its totals (100,000 / 110,000) hold
# either way. Both readings are tested, so neither the plans nor the arithmetic is taken
# on trust.

SEED_000 = lags_of({"t0": [100_000, 50_000, 60_000]})
SEED_000_SWAPPED = lags_of({"t0": [100_000, 60_000, 50_000]})
TWO = {"C0": ["t0"], "C1": ["t0"]}


@pytest.mark.parametrize("lags", [SEED_000, SEED_000_SWAPPED], ids=["as listed", "t0p1 and t0p2 swapped"])
def test_seed_000_lag_based_gives_the_biggest_partition_its_own_consumer(lags: pd.DataFrame) -> None:
    out = run(lags, TWO, "lag")
    assert as_seed_writes(out) == {"C0": ["t0p0"], "C1": ["t0p1", "t0p2"]}
    assert totals(out) == {"C0": 100_000, "C1": 110_000}


@pytest.mark.parametrize(
    ("lags", "expected_totals"),
    [
        (SEED_000, {"C0": 150_000, "C1": 60_000}),
        (SEED_000_SWAPPED, {"C0": 160_000, "C1": 50_000}),  # the totals the seed prints
    ],
    ids=["as listed", "t0p1 and t0p2 swapped"],
)
def test_seed_000_range_piles_lag_on_the_first_consumer(lags: pd.DataFrame, expected_totals: dict[str, int]) -> None:
    out = run(lags, TWO, "range")
    assert as_seed_writes(out) == {"C0": ["t0p0", "t0p1"], "C1": ["t0p2"]}
    assert totals(out) == expected_totals


# ---------------------------------------------------------------------------------------------
# seed 003: Kafka's Range and RoundRobin


BOTH_TOPICS = {"C0": ["t0", "t1"], "C1": ["t0", "t1"]}


def test_seed_003_range_gives_the_first_consumer_the_extra_partition_of_every_topic() -> None:
    out = run(sized(t0=3, t1=3), BOTH_TOPICS, "range")
    assert as_seed_writes(out) == {"C0": ["t0p0", "t0p1", "t1p0", "t1p1"], "C1": ["t0p2", "t1p2"]}


def test_seed_003_roundrobin_with_identical_subscriptions_alternates_across_topics() -> None:
    out = run(sized(t0=3, t1=3), BOTH_TOPICS, "roundrobin")
    assert as_seed_writes(out) == {"C0": ["t0p0", "t0p2", "t1p1"], "C1": ["t0p1", "t1p0", "t1p2"]}


def test_seed_003_roundrobin_with_different_subscriptions_skips_non_readers() -> None:
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    out = run(sized(t0=1, t1=2, t2=3), subs, "roundrobin")
    assert as_seed_writes(out) == {"C0": ["t0p0"], "C1": ["t1p0"], "C2": ["t1p1", "t2p0", "t2p1", "t2p2"]}


def test_seed_003_roundrobin_diagram_with_three_overlapping_subscriptions() -> None:
    """The seed's figure: T0 (3 partitions), T1 (2), T2 (4); C0 reads T0, T1; C1 reads T1,
    T2; C2 reads T2, T0. The seed lists the last partition as "T0-P3", a typo for T2-P3
    (T0 has three partitions)."""
    subs = {"C0": ["T0", "T1"], "C1": ["T1", "T2"], "C2": ["T2", "T0"]}
    out = run(sized(T0=3, T1=2, T2=4), subs, "roundrobin")
    assert as_seed_writes(out) == {
        "C0": ["T0p0", "T0p2", "T1p1"],
        "C1": ["T1p0", "T2p0", "T2p2"],
        "C2": ["T0p1", "T2p1", "T2p3"],
    }


@pytest.mark.parametrize(
    ("strategy", "partitions", "expected"),
    [
        # "5 partitions, 2 consumers: P0, P1, P2 go to C0, P3, P4 to C1"
        ("range", 5, {"C0": ["t0p0", "t0p1", "t0p2"], "C1": ["t0p3", "t0p4"]}),
        # "4 partitions, 2 consumers: P0, P1 go to C0, P2, P3 to C1"
        ("range", 4, {"C0": ["t0p0", "t0p1"], "C1": ["t0p2", "t0p3"]}),
        # "5 partitions, 2 consumers: P0, P2, P4 go to C0, P1, P3 to C1"
        ("roundrobin", 5, {"C0": ["t0p0", "t0p2", "t0p4"], "C1": ["t0p1", "t0p3"]}),
    ],
)
def test_seed_003_one_topic_statements(strategy: str, partitions: int, expected: dict[str, list[str]]) -> None:
    assert as_seed_writes(run(sized(t0=partitions), TWO, strategy)) == expected
