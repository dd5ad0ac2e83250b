"""Seeded synthetic groups for tests and benchmarks: lags and subscriptions, no Kafka needed.

Every generator is pure: ``numpy.random.default_rng(seed)`` drives every draw, so the same
arguments give the same frame on any machine. Each returns a ``Workload``: a lags
DataFrame[topic, partition, lag] (int64 partition and lag, rows sorted by topic then
partition, partitions numbered from 0) and a subscriptions dict {consumer: [topics]}, the
two inputs of ``spark_lag_assign.assign``.

Shapes:

- ``uniform``: equal topics, lags drawn uniformly; the million-partition scale test.
- ``skewed``: many topics of different size and volume, and within each topic a Zipf-like
  law, so that a few partitions hold most of the backlog (a stuck downstream service).
- ``seed002``: seed 002's group: about 80 topics whose volume and partition count differ by
  orders of magnitude, read by consumers named ``application01-<uuid>`` on a few hosts.
- ``mixed_subscriptions``: consumers reading different subsets of the topics.

Churn helpers (``join``, ``leave``, ``add_partitions``, ``add_topic``, ``drift``) derive the
next state of a group from the current one, for sequences of plans.

Consumer ids follow seed 002: ``<host>-<uuid>``, hosts numbered from 01, the uuid drawn
from the same seeded generator; sorting them groups a host's consumers together, which is
what piles Range's remainders onto the first hosts.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

Subscriptions = dict[str, list[str]]
Workload = tuple[pd.DataFrame, Subscriptions]

LAG_COLUMNS = ("topic", "partition", "lag")


def consumer_ids(count: int, rng: np.random.Generator, hosts: int | None = None, prefix: str = "host") -> list[str]:
    """``count`` ids ``<prefix><NN>-<uuid4>``, spread round-robin over ``hosts`` hosts (default: one each).

    Returned in creation order (host 01 first), not sorted.
    """
    if count < 1:
        raise ValueError("count must be at least 1")
    hosts = count if hosts is None else hosts
    if hosts < 1:
        raise ValueError("hosts must be at least 1")
    width = max(2, len(str(hosts)))
    raw = rng.integers(0, 256, size=(count, 16), dtype=np.uint8)
    return [
        f"{prefix}{i % hosts + 1:0{width}d}-{uuid.UUID(bytes=bytes(raw[i]), version=4)}" for i in range(count)
    ]


def topic_names(count: int, prefix: str = "topic") -> list[str]:
    """``count`` topic names, zero-padded so that name order is creation order."""
    width = max(3, len(str(count - 1)))
    return [f"{prefix}{i:0{width}d}" for i in range(count)]


def lag_frame(topics: Sequence[str], partitions: Sequence[int] | np.ndarray, lags: np.ndarray) -> pd.DataFrame:
    """The lags DataFrame of topics with ``partitions[i]`` partitions each, numbered from 0.

    ``lags`` holds one value per partition, topic by topic; topics must be given in name
    order so that the rows come out sorted as ``assign`` sorts them.
    """
    counts = np.asarray(partitions, dtype=np.int64)
    if len(counts) != len(topics):
        raise ValueError("one partition count per topic")
    if (counts < 1).any():
        raise ValueError("every topic needs at least one partition")
    if list(topics) != sorted(topics):
        raise ValueError("topics must be in name order")
    total = int(counts.sum())
    values = np.asarray(lags)
    if values.shape != (total,):
        raise ValueError(f"expected {total} lags, got {values.shape}")
    starts = np.cumsum(counts) - counts
    return pd.DataFrame(
        {
            "topic": np.repeat(np.asarray(topics, dtype=object), counts),
            "partition": np.arange(total, dtype=np.int64) - np.repeat(starts, counts),
            "lag": np.rint(values).astype(np.int64),
        }
    )


def _everyone(consumers: Sequence[str], topics: Sequence[str]) -> Subscriptions:
    return {c: list(topics) for c in sorted(consumers)}


def uniform(
    topics: int = 10, partitions: int = 12, consumers: int = 4, max_lag: int = 10_000, seed: int = 0
) -> Workload:
    """``topics`` topics of ``partitions`` partitions each, lags uniform in ``[0, max_lag]``,
    every consumer reading every topic. ``uniform(10_000, 100, 1_000)`` is the million-partition test."""
    rng = np.random.default_rng(seed)
    names = topic_names(topics)
    lags = rng.integers(0, max_lag + 1, size=topics * partitions)
    return lag_frame(names, [partitions] * topics, lags), _everyone(consumer_ids(consumers, rng), names)


def _zipf_within(rng: np.random.Generator, counts: np.ndarray, exponent: float) -> np.ndarray:
    """Per topic, weights ``1 / rank**exponent`` summing to 1, ranks shuffled over the partitions."""
    total = int(counts.sum())
    starts = np.cumsum(counts) - counts
    rank = np.arange(total) - np.repeat(starts, counts) + 1.0
    weights = rank**-exponent
    sums = np.add.reduceat(weights, starts)
    weights /= np.repeat(sums, counts)
    # shuffle within each topic: sort by (topic, random key) keeps topics contiguous
    topic_of_row = np.repeat(np.arange(len(counts)), counts)
    order = np.lexsort((rng.random(total), topic_of_row))
    return weights[order]


def skewed(
    topics: int = 60,
    consumers: int = 12,
    hosts: int | None = None,
    min_partitions: int = 4,
    max_partitions: int = 48,
    exponent: float = 1.5,
    volume_sigma: float = 1.0,
    median_volume: float = 1_000_000,
    seed: int = 0,
) -> Workload:
    """A few partitions hold most of the backlog.

    Each topic has a partition count uniform in ``[min_partitions, max_partitions]`` and a
    total lag drawn log-normally around ``median_volume`` (``volume_sigma`` apart, in natural
    log units). Inside a topic the partition of rank r (1 = heaviest, placed at a random
    partition number) holds a share proportional to ``1 / r**exponent``: with the default
    1.5 the top partition holds 40-60% of its topic. Every consumer (``host-uuid`` ids)
    reads every topic.
    """
    if not 1 <= min_partitions <= max_partitions:
        raise ValueError("need 1 <= min_partitions <= max_partitions")
    rng = np.random.default_rng(seed)
    names = topic_names(topics)
    counts = rng.integers(min_partitions, max_partitions + 1, size=topics)
    volume = median_volume * rng.lognormal(0.0, volume_sigma, size=topics)
    lags = np.repeat(volume, counts) * _zipf_within(rng, counts, exponent)
    return lag_frame(names, counts, lags), _everyone(consumer_ids(consumers, rng, hosts), names)


#: partition counts seen on real clusters: a few single-partition topics, many small powers
#: of two and round numbers, a handful of wide topics
SEED002_PARTITION_COUNTS = (1, 1, 2, 3, 4, 5, 6, 8, 8, 10, 12, 12, 16, 16, 20, 24, 30, 32, 40, 50, 64, 100, 128)


def seed002(
    topics: int = 80,
    hosts: int = 8,
    consumers_per_host: int = 2,
    volume_sigma: float = 2.0,
    median_volume: float = 500_000,
    seed: int = 0,
) -> Workload:
    """Seed 002's group: about 80 topics of very different volume and partition count,
    every consumer (``application01-<uuid>`` ...) reading all of them.

    Partition counts are drawn from ``SEED002_PARTITION_COUNTS``; a topic's total lag is
    log-normal around ``median_volume`` with ``volume_sigma`` (2.0: the busiest topics carry
    hundreds of times the median); within a topic partitions differ mildly (gamma, shape 4),
    as keyed producers make them.
    """
    rng = np.random.default_rng(seed)
    names = topic_names(topics, prefix="queue-")
    counts = rng.choice(np.asarray(SEED002_PARTITION_COUNTS), size=topics)
    volume = median_volume * rng.lognormal(0.0, volume_sigma, size=topics)
    noise = rng.gamma(4.0, 1.0, size=int(counts.sum()))
    starts = np.cumsum(counts) - counts
    noise /= np.repeat(np.add.reduceat(noise, starts), counts)
    lags = np.repeat(volume, counts) * noise
    ids = consumer_ids(hosts * consumers_per_host, rng, hosts, prefix="application")
    return lag_frame(names, counts, lags), _everyone(ids, names)


def mixed_subscriptions(
    topics: int = 12,
    consumers: int = 6,
    min_partitions: int = 1,
    max_partitions: int = 24,
    reads: float = 0.5,
    seed: int = 0,
) -> Workload:
    """Consumers reading different topics: each consumer reads each topic with probability
    ``reads``; every consumer reads at least one topic and every topic has at least one
    reader. Lags are log-normal (sigma 1.5) around 10,000 per partition."""
    if not 0.0 < reads <= 1.0:
        raise ValueError("reads must be in (0, 1]")
    rng = np.random.default_rng(seed)
    names = topic_names(topics)
    counts = rng.integers(min_partitions, max_partitions + 1, size=topics)
    lags = 10_000 * rng.lognormal(0.0, 1.5, size=int(counts.sum()))
    ids = consumer_ids(consumers, rng)
    reads_matrix = rng.random((consumers, topics)) < reads
    # the guarantees: give a reader-less topic one random reader, an idle consumer one random topic
    for t in np.flatnonzero(~reads_matrix.any(axis=0)):
        reads_matrix[rng.integers(consumers), t] = True
    for c in np.flatnonzero(~reads_matrix.any(axis=1)):
        reads_matrix[c, rng.integers(topics)] = True
    subs = {ids[c]: [names[t] for t in np.flatnonzero(reads_matrix[c])] for c in range(consumers)}
    return lag_frame(names, counts, lags), {c: subs[c] for c in sorted(subs)}


# ---------------------------------------------------------------------------------------------
# churn: the next state of a group


def join(
    subscriptions: Mapping[str, Sequence[str]], seed: int = 0, host: str = "joiner", topics: Sequence[str] | None = None
) -> Subscriptions:
    """The group plus one consumer ``<host>-<uuid>`` reading ``topics`` (default: every topic
    anyone reads). The id is drawn from ``seed`` and never collides with a member's."""
    rng = np.random.default_rng(seed)
    read = sorted({t for ts in subscriptions.values() for t in ts}) if topics is None else sorted(set(topics))
    while True:
        raw = bytes(rng.integers(0, 256, size=16, dtype=np.uint8))
        newcomer = f"{host}-{uuid.UUID(bytes=raw, version=4)}"
        if newcomer not in subscriptions:
            break
    out = {c: list(ts) for c, ts in subscriptions.items()}
    out[newcomer] = read
    return {c: out[c] for c in sorted(out)}


