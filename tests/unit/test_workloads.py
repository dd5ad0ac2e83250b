"""The synthetic workloads: seeded, shaped as their docstrings say, fast at a million partitions."""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from spark_lag_assign.testing import workloads as w

GENERATORS: dict[str, Callable[..., w.Workload]] = {
    "uniform": w.uniform,
    "skewed": w.skewed,
    "seed002": w.seed002,
    "mixed_subscriptions": w.mixed_subscriptions,
}

UUID4 = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


def assert_well_formed(lags: pd.DataFrame, subs: dict[str, list[str]]) -> None:
    """What ``assign`` expects: int64 columns, rows sorted, partitions 0..P-1, every topic read."""
    assert list(lags.columns) == ["topic", "partition", "lag"]
    assert lags["partition"].dtype == np.int64 and lags["lag"].dtype == np.int64
    assert (lags["lag"] >= 0).all()
    assert lags.equals(lags.sort_values(["topic", "partition"]).reset_index(drop=True))
    for _, g in lags.groupby("topic"):
        assert g["partition"].tolist() == list(range(len(g)))
    assert list(subs) == sorted(subs)
    read = {t for topics in subs.values() for t in topics}
    assert read == set(lags["topic"])


@pytest.mark.parametrize("name", list(GENERATORS))
def test_the_same_seed_gives_the_same_group_and_another_seed_another(name: str) -> None:
    make = GENERATORS[name]
    lags, subs = make(seed=7)
    again, subs_again = make(seed=7)
    other, subs_other = make(seed=8)
    pd.testing.assert_frame_equal(lags, again)
    assert subs == subs_again
    assert not (lags.equals(other) and subs == subs_other)
    assert set(subs).isdisjoint(subs_other), "consumer uuids come from the seed"


