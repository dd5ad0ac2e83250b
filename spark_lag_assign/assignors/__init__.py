"""The assignor library: every strategy of DESIGN.md as a pure, deterministic function.

``assign(lags, subscriptions, strategy, previous, seed)`` validates its input, runs the
strategy (per topic, or once for the whole group), checks the invariants of the result and
returns one row per assigned partition. Nothing here imports Spark or talks to Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from spark_lag_assign.assignors import lagbased, lagsticky, range as range_, roundrobin, shuffle, sticky
from spark_lag_assign.assignors.base import GroupProblem, Strategy, TopicProblem
from spark_lag_assign.errors import InputError, StrategyError
from spark_lag_assign.invariants import check_assignment
from spark_lag_assign.subscriptions import SubscriptionIndex, partition_keys

#: every strategy by name, in the order of DESIGN.md; each module declares its own STRATEGY
STRATEGIES: dict[str, Strategy] = {
    m.STRATEGY.name: m.STRATEGY for m in (range_, roundrobin, lagbased, shuffle, sticky, lagsticky)
}
DEFAULT_STRATEGY = "lag-sticky"

ASSIGNMENT_COLUMNS = ("consumer", "topic", "partition", "lag")


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise StrategyError(f"unknown strategy {name!r}; valid: {', '.join(STRATEGIES)}") from None


def validate_lags(lags: pd.DataFrame, keep_positions: bool = False) -> pd.DataFrame:
    """lags[topic, partition, lag] sorted by (topic, partition), int64 columns; clear errors otherwise.

    With ``keep_positions`` a ``_position`` column gives each row's position in ``lags``.
    """
    if not isinstance(lags, pd.DataFrame):
        raise InputError(f"lags must be a pandas DataFrame, not {type(lags).__name__}")
    missing = [c for c in ("topic", "partition", "lag") if c not in lags.columns]
    if missing:
        raise InputError(f"lags: missing column(s) {', '.join(missing)}")
    out = lags.loc[:, ["topic", "partition", "lag"]]
    if not all(isinstance(t, str) and t for t in pd.unique(out["topic"])):
        raise InputError("lags: column topic must hold non-empty strings")
    for col in ("partition", "lag"):
        if out[col].isna().any():
            r = out[out[col].isna()].iloc[0]
            raise InputError(f"lags: missing {col} for {r.topic}-{r.partition}")
        if not pd.api.types.is_integer_dtype(out[col]):
            values = pd.to_numeric(out[col], errors="coerce")
            if values.isna().any() or (values != np.floor(values)).any():
                raise InputError(f"lags: column {col} must hold integers")
        if (out[col] < 0).any():
            r = out[out[col] < 0].iloc[0]
            raise InputError(f"lags: negative {col} {r[col]} for {r.topic}-{r.partition}")
    out = out.astype({"partition": np.int64, "lag": np.int64})
    if keep_positions:
        out["_position"] = np.arange(len(out))
    out = out.sort_values(["topic", "partition"], kind="stable").reset_index(drop=True)
    dup = (out["topic"].to_numpy()[1:] == out["topic"].to_numpy()[:-1]) & (
        out["partition"].to_numpy()[1:] == out["partition"].to_numpy()[:-1]
    )
    if dup.any():
        r = out.iloc[int(np.argmax(dup)) + 1]
        raise InputError(f"lags: partition {r.topic}-{r.partition} appears more than once")
    return out


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
    rows: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    index: SubscriptionIndex | None = None,
) -> list[str | None]:
    """The previous owner of each row, where it is still a subscriber of the row's topic.

    Consumers and partitions of the previous plan that no longer exist are ignored; a
    partition listed under two consumers keeps the smaller consumer id.
    """
    if previous is None or len(previous) == 0:
        return [None] * len(rows)
    missing = [c for c in ("consumer", "topic", "partition") if c not in previous.columns]
    if missing:
        raise InputError(f"previous plan: missing column(s) {', '.join(missing)}")
    prev = previous.loc[:, ["consumer", "topic", "partition"]].dropna()
    index = index or SubscriptionIndex(subscriptions, rows["topic"].unique())
    consumers = index.consumer_codes(prev["consumer"])
    topics = index.topic_codes(prev["topic"])
    partitions = pd.to_numeric(prev["partition"], errors="coerce").to_numpy()
    keep = index.permitted(consumers, topics) & np.isfinite(partitions) & (partitions >= 0)
    row_topics = index.topic_codes(rows["topic"])
    row_partitions = rows["partition"].to_numpy(dtype=np.int64)
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
    result = np.full(len(rows), None, dtype=object)
    result[found] = names[owners[at[found]]]
    return result.tolist()


def unassigned(lags: pd.DataFrame, subscriptions: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """The partitions of topics nobody subscribes to: lags rows [topic, partition, lag]."""
    lags = validate_lags(lags)
    subscribed = {t for topics in subscriptions.values() for t in topics}
    return lags[~lags["topic"].isin(subscribed)].reset_index(drop=True)


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
    spec = get_strategy(strategy)
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        raise StrategyError(
            f"strategy {strategy!r} takes no option {', '.join(unknown)}"
            + (f"; it takes: {', '.join(spec.options)}" if spec.options else "")
        )
    subs = validate_subscriptions(subscriptions)
    ordered = validate_lags(lags, keep_positions=True)
    index = SubscriptionIndex(subs, ordered["topic"].unique())
    rows = ordered[np.isin(index.topic_codes(ordered["topic"]), index.subscribed_topics())]
    positions = rows["_position"].to_numpy()
    rows = rows.drop(columns="_position").reset_index(drop=True)
    problem = GroupProblem(
        topics=rows["topic"].to_numpy(dtype=object),
        partitions=rows["partition"].to_numpy(dtype=np.int64),
        lags=rows["lag"].to_numpy(dtype=np.int64),
        subscriptions=subs,
        consumers=list(subs),
        previous=previous_owners(previous, rows, subs, index),
        seed=int(seed),
        options=dict(options),
    )
    planned = np.asarray(run(spec, problem), dtype=object)
    check_assignment(rows.assign(consumer=planned), rows, subs, index)
    out = np.full(len(lags), None, dtype=object)
    out[positions] = planned
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
    planned = owners(lags, subscriptions, strategy, previous, seed, **options)
    taken = planned != None  # noqa: E711 - elementwise on an object array
    out = pd.DataFrame(
        {
            "consumer": planned[taken],
            "topic": lags["topic"].to_numpy(dtype=object)[taken],
            "partition": lags["partition"].to_numpy()[taken].astype(np.int64),
            "lag": lags["lag"].to_numpy()[taken].astype(np.int64),
        }
    )
    return out.sort_values(["consumer", "topic", "partition"], kind="stable").reset_index(drop=True)


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
