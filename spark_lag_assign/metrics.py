"""Quality metrics of a plan (DESIGN.md): what the plan report prints and the benchmarks compare.

- count spread: ``max - min`` partitions per consumer over the whole group, and the worst
  spread of any topic among that topic's subscribers;
- lag imbalance: ``max consumer lag / mean consumer lag``;
- optimality: ``max consumer lag / LB`` with ``LB = max(total lag / consumers, largest partition lag)``;
- movement: partitions whose owner changed against the previous plan.

Consumers with nothing assigned count, with zero partitions and zero lag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Quality:
    consumers: int
    partitions: int
    total_lag: int
    count_spread: int
    topic_spread: int
    max_lag: int
    mean_lag: float
    lag_imbalance: float
    lower_bound: float
    optimality: float
    moved: int | None = None

    def as_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def per_consumer(assignment: pd.DataFrame, consumers: Sequence[str]) -> pd.DataFrame:
    """consumer -> partitions, lag; every consumer in ``consumers``, sorted, zeros where empty."""
    grouped = assignment.groupby("consumer", sort=False).agg(partitions=("partition", "size"), lag=("lag", "sum"))
    out = grouped.reindex(sorted(consumers), fill_value=0)
    out.index.name = "consumer"
    return out.astype({"partitions": np.int64, "lag": np.int64})


def topic_spread(assignment: pd.DataFrame, subscriptions: Mapping[str, Sequence[str]]) -> int:
    """The worst ``max - min`` partitions of one topic among that topic's subscribers."""
    if assignment.empty:
        return 0
    counts = assignment.groupby(["topic", "consumer"], sort=False).size()
    subscribers: dict[str, int] = {}
    for topics in subscriptions.values():
        for t in set(topics):  # a topic listed twice is still one reader
            subscribers[t] = subscribers.get(t, 0) + 1
    by_topic = counts.groupby(level=0, sort=False)
    top = by_topic.max()
    holders = by_topic.size()
    n_subs = pd.Series(subscribers).reindex(top.index).fillna(0)
    # a subscriber holding nothing of the topic counts as 0
    low = by_topic.min().where(holders >= n_subs, 0)
    return int((top - low).max())


def moved(assignment: pd.DataFrame, previous: pd.DataFrame | None) -> int:
    """Partitions present in both plans whose owner differs."""
    if previous is None or previous.empty or assignment.empty:
        return 0
    # a partition listed twice keeps the smallest consumer id, as ``assign`` reads a previous plan
    prev = (
        previous.loc[:, ["consumer", "topic", "partition"]]
        .sort_values(["topic", "partition", "consumer"], kind="stable")
        .drop_duplicates(["topic", "partition"])
    )
    both = assignment[["consumer", "topic", "partition"]].merge(
        prev, on=["topic", "partition"], suffixes=("", "_prev")
    )
    return int((both["consumer"] != both["consumer_prev"]).sum())


def quality(
    assignment: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    previous: pd.DataFrame | None = None,
) -> Quality:
    """The metrics of an assignment DataFrame[consumer, topic, partition, lag]."""
    table = per_consumer(assignment, list(subscriptions))
    n = len(table)
    total = int(table["lag"].sum())
    max_lag = int(table["lag"].max()) if n else 0
    mean = total / n if n else 0.0
    largest = int(assignment["lag"].max()) if len(assignment) else 0
    lb = max(mean, float(largest))
    return Quality(
        consumers=n,
        partitions=int(table["partitions"].sum()),
        total_lag=total,
        count_spread=int(table["partitions"].max() - table["partitions"].min()) if n else 0,
        topic_spread=topic_spread(assignment, subscriptions),
        max_lag=max_lag,
        mean_lag=mean,
        lag_imbalance=max_lag / mean if mean > 0 else 1.0,
        lower_bound=lb,
        optimality=max_lag / lb if lb > 0 else 1.0,
        moved=None if previous is None else moved(assignment, previous),
    )