def leave(subscriptions: Mapping[str, Sequence[str]], consumer: str | None = None, seed: int = 0) -> Subscriptions:
    """The group without ``consumer`` (default: a member drawn with ``seed``)."""
    members = sorted(subscriptions)
    if consumer is None:
        consumer = members[int(np.random.default_rng(seed).integers(len(members)))]
    if consumer not in subscriptions:
        raise KeyError(consumer)
    return {c: list(subscriptions[c]) for c in members if c != consumer}


def add_partitions(lags: pd.DataFrame, topic: str, count: int, seed: int = 0) -> pd.DataFrame:
    """``topic`` grown by ``count`` partitions (numbered after its last one), each with a lag
    drawn uniformly between the topic's smallest and largest lag."""
    mine = lags[lags["topic"] == topic]
    if mine.empty:
        raise KeyError(topic)
    rng = np.random.default_rng(seed)
    low, high = int(mine["lag"].min()), int(mine["lag"].max())
    new = pd.DataFrame(
        {
            "topic": np.full(count, topic, dtype=object),
            "partition": np.arange(count, dtype=np.int64) + int(mine["partition"].max()) + 1,
            "lag": rng.integers(low, high + 1, size=count).astype(np.int64),
        }
    )
    return _sorted(pd.concat([lags, new], ignore_index=True))


