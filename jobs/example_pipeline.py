"""An example pipeline that reads as the plan says: one ``PlanFollower`` per consumer.

    spark-submit --jars "$(python -c 'from spark_lag_assign.jvm import spark_kafka_jars as j; print(j())')" \\
        jobs/example_pipeline.py --store out/demo --consumers C0 \\
        --bootstrap-servers 127.0.0.1:9092 --output out/demo/sink --checkpoints out/demo/checkpoints

(``--packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0``, at the cluster's exact Spark
version and Scala suffix, does the same on a cluster: README, "On a cluster";
``--local`` runs it without spark-submit, in a local session with the jars ``make jvm`` fetched.)

``--store`` is the planner's store: ``kafka://HOST:PORT/NAME``, ``hdfs://...`` or a plan
directory. Each consumer's records go to Parquet, in a file sink per checkpoint,
``<output>/<consumer>/gen-<NNNNNN>-<incarnation>`` (a file sink belongs to one checkpoint,
and each generation and each run has its own; ``--output`` and ``--checkpoints`` may be
URIs such as ``hdfs://nn:8020/sinks``), with columns topic, partition, offset, timestamp and value (as a
string). Every completed micro-batch's end offsets are committed to the plan's consumer
group, so the planner and any lag monitor see the pipeline's lag. Without
``--available-now`` it runs until Ctrl-C or SIGTERM and follows each new plan generation,
handing partitions over as ``spark_lag_assign.consume`` describes; with it, it reads the
backlog and stops. At the end it prints per consumer how many records it wrote from which
partitions, and what it committed.

``--metrics-port PORT`` serves each consumer's Prometheus metrics over HTTP while it runs
(``PlanFollower(metrics_port=...)``): the first consumer of ``--consumers`` on PORT, the next on
PORT+1, and so on; 0 gives each a free port, logged when it starts serving.

Exit status 0 when every consumer ended cleanly, 1 on bad input or a failed handover (one
line on stderr).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from spark_lag_assign.consume import AssignedStream, PlanFollower, RunSummary, StartQuery
from spark_lag_assign.core.lists import comma_list
from spark_lag_assign.errors import SparkLagAssignError
from spark_lag_assign.extract.uris import join_uri, local_path

log = logging.getLogger("example_pipeline")

COLUMNS = ("topic", "partition", "offset", "timestamp", "CAST(value AS STRING) AS value")
#: the sinks' schema, given when reading back: a sink that committed no file has none to infer from
SINK_SCHEMA = "topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP, value STRING"


def sink_dir(output: str, consumer: str, checkpoint: str) -> str:
    """Where one consumer's records under one checkpoint (a generation, a run) go."""
    return join_uri(output, consumer, checkpoint.rstrip("/").rsplit("/", 1)[-1])


def parquet_sink(output: str, *, available_now: bool = False, interval: str = "2 seconds") -> StartQuery:
    """A ``start(stream, checkpoint)`` that writes the records to Parquet, one file sink per generation."""

    def start(stream: AssignedStream, checkpoint: str) -> Any:
        writer = (
            stream.df.selectExpr(*COLUMNS)
            .writeStream.format("parquet")
            .queryName(f"example-{stream.consumer}-gen{stream.generation}")
            .option("path", sink_dir(output, stream.consumer, checkpoint))
            .option("checkpointLocation", checkpoint)
        )
        writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=interval)
        return writer.start()

    return start


