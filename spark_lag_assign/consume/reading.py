"""Reading with a plan: one consumer's part of a plan generation as Spark's Kafka source."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_lag_assign import sparkcompat
from spark_lag_assign.consume.options import (
    TopicPartition,
    offsets_json,
    partitions_of,
    source_options,
    tp_names,
)
from spark_lag_assign.errors import ConsumerNotInPlanError, InputError, NothingAssignedError, PlanError
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.store import Store, open_store

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


@dataclass(frozen=True)
class AssignedStream:
    """One consumer's streaming DataFrame and the plan generation it follows."""

    df: DataFrame
    consumer: str
    generation: int
    group: str | None
    reset: str
    assign: dict[str, list[int]]
    starting_offsets: dict[str, dict[str, int]] | str
    options: dict[str, str]

    @property
    def assign_json(self) -> str:
        return plan_io.compact_json(self.assign)

    @property
    def partitions(self) -> list[TopicPartition]:
        return partitions_of(self.assign)


def consumer_entry(plan: plan_io.Plan, consumer: str, where: str) -> plan_io.ConsumerPlan:
    """The consumer's part of a plan; a consumer the plan does not name is an error."""
    entry = plan["consumers"].get(consumer)
    if entry is None:
        named = ", ".join(sorted(plan["consumers"])) or "none"
        raise ConsumerNotInPlanError(
            f"consumer {consumer!r} is not in generation {plan['generation']} of the plan at {where} (consumers: {named})"
        )
    return entry


def holds_of(plan: plan_io.Plan, consumer: str) -> frozenset[TopicPartition] | None:
    """The partitions a plan gives ``consumer``; None if the plan does not name it."""
    entry = plan["consumers"].get(consumer)
    if entry is None:
        return None
    return frozenset((str(t), int(p)) for t, ps in entry["assign"].items() for p in ps)


def as_store(store: Store | str, client_options: Mapping[str, Any] | None = None) -> tuple[Store, bool]:
    """A ``Store`` from a store or its URI (a plan directory's path is one); True if opened here."""
    if isinstance(store, Store):
        return store, False
    return open_store(str(store), client_options=client_options), True


def load_plan(store: Store, generation: int | None = None) -> plan_io.Plan:
    """The newest plan of a store, or one generation of it; a clear error if there is none."""
    found = store.latest() if generation is None else store.get(generation)
    if found is None:
        what = "no plan" if generation is None else f"no generation {generation}"
        raise PlanError(f"{what} in the store {store.uri}")
    return found


def stream_for(
    spark: SparkSession,
    plan: plan_io.Plan,
    consumer: str,
    where: str,
    starting: Mapping[str, Mapping[str, int]] | str | None,
    options: Mapping[str, Any],
) -> AssignedStream:
    """Spark's Kafka source for ``consumer``'s part of ``plan``, from ``starting`` (default: the plan's)."""
    entry = consumer_entry(plan, consumer, where)
    if not partitions_of(entry["assign"]):
        raise NothingAssignedError(
            f"consumer {consumer!r} has no partitions in generation {plan['generation']} of the plan at {where}"
        )
    passed = source_options(options)
    chosen: dict[str, dict[str, int]] | str
    if starting is None:
        chosen = {t: dict(ps) for t, ps in entry["startingOffsets"].items()}
    elif isinstance(starting, str):
        chosen = starting
    else:
        chosen = {t: dict(ps) for t, ps in starting.items()}
    if isinstance(chosen, dict):
        given = set(partitions_of({t: [int(p) for p in ps] for t, ps in chosen.items()}))
        if given != set(partitions_of(entry["assign"])):  # Spark insists on exactly the assigned partitions
            raise InputError(
                f"startingOffsets for {consumer} name {tp_names(given) or 'nothing'}, "
                f"but it is assigned {tp_names(partitions_of(entry['assign']))}"
            )
    sparkcompat.check_kafka_source(spark)
    reader = spark.readStream.format("kafka")
    for key, value in sorted(passed.items()):
        reader = reader.option(key, value)
    assign = {t: list(ps) for t, ps in entry["assign"].items()}
    df = (
        reader.option("assign", plan_io.assign_json(entry))
        .option("startingOffsets", chosen if isinstance(chosen, str) else offsets_json(chosen))
        .load()
    )
    return AssignedStream(
        df=df,
        consumer=consumer,
        generation=int(plan["generation"]),
        group=plan.get("group"),
        reset=str(plan.get("reset", "latest")),
        assign=assign,
        starting_offsets=chosen,
        options=passed,
    )


def read_assigned(
    spark: SparkSession,
    store: Store | str,
    consumer: str,
    *,
    generation: int | None = None,
    starting_offsets: Mapping[str, Mapping[str, int]] | str | None = None,
    client_options: Mapping[str, Any] | None = None,
    **kafka_options: Any,
) -> AssignedStream:
    """The streaming DataFrame of Spark's Kafka source with ``consumer``'s ``assign`` from the plan.

    ``store``: a store URI (``kafka://HOST:PORT/NAME``, ``hdfs://...``, a plan directory) or
    an open ``Store``; ``client_options`` are the kafka-python settings a Kafka store needs
    (security). Reads the newest plan (or ``generation``); starts where the plan says
    unless ``starting_offsets`` is given (a ``startingOffsets`` object, or
    "earliest"/"latest"). ``kafka_options`` pass through to the source
    (``spark_lag_assign.consume.options``). This reads once and claims nothing: a pipeline
    that must follow new generations and hand partitions over uses ``PlanFollower``.
    """
    opened, owned = as_store(store, client_options)
    try:
        plan = load_plan(opened, generation)
        return stream_for(spark, plan, consumer, opened.uri, starting_offsets, kafka_options)
    finally:
        if owned:
            opened.close()


def stop_between_batches(query: StreamingQuery, timeout: float) -> bool:
    """Stop a query while none of its batches is being processed; True if it had to stop one mid-way.

    ``stop()`` interrupts whatever the query does. Interrupting a trigger while it only asks
    Kafka for offsets, or sleeps until the next trigger, loses nothing; interrupting the
    processing of a batch makes the sink redo it, and a Python ``foreachBatch`` interrupted
    that way makes Spark 4.0 log a StackOverflowError. Under load batches run back to back,
    so waiting for an idle trigger alone might never end: the offset-fetching phase at the
    start of every batch is the boundary this waits for.
    """
    deadline = time.monotonic() + timeout
    while query.isActive:
        status = query.status
        processing = bool(status.get("isTriggerActive")) and str(status.get("message", "")).startswith("Processing")
        if not processing:
            query.stop()
            return False
        if time.monotonic() >= deadline:
            query.stop()
            return True
        time.sleep(0.02)
    return False  # it ended by itself (availableNow, or failed): nothing left to stop


__all__ = [
    "AssignedStream",
    "as_store",
    "consumer_entry",
    "holds_of",
    "load_plan",
    "read_assigned",
    "stop_between_batches",
    "stream_for",
]
