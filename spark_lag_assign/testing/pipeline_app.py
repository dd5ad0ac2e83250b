"""One pipeline of the multi-process handover proof.

    python -m spark_lag_assign.testing.pipeline_app --store kafka://127.0.0.1:9092/orders \\
        --consumer A --bootstrap-servers 127.0.0.1:9092 --sink-topic orders-sink --lease 6

One process = one SparkSession (``local[1]`` unless ``--master`` names a cluster, e.g. a
standalone master in client mode, with ``--conf`` settings such as ``spark.cores.max=1``;
small, UI off) + one ``PlanFollower`` for one consumer id, as one Spark application on one
host of a cluster would be. Its query is a ``foreachBatch`` sink that collects each
micro-batch's (topic, partition, offset) rows and writes them to ``--sink-topic``, in one
of two ways (``--sink``):

- ``kafka``: ``PlanFollower.write_batch`` puts the records and the batch's end offsets in
  ONE Kafka transaction under the consumer's fenced transactional id, so a pipeline that
  was replaced writes nothing a ``read_committed`` reader sees;
- ``plain``: a plain (idempotent, not transactional) producer sends the records, visible at
  once; the offsets are committed afterwards by the follower's progress listener
  (``ProgressCommitter`` -> ``FencedGroupCommit``), as a sink that is not Kafka (files, a
  database) would have it. Whatever a replaced pipeline writes stays visible: duplicates
  show, and their bound is tested. Like a file sink (``jobs/example_pipeline.py``'s Parquet)
  it never asks whether the lease is valid: stopping a query whose lease lapsed is the
  follower's to do, and the proof checks that it does.

Every record's value is JSON::

    {"consumer", "incarnation", "generation", "batch_id", "started", "written",
     "topic", "partition", "offset", "value", "pid", "sink"}

``incarnation`` is the follower's (the part of the checkpoint it names that the claim
writer's incarnation id begins with, then ``+N``: the follower's N-th query, for a query
restarted under the same generation, as after a lapsed lease, numbers its batches afresh), ``generation`` the plan generation of the query,
``started`` the wall clock when the batch function began (before Spark's rows are read),
``written`` the wall clock when the records went out. After the records are written
(committed, for ``kafka``), one *batch marker* goes to ``<sink-topic>.batches`` with
``ended``, the wall clock after the write. A process killed between the write and the
marker leaves a batch without one; the analysis then bounds its end by the slowest write it
saw (``batches_of``).

Checkpoints go under ``--checkpoint-root`` (default ``file:///tmp/sla-checkpoints``: in a
``NamespacedProcess`` that is the process's private tmpfs). SIGTERM ends the run as the
protocol's step 9 says (stop between batches, commit, release). Pauses, each a SIGSTOP of
the whole process group (driver and JVM) by the process itself, for the test to resume it
with SIGCONT whenever it wants: ``--sigstop-before-claim`` once it has read the plan and
before its first claim; ``--pause-on-usr1`` after a SIGUSR1, at the next batch that read
records, just before its offsets are committed (``plain``: in a progress listener that runs
before the follower's own; ``kafka``: before its transaction), the moment a pipeline must
not be able to commit through once a successor took over.

Every follower event is logged as a line ``EVENT {json}`` with the wall clock of when it
happened (``wall``; a claim also has ``began``, when its write was sent; a start names its
query's ``stint``), the run's end as ``SUMMARY {json}``; exit status 0 after a clean end, 3
if a newer incarnation fenced this one, 1 on any other error.

The checks the proofs assert over what these processes wrote are in
``spark_lag_assign.testing.verdict``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

log = logging.getLogger("pipeline_app")

TopicPartition = tuple[str, int]

#: the batch markers' topic of a sink topic
MARKERS_SUFFIX = ".batches"
SINKS = ("kafka", "plain")
#: how long a sink's send waits for the broker (longer than the proof's broker outage)
SEND_TIMEOUT = 150.0

EXIT_OK, EXIT_ERROR, EXIT_FENCED = 0, 1, 3


def markers_topic(sink_topic: str) -> str:
    return sink_topic + MARKERS_SUFFIX


# -- the process ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="one pipeline of the multi-process handover proof")
    p.add_argument("--store", required=True, help="kafka://HOST:PORT/NAME (or a plan directory)")
    p.add_argument("--consumer", required=True)
    p.add_argument("--bootstrap-servers", required=True)
    p.add_argument("--sink-topic", required=True, help="records go here; batch markers to <sink-topic>.batches")
    p.add_argument(
        "--sink", choices=SINKS, default="kafka",
        help="kafka: records and offsets in one transaction (write_batch); plain: records by a plain producer, "
        "offsets by the follower's progress listener",
    )  # fmt: skip
    p.add_argument("--lease", type=float, default=6.0)
    p.add_argument("--poll-interval", type=float, default=0.5)
    p.add_argument("--handover-timeout", type=float, default=240.0)
    p.add_argument("--commit-timeout", type=float, default=30.0)
    p.add_argument("--stop-timeout", type=float, default=20.0)
    p.add_argument("--trigger", default="1 second", help="processing-time trigger")
    p.add_argument("--max-offsets-per-trigger", type=int, default=200)
    p.add_argument("--checkpoint-root", default="file:///tmp/sla-checkpoints")
    p.add_argument("--driver-memory", default="640m")
    p.add_argument("--master", default="local[1]", help="Spark master, e.g. spark://127.0.0.1:7077 (client mode)")
    p.add_argument("--conf", metavar="K=V", action="append", default=[], help="a Spark setting (repeatable), e.g. spark.cores.max=1")
    p.add_argument(
        "--claim-transaction-timeout-ms", type=int, default=None,
        help="kafka:// store: the claim writer's transaction timeout (the store's default if not given)",
    )  # fmt: skip
    p.add_argument(
        "--kafka-option", metavar="K=V", action="append", default=[],
        help="a kafka-python client option (repeatable) of the store, the follower's commits and fences and the sink's "
        "producers, e.g. security_protocol=SASL_PLAINTEXT; a value that parses as JSON is taken as such",
    )  # fmt: skip
    p.add_argument(
        "--source-option", metavar="K=V", action="append", default=[],
        help="an option of Spark's Kafka source (repeatable), verbatim, e.g. kafka.sasl.jaas.config=...",
    )  # fmt: skip
    p.add_argument(
        "--wait-for-plan", type=float, default=0.0, metavar="SECONDS",
        help="wait this long for a first plan in the store (the process may start while the planner still runs)",
    )  # fmt: skip
    p.add_argument("--sigstop-before-claim", action="store_true", help="SIGSTOP the process group before the first claim")
    p.add_argument(
        "--pause-on-usr1", action="store_true",
        help="after a SIGUSR1, SIGSTOP the process group just before the next batch's offsets are committed",
    )  # fmt: skip
    return p


def client_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``--kafka-option`` pairs as kafka-python settings: JSON values (numbers, booleans) as such."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _emit(kind: str, payload: Mapping[str, Any]) -> None:
    """One report line, written whole in one call: the log it goes to is shared with the
    driver's JVM, and unbuffered (PYTHONUNBUFFERED), ``print`` writes the text and its newline
    in two calls, between which a JVM log line can land on the same line."""
    sys.stdout.write(f"{kind} {json.dumps(payload, sort_keys=True)}\n")
    sys.stdout.flush()


class BatchSink:
    """The ``start(stream, checkpoint)`` of the follower: a ``foreachBatch`` query per generation."""

    def __init__(self, args: argparse.Namespace) -> None:
        from kafka import KafkaProducer

        self.args = args
        self.follower: Any = None
        self.batches = 0
        self.records = 0
        self.refused = 0
        self.pauses = 0
        self.restarts: dict[str, int] = {}
        self.stints: list[str] = []  # the label of every query started, in order (its records carry it)
        self._pause = threading.Event()
        # a broker that comes back is found within a second, not after a 30 s backoff
        common: dict[str, Any] = {
            "bootstrap_servers": args.bootstrap_servers, "acks": "all", "reconnect_backoff_max_ms": 1000,
            **client_options(args.kafka_option),
        }  # fmt: skip
        # the markers need no transaction: a marker only says when a completed batch ended
        self.markers = KafkaProducer(linger_ms=0, client_id=f"sla-markers-{args.consumer}", **common)
        # idempotent (kafka-python's default): its own retries never write a record twice
        self.plain = KafkaProducer(linger_ms=5, client_id=f"sla-sink-{args.consumer}", **common) if args.sink == "plain" else None

    def arm(self) -> None:
        """SIGUSR1: pause before the next commit of a batch that read records."""
        self._pause.set()

    def pause_here(self, why: str) -> bool:
        """SIGSTOP the whole process group (driver and JVM) here, once per ``arm()``; True
        once it has been resumed."""
        if not self._pause.is_set():
            return False
        self._pause.clear()
        self.pauses += 1
        _stop_group(self.args.consumer, why)
        return True

    def start(self, stream: Any, checkpoint: str) -> Any:
        # the follower names each query's checkpoint gen-<generation>-<incarnation[:8]>-<start>:
        # records carry "<incarnation[:8]>+<start>", one query of one incarnation
        _, _, incarnation, start = checkpoint.rstrip("/").rsplit("/", 1)[-1].split("-")
        incarnation = f"{incarnation}+{int(start)}"
        generation = int(stream.generation)
        process = self._batch_function(generation, incarnation)
        query = (
            stream.df.writeStream.foreachBatch(process)
            .queryName(f"pipeline-{self.args.consumer}-gen{generation}-{incarnation}")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=self.args.trigger)
            .start()
        )
        self.stints.append(incarnation)
        return query

    def _batch_function(self, generation: int, incarnation: str) -> Any:
        """The foreachBatch function of one query. Long because the proofs read its records
        and markers: what it writes, in which order, and when it stops itself are one story."""
        consumer, sink, follower = self.args.consumer, self.args.sink_topic, self.follower
        pid = os.getpid()

        def process(df: Any, batch_id: int) -> None:
            started = time.time()
            if not follower.lease_valid():
                # the follower stops this query without committing once it notices; whatever
                # is written regardless is fenced (kafka) or read again by a successor (plain)
                log.warning("%s gen %d batch %d: the lease is not valid now", consumer, generation, batch_id)
            rows = df.selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value").collect()
            if not rows:
                return
            ends: dict[TopicPartition, int] = {}
            for r in rows:
                tp = (str(r["topic"]), int(r["partition"]))
                ends[tp] = max(ends.get(tp, 0), int(r["offset"]) + 1)
            written = time.time()
            records = [
                (
                    f"{r['topic']}:{r['partition']}:{r['offset']}".encode(),
                    json.dumps(
                        {
                            "consumer": consumer,
                            "incarnation": incarnation,
                            "generation": generation,
                            "batch_id": int(batch_id),
                            "started": started,
                            "written": written,
                            "topic": r["topic"],
                            "partition": int(r["partition"]),
                            "offset": int(r["offset"]),
                            "value": r["value"],
                            "pid": pid,
                            "sink": self.args.sink,
                        },
                        separators=(",", ":"),
                    ).encode(),
                )
                for r in rows
            ]
            if self.plain is not None:
                self._send_plain(sink, records)
            else:
                self.pause_here(f"before the transaction of batch {batch_id}")
                self._write_transaction(ends, sink, records, f"{consumer} gen {generation} batch {batch_id}")
            ended = time.time()
            self.batches += 1
            self.records += len(rows)
            marker = {
                "consumer": consumer,
                "incarnation": incarnation,
                "generation": generation,
                "batch_id": int(batch_id),
                "started": started,
                "written": written,
                "ended": ended,
                "records": len(rows),
                "ends": {f"{t}:{p}": o for (t, p), o in sorted(ends.items())},
            }
            try:
                self.markers.send(markers_topic(sink), json.dumps(marker).encode()).get(timeout=SEND_TIMEOUT)
            except Exception as exc:  # noqa: BLE001 - the batch is written: a lost marker only loosens the analysis
                log.warning("%s gen %d batch %d: its marker was not written: %s", consumer, generation, batch_id, exc)

        return process

    def _send_plain(self, topic: str, records: Sequence[tuple[bytes, bytes]]) -> None:
        """Send the records outside any transaction: visible at once, whoever reads them again.
        The producer retries through a broker outage; a send that still fails fails the batch."""
        assert self.plain is not None
        futures = [self.plain.send(topic, key=key, value=value) for key, value in records]
        self.plain.flush(timeout=SEND_TIMEOUT)
        for future in futures:
            future.get(timeout=SEND_TIMEOUT)

    def _write_transaction(self, ends: Mapping[TopicPartition, int], topic: str, records: Sequence[tuple[bytes, bytes]], what: str) -> None:
        """Records and offsets in one transaction; a failure is retried while the lease runs
        (for ``--commit-timeout`` at most), a refusal never."""
        from spark_lag_assign.errors import CommitFencedError, KafkaCommitError

        deadline = time.monotonic() + self.args.commit_timeout
        while True:
            try:
                self.follower.write_batch(ends, topic, records)
                return
            except CommitFencedError as exc:
                self.refused += 1
                log.warning("%s refused (%d records): %s", what, len(records), exc)
                raise
            except KafkaCommitError as exc:
                if not self.follower.lease_valid() or time.monotonic() >= deadline:
                    raise  # the lapse stops the query; or Kafka kept failing: the query fails
                log.warning("%s: write failed, retrying: %s", what, exc)
                time.sleep(0.5)

    def close(self) -> None:
        for producer in (self.markers, self.plain):
            try:
                if producer is not None:
                    producer.close(timeout=5)
            except Exception:  # closing must not hide the run's outcome
                log.debug("closing a producer failed", exc_info=True)


def pause_listener(sink: BatchSink) -> Any:
    """A ``StreamingQueryListener`` that pauses (``BatchSink.pause_here``) on the progress
    report of a batch that read records. Added before the follower's own listener, it runs
    first on Spark's listener thread: the follower's commit of that batch comes after the pause."""
    from pyspark.sql.streaming import StreamingQueryListener

    class _PauseListener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            progress = event.progress
            if progress.numInputRows > 0 and sink.pause_here(f"before the commit of batch {progress.batchId}"):
                # resumed: this thread commits the batch at once, as the follower's listener
                # (next in line, on this thread) would; the follower's own loop, resumed at the
                # same moment, may otherwise stop the query before that listener gets to it
                sink.follower.committer.record(str(progress.id), [s.endOffset for s in progress.sources])

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return _PauseListener()


#: set by the SIGCONT handler (``main``): the process group was resumed
_CONTINUED = threading.Event()


def _stop_group(consumer: str, why: str) -> None:
    """SIGSTOP this process's whole group (driver and JVM); returns once it was resumed.
    The stop may reach this thread only after ``killpg`` returned, so it waits for SIGCONT."""
    _CONTINUED.clear()
    _emit("SIGSTOP", {"consumer": consumer, "wall": time.time(), "why": why})
    os.killpg(os.getpgid(0), signal.SIGSTOP)
    _CONTINUED.wait(3600)
    _emit("SIGCONT", {"consumer": consumer, "wall": time.time()})


def _stop_before_claim(store: Any) -> None:
    """Make the first ``claim_writer`` call SIGSTOP the whole process group first."""
    original = store.claim_writer

    def claim_writer(consumer: str) -> Any:
        store.claim_writer = original
        _stop_group(consumer, "before the first claim")
        return original(consumer)

    store.claim_writer = claim_writer


def event_payload(consumer: str, e: Any, offset: float, stint: str | None = None) -> dict[str, Any]:
    """An ``EVENT`` line's payload: the follower's event with its times on the wall clock
    (``offset``: this process's wall minus monotonic clock), when it happened, not when printed."""
    out: dict[str, Any] = {
        "consumer": consumer, "kind": e.kind, "generation": e.generation, "assign": e.assign,
        "detail": e.detail, "wall": e.at + offset,
    }  # fmt: skip
    if e.began is not None:
        out["began"] = e.began + offset
    if stint is not None:
        out["stint"] = stint
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """The pipeline process the proofs start. Long because it wires Spark, the store, the
    follower, its sinks and the staged faults (SIGSTOP points) in the order they start."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("kafka", "py4j"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from spark_lag_assign.consume import PlanFollower
    from spark_lag_assign.spark.session import local_session
    from spark_lag_assign.store import ClaimFencedError, open_store

    conf = dict(kv.split("=", 1) for kv in args.conf)
    spark = local_session(
        f"sla-pipeline-{args.consumer}",
        master=args.master,
        # jars given as settings (a submitted application: spark-submit --jars or --conf) replace
        # the checkout's, which a packed environment on a cluster does not have
        with_kafka="spark.jars" not in conf,
        extra={
            "spark.driver.memory": args.driver_memory,
            "spark.sql.shuffle.partitions": "1",
            "spark.ui.enabled": "false",
            "spark.sql.execution.arrow.pyspark.enabled": "false",
            "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
            "spark.sql.streaming.minBatchesToRetain": "5",
            **conf,
        },
    )
    spark.sparkContext.setLogLevel("WARN")
    settings = {} if args.claim_transaction_timeout_ms is None else {"claim_transaction_timeout_ms": args.claim_transaction_timeout_ms}
    login = client_options(args.kafka_option)
    store = open_store(args.store, client_options=login, **settings)
    if args.wait_for_plan > 0 and store.wait_for_plan(0, args.wait_for_plan) is None:
        log.error("no plan in %s within %gs", args.store, args.wait_for_plan)
        store.close()
        spark.stop()
        return EXIT_ERROR
    signal.signal(signal.SIGCONT, lambda *_: _CONTINUED.set())
    if args.sigstop_before_claim:
        _stop_before_claim(store)
    sink = BatchSink(args)
    if args.pause_on_usr1:
        signal.signal(signal.SIGUSR1, lambda *_: sink.arm())
        if args.sink == "plain":  # its offsets are committed by the follower's listener, added after this one
            spark.streams.addListener(pause_listener(sink))
    follower = PlanFollower(
        spark,
        store,
        args.consumer,
        sink.start,
        checkpoint_root=args.checkpoint_root,
        kafka_options={
            "kafka.bootstrap.servers": args.bootstrap_servers,
            "maxOffsetsPerTrigger": args.max_offsets_per_trigger,
            # shorter than the test's pauses, so a batch in flight when the driver is
            # SIGSTOPped fails on resuming, as it does after a long GC pause in production
            # (Kafka's admin client needs request.timeout.ms <= default.api.timeout.ms)
            "kafka.default.api.timeout.ms": 20000,
            "kafka.request.timeout.ms": 10000,
            **dict(kv.split("=", 1) for kv in args.source_option),
        },
        client_options=login,
        lease=args.lease,
        poll_interval=args.poll_interval,
        handover_timeout=args.handover_timeout,
        commit_timeout=args.commit_timeout,
        stop_timeout=args.stop_timeout,
    )
    sink.follower = follower
    signal.signal(signal.SIGTERM, lambda *_: follower.stop())
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["summary"] = follower.run()
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which decides the exit status
            outcome["error"] = exc

    thread = threading.Thread(target=run, name=f"follow-{args.consumer}")
    _emit("READY", {"consumer": args.consumer, "pid": os.getpid(), "wall": time.time(), "sink": args.sink})
    thread.start()
    seen = starts = 0
    try:
        while True:
            thread.join(timeout=0.2)
            new = follower.events[seen:]  # the follower's thread appends on: count only what is emitted
            seen += len(new)
            offset = time.time() - time.monotonic()
            for e in new:
                stint = None
                if e.kind == "start":  # the sink named the query before the follower recorded its start
                    stint = sink.stints[starts] if starts < len(sink.stints) else "?"
                    starts += 1
                _emit("EVENT", event_payload(args.consumer, e, offset, stint))
            if not thread.is_alive():
                break
    finally:
        sink.close()
        store.close()
    status = EXIT_OK
    error = outcome.get("error")
    if isinstance(error, ClaimFencedError):
        status = EXIT_FENCED
        _emit("SUMMARY", {"consumer": args.consumer, "reason": "fenced", "error": str(error)})
    elif error is not None:
        log.error("%s failed", args.consumer, exc_info=error)
        status = EXIT_ERROR
        _emit("SUMMARY", {"consumer": args.consumer, "reason": "error", "error": f"{type(error).__name__}: {error}"})
    else:
        s = outcome["summary"]
        _emit("SUMMARY", {
            "consumer": s.consumer, "reason": s.reason, "generations": s.generations,
            "incarnation": s.incarnation, "commit_failures": s.commit_failures, "refused": s.refused,
            "committed": {f"{t}:{p}": o for (t, p), o in sorted(s.committed.items())},
            "batches": sink.batches, "records": sink.records, "refused_batches": sink.refused,
            "sink": args.sink, "pauses": sink.pauses,
        })  # fmt: skip
    spark.stop()
    return status


if __name__ == "__main__":
    raise SystemExit(main())
