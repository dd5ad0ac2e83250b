"""Quality metrics of a plan: what the plan report prints and the benchmarks compare.

- count spread: ``max - min`` partitions per consumer over the whole group, and the worst
  spread of any topic among that topic's subscribers;
- lag imbalance: ``max consumer lag / mean consumer lag``;
- optimality: ``max consumer lag / LB`` with ``LB = max(total lag / consumers, largest partition lag)``;
- movement: partitions whose owner changed against the previous plan.

Consumers with nothing assigned count, with zero partitions and zero lag.

Lags are int64 (Kafka offsets are), but a sum of many of them is not: every total here is
exact (``exact_sum``, ``exact_sums``: Python ints, never wrapped), and ratios are floats.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from spark_lag_assign.core.limits import INT64_LIMIT
from spark_lag_assign.core.previous import check_previous, previous_table
from spark_lag_assign.core.subscriptions import distinct, factorize
from spark_lag_assign.errors import InputError

_LOW = np.int64(0xFFFFFFFF)


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


def _halves(values: object) -> tuple[np.ndarray, np.ndarray] | None:
    """Integer values as ``high * 2**32 + low`` with both halves int64 (None: not an integer
    array). Summing n halves cannot wrap for n < 2**31, so two numpy sums make an exact one."""
    a = np.asarray(values)
    if a.dtype.kind == "i":
        a = a.astype(np.int64, copy=False)
        return a >> 32, a & _LOW
    if a.dtype.kind == "u":
        a = a.astype(np.uint64, copy=False)
        return (a >> np.uint64(32)).astype(np.int64), (a & np.uint64(0xFFFFFFFF)).astype(np.int64)
    return None


def _as_int(value: object) -> int:
    """One lag as a Python int: integers as they are, floats only when whole and finite."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value).is_integer():
        return int(value)
    raise InputError(f"a lag must be a whole number of messages, not {value!r}")


def exact_sum(values: object) -> int:
    """The sum of integer lags as a Python int: exact, however many and however large. The
    one exact sum of the package: the front end's check of a total, the plan's totals and
    the metrics all use it."""
    array = np.asarray(values) if not isinstance(values, pd.Series) else values.to_numpy()
    if array.dtype.kind in "iu" and len(array):
        bound = max(abs(int(array.min())), abs(int(array.max())))
        if bound * len(array) < INT64_LIMIT:  # no partial sum can wrap: numpy's own
            return int(array.sum())
    halves = _halves(values)
    if halves is not None:
        high, low = halves
        return (int(high.sum()) << 32) + int(low.sum())
    return sum(map(_as_int, np.asarray(values, dtype=object).ravel().tolist()))


def exact_sums(keys: pd.Series | np.ndarray, values: pd.Series | np.ndarray) -> dict[object, int]:
    """Per key, the exact sum of its values (``exact_sum`` by group), in order of first appearance."""
    halves = _halves(values)
    if halves is None:
        out: dict[object, int] = {}
        for k, v in zip(np.asarray(keys, dtype=object).tolist(), np.asarray(values, dtype=object).tolist()):
            out[k] = out.get(k, 0) + _as_int(v)
        return out
    uniques, _, sums = _by_key(keys, halves)
    return dict(zip(uniques.tolist(), sums))


