"""One pipeline of the multi-process handover proof, and the checks over what its sinks wrote.

    python -m spark_lag_assign.testing.pipeline_app --store kafka://127.0.0.1:9092/orders \\
        --consumer A --bootstrap-servers 127.0.0.1:9092 --sink-topic orders-sink --lease 6

One process = one SparkSession (``local[1]`` unless ``--master`` names a cluster, e.g. a
standalone master in client mode, with ``--conf`` settings such as ``spark.cores.max=1``;
small, UI off) + one ``PlanFollower``
for one consumer id, as one Spark application on one host of a cluster would be. Its query
is a ``foreachBatch`` sink that collects each micro-batch's (topic, partition, offset) rows
and hands them to ``PlanFollower.write_batch``: the records go to ``--sink-topic`` and the
batch's end offsets to the consumer group in ONE Kafka transaction under the consumer's
fenced transactional id, so a pipeline that was replaced writes nothing a
``read_committed`` reader sees. Every record's value is JSON::

    {"consumer", "incarnation", "generation", "batch_id", "started", "written",
     "topic", "partition", "offset", "value", "pid"}

``incarnation`` is the follower's (the part of the checkpoint it names that the claim
writer's incarnation id begins with, then ``+N``: the follower's N-th query, for a query
restarted under the same generation, as after a lapsed lease, numbers its batches afresh), ``generation`` the plan generation of the query,
``started`` the wall clock when the batch function began (before Spark's rows are read),
``written`` the wall clock when the records went to the transaction. After the transaction
committed, one *batch marker* goes to ``<sink-topic>.batches`` with ``ended``, the wall
clock after the write: a batch's interval [started, ended] covers its reading and its
commit. A process killed between the commit and the marker leaves a batch without one;
the analysis then bounds its end by the slowest write it saw (``batches_of``).

Checkpoints go under ``--checkpoint-root`` (default ``file:///tmp/sla-checkpoints``: in a
``NamespacedProcess`` that is the process's private tmpfs). SIGTERM ends the run as the
protocol's step 9 says (stop between batches, commit, release). ``--sigstop-before-claim``
makes the process SIGSTOP its whole process group (driver and JVM) once it has read the
plan and before its first claim, for the test to resume it with SIGCONT whenever it wants.

Every follower event is logged as a line ``EVENT {json}``, and the run's end as
``SUMMARY {json}``; exit status 0 after a clean end, 3 if a newer incarnation fenced this
one, 1 on any other error.

The second half of this module is pure: parsing the sink's records and the batch markers,
and the checks the proof asserts (losses, overlapping batches, duplicates and their
bound, commits that went backwards), unit-tested in tests/unit/test_handover_analysis.py.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import signal
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_fixed

log = logging.getLogger("pipeline_app")

TopicPartition = tuple[str, int]

#: the batch markers' topic of a sink topic
MARKERS_SUFFIX = ".batches"

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
    p.add_argument(
        "--conf", metavar="K=V", action="append", default=[], help="a Spark setting (repeatable), e.g. spark.cores.max=1"
    )
    p.add_argument("--sigstop-before-claim", action="store_true", help="SIGSTOP the process group before the first claim")
    return p


def _emit(kind: str, payload: Mapping[str, Any]) -> None:
    print(f"{kind} {json.dumps(payload, sort_keys=True)}", flush=True)


class BatchSink:
    """The ``start(stream, checkpoint)`` of the follower: a ``foreachBatch`` query per generation."""

    def __init__(self, args: argparse.Namespace) -> None:
        from kafka import KafkaProducer

        self.args = args
        self.follower: Any = None
        self.batches = 0
        self.records = 0
        self.refused = 0
        # the markers need no transaction: a marker only says when a committed batch ended
        self.markers = KafkaProducer(
            bootstrap_servers=args.bootstrap_servers, acks="all", linger_ms=0, client_id=f"sla-markers-{args.consumer}"
        )

    def start(self, stream: Any, checkpoint: str) -> Any:
        # the follower names each query's checkpoint gen-<generation>-<incarnation[:8]>-<start>:
        # records carry "<incarnation[:8]>+<start>", one query of one incarnation
        _, _, incarnation, start = checkpoint.rstrip("/").rsplit("/", 1)[-1].split("-")
        incarnation = f"{incarnation}+{int(start)}"
        generation = int(stream.generation)
        process = self._batch_function(generation, incarnation)
        return (
            stream.df.writeStream.foreachBatch(process)
            .queryName(f"pipeline-{self.args.consumer}-gen{generation}-{incarnation}")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime=self.args.trigger)
            .start()
        )

    def _batch_function(self, generation: int, incarnation: str) -> Any:
        from spark_lag_assign.errors import CommitFencedError, KafkaCommitError

        consumer, sink, follower = self.args.consumer, self.args.sink_topic, self.follower
        pid = os.getpid()

        def process(df: Any, batch_id: int) -> None:
            started = time.time()
            if not follower.lease_valid():
                # the follower stops this query without committing once it notices; whatever
                # is written regardless is fenced if someone took over
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
                        },
                        separators=(",", ":"),
                    ).encode(),
                )
                for r in rows
            ]
            # Kafka failed, nothing committed: try again, ten times at most; a refusal is final
            policy = Retrying(
                retry=retry_if_exception(lambda e: isinstance(e, KafkaCommitError) and not isinstance(e, CommitFencedError)),
                stop=stop_after_attempt(10),
                wait=wait_fixed(0.5),
                before_sleep=lambda state: log.warning(
                    "%s gen %d batch %d: write failed, retrying: %s",
                    consumer, generation, batch_id, state.outcome.exception() if state.outcome else None,
                ),
                reraise=True,
            )  # fmt: skip
            try:
                policy(follower.write_batch, ends, sink, records)
            except CommitFencedError as exc:
                self.refused += 1
                log.warning("%s gen %d batch %d refused (%d records): %s", consumer, generation, batch_id, len(rows), exc)
                raise
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
            self.markers.send(markers_topic(sink), json.dumps(marker).encode()).get(timeout=30)

        return process

    def close(self) -> None:
        try:
            self.markers.close(timeout=5)
        except Exception:  # closing must not hide the run's outcome
            log.debug("closing the marker producer failed", exc_info=True)


def _stop_before_claim(store: Any) -> None:
    """Make the first ``claim_writer`` call SIGSTOP the whole process group first."""
    original = store.claim_writer

    def claim_writer(consumer: str) -> Any:
        store.claim_writer = original
        _emit("SIGSTOP", {"consumer": consumer, "wall": time.time(), "why": "before the first claim"})
        os.killpg(os.getpgid(0), signal.SIGSTOP)
        _emit("SIGCONT", {"consumer": consumer, "wall": time.time()})
        return original(consumer)

    store.claim_writer = claim_writer


def main(argv: Sequence[str] | None = None) -> int:
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
    store = open_store(args.store)
    if args.sigstop_before_claim:
        _stop_before_claim(store)
    sink = BatchSink(args)
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
        },
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
    _emit("READY", {"consumer": args.consumer, "pid": os.getpid(), "wall": time.time()})
    thread.start()
    seen = 0
    try:
        while True:
            thread.join(timeout=0.2)
            events = follower.events
            for e in events[seen:]:
                _emit("EVENT", {"consumer": args.consumer, "kind": e.kind, "generation": e.generation,
                                "assign": e.assign, "detail": e.detail, "wall": time.time()})  # fmt: skip
            seen = len(events)
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
        })  # fmt: skip
    spark.stop()
    return status


# -- the analysis (pure) ----------------------------------------------------------------------


@dataclass(frozen=True)
class SinkRecord:
    """One record a pipeline's sink wrote (a committed one, read with ``read_committed``)."""

    consumer: str
    incarnation: str
    generation: int
    batch_id: int
    started: float
    written: float
    topic: str
    partition: int
    offset: int

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def stint(self) -> tuple[str, str, int]:
        """One query: a consumer's incarnation reading under one generation."""
        return (self.consumer, self.incarnation, self.generation)

    @property
    def batch(self) -> tuple[str, str, int, int]:
        return (self.consumer, self.incarnation, self.generation, self.batch_id)


