"""The assignors' front end: from a DataFrame of lags to a DataFrame of owners.

``assign(lags, subscriptions, strategy, previous, seed)`` validates its input, runs the
strategy (per topic, or once for the whole group), checks the invariants of the result and
returns one row per assigned partition. Nothing here imports Spark or talks to Kafka.

The front end does each piece of work once, on arrays: the subscriptions are validated and
indexed once (``SubscriptionIndex``), topics and consumers become integer codes once (hashing
only the first of each run of equal values, as frames sorted or grouped by topic have few
runs), input already sorted by (topic, partition) is not sorted again, the previous plan is
matched to the rows through a lookup table (``core.previous``: the one rule for reading a
previous plan, which the Spark paths use too), and strategies with ``assign_codes`` hand back
consumer codes, from which the invariant check and the output frame are built directly (a
stable sort by owner, each consumer's id repeated over its block). The problem's columns of strings (its topics, the
previous owners' names) are made from the codes only if a strategy reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from spark_lag_assign.assignors import drain, lagbased, lagsticky, range as range_, roundrobin, shuffle, sticky
from spark_lag_assign.assignors.base import Encoded, GroupProblem, Strategy
from spark_lag_assign.core.invariants import check_owner_codes
from spark_lag_assign.core.limits import INT64_LIMIT, PARTITION_LIMIT
from spark_lag_assign.core.previous import check_previous, previous_codes
from spark_lag_assign.core.quality import exact_sum
from spark_lag_assign.core.subscriptions import (
    SubscriptionIndex,
    factorize,
    run_starts,
    strictly_increasing,
    validate_subscriptions,
)
from spark_lag_assign.errors import InputError, StrategyError

#: every strategy by name, in the order of README's "Strategies"; each module declares its own STRATEGY
STRATEGIES: dict[str, Strategy] = {
    m.STRATEGY.name: m.STRATEGY for m in (range_, roundrobin, lagbased, shuffle, sticky, lagsticky, drain)
}
DEFAULT_STRATEGY = "lag-sticky"

ASSIGNMENT_COLUMNS = ("consumer", "topic", "partition", "lag")

#: exclusive upper bounds of the lags frame's integer columns (``core.limits``): a lag, and
#: the total of the lags, which plans and metrics add up in int64, stay below 2^63
LIMITS = {"partition": PARTITION_LIMIT, "lag": INT64_LIMIT}


def get_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise StrategyError(f"unknown strategy {name!r}; valid: {', '.join(STRATEGIES)}") from None


# -- the lags frame -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Lags:
    """The validated lags frame: per row (in the frame's order) its topic code (into the sorted
    ``names``), partition and lag; ``order`` sorts the rows by (topic, partition), None when
    they already are."""

    codes: np.ndarray
    names: np.ndarray  # object: the distinct topics, sorted
    partitions: np.ndarray
    lag: np.ndarray
    order: np.ndarray | None

    def sorted(self, values: np.ndarray) -> np.ndarray:
        return values if self.order is None else values[self.order]


def _factorize_sorted(column: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(code per value, the distinct values sorted, the first position of each run of equal
    values or None): codes follow the sorted order. A categorical column is already
    factorized: its codes are used as they are."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = np.asarray(column.cat.codes, dtype=np.int64)
        uniques = np.asarray(column.cat.categories, dtype=object)
        used = np.bincount(codes[codes >= 0], minlength=len(uniques)) > 0
        if not used.all():  # categories without rows are no topics of this frame
            codes = np.where(codes >= 0, (np.cumsum(used) - 1)[np.maximum(codes, 0)], -1)
            uniques = uniques[used]
        return (*_sorted_codes(codes, uniques), None)
    values = column.to_numpy(dtype=object)
    heads = run_starts(values)
    if heads is None:  # short runs: every value is hashed
        return (*_sorted_codes(*factorize(values)), None)
    # grouped by topic, as snapshots and plans are: hash and rank one value per run
    firsts = values[heads]
    if strictly_increasing(firsts):  # sorted by topic: the runs are the topics, in order
        if not _all_names(firsts):
            raise InputError("lags: column topic must hold non-empty strings")
        head_codes, names = np.arange(len(heads), dtype=np.int64), firsts
    else:
        head_codes, uniques = pd.factorize(firsts, use_na_sentinel=True)
        head_codes, names = _sorted_codes(head_codes, np.asarray(uniques, dtype=object))
    return np.repeat(head_codes, np.diff(np.r_[heads, len(values)])), names, heads


def _sorted_codes(codes: np.ndarray, uniques: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if (codes < 0).any() or not _all_names(uniques):
        raise InputError("lags: column topic must hold non-empty strings")
    sorter = np.argsort(uniques, kind="stable")
    if (sorter[1:] > sorter[:-1]).all():  # first seen in sorted order (a sorted frame): codes are ranks
        return codes.astype(np.int64, copy=False), uniques
    rank = np.empty(len(sorter), dtype=np.int64)
    rank[sorter] = np.arange(len(sorter))
    return rank[codes], uniques[sorter]


def _all_names(values: np.ndarray) -> bool:
    """Every value a non-empty string (checked in C: ten thousand topics cost microseconds)."""
    return len(values) == 0 or (pd.api.types.infer_dtype(values, skipna=False) == "string" and not (values == "").any())


def _integer_column(lags: pd.DataFrame, col: str, where: Any) -> np.ndarray:
    """One of the integer columns of ``lags`` as int64, or an InputError naming the first bad
    row (``where(i)`` names row i): missing, fractional, infinite, negative or too large."""
    limit = LIMITS[col]
    series = lags[col]
    values = series.to_numpy()
    if values.dtype.kind not in "iu":
        missing = series.isna().to_numpy()
        if missing.any():
            raise InputError(f"lags: missing {col} for {where(int(np.argmax(missing)))}")
        values = pd.to_numeric(series, errors="coerce").to_numpy()
        if values.dtype.kind == "f":
            bad = ~np.isfinite(values) | (values != np.floor(values))
            if bad.any():
                i = int(np.argmax(bad))
                kind = "not a number" if np.isnan(values[i]) else "infinite" if np.isinf(values[i]) else "not whole"
                shown = _shown(series.iloc[i])
                raise InputError(f"lags: {col} {shown} for {where(i)} is {kind}: column {col} must hold integers")
        elif values.dtype.kind not in "iu":
            raise InputError(f"lags: column {col} must hold integers")
    if len(values) == 0 or (values.min() >= 0 and values.max() < limit):  # two passes, no mask
        return values.astype(np.int64, copy=False)
    negative = values < 0
    if negative.any():
        i = int(np.argmax(negative))
        raise InputError(f"lags: negative {col} {series.iloc[i]} for {where(i)}")
    too_big = values >= limit
    if too_big.any():
        i = int(np.argmax(too_big))
        raise InputError(
            f"lags: {col} {series.iloc[i]} for {where(i)} is 2^{limit.bit_length() - 1} or more"
            + (", beyond Kafka's int32 partition ids" if col == "partition" else ", where totals would wrap")
        )
    return values.astype(np.int64, copy=False)


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def _read_lags(lags: pd.DataFrame) -> _Lags:
    if not isinstance(lags, pd.DataFrame):
        raise InputError(f"lags must be a pandas DataFrame, not {type(lags).__name__}")
    missing = [c for c in ("topic", "partition", "lag") if c not in lags.columns]
    if missing:
        raise InputError(f"lags: missing column(s) {', '.join(missing)}")
    codes, names, heads = _factorize_sorted(lags["topic"])
    partitions = _integer_column(lags, "partition", lambda i: f"a row of topic {names[codes[i]]}")
    lag = _integer_column(lags, "lag", lambda i: f"{names[codes[i]]}-{partitions[i]}")
    total = exact_sum(lag)
    if total >= LIMITS["lag"]:
        raise InputError(f"lags: the total lag {total:,} is 2^63 or more, where totals would wrap")
    order: np.ndarray | None = None
    if not _in_order(codes, partitions, heads):  # not sorted, or a duplicate
        keys = codes * (LIMITS["partition"]) + partitions  # fewer than 2^32 topics: no overflow
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        dup = ordered[1:] == ordered[:-1]
        if dup.any():
            i = int(order[int(np.argmax(dup)) + 1])
            raise InputError(f"lags: partition {names[codes[i]]}-{partitions[i]} appears more than once")
    return _Lags(codes, names, partitions, lag, order)


def _in_order(codes: np.ndarray, partitions: np.ndarray, heads: np.ndarray | None) -> bool:
    """Whether the rows are sorted by (topic code, partition) without a duplicate; ``heads``,
    when known, are the first rows of the runs of equal codes."""
    if len(codes) < 2:
        return True
    if heads is None:
        keys = codes * (LIMITS["partition"]) + partitions
        return bool((keys[1:] > keys[:-1]).all())
    if not (codes[heads[1:]] > codes[heads[:-1]]).all():  # a topic after a greater one, or twice
        return False
    rising = partitions[1:] > partitions[:-1]
    rising[heads[1:] - 1] = True  # the first row of a topic may have any partition
    return bool(rising.all())


def validate_lags(lags: pd.DataFrame) -> pd.DataFrame:
    """lags[topic, partition, lag] sorted by (topic, partition), int64 columns; clear errors otherwise."""
    rows = _read_lags(lags)
    return pd.DataFrame(
        {"topic": rows.names[rows.sorted(rows.codes)], "partition": rows.sorted(rows.partitions), "lag": rows.sorted(rows.lag)}
    )


def unassigned(lags: pd.DataFrame, subscriptions: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """The partitions of topics nobody subscribes to: lags rows [topic, partition, lag]."""
    lags = validate_lags(lags)
    subscribed = {t for topics in subscriptions.values() for t in topics}
    return lags[~lags["topic"].isin(subscribed)].reset_index(drop=True)


# -- planning -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Planned:
    """A checked plan over the subscribed rows of ``lags``: their positions in ``lags`` (None:
    all of them, in order), sorted by (topic, partition), and their owners' codes."""

    positions: np.ndarray | None
    problem: GroupProblem
    owner_codes: np.ndarray

    @property
    def index(self) -> SubscriptionIndex:
        return self.problem.codes().index