def _by_key(keys: pd.Series | np.ndarray, halves: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(distinct keys in order of first appearance, rows of each, exact sum of each) for
    values given as ``_halves``; rows whose key is missing count nowhere, as in a groupby."""
    codes, uniques = factorize(np.asarray(keys, dtype=object))
    kept = codes >= 0
    codes = codes[kept]
    high, low = (np.zeros(len(uniques), dtype=np.int64) for _ in range(2))
    np.add.at(high, codes, halves[0][kept])  # int64 throughout: exact, where bincount's weights are floats
    np.add.at(low, codes, halves[1][kept])
    sizes = np.bincount(codes, minlength=len(uniques))
    return uniques, sizes, [(h << 32) + lo for h, lo in zip(high.tolist(), low.tolist())]


def exact_run_sums(values: pd.Series | np.ndarray, starts: np.ndarray) -> list[int]:
    """The exact sum of each run of ``values`` (runs start at ``starts``, ascending, the first at 0)."""
    if len(starts) == 0:
        return []
    halves = _halves(values)
    if halves is None:
        every = np.asarray(values, dtype=object).tolist()
        bounds = [*np.asarray(starts).tolist(), len(every)]
        return [sum(map(_as_int, every[a:b])) for a, b in pairwise(bounds)]
    high, low = (np.add.reduceat(h, starts).tolist() for h in halves)
    return [(h << 32) + lo for h, lo in zip(high, low)]


def per_consumer(assignment: pd.DataFrame, consumers: Sequence[str]) -> pd.DataFrame:
    """consumer -> partitions, lag; every consumer in ``consumers``, sorted, zeros where empty.

    ``lag`` is int64 while every consumer's total fits, Python ints (object) beyond: never wrapped.
    """
    names = sorted(consumers)
    halves = _halves(assignment["lag"]) if len(assignment) else None
    if halves is not None:  # one pass over the names for counts and sums
        keys, counts, sums = _by_key(assignment["consumer"], halves)
        sizes = pd.Series(counts, index=pd.Index(keys, dtype=object))
        totals = dict(zip(keys.tolist(), sums))
    else:
        sizes = assignment.groupby("consumer", sort=False).size()
        totals = exact_sums(assignment["consumer"], assignment["lag"]) if len(assignment) else {}
    lags = [totals.get(c, 0) for c in names]
    fits = all(-INT64_LIMIT <= v < INT64_LIMIT for v in lags)
    out = pd.DataFrame(
        {
            "partitions": sizes.reindex(names, fill_value=0).to_numpy(dtype=np.int64),
            "lag": np.array(lags, dtype=np.int64 if fits else object),
        },
        index=pd.Index(names, name="consumer", dtype=object),
    )
    return out


def topic_spread(assignment: pd.DataFrame, subscriptions: Mapping[str, Sequence[str]]) -> int:
    """The worst ``max - min`` partitions of one topic among that topic's subscribers."""
    if assignment.empty:
        return 0
    topic_codes, topics = factorize(assignment["topic"].to_numpy(dtype=object))
    consumer_codes, owners = factorize(assignment["consumer"].to_numpy(dtype=object))
    held = (topic_codes >= 0) & (consumer_codes >= 0)  # rows without an owner hold nothing
    if not held.any():
        return 0
    # one key per (topic, consumer) pair, sorted by topic: each topic's holders are one run
    width = max(len(owners), 1)
    keys, counts = np.unique(topic_codes[held].astype(np.int64) * width + consumer_codes[held], return_counts=True)
    pair_topic = keys // width
    starts = np.flatnonzero(np.r_[True, pair_topic[1:] != pair_topic[:-1]])
    top = np.maximum.reduceat(counts, starts)
    low = np.minimum.reduceat(counts, starts)
    holders = np.diff(np.r_[starts, len(keys)])
    # readers per topic, once per distinct topic list (a thousand consumers often share one)
    index = pd.Index(topics)
    readers = np.zeros(len(topics), dtype=np.int64)
    for topic_list, members in distinct(subscriptions).items():
        found = index.get_indexer(pd.Index(list(set(topic_list)), dtype=object))  # a topic listed twice is still one reader
        readers[found[found >= 0]] += len(members)
    # a subscriber holding nothing of the topic counts as 0
    low = np.where(holders >= readers[pair_topic[starts]], low, 0)
    return int((top - low).max())


def moved(assignment: pd.DataFrame, previous: pd.DataFrame | None, subscriptions: Mapping[str, Sequence[str]]) -> int:
    """Partitions whose owner now differs from their previous owner: the owner by the one rule
    of ``core.previous`` where it names one; a partition that only consumers which left (or no
    longer read its topic) listed moved from the smallest of them, since someone now takes it over."""
    if not check_previous(previous) or assignment.empty:
        return 0
    assert previous is not None
    departed = previous.loc[:, ["consumer", "topic", "partition"]].sort_values(["topic", "partition", "consumer"], kind="stable")
    prev = pd.concat([previous_table(previous, subscriptions), departed]).drop_duplicates(["topic", "partition"])
    both = assignment[["consumer", "topic", "partition"]].merge(prev, on=["topic", "partition"], suffixes=("", "_prev"))
    return int((both["consumer"] != both["consumer_prev"]).sum())


def quality(
    assignment: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    previous: pd.DataFrame | None = None,
) -> Quality:
    """The metrics of an assignment DataFrame[consumer, topic, partition, lag]."""
    table = per_consumer(assignment, list(subscriptions))
    n = len(table)
    lags = [int(v) for v in table["lag"].tolist()]  # Python ints: their sum and ratios are exact
    total = sum(lags)
    max_lag = max(lags) if n else 0
    mean = total / n if n else 0.0  # int / int: correctly rounded, whatever the size
    largest = _as_int(assignment["lag"].max()) if len(assignment) else 0
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
        moved=None if previous is None else moved(assignment, previous, subscriptions),
    )