def parse_record(value: bytes | str) -> SinkRecord:
    d = json.loads(value)
    return SinkRecord(
        str(d["consumer"]), str(d["incarnation"]), int(d["generation"]), int(d["batch_id"]),
        float(d["started"]), float(d["written"]), str(d["topic"]), int(d["partition"]), int(d["offset"]),
    )  # fmt: skip


def parse_marker(value: bytes | str) -> tuple[tuple[str, str, int, int], float]:
    """(batch key, ended) of a batch marker."""
    d = json.loads(value)
    return (str(d["consumer"]), str(d["incarnation"]), int(d["generation"]), int(d["batch_id"])), float(d["ended"])


@dataclass
class Batch:
    """One committed micro-batch: who read what, and when ([started, ended])."""

    key: tuple[str, str, int, int]
    started: float
    written: float
    ended: float
    ended_known: bool  # False: no marker (killed right after its commit), ``ended`` is a bound
    offsets: dict[TopicPartition, list[int]] = field(default_factory=dict)

    @property
    def consumer(self) -> str:
        return self.key[0]

    @property
    def incarnation(self) -> str:
        return self.key[1]

    @property
    def stint(self) -> tuple[str, str, int]:
        return self.key[:3]

    def describe(self) -> str:
        c, i, g, b = self.key
        return f"{c}/{i}/gen{g}/batch{b} [{self.started:.3f}, {self.ended:.3f}]"


