"""The one invariant checker: production code runs it before a plan is returned or written,
and every assignor test runs it after every case.

Every partition of a subscribed topic is assigned to exactly one consumer, and only to a
consumer subscribed to its topic; nothing else is assigned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from spark_lag_assign.core.subscriptions import SubscriptionIndex, partition_keys
from spark_lag_assign.errors import InvariantError


def _name(index: SubscriptionIndex, key: np.int64, width: int) -> str:
    return f"{index.topics[int(key // width)]}-{int(key % width)}"


def check_assignment(
    assignment: pd.DataFrame,
    lags: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    index: SubscriptionIndex | None = None,
) -> None:
    """Raise InvariantError unless ``assignment`` covers every subscribed partition of ``lags`` once.

    assignment: DataFrame[consumer, topic, partition, ...]; lags: DataFrame[topic, partition, ...]
    (partitions of unsubscribed topics in ``lags`` are expected to stay unassigned). Pass an
    ``index`` built for these subscriptions and topics to save building it again.
    """
    missing = [c for c in ("consumer", "topic", "partition") if c not in assignment.columns]
    if missing:
        raise InvariantError(f"assignment lacks column(s) {', '.join(missing)}")
    if index is None:
        index = SubscriptionIndex(subscriptions, np.concatenate([lags["topic"].unique(), assignment["topic"].unique()]))
    topics = index.topic_codes(assignment["topic"])
    partitions = assignment["partition"].to_numpy(dtype=np.int64)
    _check_owners(assignment["consumer"].to_numpy(dtype=object), topics, partitions, index, assignment["topic"].to_numpy())

    expected_topics = index.topic_codes(lags["topic"])
    expected_partitions = lags["partition"].to_numpy(dtype=np.int64)
    wanted = np.isin(expected_topics, index.subscribed_topics())
    expected_topics, expected_partitions = expected_topics[wanted], expected_partitions[wanted]
    width = int(max(partitions.max(initial=0), expected_partitions.max(initial=0))) + 1
    got = partition_keys(topics, partitions, width)
    expected = partition_keys(expected_topics, expected_partitions, width)
    space = len(index.topics) * width
    if space <= 4 * (len(got) + len(expected)) + 4096 and got.min(initial=0) >= 0 and expected.min(initial=0) >= 0:
        # keys dense enough to count, not sort: the usual plan passes in two linear passes
        seen = np.bincount(got, minlength=space)
        if seen.max(initial=0) <= 1 and np.array_equal(seen, np.bincount(expected, minlength=space)):
            return
    _differences(got, expected, index, width)


def _differences(got: np.ndarray, expected: np.ndarray, index: SubscriptionIndex, width: int) -> None:
    """``check_assignment``'s verdict on the partition keys assigned and expected: the first
    problem, if any."""
    got = np.sort(got)
    twice = got[1:][got[1:] == got[:-1]]
    if len(twice):
        raise InvariantError(f"partition {_name(index, twice[0], width)} is assigned more than once")
    expected = np.sort(expected)
    if len(expected) == len(got) and np.array_equal(expected, got):
        return
    lost = np.setdiff1d(expected, got, assume_unique=True)
    if len(lost):
        raise InvariantError(f"{len(lost)} subscribed partition(s) unassigned, e.g. {_name(index, lost[0], width)}")
    extra = np.setdiff1d(got, expected, assume_unique=True)
    raise InvariantError(
        f"{len(extra)} assigned partition(s) do not exist or are not subscribed, e.g. {_name(index, extra[0], width)}"
    )


def check_owners(owners: np.ndarray, topic_codes: np.ndarray, partitions: np.ndarray, index: SubscriptionIndex) -> np.ndarray:
    """The same check for a plan given as one owner per row, where the rows are every subscribed
    partition once (as ``assign`` builds them): returns the owners' consumer codes."""
    if len(owners) != len(topic_codes):
        raise InvariantError(f"{len(owners)} owners for {len(topic_codes)} partitions")
    return _check_owners(owners, topic_codes, partitions, index)


def check_owner_codes(owners: np.ndarray, topic_codes: np.ndarray, partitions: np.ndarray, index: SubscriptionIndex) -> None:
    """``check_owners`` for owners given as consumer codes of ``index`` (-1: an unknown id),
    as the strategies with ``assign_codes`` return them."""
    if len(owners) != len(topic_codes):
        raise InvariantError(f"{len(owners)} owners for {len(topic_codes)} partitions")
    if len(owners) == 0:
        return
    if owners.min() < 0 or owners.max() >= len(index.consumers):
        unknown = (owners < 0) | (owners >= len(index.consumers))
        raise InvariantError(f"assignment names {int(unknown.sum())} owner(s) that are not consumers of the group")
    if len(index.reads) == 1 and index.reads[0].all() and topic_codes.min() >= 0:
        return  # one kind of consumer, reading every topic: every owner may read every row
    bad = ~index.permitted(owners, topic_codes)
    if bad.any():
        i = int(np.argmax(bad))
        topic, owner = index.topics[topic_codes[i]], index.consumers[owners[i]]
        raise InvariantError(f"{topic}-{partitions[i]} is assigned to {owner}, which does not subscribe to {topic}")


def _check_owners(
    owners: np.ndarray,
    topic_codes: np.ndarray,
    partitions: np.ndarray,
    index: SubscriptionIndex,
    topic_names: np.ndarray | None = None,
) -> np.ndarray:
    """Every row's owner is a consumer of the group that subscribes to the row's topic."""
    consumers = index.consumer_codes(owners)
    if (consumers < 0).any():
        unknown = sorted({str(c) for c in owners[consumers < 0]})
        raise InvariantError(f"assignment names unknown consumer(s) {', '.join(unknown[:5])}")
    bad = ~index.permitted(consumers, topic_codes)
    if bad.any():
        i = int(np.argmax(bad))
        topic = topic_names[i] if topic_names is not None else index.topics[topic_codes[i]]
        raise InvariantError(f"{topic}-{partitions[i]} is assigned to {owners[i]}, which does not subscribe to {topic}")
    return consumers
