"""The previous plan: its one check and the one rule for reading it, for every path.

A previous plan is a DataFrame[consumer, topic, partition] (``check_previous`` refuses
anything else). Each partition's previous owner is read by one rule (``previous_codes``):

- only a listing whose consumer is still in the group and still subscribes to the topic
  counts; a listing of a consumer or topic that no longer exists, or of a partition number
  that is missing, not whole, negative or beyond Kafka's int32, is ignored;
- a partition the plan lists more than once (after that) is kept by the smallest consumer
  id (the order every assignor sorts consumers in), whatever the order of the plan's rows;
- a partition of the plan that is not among the rows planned now is ignored.

``spark_lag_assign.assign`` reads the plan through ``previous_codes``; the Spark job
(``spark.job``) through ``previous_owners`` on its offsets; the DataFrame transform
``spark.transforms.with_previous_owner`` through ``previous_table``, which the rows then
join; ``core.quality.moved`` counts moves from the owners ``previous_table`` gives. All are
this rule, so every path gives a partition the same previous owner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from spark_lag_assign.core.limits import PARTITION_LIMIT
from spark_lag_assign.core.subscriptions import SubscriptionIndex, validate_subscriptions
from spark_lag_assign.errors import InputError

PREVIOUS_COLUMNS = ("consumer", "topic", "partition")
#: the previous plan is matched through a dense (topic, partition) table up to this many cells
#: per row (plus a floor), through a binary search beyond
DENSE_PER_ROW, DENSE_FLOOR = 4, 1 << 16


def check_previous(previous: pd.DataFrame | None) -> bool:
    """Whether a previous plan is given (with rows); an InputError if it is no DataFrame or
    lacks a column. The one check of a previous plan, on every path."""
    if previous is None:
        return False
    if not isinstance(previous, pd.DataFrame):
        raise InputError(f"previous plan must be a pandas DataFrame, not {type(previous).__name__}")
    missing = [c for c in PREVIOUS_COLUMNS if c not in previous.columns]
    if missing:
        raise InputError(f"previous plan: missing column(s) {', '.join(missing)}")
    return len(previous) > 0


def previous_codes(
    previous: pd.DataFrame | None,
    row_topics: np.ndarray,
    row_partitions: np.ndarray,
    index: SubscriptionIndex,
) -> np.ndarray:
    """The code (in ``index``) of each row's previous owner, -1 for none: the rule of this
    module. Rows are (topic code in ``index``, partition), distinct, in any order (sorted by
    (topic, partition) they need no sort here)."""
    n_rows = len(row_topics)
    owner = np.full(n_rows, -1, dtype=np.int64)
    if not check_previous(previous) or n_rows == 0:
        return owner
    assert previous is not None
    consumers, topics, partitions = _eligible(previous, index)
    rows = _rows_of(topics, partitions, row_topics, row_partitions, len(index.topics))
    if rows.min(initial=0) < 0:  # some partitions of the plan are gone
        found = rows >= 0
        rows, consumers = rows[found], consumers[found]
    if len(rows) and np.bincount(rows, minlength=n_rows).max() > 1:  # listed more than once
        owner[:] = len(index.consumers)
        np.minimum.at(owner, rows, consumers)  # the smallest consumer id keeps it
        owner[owner == len(index.consumers)] = -1
    else:
        owner[rows] = consumers
    return owner


def _eligible(previous: pd.DataFrame, index: SubscriptionIndex) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The listings of ``previous`` that count: (consumer code, topic code, partition) of a
    consumer of the group that subscribes to the topic, with a usable partition number."""
    consumers = index.consumer_codes(previous["consumer"])
    topics = index.topic_codes(previous["topic"])
    column = previous["partition"]
    if column.dtype.kind in "iu":
        partitions = column.to_numpy()
        keep = index.permitted(consumers, topics)
        if len(partitions) and (partitions.min() < 0 or partitions.max() >= PARTITION_LIMIT):  # two passes, no mask
            keep &= (partitions >= 0) & (partitions < PARTITION_LIMIT)
        partitions = partitions.astype(np.int64, copy=False)
    else:  # missing or unreadable partitions are ignored with the rest of a stale plan
        numbers = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        keep = index.permitted(consumers, topics) & (numbers >= 0) & (numbers < PARTITION_LIMIT)
        keep &= numbers == np.floor(numbers)
        partitions = np.where(keep, numbers, 0).astype(np.int64)
    if not keep.all():
        consumers, topics, partitions = consumers[keep], topics[keep], partitions[keep]
    return consumers, topics, partitions


def _rows_of(
    topics: np.ndarray, partitions: np.ndarray, row_topics: np.ndarray, row_partitions: np.ndarray, n_topics: int
) -> np.ndarray:
    """The row holding each (topic code, partition), -1 if none; the rows are distinct."""
    width = int(max(row_partitions.max(initial=0), partitions.max(initial=0))) + 1
    wanted = topics * width + partitions
    keys = row_topics * width + row_partitions
    if n_topics * width <= DENSE_PER_ROW * len(keys) + DENSE_FLOOR:  # a dense table: no search at all
        table = np.full(n_topics * width, -1, dtype=np.int64)
        table[keys] = np.arange(len(keys))
        return table[wanted]
    order = None if len(keys) < 2 or bool((keys[1:] > keys[:-1]).all()) else np.argsort(keys, kind="stable")
    ordered = keys if order is None else keys[order]
    at = np.minimum(np.searchsorted(ordered, wanted), len(keys) - 1)
    found = np.where(ordered[at] == wanted, at, -1)
    return found if order is None else np.where(found >= 0, order[found], -1)


def previous_owners(
    previous: pd.DataFrame | None,
    row_topics: np.ndarray,
    row_partitions: np.ndarray,
    index: SubscriptionIndex,
) -> np.ndarray:
    """``previous_codes`` as consumer ids: an object array, None for none."""
    codes = previous_codes(previous, row_topics, row_partitions, index)
    return np.concatenate([index.names, np.array([None], dtype=object)])[codes]  # -1: the None at the end


def previous_table(previous: pd.DataFrame | None, subscriptions: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """DataFrame[topic, partition, consumer]: each partition the previous plan gives an owner
    by the rule, once, with that owner, sorted by (topic, partition). Rows planned now join
    it (a partition that is gone finds no row); the rows of a Spark DataFrame do."""
    index = SubscriptionIndex(validate_subscriptions(subscriptions))
    if check_previous(previous):
        assert previous is not None
        _, topics, partitions = _eligible(previous, index)
        keys = np.unique(topics * np.int64(PARTITION_LIMIT) + partitions)  # fewer than 2^32 topics: no overflow
    else:
        keys = np.zeros(0, dtype=np.int64)
    row_topics, row_partitions = np.divmod(keys, np.int64(PARTITION_LIMIT))
    return pd.DataFrame(
        {
            "topic": np.asarray(index.topics, dtype=object)[row_topics],
            "partition": row_partitions.astype(np.int32),
            "consumer": previous_owners(previous, row_topics, row_partitions, index),
        }
    )


__all__ = [
    "DENSE_FLOOR",
    "DENSE_PER_ROW",
    "PREVIOUS_COLUMNS",
    "check_previous",
    "previous_codes",
    "previous_owners",
    "previous_table",
]
