"""Transform: the Spark side of the planner, as ``DataFrame -> DataFrame`` functions.

    offsets ──with_lag(reset)──▶ lags ──with_previous_owner(prev, subs)──▶ ──assign_partitions(...)──▶ plan

``with_lag`` runs the lag rules of ``spark_lag_assign.core.lag`` in a pandas UDF;
``assign_partitions`` runs the pure assignors in ``applyInPandas``; ``plan_partitions`` is the
two in one stage (offsets -> plan rows), each group's lag rules computed by the same pandas
function just before its assignor, so that every row goes through Python once: what the job
runs (at a million partitions one Arrow round trip less, about 0.9 s). For the per-topic
strategies (range, lag, shuffle) each group is a bucket of whole topics (a hash of the topic
name, or of its code), so that ten thousand topics cost a few dozen Python calls, not ten
thousand (a 1M-partition ``lag`` plan: 0.5 s of Python in all, not 2 s): each bucket goes
through ``spark_lag_assign.assignors.owners`` like a group of its own, which runs the rule
topic by topic; the strategies that need the whole group at once (roundrobin, sticky,
lag-sticky, drain) run in one global group. Either way every group is planned by the same
front end as ``spark_lag_assign.assign``, and the rows are exactly its rows. None of
these functions reads, writes or creates a session; the job composes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, functions as F
from pyspark.sql.functions import pandas_udf
from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark_lag_assign.assignors import get_strategy, owners, validate_subscriptions
from spark_lag_assign.core.lag import check_reset, lag_columns
from spark_lag_assign.core.previous import previous_table
from spark_lag_assign.core.subscriptions import distinct

OFFSETS_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("beginning_offset", LongType(), False),
        StructField("end_offset", LongType(), False),
        StructField("committed_offset", LongType(), True),
    ]
)
# a pandas UDF's struct fields are nullable by Spark's rule, although the lag rules never give null
LAG_RULES_SCHEMA = StructType(
    [
        StructField("lag", LongType(), True),
        StructField("position", LongType(), True),
        StructField("out_of_range", BooleanType(), True),
        StructField("starting_offset", LongType(), True),
    ]
)
LAGS_SCHEMA = StructType(OFFSETS_SCHEMA.fields + LAG_RULES_SCHEMA.fields)
PREVIOUS_SCHEMA = StructType(
    [
        StructField("consumer", StringType(), False),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
    ]
)
#: one row per partition; ``consumer`` is null for partitions of topics nobody subscribes to
PLAN_SCHEMA = StructType(
    [
        StructField("consumer", StringType(), True),
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("lag", LongType(), False),
        StructField("starting_offset", LongType(), False),
    ]
)

#: the same rows with names as codes (``assign_partitions(..., topics=...)``): at a million rows,
#: two ints cross Spark's shuffle, Arrow and the driver many times cheaper than two strings
PLAN_CODES_SCHEMA = StructType(
    [
        StructField("consumer_code", IntegerType(), False),  # index of the sorted consumers; -1: nobody subscribes
        StructField("topic_code", IntegerType(), False),  # index of the ``topics`` given
        StructField("partition", IntegerType(), False),
        StructField("lag", LongType(), False),
        StructField("starting_offset", LongType(), False),
    ]
)

Transform = Callable[[DataFrame], DataFrame]


@dataclass(frozen=True)
class _Codes:
    consumers: pd.Index  # sorted
    topics: pd.Index


def _plan_frame(
    owners: np.ndarray,
    topics: np.ndarray,
    partitions: np.ndarray,
    lags: np.ndarray,
    starting: np.ndarray,
    codes: _Codes | None,
) -> pd.DataFrame:
    """The rows an applyInPandas function returns: PLAN_SCHEMA, or PLAN_CODES_SCHEMA with ``codes``."""
    tail = {
        "partition": partitions.astype(np.int32),
        "lag": lags.astype(np.int64, copy=False),
        "starting_offset": starting.astype(np.int64, copy=False),
    }
    if codes is None:
        return pd.DataFrame({"consumer": pd.Series(owners, dtype=object), "topic": topics, **tail})
    return pd.DataFrame(
        {
            "consumer_code": codes.consumers.get_indexer(pd.Index(owners, dtype=object)).astype(np.int32),
            "topic_code": codes.topics.get_indexer(pd.Index(topics, dtype=object)).astype(np.int32),
            **tail,
        }
    )


def decode_plan(rows: pd.DataFrame, consumers: Sequence[str], topics: Sequence[str]) -> pd.DataFrame:
    """PLAN_CODES_SCHEMA rows (pandas) -> plan rows [consumer, topic, partition, lag, starting_offset];
    each name is one shared string object, not one per row."""
    names = np.asarray([*sorted(consumers), None], dtype=object)  # code -1 takes the last: None
    return pd.DataFrame(
        {
            "consumer": names[rows["consumer_code"].to_numpy(dtype=np.int64)],
            "topic": np.asarray(topics, dtype=object)[rows["topic_code"].to_numpy(dtype=np.int64)],
            "partition": rows["partition"].to_numpy(dtype=np.int32),
            "lag": rows["lag"].to_numpy(dtype=np.int64),
            "starting_offset": rows["starting_offset"].to_numpy(dtype=np.int64),
        }
    )


def with_lag(reset: str = "latest") -> Transform:
    """offsets -> offsets + lag, position, out_of_range, starting_offset (the lag rules, in a pandas UDF)."""

    @pandas_udf(LAG_RULES_SCHEMA)  # type: ignore[call-overload]
    def lag_rules(beginning: pd.Series, end: pd.Series, committed: pd.Series) -> pd.DataFrame:
        return lag_columns(beginning, end, committed, reset)

    def transform(offsets: DataFrame) -> DataFrame:
        rules = lag_rules(offsets["beginning_offset"], offsets["end_offset"], offsets["committed_offset"])
        return offsets.withColumn("_rules", rules).select(*offsets.columns, "_rules.*")

    return transform


def with_previous_owner(previous: DataFrame | pd.DataFrame | None, subscriptions: Mapping[str, Sequence[str]]) -> Transform:
    """lags -> lags + previous_owner (the owner in the previous plan, null where none).

    The owner is read by the one rule for a previous plan, ``core.previous`` (as
    ``spark_lag_assign.assign`` and the job read it): a partition listed more than once is
    kept by the smallest consumer id among the listings of consumers that still subscribe to
    its topic; other listings, and partitions that are gone, are ignored. The previous plan
    (a Spark or pandas DataFrame[consumer, topic, partition]; at most about one row per
    partition) is collected and read on the driver here, once; the rows join its result.
    """
    table = previous_table(_collected(previous), subscriptions)
    owners = table.rename(columns={"consumer": "previous_owner"})

    def transform(lags: DataFrame) -> DataFrame:
        if owners.empty:
            return lags.withColumn("previous_owner", F.lit(None).cast(StringType()))
        right = lags.sparkSession.createDataFrame(owners, schema=_PREVIOUS_OWNER_SCHEMA)
        return lags.join(right, on=["topic", "partition"], how="left")

    return transform


_PREVIOUS_OWNER_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("previous_owner", StringType(), False),
    ]
)


def _collected(previous: DataFrame | pd.DataFrame | None) -> pd.DataFrame | None:
    """A previous plan on the driver: a Spark DataFrame collected, anything else as it is
    (``core.previous.check_previous`` refuses what is no plan)."""
    return previous.toPandas() if isinstance(previous, DataFrame) else previous


#: groups of the per-topic stage at most: enough to keep every core of a cluster busy, few
#: enough that the per-group cost of applyInPandas (an Arrow batch, a pandas frame) stays small
TOPIC_BUCKETS = 64


def _group_rows(
    strategy: str,
    subscriptions: Mapping[str, Sequence[str]],
    seed: int,
    options: Mapping[str, Any],
    codes: _Codes | None = None,
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The applyInPandas function of a whole-group strategy (every row -> its owner, via
    ``owners``), and of a bucket of whole topics for a per-topic strategy (each topic by its
    own rule)."""

    def apply(rows: pd.DataFrame) -> pd.DataFrame:
        owned = rows[rows["previous_owner"].notna()]
        previous = pd.DataFrame({"consumer": owned["previous_owner"], "topic": owned["topic"], "partition": owned["partition"]})
        planned = owners(rows[["topic", "partition", "lag"]], subscriptions, strategy, previous, seed, **options)
        return _plan_frame(
            planned,
            rows["topic"].to_numpy(dtype=object),
            rows["partition"].to_numpy(),
            rows["lag"].to_numpy(dtype=np.int64),
            rows["starting_offset"].to_numpy(dtype=np.int64),
            codes,
        )

    return apply