def batches_of(
    records: Iterable[SinkRecord], ended: Mapping[tuple[str, str, int, int], float], slack: float | None = None
) -> list[Batch]:
    """The batches the records came from, each ending when its marker says.

    A batch without a marker ends at ``written + slack``; ``slack`` defaults to the longest
    write (``ended - written``) among the batches that have one (a process killed between
    its commit and its marker wrote at most that long)."""
    found: dict[tuple[str, str, int, int], Batch] = {}
    for r in records:
        b = found.get(r.batch)
        if b is None:
            b = found[r.batch] = Batch(r.batch, r.started, r.written, r.written, False)
        b.started = min(b.started, r.started)
        b.written = max(b.written, r.written)
        b.offsets.setdefault(r.tp, []).append(r.offset)
    known = [ended[k] - b.written for k, b in found.items() if k in ended]
    bound = slack if slack is not None else max(known, default=0.0)
    for k, b in found.items():
        if k in ended:
            b.ended, b.ended_known = max(ended[k], b.written), True
        else:
            b.ended = b.written + bound
    return sorted(found.values(), key=lambda b: (b.started, b.key))


@dataclass(frozen=True)
class Overlap:
    tp: TopicPartition
    first: Batch
    second: Batch

    def describe(self) -> str:
        return f"{self.tp[0]}-{self.tp[1]}: {self.first.describe()} overlaps {self.second.describe()}"


def overlaps(batches: Sequence[Batch], *, across: str = "stint") -> list[Overlap]:
    """Pairs of batches of different readers (``across``: "stint" = consumer, incarnation and
    generation; "incarnation") that read one partition in intersecting [started, ended]."""
    by_tp: dict[TopicPartition, list[Batch]] = defaultdict(list)
    for b in batches:
        for tp in b.offsets:
            by_tp[tp].append(b)
    reader = (lambda b: b.stint) if across == "stint" else (lambda b: b.key[:2])
    found = []
    for tp, group in sorted(by_tp.items()):
        group = sorted(group, key=lambda b: (b.started, b.key))
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                if b.started > a.ended:
                    break  # sorted by start: no later batch begins before ``a`` ends either
                if reader(a) != reader(b) and b.started <= a.ended and a.started <= b.ended:
                    found.append(Overlap(tp, a, b))
    return found


def handover_gaps(batches: Sequence[Batch]) -> list[tuple[TopicPartition, float, Batch, Batch]]:
    """Per partition, each change of reader (stint) between consecutive batches: (tp, gap, the
    earlier reader's last batch, the next reader's first); the gap is next.started - last.ended
    (negative when they overlap)."""
    by_tp: dict[TopicPartition, list[Batch]] = defaultdict(list)
    for b in batches:
        for tp in b.offsets:
            by_tp[tp].append(b)
    found = []
    for tp, group in sorted(by_tp.items()):
        group = sorted(group, key=lambda b: (b.started, b.key))
        for a, b in itertools.pairwise(group):
            if a.stint != b.stint:
                found.append((tp, b.started - a.ended, a, b))
    return found


def losses(records: Iterable[SinkRecord], ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, list[tuple[int, int]]]:
    """Per partition, the ranges [a, b) of offsets below its end that no record covers, and
    (as (offset, -1)) offsets the sinks have beyond the end (which nobody produced)."""
    seen: dict[TopicPartition, set[int]] = defaultdict(set)
    for r in records:
        seen[r.tp].add(r.offset)
    out: dict[TopicPartition, list[tuple[int, int]]] = {}
    for tp in sorted(set(ends) | set(seen)):
        end = ends.get(tp, 0)
        missing: list[tuple[int, int]] = []
        start = None
        for o in range(end):
            if o not in seen[tp]:
                start = o if start is None else start
            elif start is not None:
                missing.append((start, o))
                start = None
        if start is not None:
            missing.append((start, end))
        missing += [(o, -1) for o in sorted(seen[tp]) if o >= end]
        if missing:
            out[tp] = missing
    return out


