"""The one invariant checker: production code runs it before a plan is returned or written,
and every assignor test runs it after every case.

Every partition of a subscribed topic is assigned to exactly one consumer, and only to a
consumer subscribed to its topic; nothing else is assigned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from spark_lag_assign.errors import InvariantError


def check_assignment(
    assignment: pd.DataFrame, lags: pd.DataFrame, subscriptions: Mapping[str, Sequence[str]]
) -> None:
    """Raise InvariantError unless ``assignment`` covers every subscribed partition of ``lags`` once.

    assignment: DataFrame[consumer, topic, partition, ...]; lags: DataFrame[topic, partition, ...]
    (partitions of unsubscribed topics in ``lags`` are expected to stay unassigned).
    """
    missing = [c for c in ("consumer", "topic", "partition") if c not in assignment.columns]
    if missing:
        raise InvariantError(f"assignment lacks column(s) {', '.join(missing)}")
    unknown = sorted(set(assignment["consumer"]) - set(subscriptions))
    if unknown:
        raise InvariantError(f"assignment names unknown consumer(s) {', '.join(map(str, unknown[:5]))}")
    dup = assignment.duplicated(["topic", "partition"])
    if dup.any():
        r = assignment[dup].iloc[0]
        raise InvariantError(f"partition {r.topic}-{r.partition} is assigned more than once")
    pairs = pd.DataFrame(
        [(c, t) for c, topics in subscriptions.items() for t in topics], columns=["consumer", "topic"]
    ).drop_duplicates()
    pairs["_ok"] = True
    joined = assignment[["consumer", "topic", "partition"]].merge(pairs, on=["consumer", "topic"], how="left")
    bad = joined["_ok"].isna()
    if bad.any():
        r = joined[bad].iloc[0]
        raise InvariantError(f"{r.topic}-{r.partition} is assigned to {r.consumer}, which does not subscribe to {r.topic}")
    subscribed = {t for topics in subscriptions.values() for t in topics}
    expected = lags.loc[lags["topic"].isin(subscribed), ["topic", "partition"]]
    got = assignment[["topic", "partition"]]
    if len(expected) != len(got) or not expected.merge(got, how="left", indicator=True)["_merge"].eq("both").all():
        both = expected.merge(got, how="outer", indicator=True)
        lost = both[both["_merge"] == "left_only"]
        extra = both[both["_merge"] == "right_only"]
        if len(lost):
            r = lost.iloc[0]
            raise InvariantError(f"{len(lost)} subscribed partition(s) unassigned, e.g. {r.topic}-{r.partition}")
        r = extra.iloc[0]
        raise InvariantError(f"{len(extra)} assigned partition(s) do not exist or are not subscribed, e.g. {r.topic}-{r.partition}")