def _prepared(
    apply: Callable[[pd.DataFrame], pd.DataFrame], reset: str | None, names: pd.Index | None
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """``apply`` on a group's rows as the stage functions take them (topic, partition, lag,
    starting_offset, previous_owner): with ``reset``, the lag rules' columns are made from the
    offsets first (``plan_partitions``: one trip through Python for both); with ``names``, the
    rows carry ``topic_code`` into them, and the topic becomes a categorical of those names."""

    def run(rows: pd.DataFrame) -> pd.DataFrame:
        if names is None:
            topic = rows["topic"]
        else:
            codes = rows["topic_code"].to_numpy()
            topic = pd.Series(pd.Categorical.from_codes(codes, categories=names), index=rows.index)  # type: ignore[arg-type]  # the stubs want a Sequence; an int array is what pandas takes best
        if reset is None:
            lag, starting = rows["lag"], rows["starting_offset"]
        else:
            rules = lag_columns(rows["beginning_offset"], rows["end_offset"], rows["committed_offset"], reset)
            lag, starting = rules["lag"], rules["starting_offset"]
        return apply(
            pd.DataFrame(
                {
                    "topic": topic,
                    "partition": rows["partition"],
                    "lag": lag,
                    "starting_offset": starting,
                    "previous_owner": rows["previous_owner"],
                }
            )
        )

    return run


def _assign_stage(
    subscriptions: Mapping[str, Sequence[str]],
    strategy: str,
    seed: int,
    options: Mapping[str, Any] | None,
    topics: Sequence[str] | None,
    reset: str | None,
) -> Transform:
    """The applyInPandas stage of ``assign_partitions`` (``reset`` None: its input has the lag
    columns) and of ``plan_partitions`` (its input has the offsets; the rules run first).
    Given ``topics``, the input may name its topics by ``topic_code`` (an index into them)
    instead of ``topic``: a million names then cross Spark as ints."""
    spec = get_strategy(strategy)
    options = dict(options or {})
    seed = spec.check_call(seed, options)  # here, on the driver: a worker's error arrives as a Python traceback
    subs = validate_subscriptions(subscriptions)  # consumers with the same topics share one list
    codes = None if topics is None else _Codes(pd.Index(list(subs)), pd.Index(list(topics)))
    schema = PLAN_SCHEMA if codes is None else PLAN_CODES_SCHEMA
    given = ["lag", "starting_offset"] if reset is None else ["beginning_offset", "end_offset", "committed_offset"]

    def transform(frame: DataFrame) -> DataFrame:
        if "previous_owner" not in frame.columns:
            frame = frame.withColumn("previous_owner", F.lit(None).cast(StringType()))
        coded = "topic_code" in frame.columns and "topic" not in frame.columns
        if coded and codes is None:
            raise ValueError("rows that name topics by topic_code need the topics it indexes (topics=...)")
        rows = frame.select("topic_code" if coded else "topic", "partition", *given, "previous_owner")
        apply = _group_rows(strategy, subs, seed, options, codes)
        if spec.scope == "topic":
            subscribed = {t for topic_list in distinct(subs) for t in topic_list}
            buckets = max(1, min(TOPIC_BUCKETS, len(subscribed)))
            key = F.col("topic_code") if coded else F.xxhash64("topic")
            grouped = rows.groupBy(F.pmod(key, F.lit(buckets)).alias("_bucket"))
        else:
            grouped = rows.groupBy(F.lit(0).alias("_all"))
        if reset is not None or coded:
            apply = _prepared(apply, reset, codes.topics if coded and codes is not None else None)
        return grouped.applyInPandas(apply, schema)

    return transform


def assign_partitions(
    subscriptions: Mapping[str, Sequence[str]],
    strategy: str,
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    topics: Sequence[str] | None = None,
) -> Transform:
    """lags (+ previous_owner) -> plan rows [consumer, topic, partition, lag, starting_offset].

    Per-topic strategies run as ``groupBy(bucket of topics).applyInPandas``, each topic by
    its own rule; whole-group strategies as one global ``applyInPandas`` stage. Partitions of
    topics nobody subscribes to keep a null consumer, so that the plan can list them. Given
    ``topics`` (every topic of the input), the rows carry codes instead of names
    (PLAN_CODES_SCHEMA; ``decode_plan`` turns them back on the driver).
    """
    return _assign_stage(subscriptions, strategy, seed, options, topics, None)


def plan_partitions(
    subscriptions: Mapping[str, Sequence[str]],
    strategy: str,
    reset: str = "latest",
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    topics: Sequence[str] | None = None,
) -> Transform:
    """offsets (+ previous_owner) -> plan rows: ``with_lag(reset)`` then ``assign_partitions``,
    the same rows, in one applyInPandas stage: each group's lag rules run in the pandas
    function that then assigns the group (a lag stage of its own would send every row to
    Python and back once more)."""
    return _assign_stage(subscriptions, strategy, seed, options, topics, check_reset(reset))