@dataclass
class Duplicates:
    """What was read more than once, and whether it stays within the bound."""

    records: int  # records in the sinks beyond the first copy of each offset
    offsets: int  # offsets with more than one copy
    boundaries: int  # changes of reader (stint) of a partition: handovers and restarts
    handovers: int  # the boundaries where the consumer or its incarnation changed
    violations: list[str]
    per_boundary: dict[tuple[TopicPartition, tuple[str, str, int]], int] = field(default_factory=dict)


def duplicates(records: Iterable[SinkRecord], max_per_batch: int) -> Duplicates:
    """Duplicates and their bound: a record is read again only around a handover, and at most
    one batch per moved partition per handover.

    Per partition, the stints (one query of one incarnation) that read it are ordered by when
    they began. Every copy of an offset after the first must come from a later stint than
    the first copy (never twice within one query); at each stint boundary the offsets read
    again must all come from ONE batch of the earlier readers (the batch a stop or a lapse
    interrupted, whose commit never happened), hence number at most ``max_per_batch`` (the
    source's ``maxOffsetsPerTrigger``).
    """
    records = list(records)
    by_tp: dict[TopicPartition, list[SinkRecord]] = defaultdict(list)
    for r in records:
        by_tp[r.tp].append(r)
    violations: list[str] = []
    total = dup_offsets = boundaries = handovers = 0
    per_boundary: dict[tuple[TopicPartition, tuple[str, str, int]], int] = {}
    for tp, rs in sorted(by_tp.items()):
        name = f"{tp[0]}-{tp[1]}"
        first_start: dict[tuple[str, str, int], float] = {}
        for r in rs:
            first_start[r.stint] = min(first_start.get(r.stint, r.started), r.started)
        order = sorted(first_start, key=lambda s: (first_start[s], s))
        rank = {s: i for i, s in enumerate(order)}
        boundaries += len(order) - 1
        handovers += sum(1 for a, b in itertools.pairwise(order) if a[:2] != b[:2])
        copies: dict[int, list[SinkRecord]] = defaultdict(list)
        for r in rs:
            copies[r.offset].append(r)
        again: dict[tuple[str, str, int], list[tuple[int, tuple[str, str, int, int]]]] = defaultdict(list)
        for offset, cs in sorted(copies.items()):
            if len(cs) == 1:
                continue
            dup_offsets += 1
            total += len(cs) - 1
            cs = sorted(cs, key=lambda r: (rank[r.stint], r.started))
            stints = [r.stint for r in cs]
            if len(set(stints)) != len(stints):
                violations.append(f"{name}@{offset} read twice by one query {cs[0].stint}")
            for earlier, later in itertools.pairwise(cs):
                again[later.stint].append((offset, earlier.batch))
        for stint, hits in sorted(again.items(), key=lambda kv: rank[kv[0]]):
            per_boundary[(tp, stint)] = len(hits)
            sources = {batch for _, batch in hits}
            if len(sources) > 1:
                violations.append(
                    f"{name}: {stint} read again {len(hits)} offsets from {len(sources)} earlier batches "
                    f"{sorted(sources)} (at most one batch per handover)"
                )
            if len(hits) > max_per_batch:
                violations.append(f"{name}: {stint} read again {len(hits)} offsets, more than a batch ({max_per_batch})")
    return Duplicates(total, dup_offsets, boundaries, handovers, violations, per_boundary)


def backwards(samples: Sequence[tuple[float, Mapping[TopicPartition, int]]]) -> list[str]:
    """Every time a partition's committed offset was seen lower than in an earlier sample
    (samples in the order they were taken; a partition missing from a sample is skipped)."""
    high: dict[TopicPartition, tuple[float, int]] = {}
    found = []
    for at, offsets in samples:
        for tp, o in sorted(offsets.items()):
            if tp in high and o < high[tp][1]:
                found.append(f"{tp[0]}-{tp[1]}: {high[tp][1]} at {high[tp][0]:.3f} then {o} at {at:.3f}")
            if tp not in high or o >= high[tp][1]:
                high[tp] = (at, o)
    return found


if __name__ == "__main__":
    raise SystemExit(main())