def add_topic(
    lags: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    topic: str,
    partitions: int,
    mean_lag: float = 10_000,
    readers: Sequence[str] | None = None,
    seed: int = 0,
) -> Workload:
    """A new topic of ``partitions`` partitions (exponential lags around ``mean_lag``), read by
    ``readers`` (default: every consumer)."""
    if topic in set(lags["topic"]):
        raise ValueError(f"topic {topic} exists")
    rng = np.random.default_rng(seed)
    new = lag_frame([topic], [partitions], rng.exponential(mean_lag, size=partitions))
    who = set(subscriptions) if readers is None else set(readers)
    subs = {c: sorted(set(ts) | ({topic} if c in who else set())) for c, ts in subscriptions.items()}
    return _sorted(pd.concat([lags, new], ignore_index=True)), {c: subs[c] for c in sorted(subs)}


def drift(lags: pd.DataFrame, sigma: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """Every lag multiplied by a log-normal factor (``sigma`` in natural log units): the next
    snapshot of a group whose backlog moved a little."""
    rng = np.random.default_rng(seed)
    factor = rng.lognormal(0.0, sigma, size=len(lags))
    return lags.assign(lag=np.rint(lags["lag"].to_numpy() * factor).astype(np.int64))


def _sorted(lags: pd.DataFrame) -> pd.DataFrame:
    return lags.sort_values(["topic", "partition"], kind="stable").reset_index(drop=True)


__all__ = [
    "LAG_COLUMNS",
    "SEED002_PARTITION_COUNTS",
    "Subscriptions",
    "Workload",
    "add_partitions",
    "add_topic",
    "consumer_ids",
    "drift",
    "join",
    "lag_frame",
    "leave",
    "mixed_subscriptions",
    "seed002",
    "skewed",
    "topic_names",
    "uniform",
]
