"""The assignor library: every strategy of DESIGN.md as a pure, deterministic function.

``assign(lags, subscriptions, strategy, previous, seed)`` validates its input, runs the
strategy (per topic, or once for the whole group), checks the invariants of the result and
returns one row per assigned partition. Nothing here imports Spark or talks to Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from spark_lag_assign.assignors import drain, lagbased, lagsticky, range as range_, roundrobin, shuffle, sticky
from spark_lag_assign.assignors.base import GroupProblem, Strategy, TopicProblem
from spark_lag_assign.errors import InputError, StrategyError
from spark_lag_assign.invariants import check_owners
from spark_lag_assign.subscriptions import SubscriptionIndex, partition_keys

#: every strategy by name, in the order of DESIGN.md; each module declares its own STRATEGY
STRATEGIES: dict[str, Strategy] = {
    m.STRATEGY.name: m.STRATEGY for m in (range_, roundrobin, lagbased, shuffle, sticky, lagsticky, drain)
}
DEFAULT_STRATEGY = "lag-sticky"

ASSIGNMENT_COLUMNS = ("consumer", "topic", "partition", "lag")


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise StrategyError(f"unknown strategy {name!r}; valid: {', '.join(STRATEGIES)}") from None


def _integer_column(lags: pd.DataFrame, col: str, topics: np.ndarray, partitions: np.ndarray | None) -> np.ndarray:
    """One of the integer columns of ``lags`` as int64, or an InputError naming the first bad row."""

    def where(i: int) -> str:
        part = lags["partition"].iloc[i] if partitions is None else partitions[i]
        return f"{topics[i]}-{part}"

    series = lags[col]
    values = series.to_numpy()
    if values.dtype.kind in "iu":  # plain numpy integers: nothing missing, nothing fractional
        out = values.astype(np.int64, copy=False)
    else:
        missing = series.isna().to_numpy()
        if missing.any():
            raise InputError(f"lags: missing {col} for {where(int(np.argmax(missing)))}")
        numbers = pd.to_numeric(series, errors="coerce")
        if numbers.isna().any() or (numbers != np.floor(numbers)).any():
            raise InputError(f"lags: column {col} must hold integers")
        out = numbers.to_numpy().astype(np.int64)
    negative = out < 0
    if negative.any():
        i = int(np.argmax(negative))
        raise InputError(f"lags: negative {col} {out[i]} for {where(i)}")
    return out


def _lag_arrays(lags: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(topic, partition, lag, order): the validated columns in the row order of ``lags``, and
    the row order that sorts them by (topic, partition). Clear errors for bad input."""
    if not isinstance(lags, pd.DataFrame):
        raise InputError(f"lags must be a pandas DataFrame, not {type(lags).__name__}")
    missing = [c for c in ("topic", "partition", "lag") if c not in lags.columns]
    if missing:
        raise InputError(f"lags: missing column(s) {', '.join(missing)}")
    topics = lags["topic"].to_numpy(dtype=object)
    codes, names = pd.factorize(topics, sort=True, use_na_sentinel=True)
    if (codes < 0).any() or not all(isinstance(t, str) and t for t in names):
        raise InputError("lags: column topic must hold non-empty strings")
    partitions = _integer_column(lags, "partition", topics, None)
    lag = _integer_column(lags, "lag", topics, partitions)
    order = np.lexsort((partitions, codes))
    key_t, key_p = codes[order], partitions[order]
    dup = (key_t[1:] == key_t[:-1]) & (key_p[1:] == key_p[:-1])
    if dup.any():
        i = int(order[int(np.argmax(dup)) + 1])
        raise InputError(f"lags: partition {topics[i]}-{partitions[i]} appears more than once")
    return topics, partitions, lag, order


def validate_lags(lags: pd.DataFrame) -> pd.DataFrame:
    """lags[topic, partition, lag] sorted by (topic, partition), int64 columns; clear errors otherwise."""
    topics, partitions, lag, order = _lag_arrays(lags)
    return pd.DataFrame({"topic": topics[order], "partition": partitions[order], "lag": lag[order]})


