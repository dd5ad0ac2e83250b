"""Reading with a plan: one consumer's part of a plan generation as Spark's Kafka source, and
the one query a follower runs over it at a time (``RunningQuery``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_lag_assign import sparkcompat
from spark_lag_assign.consume.kafka_commit import commit_namespace
from spark_lag_assign.consume.options import (
    TopicPartition,
    offsets_json,
    partitions_of,
    source_options,
    tp_names,
)
from spark_lag_assign.errors import (
    ConfigError,
    ConsumerNotInPlanError,
    InputError,
    NotAuthorizedError,
    NothingAssignedError,
    PlanError,
    ReadNotAuthorizedError,
)
from spark_lag_assign.extract.acls import Acl, not_authorized
from spark_lag_assign.extract.uris import join_uri
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.store import Store, open_store

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from spark_lag_assign.consume.protocol import Handover, Holds

log = logging.getLogger(__name__)

StartQuery = Callable[["AssignedStream", str], "StreamingQuery"]
"""``start(stream, checkpoint_location) -> StreamingQuery``: the pipeline's own processing and sink."""


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


def as_store(
    store: Store | str, client_options: Mapping[str, Any] | None = None, *, commits: bool = False
) -> tuple[Store, bool]:
    """A ``Store`` from a store or its URI (a plan directory's path is one); True if opened here.

    ``commits``: pipelines will commit under the store's name, which must then name commit
    ids (``kafka_commit.commit_namespace``); refused before anything is claimed.
    """
    opened, owned = (store, False) if isinstance(store, Store) else (open_store(str(store), client_options=client_options), True)
    if commits:
        try:
            commit_namespace(opened.name)
        except ConfigError:
            if owned:
                opened.close()
            raise
    return opened, owned


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


class RunningQuery:
    """The one streaming query a follower runs at a time (``query``: None while it reads nothing).

    ``start``: the pipeline's own processing and sink; every start gets a checkpoint of its
    own below ``checkpoint_root``/<consumer>. ``guard`` is the body of the lease guard thread.
    """

    def __init__(self, consumer: str, start: StartQuery, checkpoint_root: str, stop_timeout: float) -> None:
        self.consumer = consumer
        self.start_query = start
        self.checkpoint_root = checkpoint_root
        self.stop_timeout = stop_timeout
        self.query: StreamingQuery | None = None
        self._starts = 0
        self._lapse_stopped: set[str] = set()  # run ids of the queries the lease guard stopped

    def start(self, stream: AssignedStream, incarnation: str) -> StreamingQuery:
        # a checkpoint of its own for every start: Spark resumes a query from its checkpoint and
        # ignores the starting offsets, and a query restarted under the same generation (after a
        # lapse) must start where the group's commits stand, which another pipeline may have
        # moved on meanwhile, not where its own last run stopped
        self._starts += 1
        name = f"gen-{stream.generation:06d}-{incarnation[:8]}-{self._starts:03d}"
        self.query = self.start_query(stream, join_uri(self.checkpoint_root, self.consumer, name))
        return self.query

    def stop_between_batches(self) -> tuple[str, Sequence[str | None]]:
        """Stop it between two batches (``stop_between_batches``): its id and where its source
        ended. It stays ``query`` until ``forget``: its final commit comes first."""
        query = self.query
        assert query is not None
        if stop_between_batches(query, self.stop_timeout):
            log.warning(
                "%s: no pause between batches within %gs; stopped mid-batch (that batch is read again)",
                self.consumer, self.stop_timeout,
            )  # fmt: skip
        return str(query.id), sparkcompat.source_end_offsets(query.lastProgress)

    def forget(self) -> None:
        """The stopped query is done with (its final commit went, or was given up)."""
        self.query = None

    def stop_now(self) -> str:
        """Stop it at once (whatever it read after a lapse is not committed): its id."""
        query = self.query
        assert query is not None
        query.stop()
        self.query = None
        return str(query.id)

    def refused_read(self, error: BaseException, generation: int, holds: Holds) -> NotAuthorizedError | None:
        """Spark's Kafka source ends a query the cluster refused with the Java client's error,
        which names the topics but not the ACL: reading needs READ on each."""
        needed = [Acl("READ", "Topic", t) for t in sorted({t for t, _ in holds})]
        return not_authorized(error, needed, ReadNotAuthorizedError, f"{self.consumer} reading under generation {generation}")

    def lapse_stopped(self) -> bool:
        """The guard stopped the running query: its lease lapsed."""
        return self.query is not None and str(self.query.runId) in self._lapse_stopped

    def guard(self, core: Handover, clock: Callable[[], float], done: threading.Event) -> None:
        """Stop the query once its lease lapsed, even while the loop is blocked in a store or
        Kafka call (a claim write waits out a broker outage: kafka-python's commit_transaction
        has no bound). The loop stops a lapsed query at its first step, but its first step comes
        only when that call returns, and meanwhile the query would complete batch after batch.
        The loop learns of it through ``lapse_stopped`` and stops as after any lapse."""
        while not done.wait(0.1):
            query = self.query
            if query is None or core.reading is None or clock() < core.deadline():
                continue
            run = str(query.runId)  # a query restarted on its checkpoint keeps its id, not its run id
            if run not in self._lapse_stopped and query.isActive:
                log.warning("%s: the lease lapsed while the loop waited: stopping the query", self.consumer)
                self._lapse_stopped.add(run)
                query.stop()


__all__ = [
    "AssignedStream",
    "RunningQuery",
    "StartQuery",
    "as_store",
    "consumer_entry",
    "holds_of",
    "load_plan",
    "read_assigned",
    "stop_between_batches",
    "stream_for",
]
