"""A plain kafka-python consumer whose group balances lag: the seeds' own form, no Spark.

    python jobs/kafka_python_consumer.py --bootstrap-servers 127.0.0.1:9092 --group orders \\
        --topics orders --strategy lag-sticky --reset earliest

Run it several times (on one host or many) with the same ``--group``: whichever member
leads a rebalance assigns the partitions with the planner's strategy (``lag``,
``lag-sticky``, ``sticky``, ...), from a lag snapshot that a ``GroupLagMonitor`` refreshes in
the background every ``--lag-interval-s`` seconds. ``--cooperative`` uses the KIP-429
protocol (every member of a group must use the same); ``--instance-id`` makes the member
static (``group.instance.id``).

Each batch of records is "processed" (counted, and written to ``--journal`` if given) and
its offsets committed before the next poll, so a rebalance re-delivers at most the batch
in flight. The journal has one JSON object per line: ``assigned`` / ``revoked`` / ``lost``
(the rebalance listener's calls), ``records`` (topic, partition, offset of each record),
``led`` (what this member's assignor did when it led a rebalance) and ``stopped``.
``--start-when-exists PATH`` joins the group but keeps its partitions paused, committing
nothing, until PATH exists (to line a group up before it starts reading).

Runs until SIGTERM / Ctrl-C (or ``--duration-s``), then leaves the group and prints what it
read per partition. Exit status 0, or 1 with one line on stderr if Kafka cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from spark_lag_assign.core.lists import comma_list

log = logging.getLogger("kafka_python_consumer")

STRATEGIES = ("lag", "lag-sticky", "sticky", "range", "roundrobin", "shuffle")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bootstrap-servers", required=True)
    p.add_argument("--group", required=True, help="the consumer group id")
    p.add_argument("--topics", required=True, help="comma-separated topics to subscribe to")
    p.add_argument("--strategy", default="lag-sticky", choices=STRATEGIES)
    p.add_argument("--cooperative", action="store_true", help="KIP-429 incremental rebalancing")
    p.add_argument("--instance-id", help="group.instance.id: a static member")
    p.add_argument("--name", help="this member's name in the journal (default: instance id or client id)")
    p.add_argument("--reset", default="earliest", choices=("earliest", "latest"), help="auto.offset.reset")
    p.add_argument("--session-timeout-ms", type=int, default=10000)
    p.add_argument("--heartbeat-interval-ms", type=int, default=1000)
    p.add_argument("--max-poll-interval-ms", type=int, default=30000)
    p.add_argument("--max-poll-records", type=int, default=500)
    p.add_argument("--lag-interval-s", type=float, default=5.0, help="how often the lag snapshot is refreshed")
    p.add_argument("--wait-lags-s", type=float, default=10.0, help="wait this long for a first lag snapshot before joining")
    p.add_argument("--journal", type=Path, help="append JSON-lines events here")
    p.add_argument("--start-when-exists", type=Path, help="keep partitions paused until this file exists")
    p.add_argument("--duration-s", type=float, help="stop after this many seconds")
    return p


class Journal:
    """JSON lines, flushed per event, so that a killed member's journal is whole up to its death."""

    def __init__(self, member: str, out: IO[str] | None) -> None:
        self.member = member
        self._out = out
        self._lock = threading.Lock()

    def write(self, event: str, **fields: Any) -> None:
        if self._out is None:
            return
        line = json.dumps({"t": time.time(), "member": self.member, "event": event, **fields})
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()


def _tps(partitions: Any) -> list[list[Any]]:
    return sorted([tp.topic, tp.partition] for tp in partitions)


def run(args: argparse.Namespace, stop: threading.Event, journal_out: IO[str] | None = None) -> dict[tuple[str, int], int]:
    """Consume until ``stop`` is set; return records read per partition."""
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.errors import CommitFailedError, KafkaError

    from spark_lag_assign.group import GroupLagMonitor, assignor_class, subscribe

    topics = comma_list(args.topics)
    name = args.name or args.instance_id or f"consumer-{args.group}"
    journal = Journal(name, journal_out)
    monitor = GroupLagMonitor(args.bootstrap_servers, args.group, topics=topics, reset=args.reset, interval_s=args.lag_interval_s)
    if args.wait_lags_s > 0 and not monitor.wait_ready(args.wait_lags_s):
        log.warning("no lag snapshot after %.0f s; joining anyway (count balance until one arrives)", args.wait_lags_s)
    assignor = assignor_class(args.strategy, cooperative=args.cooperative)(monitor)
    holding = [args.start_when_exists is not None]
    consumer: Any = None

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            journal.write("revoked", partitions=_tps(revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            journal.write("assigned", partitions=_tps(assigned))
            if holding[0] and assigned:
                consumer.pause(*assigned)

        def on_partitions_lost(self, lost: Any) -> None:
            journal.write("lost", partitions=_tps(lost))

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap_servers,
        group_id=args.group,
        group_instance_id=args.instance_id,
        client_id=name,
        auto_offset_reset=args.reset,
        enable_auto_commit=False,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        max_poll_interval_ms=args.max_poll_interval_ms,
        max_poll_records=args.max_poll_records,
        partition_assignment_strategy=[assignor],
    )
    counts: dict[tuple[str, int], int] = {}
    led = None
    try:
        unknown = subscribe(consumer, topics, Listener())  # loads metadata first: see spark_lag_assign.group.consumer
        if unknown:
            log.warning("topic(s) not in the cluster (yet): %s", ", ".join(sorted(unknown)))
        while not stop.is_set():
            if holding[0] and args.start_when_exists.exists():
                holding[0] = False
                consumer.resume(*consumer.paused())
                journal.write("started")
            elif holding[0]:
                consumer.pause(*consumer.assignment())
            batches = consumer.poll(timeout_ms=200)
            if assignor.last is not led:
                led = assignor.last
                journal.write(
                    "led",
                    members=led.members,
                    lagged=led.lagged,
                    lag_source=led.lag_source,
                    moved=led.moved,
                    deferred=led.deferred,
                    optimality=led.optimality,
                    count_spread=led.count_spread,
                    ms=round(1000 * led.seconds, 1),
                    bad_members=list(led.bad_members),
                )
            if not batches:
                continue
            journal.write("records", records=[[r.topic, r.partition, r.offset] for rs in batches.values() for r in rs])
            for tp, records in batches.items():
                counts[(tp.topic, tp.partition)] = counts.get((tp.topic, tp.partition), 0) + len(records)
            if not holding[0]:
                try:
                    consumer.commit()
                except (CommitFailedError, KafkaError) as exc:  # a rebalance began: the batch may come again
                    journal.write("commit-failed", error=type(exc).__name__)
    finally:
        journal.write("stopped")
        consumer.close()
        monitor.close()
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stderr)
    logging.getLogger("kafka").setLevel(logging.WARNING)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.duration_s:
        timer = threading.Timer(args.duration_s, stop.set)
        timer.daemon = True
        timer.start()
    out = open(args.journal, "a") if args.journal else None  # noqa: SIM115 - closed below
    try:
        counts = run(args, stop, out)
    except Exception as exc:  # one line, as every job of this repository reports failures
        from kafka.errors import KafkaError

        if not isinstance(exc, KafkaError):
            raise
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if out is not None:
            out.close()
    for (topic, partition), n in sorted(counts.items()):
        print(f"{topic}-{partition}: {n} record(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