def validate_subscriptions(subscriptions: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """consumer -> sorted distinct topics, consumers in sorted order; at least one consumer."""
    if not isinstance(subscriptions, Mapping):
        raise InputError("subscriptions must map consumer ids to lists of topics")
    if not subscriptions:
        raise InputError("no consumers: subscriptions is empty")
    for consumer in subscriptions:
        if not isinstance(consumer, str) or not consumer.strip() or consumer != consumer.strip():
            raise InputError(f"invalid consumer id {consumer!r}")
    normalized: dict[tuple[str, ...], list[str]] = {}  # consumers usually share a handful of topic lists
    out: dict[str, list[str]] = {}
    for consumer in sorted(subscriptions):
        topics = subscriptions[consumer]
        if isinstance(topics, str) or not isinstance(topics, Sequence | set | frozenset | np.ndarray):
            raise InputError(f"consumer {consumer}: subscriptions must be a list of topic names")
        key = tuple(topics)
        if key not in normalized:
            if not all(isinstance(t, str) and t for t in key):
                raise InputError(f"consumer {consumer}: subscriptions must be a list of topic names")
            normalized[key] = sorted(set(key))
        out[consumer] = normalized[key]
    return out


def previous_owners(
    previous: pd.DataFrame | None,
    row_topics: np.ndarray,
    row_partitions: np.ndarray,
    index: SubscriptionIndex,
) -> list[str | None]:
    """The previous owner of each row (topic codes of ``index``, partitions), where it is still
    a subscriber of the row's topic.

    Consumers and partitions of the previous plan that no longer exist are ignored; a
    partition listed under two consumers keeps the smaller consumer id.
    """
    if previous is None or len(previous) == 0:
        return [None] * len(row_topics)
    missing = [c for c in ("consumer", "topic", "partition") if c not in previous.columns]
    if missing:
        raise InputError(f"previous plan: missing column(s) {', '.join(missing)}")
    consumers = index.consumer_codes(previous["consumer"].to_numpy(dtype=object))
    topics = index.topic_codes(previous["topic"].to_numpy(dtype=object))
    column = previous["partition"]
    if column.dtype.kind in "iu":
        partitions = column.to_numpy()
    else:  # missing or unreadable partitions are ignored with the rest of a stale plan
        partitions = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    # a missing consumer or topic has code -1, which permitted() rejects
    keep = index.permitted(consumers, topics) & np.isfinite(partitions) & (partitions >= 0)
    width = int(max(row_partitions.max(initial=0), partitions[keep].max(initial=0))) + 1
    keys = partition_keys(topics[keep], partitions[keep].astype(np.int64), width)
    owners = consumers[keep]
    # by key, then by consumer code (codes follow sorted ids): the first of each key wins
    order = np.lexsort((owners, keys))
    keys, owners = keys[order], owners[order]
    first = np.r_[True, keys[1:] != keys[:-1]] if len(keys) else np.zeros(0, dtype=bool)
    keys, owners = keys[first], owners[first]
    wanted = partition_keys(row_topics, row_partitions, width)
    at = np.searchsorted(keys, wanted)
    found = at < len(keys)
    found[found] = keys[at[found]] == wanted[found]
    names = np.asarray(index.consumers, dtype=object)
    result = np.full(len(row_topics), None, dtype=object)
    result[found] = names[owners[at[found]]]
    return result.tolist()


def unassigned(lags: pd.DataFrame, subscriptions: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """The partitions of topics nobody subscribes to: lags rows [topic, partition, lag]."""
    lags = validate_lags(lags)
    subscribed = {t for topics in subscriptions.values() for t in topics}
    return lags[~lags["topic"].isin(subscribed)].reset_index(drop=True)


@dataclass(frozen=True)
class _Planned:
    """A checked plan over the subscribed rows of ``lags``: their positions in ``lags``, sorted
    by (topic, partition), their owners, and the codes ``index`` gives them."""

    positions: np.ndarray
    owners: np.ndarray  # object (consumer ids)
    owner_codes: np.ndarray
    topic_codes: np.ndarray
    partitions: np.ndarray
    lags: np.ndarray
    index: SubscriptionIndex


def _plan(
    lags: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    strategy: str,
    previous: pd.DataFrame | None,
    seed: int,
    options: Mapping[str, Any],
) -> _Planned:
    spec = get_strategy(strategy)
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        raise StrategyError(
            f"strategy {strategy!r} takes no option {', '.join(unknown)}"
            + (f"; it takes: {', '.join(spec.options)}" if spec.options else "")
        )
    subs = validate_subscriptions(subscriptions)
    topics, partitions, lag, order = _lag_arrays(lags)
    index = SubscriptionIndex(subs, pd.unique(topics))
    sorted_codes = index.topic_codes(topics[order])
    subscribed = index.allowed.any(axis=0)[sorted_codes]
    positions = order[subscribed]
    topic_codes = sorted_codes[subscribed]
    problem = GroupProblem(
        topics=topics[positions],
        partitions=partitions[positions],
        lags=lag[positions],
        subscriptions=subs,
        consumers=list(subs),
        previous=previous_owners(previous, topic_codes, partitions[positions], index),
        seed=int(seed),
        options=dict(options),
    )
    planned = np.asarray(run(spec, problem), dtype=object)
    owner_codes = check_owners(planned, topic_codes, problem.partitions, index)
    return _Planned(positions, planned, owner_codes, topic_codes, problem.partitions, problem.lags, index)


def owners(
    lags: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    strategy: str = DEFAULT_STRATEGY,
    previous: pd.DataFrame | None = None,
    seed: int = 0,
    **options: Any,
) -> np.ndarray:
    """The owner of each row of ``lags``, in its row order (None where nobody subscribes).

    Validates the input, runs the strategy and checks the invariants; ``assign`` and the
    Spark job's global stage both stand on it.
    """
    planned = _plan(lags, subscriptions, strategy, previous, seed, options)
    out = np.full(len(lags), None, dtype=object)
    out[planned.positions] = planned.owners
    return out


def assign(
    lags: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    strategy: str = DEFAULT_STRATEGY,
    previous: pd.DataFrame | None = None,
    seed: int = 0,
    **options: Any,
) -> pd.DataFrame:
    """Plan which consumer reads which partition.

    lags: DataFrame[topic, partition, lag]; subscriptions: {consumer: [topics]};
    previous: None or DataFrame[consumer, topic, partition] (an earlier plan).
    Returns DataFrame[consumer, topic, partition, lag], one row per assigned partition,
    sorted by (consumer, topic, partition). Partitions of topics nobody subscribes to are
    left out (see ``unassigned``).
    """
    planned = _plan(lags, subscriptions, strategy, previous, seed, options)
    # codes follow the sorted ids and names, so this is the order of (consumer, topic, partition)
    order = np.lexsort((planned.partitions, planned.topic_codes, planned.owner_codes))
    return pd.DataFrame(
        {
            "consumer": planned.owners[order],
            "topic": np.asarray(planned.index.topics, dtype=object)[planned.topic_codes[order]],
            "partition": planned.partitions[order],
            "lag": planned.lags[order],
        }
    )


def run(spec: Strategy, problem: GroupProblem) -> list[str]:
    """The owner of each row of ``problem`` under ``spec``; per topic or for the whole group."""
    if spec.scope == "group":
        assert spec.assign_group is not None
        owners = list(spec.assign_group(problem))
    else:
        assert spec.assign_topic is not None
        subscribers = problem.subscribers()
        owners = []
        for topic, rows in problem.topic_slices():
            owners.extend(
                spec.assign_topic(
                    TopicProblem(
                        topic=topic,
                        partitions=problem.partitions[rows],
                        lags=problem.lags[rows],
                        consumers=subscribers[topic],
                        previous=list(problem.previous[rows]) if len(problem.previous) else [],
                        seed=problem.seed,
                    )
                )
            )
    if len(owners) != len(problem.partitions):
        raise AssertionError(f"strategy {spec.name} returned {len(owners)} owners for {len(problem.partitions)} rows")
    return owners


__all__ = [
    "ASSIGNMENT_COLUMNS",
    "DEFAULT_STRATEGY",
    "STRATEGIES",
    "GroupProblem",
    "Strategy",
    "TopicProblem",
    "assign",
    "get_strategy",
    "owners",
    "unassigned",
]