def problem(
    lags: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    strategy: str = DEFAULT_STRATEGY,
    previous: pd.DataFrame | None = None,
    seed: int = 0,
    **options: Any,
) -> GroupProblem:
    """The ``GroupProblem`` that ``assign`` hands the strategy: validated, sorted, encoded."""
    return _problem(lags, subscriptions, get_strategy(strategy), previous, seed, options)[0]


def _problem(
    lags: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    spec: Strategy,
    previous: pd.DataFrame | None,
    seed: int,
    options: Mapping[str, Any],
) -> tuple[GroupProblem, np.ndarray | None]:
    seed = spec.check_call(seed, options)
    subs = validate_subscriptions(subscriptions)
    rows = _read_lags(lags)
    index = SubscriptionIndex(subs, rows.names)
    # both name lists are sorted, so mapping codes keeps the rows sorted
    row_topic = rows.sorted(rows.codes)
    if len(rows.names) == len(index.topics):  # the index holds just these topics: the same codes
        mapping = np.arange(len(rows.names))
    else:
        mapping = index.topic_codes(rows.names)
        row_topic = mapping[row_topic]
    positions = rows.order
    partitions, lag = rows.sorted(rows.partitions), rows.sorted(rows.lag)
    if not index.subscribed[mapping].all():
        subscribed = index.subscribed[row_topic]
        positions = np.flatnonzero(subscribed) if positions is None else positions[subscribed]
        row_topic, partitions, lag = row_topic[subscribed], partitions[subscribed], lag[subscribed]
    named: Sequence[str | None] | None = ()
    if check_previous(previous) and spec.uses_previous:
        owners = previous_codes(previous, row_topic, partitions, index)
        named = None  # the owners' names, made from their codes if a strategy reads them
    else:  # no previous owners: -1 for every row, read-only, without writing a million cells
        owners = np.broadcast_to(np.array(-1, dtype=np.int64), len(row_topic))
    group = GroupProblem(
        None,  # the topics, made from their codes if a strategy reads them
        partitions,
        lag,
        subscriptions=subs,
        consumers=list(index.consumers),
        previous=named,
        seed=int(seed),
        options=dict(options),
        encoded=Encoded(index, row_topic, owners),
    )
    return group, positions


