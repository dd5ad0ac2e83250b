"""The one invariant checker: production code runs it before a plan is returned or written,
and every assignor test runs it after every case.

Every partition of a subscribed topic is assigned to exactly one consumer, and only to a
consumer subscribed to its topic; nothing else is assigned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from spark_lag_assign.errors import InvariantError
from spark_lag_assign.subscriptions import SubscriptionIndex, partition_keys


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
    consumers = index.consumer_codes(assignment["consumer"])
    if (consumers < 0).any():
        unknown = sorted({str(c) for c in assignment["consumer"][consumers < 0]})
        raise InvariantError(f"assignment names unknown consumer(s) {', '.join(unknown[:5])}")
    topics = index.topic_codes(assignment["topic"])
    partitions = assignment["partition"].to_numpy(dtype=np.int64)
    bad = ~index.permitted(consumers, topics)
    if bad.any():
        i = int(np.argmax(bad))
        r = assignment.iloc[i]
        raise InvariantError(f"{r.topic}-{r.partition} is assigned to {r.consumer}, which does not subscribe to {r.topic}")

    expected_rows = lags[np.isin(index.topic_codes(lags["topic"]), index.subscribed_topics())]
    width = int(max(partitions.max(initial=0), expected_rows["partition"].max() if len(expected_rows) else 0)) + 1
    got = np.sort(partition_keys(topics, partitions, width))
    twice = got[1:][got[1:] == got[:-1]]
    if len(twice):
        raise InvariantError(f"partition {_name(index, twice[0], width)} is assigned more than once")
    expected = np.sort(
        partition_keys(index.topic_codes(expected_rows["topic"]), expected_rows["partition"].to_numpy(), width)
    )
    if len(expected) == len(got) and np.array_equal(expected, got):
        return
    lost = np.setdiff1d(expected, got, assume_unique=True)
    if len(lost):
        raise InvariantError(f"{len(lost)} subscribed partition(s) unassigned, e.g. {_name(index, lost[0], width)}")
    extra = np.setdiff1d(got, expected, assume_unique=True)
    raise InvariantError(
        f"{len(extra)} assigned partition(s) do not exist or are not subscribed, e.g. {_name(index, extra[0], width)}"
    )