def report(spark: Any, output: str, summary: RunSummary) -> str:
    """One consumer's records per partition, read back from its sinks (committed batches only)."""
    from pyspark.sql import functions as F

    local = local_path(output)
    root = Path(local) / summary.consumer if local is not None else None
    dirs = sorted(str(d) for d in root.glob("gen-*") if (d / "_spark_metadata").is_dir()) if root is not None else []
    counts: dict[tuple[str, int], int] = {}
    for d in dirs:  # one read per sink: Spark only honours a sink's log when given its own directory
        for row in spark.read.schema(SINK_SCHEMA).parquet(d).groupBy("topic", "partition").agg(F.count("*").alias("n")).collect():
            key = (row["topic"], int(row["partition"]))
            counts[key] = counts.get(key, 0) + int(row["n"])
    total = sum(counts.values())
    parts = ", ".join(f"{t}p{p} {n:,}" for (t, p), n in sorted(counts.items())) or "nothing"
    committed = ", ".join(f"{t}p{p}@{o:,}" for (t, p), o in sorted(summary.committed.items())) or "nothing"
    generations = ",".join(str(g) for g in sorted(set(summary.generations))) or "-"
    return (
        f"{summary.consumer}: {total:,} records ({parts}); generation(s) {generations}; "
        f"committed {committed}; ended: {summary.reason}"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--store", "--plan", dest="store", required=True,
        help="the planner's store: kafka://HOST:PORT/NAME, hdfs://..., or a plan directory",
    )  # fmt: skip
    parser.add_argument("--consumers", required=True, help="comma-separated consumer ids to run in this application")
    parser.add_argument("--bootstrap-servers", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--output", required=True, help="root directory of the Parquet sinks")
    parser.add_argument("--checkpoints", required=True, help="root directory of the checkpoints")
    parser.add_argument("--available-now", action="store_true", help="read the backlog, then stop")
    parser.add_argument("--trigger-interval", default="2 seconds", help="processing-time trigger (default 2 seconds)")
    parser.add_argument("--max-offsets-per-trigger", type=int, help="Kafka source maxOffsetsPerTrigger")
    parser.add_argument("--poll-interval", type=float, default=5.0, help="seconds between plan polls (default 5)")
    parser.add_argument("--handover-timeout", type=float, default=300.0, help="seconds to wait for a release (default 300)")
    parser.add_argument("--lease", type=float, default=30.0, help="seconds a claim holds without renewal (default 30)")
    parser.add_argument(
        "--metrics-port", type=int, metavar="PORT",
        help="serve each consumer's Prometheus metrics over HTTP: the first on PORT, the next on PORT+1 (0: free ports)",
    )  # fmt: skip
    parser.add_argument("--local", action="store_true", help="a local session with the Maven-fetched jars, no spark-submit")
    return parser


def metrics_ports(first: int | None, consumers: int) -> list[int | None]:
    """Each consumer's metrics port: none without ``--metrics-port``, else PORT, PORT+1, ...
    (0: a free one each)."""
    if first is None:
        return [None] * consumers
    if first == 0:
        return [0] * consumers
    if not 1 <= first <= 65536 - consumers:
        raise SparkLagAssignError(f"--metrics-port {first}: {consumers} consumer(s) need ports {first} to "
                                  f"{first + consumers - 1}, within 1-65535")  # fmt: skip
    return [first + i for i in range(consumers)]


def submitted_session(local: bool) -> Any:
    if local:
        from spark_lag_assign.spark.session import local_session

        return local_session("spark-lag-assign-example-pipeline")
    from pyspark.sql import SparkSession

    return SparkSession.builder.appName("spark-lag-assign-example-pipeline").getOrCreate()


def run(spark: Any, args: argparse.Namespace, on_started: Callable[[list[PlanFollower]], None] | None = None) -> int:
    consumers = comma_list(args.consumers)
    if not consumers:
        raise SparkLagAssignError("no consumers: give at least one consumer id")
    ports = metrics_ports(args.metrics_port, len(consumers))
    options: dict[str, Any] = {"kafka.bootstrap.servers": args.bootstrap_servers}
    if args.max_offsets_per_trigger:
        options["maxOffsetsPerTrigger"] = args.max_offsets_per_trigger
    start = parquet_sink(args.output, available_now=args.available_now, interval=args.trigger_interval)
    followers = [
        PlanFollower(
            spark,
            args.store,
            consumer,
            start,
            checkpoint_root=args.checkpoints,
            kafka_options=options,
            poll_interval=args.poll_interval,
            handover_timeout=args.handover_timeout,
            lease=args.lease,
            metrics_port=port,
        )
        for consumer, port in zip(consumers, ports)
    ]
    summaries: dict[str, RunSummary] = {}
    errors: dict[str, BaseException] = {}

    def follow(follower: PlanFollower) -> None:
        try:
            summaries[follower.consumer] = follower.run(until_drained=args.available_now)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread, which owns the exit status
            errors[follower.consumer] = exc

    threads = [threading.Thread(target=follow, args=(f,), name=f"follow-{f.consumer}") for f in followers]
    for t in threads:
        t.start()
    if on_started is not None:
        on_started(followers)
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.5)
    except KeyboardInterrupt:
        for f in followers:
            f.stop()
        for t in threads:
            t.join()
    for consumer in consumers:
        if consumer in summaries:
            print(report(spark, args.output, summaries[consumer]), flush=True)
    for consumer, exc in sorted(errors.items()):
        if not isinstance(exc, SparkLagAssignError):
            raise exc
        print(f"error: {consumer}: {exc}", file=sys.stderr, flush=True)
    return 1 if errors else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark = submitted_session(args.local)
    followers: list[PlanFollower] = []

    def on_term(*_: Any) -> None:  # SIGTERM ends the run like Ctrl-C: stop between batches, commit, release
        for f in followers:
            f.stop()

    signal.signal(signal.SIGTERM, on_term)
    try:
        return run(spark, args, on_started=followers.extend)
    except SparkLagAssignError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        spark.stop()


if __name__ == "__main__":
    raise SystemExit(main())
