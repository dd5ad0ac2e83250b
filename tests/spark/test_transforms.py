"""The Spark transforms, compared as whole DataFrames (chispa) with explicit schemas."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

import spark_lag_assign as sla
from spark_lag_assign import assignors, sparkcompat
from spark_lag_assign.core.lag import EARLIEST, LATEST
from spark_lag_assign.spark import transforms


def offsets_df(spark, rows):  # type: ignore[no-untyped-def]
    return spark.createDataFrame(rows, schema=transforms.OFFSETS_SCHEMA)


def test_with_lag_applies_every_rule(spark) -> None:  # type: ignore[no-untyped-def]
    rows = [
        ("t", 0, 10, 100, 40),  # within range
        ("t", 1, 10, 100, None),  # nothing committed
        ("t", 2, 10, 100, 5),  # below the log start: retention deleted it
        ("t", 3, 10, 100, 250),  # beyond the end: topic recreated
        ("t", 4, 0, 0, None),  # empty partition
    ]
    got = offsets_df(spark, rows).transform(transforms.with_lag("earliest"))
    expected = spark.createDataFrame(
        [
            ("t", 0, 10, 100, 40, 60, 40, False, 40),
            ("t", 1, 10, 100, None, 90, 10, False, EARLIEST),
            ("t", 2, 10, 100, 5, 90, 10, True, EARLIEST),
            ("t", 3, 10, 100, 250, 90, 10, True, EARLIEST),
            ("t", 4, 0, 0, None, 0, 0, False, EARLIEST),
        ],
        schema=transforms.LAGS_SCHEMA,
    )
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def test_with_lag_latest_gives_no_lag_without_a_commit(spark) -> None:  # type: ignore[no-untyped-def]
    got = offsets_df(spark, [("t", 0, 10, 100, None)]).transform(transforms.with_lag("latest"))
    expected = spark.createDataFrame([("t", 0, 10, 100, None, 0, 100, False, LATEST)], schema=transforms.LAGS_SCHEMA)
    assert_df_equality(got, expected, ignore_nullable=True)


def test_with_lag_in_spark_equals_compute_lag_in_pandas(spark) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(7)
    n = 500
    beginning = rng.integers(0, 1_000, n)
    end = beginning + rng.integers(0, 10_000, n)
    committed = np.where(rng.random(n) < 0.2, -1, beginning + rng.integers(-50, 11_000, n).clip(-beginning))
    frame = pd.DataFrame(
        {
            "topic": [f"t{i % 7}" for i in range(n)],
            "partition": np.arange(n) // 7,
            "beginning_offset": beginning,
            "end_offset": end,
            "committed_offset": pd.array([None if c < 0 else int(c) for c in committed], dtype="Int64"),
        }
    )
    for reset in ("earliest", "latest"):
        want = sla.compute_lag(frame, reset).sort_values(["topic", "partition"]).reset_index(drop=True)
        got = (
            spark.createDataFrame(frame.astype({"partition": "int32"}), schema=transforms.OFFSETS_SCHEMA)
            .transform(transforms.with_lag(reset))
            .toPandas()
            .sort_values(["topic", "partition"])
            .reset_index(drop=True)
        )
        for col in ("lag", "position", "starting_offset"):
            assert got[col].astype("int64").tolist() == want[col].astype("int64").tolist(), (reset, col)
        assert got["out_of_range"].tolist() == want["out_of_range"].tolist()


def lags_df(spark, rows):  # type: ignore[no-untyped-def]
    frame = pd.DataFrame(rows, columns=["topic", "partition", "lag"])
    frame["starting_offset"] = 1000
    return spark.createDataFrame(
        frame,
        schema="topic string, partition int, lag long, starting_offset long",
    )


def test_assign_partitions_seed_000_per_topic(spark) -> None:  # type: ignore[no-untyped-def]
    lags = lags_df(spark, [("t0", 0, 100_000), ("t0", 1, 50_000), ("t0", 2, 60_000)])
    got = lags.transform(transforms.assign_partitions({"C0": ["t0"], "C1": ["t0"]}, "lag"))
    expected = spark.createDataFrame(
        [("C0", "t0", 0, 100_000, 1000), ("C1", "t0", 1, 50_000, 1000), ("C1", "t0", 2, 60_000, 1000)],
        schema=transforms.PLAN_SCHEMA,
    )
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def test_a_topic_nobody_subscribes_to_stays_unassigned(spark) -> None:  # type: ignore[no-untyped-def]
    lags = lags_df(spark, [("t0", 0, 5), ("lonely", 0, 7), ("lonely", 1, 9)])
    got = lags.transform(transforms.assign_partitions({"C0": ["t0"]}, "range"))
    expected = spark.createDataFrame(
        [("C0", "t0", 0, 5, 1000), (None, "lonely", 0, 7, 1000), (None, "lonely", 1, 9, 1000)],
        schema=transforms.PLAN_SCHEMA,
    )
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


def _workload(seed: int) -> tuple[pd.DataFrame, dict[str, list[str]], pd.DataFrame]:
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(6):
        for p in range(int(rng.integers(1, 9))):
            rows.append((f"topic-{t}", p, int(rng.pareto(1.2) * 1000)))
    lags = pd.DataFrame(rows, columns=["topic", "partition", "lag"])
    topics = sorted(set(lags["topic"]))
    subs = {f"host{c:02d}-{rng.integers(1 << 30):08x}": sorted(rng.choice(topics, 4, replace=False)) for c in range(5)}
    subs[sorted(subs)[0]] = topics  # someone reads everything
    owners = list(subs)
    previous = lags.sample(frac=0.6, random_state=seed)[["topic", "partition"]].assign(
        consumer=[owners[i % len(owners)] for i in range(int(len(lags) * 0.6 + 0.5))][: round(len(lags) * 0.6)]
    )
    return lags, subs, previous


@pytest.mark.parametrize("strategy", list(sla.STRATEGIES))
def test_spark_plan_equals_the_pure_plan(spark, strategy: str) -> None:  # type: ignore[no-untyped-def]
    lags, subs, previous = _workload(11)
    want = sla.assign(lags, subs, strategy, previous=previous, seed=3)
    frame = lags.assign(starting_offset=0)
    df = spark.createDataFrame(frame, schema="topic string, partition int, lag long, starting_offset long")
    prev_df = spark.createDataFrame(previous[["consumer", "topic", "partition"]], schema=transforms.PREVIOUS_SCHEMA)
    got = (
        df.transform(transforms.with_previous_owner(prev_df, subs))
        .transform(transforms.assign_partitions(subs, strategy, seed=3))
        .where("consumer is not null")
        .select("consumer", "topic", "partition", "lag")
    )
    expected = spark.createDataFrame(want, schema="consumer string, topic string, partition int, lag long")
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.kafka_source
def test_the_session_loads_the_kafka_source_of_pysparks_exact_version(spark) -> None:  # type: ignore[no-untyped-def]
    import pyspark

    from spark_lag_assign import jvm

    # PyPI's 3.5.x is built for Scala 2.12, 4.x for 2.13: the suffix is read from PySpark's own jars
    scala = sparkcompat.bundled_scala_binary(jvm.pyspark_home())
    assert scala == {"3": "2.12", "4": "2.13"}[pyspark.__version__[0]]
    jars = sorted(Path(j).name for j in spark.conf.get("spark.jars").split(",") if Path(j).name.startswith("spark-"))
    assert jars == [
        f"spark-sql-kafka-0-10_{scala}-{pyspark.__version__}.jar",
        f"spark-token-provider-kafka-0-10_{scala}-{pyspark.__version__}.jar",
    ]
    assert spark.version == pyspark.__version__


@pytest.mark.parametrize("strategy", ["sticky", "lag-sticky"])
def test_a_partition_listed_twice_in_the_previous_plan_is_the_smallest_ids_on_both_paths(spark, strategy: str) -> None:  # type: ignore[no-untyped-def]
    lags, subs, previous = _workload(11)
    first = previous.iloc[0]
    consumers = sorted(subs)
    # the same partition again, under every other consumer, listed before and after the real owner
    others = [c for c in consumers if c != first["consumer"]]
    twice = pd.concat(
        [
            pd.DataFrame({"consumer": others[-1:], "topic": [first["topic"]], "partition": [first["partition"]]}),
            previous,
            pd.DataFrame({"consumer": others[:1], "topic": [first["topic"]], "partition": [first["partition"]]}),
        ],
        ignore_index=True,
    )[["consumer", "topic", "partition"]]
    want = sla.assign(lags, subs, strategy, previous=twice, seed=3)
    df = spark.createDataFrame(
        lags.assign(starting_offset=0), schema="topic string, partition int, lag long, starting_offset long"
    )
    with_prev = df.transform(transforms.with_previous_owner(spark.createDataFrame(twice, schema=transforms.PREVIOUS_SCHEMA), subs))
    owner = with_prev.where((F.col("topic") == str(first["topic"])) & (F.col("partition") == int(first["partition"])))
    assert [r["previous_owner"] for r in owner.collect()] == [min(others[0], str(first["consumer"]))]
    got = with_prev.transform(transforms.assign_partitions(subs, strategy, seed=3)).where("consumer is not null")
    expected = spark.createDataFrame(want, schema="consumer string, topic string, partition int, lag long")
    assert_df_equality(got.select("consumer", "topic", "partition", "lag"), expected, ignore_row_order=True, ignore_nullable=True)


def _stale_previous(seed: int) -> tuple[pd.DataFrame, dict[str, list[str]], pd.DataFrame]:
    """Rows, subscriptions and a stale previous plan: partitions listed several times, consumers
    that left or no longer read the topic, partitions and topics that are gone, partition
    numbers beyond int32 or missing."""
    rng = np.random.default_rng(seed)
    topics = ["t0", "t1", "t2", "t3"]
    consumers = ["a", "b", "c", "d"]
    subs = {c: sorted(str(t) for t in rng.choice(topics, int(rng.integers(1, 4)), replace=False)) for c in consumers}
    rows = pd.DataFrame(
        [(t, p, 1) for t in topics[:3] for p in range(int(rng.integers(2, 7)))], columns=["topic", "partition", "lag"]
    )
    n = 120
    previous = pd.DataFrame(
        {
            "consumer": rng.choice([*consumers, "gone"], n),
            "topic": rng.choice([*topics, "t9"], n),
            "partition": rng.choice(np.r_[np.arange(9), -1, 2**31, 2**40], n).astype(object),
        }
    )
    previous.loc[rng.choice(n, 3, replace=False), "partition"] = None
    return rows.sample(frac=1.0, random_state=seed).reset_index(drop=True), subs, previous


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_with_previous_owner_reads_a_stale_previous_plan_as_the_pure_path(spark, seed: int) -> None:  # type: ignore[no-untyped-def]
    # the rule of core.previous on both paths: the previous owners the pure front end hands a
    # strategy are the ones the Spark transform joins to the rows (None for unread topics)
    rows, subs, previous = _stale_previous(seed)
    group = assignors.problem(rows, subs, "sticky", previous=previous)
    codes = group.codes()
    want = {(t, int(p)): None for t, p in zip(rows["topic"], rows["partition"])}
    for t, p, c in zip(np.asarray(codes.index.topics)[codes.row_topic], group.partitions, codes.previous):
        want[(t, int(p))] = None if c < 0 else codes.index.names[c]
    assert any(want.values()) and not all(want.values())
    prev_df = spark.createDataFrame(previous, schema="consumer string, topic string, partition long")
    df = spark.createDataFrame(rows, schema="topic string, partition int, lag long")
    got = df.transform(transforms.with_previous_owner(prev_df, subs)).collect()
    assert {(r["topic"], r["partition"]): r["previous_owner"] for r in got} == want
    assert len(got) == len(rows)


@pytest.mark.parametrize("strategy", [s for s, spec in sla.STRATEGIES.items() if spec.scope == "topic"])
def test_many_topics_share_a_bucket_and_still_get_the_pure_plan(spark, strategy: str) -> None:  # type: ignore[no-untyped-def]
    # more topics than buckets: each applyInPandas group runs the assignor for several topics
    rng = np.random.default_rng(5)
    n_topics = 3 * transforms.TOPIC_BUCKETS
    rows = [(f"t{t:03d}", p, int(rng.integers(0, 10_000))) for t in range(n_topics) for p in range(int(rng.integers(1, 6)))]
    lags = pd.DataFrame(rows, columns=["topic", "partition", "lag"])
    topics = sorted(set(lags["topic"]))
    subs = {"a": topics[:-20], "b": topics[::2], "c": topics[1::3], "d": topics[: n_topics // 2]}
    previous = lags.sample(frac=0.5, random_state=1)[["topic", "partition"]].assign(consumer="a")
    want = sla.assign(lags, subs, strategy, previous=previous, seed=2)
    df = spark.createDataFrame(
        lags.assign(starting_offset=0), schema="topic string, partition int, lag long, starting_offset long"
    )
    prev_df = spark.createDataFrame(previous[["consumer", "topic", "partition"]], schema=transforms.PREVIOUS_SCHEMA)
    got = (
        df.transform(transforms.with_previous_owner(prev_df, subs))
        .transform(transforms.assign_partitions(subs, strategy, seed=2))
        .select("consumer", "topic", "partition", "lag")
    )
    unread = sorted(set(topics) - {t for ts in subs.values() for t in ts})
    assert unread  # some topics nobody reads: they come back with a null consumer
    expected = spark.createDataFrame(
        pd.concat([want, lags[lags["topic"].isin(unread)].assign(consumer=None)], ignore_index=True)[
            ["consumer", "topic", "partition", "lag"]
        ],
        schema="consumer string, topic string, partition int, lag long",
    )
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.parametrize("strategy", ["lag", "lag-sticky"])
def test_coded_rows_decode_to_the_named_rows(spark, strategy: str) -> None:  # type: ignore[no-untyped-def]
    lags, subs, previous = _workload(4)
    lags = pd.concat([lags, pd.DataFrame({"topic": ["unread"], "partition": [0], "lag": [3]})], ignore_index=True)
    topics = sorted(set(lags["topic"]))
    df = spark.createDataFrame(
        lags.assign(starting_offset=7), schema="topic string, partition int, lag long, starting_offset long"
    )
    prev_df = spark.createDataFrame(previous[["consumer", "topic", "partition"]], schema=transforms.PREVIOUS_SCHEMA)
    with_prev = df.transform(transforms.with_previous_owner(prev_df, subs))
    named = with_prev.transform(transforms.assign_partitions(subs, strategy, seed=1))
    coded = with_prev.transform(transforms.assign_partitions(subs, strategy, seed=1, topics=topics))
    assert coded.schema == transforms.PLAN_CODES_SCHEMA
    rows = coded.toPandas()
    assert rows["consumer_code"].min() == -1  # the unread topic's partition
    decoded = spark.createDataFrame(transforms.decode_plan(rows, list(subs), topics), schema=transforms.PLAN_SCHEMA)
    assert_df_equality(decoded, named, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.parametrize("strategy", ["range", "lag", "lag-sticky"])
@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_plan_partitions_is_with_lag_then_assign_partitions_in_one_stage(spark, strategy: str, reset: str) -> None:  # type: ignore[no-untyped-def]
    # offsets that hit every lag rule, more topics than buckets, a previous plan, a topic nobody reads
    rng = np.random.default_rng(13)
    rows = []
    for t in range(transforms.TOPIC_BUCKETS + 9):
        for p in range(int(rng.integers(1, 5))):
            b = int(rng.integers(0, 100))
            e = b + int(rng.integers(0, 5_000))
            c = [None, b + (e - b) // 3, b - 1, e + 7, e][int(rng.integers(0, 5))]
            rows.append((f"t{t:03d}", p, b, e, c))
    offsets = offsets_df(spark, rows)
    topics = sorted({r[0] for r in rows})
    subs = {"a": topics[:-1], "b": topics[:-1:2], "c": topics[: len(topics) // 2]}
    previous = spark.createDataFrame(
        [("b", r[0], r[1]) for r in rows[::3] if r[0] in subs["b"]] + [("a", r[0], r[1]) for r in rows[1::4]],
        schema=transforms.PREVIOUS_SCHEMA,
    )
    with_prev = offsets.transform(transforms.with_previous_owner(previous, subs)).cache()
    two = with_prev.transform(transforms.with_lag(reset)).transform(
        transforms.assign_partitions(subs, strategy, seed=4, topics=topics)
    )
    one = with_prev.transform(transforms.plan_partitions(subs, strategy, reset, seed=4, topics=topics))
    assert one.schema == transforms.PLAN_CODES_SCHEMA
    assert one.where("consumer_code = -1").count() == sum(r[0] == topics[-1] for r in rows)  # read by nobody
    frame = pd.DataFrame(rows, columns=[f.name for f in transforms.OFFSETS_SCHEMA.fields]).astype({"committed_offset": "Int64"})
    want = sla.compute_lag(frame, reset)
    got = one.toPandas()
    assert got["lag"].sum() == want["lag"].sum() > 0  # the rules ran, as the pure ones do
    assert sorted(got["starting_offset"]) == sorted(want["starting_offset"])
    assert_df_equality(one, two, ignore_row_order=True)
    with_prev.unpersist()


def test_plan_partitions_refuses_an_unknown_reset_before_spark_runs(spark) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(sla.InputError, match="unknown reset policy 'smallest'"):
        transforms.plan_partitions({"a": ["t"]}, "range", "smallest")


@pytest.mark.parametrize("strategy", ["lag", "lag-sticky"])
def test_rows_may_name_their_topics_by_code_into_the_topics_given(spark, strategy: str) -> None:  # type: ignore[no-untyped-def]
    lags, subs, previous = _workload(11)
    topics = sorted(set(lags["topic"]))
    frame = lags.assign(starting_offset=5)
    df = spark.createDataFrame(frame, schema="topic string, partition int, lag long, starting_offset long")
    prev_df = spark.createDataFrame(previous[["consumer", "topic", "partition"]], schema=transforms.PREVIOUS_SCHEMA)
    named = df.transform(transforms.with_previous_owner(prev_df, subs))
    codes = spark.createDataFrame(list(zip(topics, range(len(topics)))), schema="topic string, topic_code int")
    coded = named.join(codes, "topic").select("topic_code", "partition", "lag", "starting_offset", "previous_owner")
    assert "topic" not in coded.columns
    want = named.transform(transforms.assign_partitions(subs, strategy, seed=3, topics=topics))
    got = coded.transform(transforms.assign_partitions(subs, strategy, seed=3, topics=topics))
    assert_df_equality(got, want, ignore_row_order=True)
    assert sorted(r["topic_code"] for r in got.collect()) == sorted(topics.index(t) for t in lags["topic"])
    with pytest.raises(ValueError, match="topic_code need the topics"):
        coded.transform(transforms.assign_partitions(subs, strategy))