@pytest.mark.parametrize("name", list(GENERATORS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_generator_returns_what_assign_expects(name: str, seed: int) -> None:
    assert_well_formed(*GENERATORS[name](seed=seed))


def test_uniform_is_a_grid_with_lags_in_range_and_everyone_reading_everything() -> None:
    lags, subs = w.uniform(topics=7, partitions=5, consumers=3, max_lag=100, seed=1)
    assert len(lags) == 35
    assert lags.groupby("topic").size().tolist() == [5] * 7
    assert lags["lag"].between(0, 100).all()
    assert len(subs) == 3
    assert all(topics == sorted(set(lags["topic"])) for topics in subs.values())


def test_consumer_ids_are_host_uuid_with_hosts_numbered_from_01() -> None:
    ids = w.consumer_ids(5, np.random.default_rng(0), hosts=2, prefix="application")
    assert [i.split("-")[0] for i in ids] == ["application01", "application02"] * 2 + ["application01"]
    assert all(re.fullmatch(rf"application0[12]-{UUID4}", i) for i in ids)
    assert len(set(ids)) == 5


def test_skewed_puts_most_of_each_topic_on_its_top_partition() -> None:
    lags, subs = w.skewed(topics=40, min_partitions=4, max_partitions=30, exponent=1.5, seed=3)
    sizes = lags.groupby("topic").size()
    assert sizes.between(4, 30).all()
    by_topic = lags.groupby("topic")["lag"]
    share = by_topic.max() / by_topic.sum()
    # weights 1/r^1.5 sum to less than zeta(1.5) = 2.612..., so rank 1 holds more than 1/2.612
    assert (share > 1 / 2.6124 - 0.01).all()
    # so the 40 topic leaders, at most a quarter of the partitions, hold well over a third of all lag
    top = np.sort(lags["lag"].to_numpy())[::-1]
    assert len(top) >= 4 * 40
    assert top[:40].sum() > 0.38 * top.sum()
    assert all(re.fullmatch(rf"host\d\d-{UUID4}", c) for c in subs)


def test_seed002_has_about_80_topics_of_very_different_volume_and_size_read_by_application_hosts() -> None:
    lags, subs = w.seed002(seed=0)
    assert lags["topic"].nunique() == 80
    sizes = lags.groupby("topic").size()
    assert set(sizes) <= set(w.SEED002_PARTITION_COUNTS)
    assert sizes.max() / sizes.min() >= 20
    volume = lags.groupby("topic")["lag"].sum()
    # log-normal with sigma 2 over 80 draws spans far more than two orders of magnitude
    assert volume.max() / max(volume.min(), 1) > 100
    hosts = Counter(c.split("-")[0] for c in subs)
    assert hosts == {f"application{h:02d}": 2 for h in range(1, 9)}
    assert all(re.fullmatch(rf"application\d\d-{UUID4}", c) for c in subs)


@pytest.mark.parametrize("seed", range(5))
def test_mixed_subscriptions_differ_yet_leave_nobody_idle_and_no_topic_unread(seed: int) -> None:
    lags, subs = w.mixed_subscriptions(topics=10, consumers=6, reads=0.3, seed=seed)
    topics = set(lags["topic"])
    assert all(subs[c] for c in subs)
    assert {t for ts in subs.values() for t in ts} == topics
    assert len({tuple(ts) for ts in subs.values()}) > 1


def test_join_adds_one_reader_of_every_topic_with_a_fresh_id() -> None:
    _, subs = w.uniform(topics=3, consumers=4, seed=0)
    joined = w.join(subs, seed=5)
    new = set(joined) - set(subs)
    assert len(new) == 1
    (newcomer,) = new
    assert re.fullmatch(rf"joiner-{UUID4}", newcomer)
    assert joined[newcomer] == sorted({t for ts in subs.values() for t in ts})
    assert {c: joined[c] for c in subs} == subs
    assert w.join(subs, seed=5) == joined
    assert w.join(subs, topics=["topic000"], seed=5)[newcomer] == ["topic000"]


def test_leave_removes_the_named_consumer_or_a_seeded_one() -> None:
    _, subs = w.uniform(topics=2, consumers=5, seed=0)
    gone = sorted(subs)[2]
    assert set(w.leave(subs, gone)) == set(subs) - {gone}
    assert w.leave(subs, seed=3) == w.leave(subs, seed=3)
    assert len(w.leave(subs, seed=3)) == 4
    with pytest.raises(KeyError):
        w.leave(subs, "nobody")


def test_add_partitions_numbers_after_the_last_and_draws_lags_within_the_topics_range() -> None:
    lags, _ = w.uniform(topics=2, partitions=3, seed=0)
    grown = w.add_partitions(lags, "topic001", 4, seed=1)
    assert_well_formed(grown, {"c": sorted(set(grown["topic"]))})
    new = grown[(grown["topic"] == "topic001") & (grown["partition"] >= 3)]
    assert new["partition"].tolist() == [3, 4, 5, 6]
    old = lags[lags["topic"] == "topic001"]["lag"]
    assert new["lag"].between(old.min(), old.max()).all()
    pd.testing.assert_frame_equal(grown[grown["partition"] < 3].reset_index(drop=True), lags)


def test_add_topic_is_read_by_the_named_readers_only() -> None:
    lags, subs = w.uniform(topics=2, partitions=3, consumers=3, seed=0)
    reader = sorted(subs)[1]
    more, subs2 = w.add_topic(lags, subs, "new-topic", 5, readers=[reader], seed=2)
    assert_well_formed(more, subs2)
    assert (more["topic"] == "new-topic").sum() == 5
    assert [c for c in subs2 if "new-topic" in subs2[c]] == [reader]
    with pytest.raises(ValueError, match="topic new-topic exists"):
        w.add_topic(more, subs2, "new-topic", 1)


def test_drift_moves_lags_a_little_and_keeps_the_rest() -> None:
    lags, _ = w.uniform(topics=20, partitions=50, max_lag=100_000, seed=0)
    drifted = w.drift(lags, sigma=0.05, seed=1)
    pd.testing.assert_frame_equal(drifted[["topic", "partition"]], lags[["topic", "partition"]])
    ratio = (drifted["lag"] + 1) / (lags["lag"] + 1)
    assert ratio.median() == pytest.approx(1.0, abs=0.02)
    # a factor of sigma 0.05 (in log units) leaves [0.7, 1.3] only beyond five sigma: not in 1,000 draws
    assert ratio[lags["lag"] > 1_000].between(0.7, 1.3).all()
    assert not drifted["lag"].equals(lags["lag"])


def test_a_million_partitions_are_generated_in_seconds() -> None:
    start = time.perf_counter()
    lags, subs = w.uniform(topics=10_000, partitions=100, consumers=1_000, seed=0)
    elapsed = time.perf_counter() - start
    assert len(lags) == 1_000_000 and len(subs) == 1_000
    assert elapsed < 5.0, elapsed