def _plan(
    lags: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    strategy: str,
    previous: pd.DataFrame | None,
    seed: int,
    options: Mapping[str, Any],
) -> _Planned:
    spec = get_strategy(strategy)  # looked up once: an unknown name fails before the input is read
    group, positions = _problem(lags, subscriptions, spec, previous, seed, options)
    codes = group.codes()
    owner_codes = run_codes(spec, group)
    check_owner_codes(owner_codes, codes.row_topic, group.partitions, codes.index)
    return _Planned(positions, group, owner_codes)


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
    names = planned.index.names[planned.owner_codes]
    if planned.positions is None:
        return names
    out = np.full(len(lags), None, dtype=object)
    out[planned.positions] = names
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
    previous: None or DataFrame[consumer, topic, partition] (an earlier plan; a partition it
    lists twice counts as the smallest consumer id's).
    Returns DataFrame[consumer, topic, partition, lag], one row per assigned partition,
    sorted by (consumer, topic, partition). Partitions of topics nobody subscribes to are
    left out (see ``unassigned``).
    """
    planned = _plan(lags, subscriptions, strategy, previous, seed, options)
    group, owner = planned.problem, planned.owner_codes
    index, row_topic = planned.index, group.codes().row_topic
    # rows are in (topic, partition) order and codes follow the sorted ids and names, so a
    # stable sort by owner gives (consumer, topic, partition), each consumer's rows in a block
    order, counts = _by_owner(owner, len(index.consumers))
    topic_codes = row_topic[order]
    topics = np.asarray(index.topics, dtype=object)[topic_codes]
    return pd.DataFrame(
        {
            "consumer": np.repeat(index.names, counts),
            "topic": topics,
            # into the codes' array, done with: one array less (a permutation: clip is never used,
            # and unlike "raise" it writes straight into ``out``)
            "partition": np.take(group.partitions, order, out=topic_codes, mode="clip"),
            "lag": group.lags[order],
        },
        copy=False,
    )


def _by_owner(owner: np.ndarray, n_consumers: int) -> tuple[np.ndarray, np.ndarray]:
    """(the rows in a stable order by owner, the rows of each owner) for owner codes in
    ``range(n_consumers)``. numpy's stable sort is a radix sort for 16-bit integers: at a
    million rows, a fourth of the time of sorting the codes as int64."""
    order = np.argsort(owner.astype(np.int16) if n_consumers < 2**15 else owner, kind="stable")
    return order, np.bincount(owner, minlength=n_consumers)


def run(spec: Strategy, problem: GroupProblem) -> list[str]:
    """The owner of each row of ``problem`` under ``spec``, as consumer ids."""
    return problem.codes().index.names[run_codes(spec, problem)].tolist()


def run_codes(spec: Strategy, problem: GroupProblem) -> np.ndarray:
    """The owner of each row of ``problem`` under ``spec``: consumer codes of ``problem.codes().index``."""
    codes = np.asarray(spec.assign_codes(problem), dtype=np.int64)
    if len(codes) != len(problem.partitions):
        raise AssertionError(f"strategy {spec.name} returned {len(codes)} owners for {len(problem.partitions)} rows")
    return codes


__all__ = [
    "ASSIGNMENT_COLUMNS",
    "DEFAULT_STRATEGY",
    "STRATEGIES",
    "GroupProblem",
    "Strategy",
    "assign",
    "get_strategy",
    "owners",
    "problem",
    "unassigned",
    "validate_subscriptions",
]
