"""Proof without a cluster (issue 10, part 3): the planner and three pipelines as separate OS
processes, each in its own mount namespace with a private /tmp (``NamespacedProcess``),
sharing only the local broker and the ``kafka://`` store in it, while producers keep writing.

The plan changes five times: A and B (1), C joins (2), A leaves (3), A comes back (4), a
topic grows (5). Faults, each on a whole process group (driver and Spark JVM):

- C is SIGSTOPped after it read the plan and before its first claim, and resumed only after
  the next generation was published;
- A is SIGSTOPped across generations 3 and 4, for far longer than its lease, while the plan
  moves its partitions to B and back (A -> B -> A);
- B is SIGKILLed while reading, and restarted under the same consumer id.

Every pipeline writes each micro-batch through ``PlanFollower.write_batch`` (records and
offsets in one transaction, fenced per consumer), stamping every record with who read it,
under which generation, in which batch and when (``spark_lag_assign.testing.pipeline_app``).
At the end, from those records as a ``read_committed`` reader sees them: nothing lost, no
two readers of one partition in overlapping micro-batches, duplicates only around handovers
and at most one batch per moved partition per handover, and the group's commits at the end
offsets, never seen going backwards in samples taken every 0.5 s during the run.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spark_lag_assign.testing import pipeline_app as app
from spark_lag_assign.testing.localkafka import LocalKafka, commit, create_topic
from spark_lag_assign.testing.namespaces import NamespacedProcess, require_namespaces

STORE_NAME = "handover-proof"
GROUP = "handover-proof"
ORDERS, PAYMENTS = "hp-orders", "hp-payments"
PARTITIONS = {ORDERS: 4, PAYMENTS: 2}
GROWN = 4  # PAYMENTS grows to this many partitions in generation 5
SINK = "hp-sink"
LEASE = 6.0
POLL = 0.5
MAX_PER_TRIGGER = 200  # one micro-batch holds at most this many records: the duplicate bound
PER_ROUND, ROUND_PAUSE = 2, 0.1  # records per partition every 100 ms
STEP_TIMEOUT = 120.0


def namespace_check() -> None:
    require_namespaces()  # a NamespaceError fails the test: never a skip that turns it green


def test_namespaces_keep_their_tmp_to_themselves(tmp_path: Path) -> None:
    namespace_check()
    marker = f"sla-isolation-{time.time_ns()}"
    writer = NamespacedProcess(
        "writer", ["sh", "-c", f'echo secret > /tmp/{marker} && test -f /tmp/{marker} && echo "written" && sleep 3'], tmp_path / "w.log"
    ).start()
    try:
        deadline = time.monotonic() + 20
        while "written" not in writer.log_text():
            assert writer.alive or "written" in writer.log_text(), writer.log_text()
            assert time.monotonic() < deadline, writer.log_text()
            time.sleep(0.05)
        # while the writer still runs (its tmpfs mounted): neither the test nor another namespace sees it
        assert not Path(f"/tmp/{marker}").exists()
        reader = NamespacedProcess(
            "reader", ["sh", "-c", f"ls -A /tmp; test ! -e /tmp/{marker} && echo unseen; touch {Path(__file__)} || echo read-only"],
            tmp_path / "r.log",
        ).start()
        assert reader.wait(20) == 0
        out = reader.log_text()
        assert "unseen" in out and "read-only" in out, out
        assert writer.wait(20) == 0
    finally:
        writer.close()


# -- the scenario's moving parts -----------------------------------------------------------------


class Producers(threading.Thread):
    """Appends ``PER_ROUND`` records to every partition of every topic each ``ROUND_PAUSE``,
    counting what the broker acknowledged; ``grow`` adds partitions as it runs."""

    def __init__(self, bootstrap: str, partitions: dict[str, int]) -> None:
        super().__init__(name="producers", daemon=True)
        self.bootstrap = bootstrap
        self.partitions = dict(partitions)
        self.sent: dict[tuple[str, int], int] = {(t, p): 0 for t, n in partitions.items() for p in range(n)}
        self.halt = threading.Event()
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._reopen = False

    def grow(self, topic: str, total: int) -> None:
        with self._lock:
            self.partitions[topic] = total
            for p in range(total):
                self.sent.setdefault((topic, p), 0)
            self._reopen = True

    def run(self) -> None:
        from kafka import KafkaProducer

        def open_producer() -> Any:
            return KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5, client_id="hp-producer")

        producer = open_producer()
        try:
            while not self.halt.is_set():
                with self._lock:
                    if self._reopen:  # a fresh client knows the new partitions at once
                        producer.close()
                        producer = open_producer()
                        self._reopen = False
                    targets = sorted(self.sent)
                futures = []
                for t, p in targets:
                    for seq in range(self.sent[(t, p)], self.sent[(t, p)] + PER_ROUND):
                        futures.append(((t, p), producer.send(t, value=f"{t}:{p}:{seq}".encode(), partition=p)))
                producer.flush(timeout=60)
                for tp, f in futures:
                    f.get(timeout=60)
                    self.sent[tp] += 1
                self.halt.wait(ROUND_PAUSE)
        except BaseException as exc:  # the test reports it
            self.error = exc
        finally:
            producer.close()

    def stop(self) -> dict[tuple[str, int], int]:
        self.halt.set()
        self.join(60)
        assert not self.is_alive(), "the producers did not stop"
        if self.error is not None:
            raise AssertionError("the producers failed") from self.error
        return dict(self.sent)


class CommitSampler(threading.Thread):
    """The group's committed offsets every 0.5 s (``samples``: (wall clock, {tp: offset})); a
    failed sample (the broker away) is counted and the client opened again."""

    def __init__(self, bootstrap: str, group: str = GROUP) -> None:
        super().__init__(name="commit-sampler", daemon=True)
        self.bootstrap, self.group = bootstrap, group
        self.samples: list[tuple[float, dict[tuple[str, int], int]]] = []
        self.halt = threading.Event()
        self.errors = 0

    def run(self) -> None:
        from kafka import KafkaAdminClient

        admin = None
        while not self.halt.is_set():
            try:
                if admin is None:
                    admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="hp-sampler", request_timeout_ms=5000)
                found = admin.list_group_offsets(self.group)[self.group]
                self.samples.append((time.time(), {(tp.topic, tp.partition): om.offset for tp, om in found.items() if om.offset >= 0}))
            except Exception:
                self.errors += 1
                if admin is not None:
                    with contextlib.suppress(Exception):
                        admin.close()
                    admin = None
            self.halt.wait(0.5)
        if admin is not None:
            admin.close()

    def latest(self) -> dict[tuple[str, int], int]:
        return dict(self.samples[-1][1]) if self.samples else {}


class ProcessScenario:
    """The processes of one run, their logs, and waiting on what they report (shared by the
    local proof here and the cluster proof in tests/cluster)."""

    def __init__(self, bootstrap: str, store: str, logs: Path, *, label: str = "", step_timeout: float = STEP_TIMEOUT) -> None:
        self.bootstrap, self.store, self.logs = bootstrap, store, logs
        self.label, self.step_timeout = label, step_timeout
        self.processes: list[NamespacedProcess] = []
        self.pipelines: dict[str, NamespacedProcess] = {}
        self.t0 = time.monotonic()
        self.timeline: list[str] = []
        self.planner_seconds: list[float] = []

    def note(self, what: str) -> None:
        line = f"{time.monotonic() - self.t0:7.1f}s {self.label}{what}"
        self.timeline.append(line)
        print(line, flush=True)

    @staticmethod
    def lines(proc: NamespacedProcess, kind: str) -> list[dict[str, Any]]:
        prefix = kind + " "
        return [json.loads(line[len(prefix) :]) for line in proc.log_text().splitlines() if line.startswith(prefix)]

    def events(self, consumer: str) -> list[dict[str, Any]]:
        return self.lines(self.pipelines[consumer], "EVENT")

    def wait(self, check: Callable[[], bool], what: str, timeout: float | None = None) -> None:
        limit = timeout if timeout is not None else self.step_timeout
        deadline = time.monotonic() + limit
        while not check():
            for consumer, proc in self.pipelines.items():
                if not proc.alive:
                    raise AssertionError(f"pipeline {consumer} exited ({proc.poll()}) while waiting until {what}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {limit:g}s waiting until {what}")
            time.sleep(0.2)
        self.note(what)

    def reading(self, consumer: str, generation: int) -> bool:
        """The consumer reads what ``generation`` gives it: a query started under it, or a
        running query whose claim it renewed under it (same partitions: it kept reading)."""
        return any(
            e["generation"] == generation and (e["kind"] == "start" or (e["kind"] == "claim" and e["detail"] == "reading"))
            for e in self.events(consumer)
        )

    @staticmethod
    def committed_beyond(sampler: CommitSampler, baseline: dict[tuple[str, int], int], tps: list[tuple[str, int]]) -> bool:
        latest = sampler.latest()
        return all(latest.get(tp, -1) > baseline.get(tp, -1) for tp in tps)

    def dump(self) -> str:
        parts = ["timeline:", *self.timeline]
        for proc in self.processes:
            parts.append(f"---- {proc.name} ({proc.log_path}) ----")
            lines = [ln for ln in proc.log_text().splitlines() if not ln.lstrip().startswith("at ")]
            parts.extend(lines[-80:])
        return "\n".join(parts)

    def close(self) -> None:
        for proc in self.processes:
            proc.close()


class Scenario(ProcessScenario):
    """The local proof: the planner and pipelines as local-Spark processes, the Kafka store."""

    def __init__(self, kafka: LocalKafka, logs: Path) -> None:
        super().__init__(kafka.bootstrap_servers, f"kafka://{kafka.bootstrap_servers}/{STORE_NAME}", logs)

    def plan(self, consumers: str, topics: str = f"{ORDERS},{PAYMENTS}") -> int:
        """Run the planner as a process of its own; the generation it published."""
        n = len(self.planner_seconds) + 1
        argv = [
            sys.executable, "-m", "spark_lag_assign.cli", "plan",
            "--store", self.store, "--bootstrap-servers", self.bootstrap, "--group", GROUP,
            "--topics", topics, "--consumers", consumers, "--strategy", "range", "--reset", "earliest",
            "--master", "local[1]",
        ]  # fmt: skip
        began = time.monotonic()
        proc = NamespacedProcess(f"planner-{n}", argv, self.logs / f"planner-{n}.log").start()
        self.processes.append(proc)
        status = proc.wait(180)
        self.planner_seconds.append(time.monotonic() - began)
        out = proc.log_text()
        assert status == 0, f"planner run {n} failed ({status}):\n{out}"
        found = re.findall(r"published generation (\d+) to", out)
        assert found, out
        generation = int(found[-1])
        self.note(f"planner published generation {generation}: {consumers} ({self.planner_seconds[-1]:.1f}s)")
        return generation

    def pipeline(self, consumer: str, *extra: str, run: int = 1) -> NamespacedProcess:
        argv = [
            sys.executable, "-m", "spark_lag_assign.testing.pipeline_app",
            "--store", self.store, "--consumer", consumer, "--bootstrap-servers", self.bootstrap,
            "--sink-topic", SINK, "--lease", str(LEASE), "--poll-interval", str(POLL),
            "--max-offsets-per-trigger", str(MAX_PER_TRIGGER), "--trigger", "1 second", *extra,
        ]  # fmt: skip
        proc = NamespacedProcess(f"pipeline-{consumer}-{run}", argv, self.logs / f"pipeline-{consumer}-{run}.log").start()
        self.processes.append(proc)
        self.pipelines[consumer] = proc
        self.note(f"started pipeline {consumer} (run {run}, pid {proc.pid}) {' '.join(extra)}")
        return proc


def end_offsets(bootstrap: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="hp-ends", enable_auto_commit=False)
    try:
        found = consumer.end_offsets([TopicPartition(t, p) for t, p in tps])
        return {(tp.topic, tp.partition): int(o) for tp, o in found.items()}
    finally:
        consumer.close()


def read_committed(bootstrap: str, topic: str) -> list[bytes]:
    """Every value of a single-partition topic that a ``read_committed`` reader sees."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, client_id="hp-sink-reader", enable_auto_commit=False,
        isolation_level="read_committed", auto_offset_reset="earliest", max_partition_fetch_bytes=4 * 1024 * 1024,
    )  # fmt: skip
    tp = TopicPartition(topic, 0)
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]  # the last stable offset: nothing may be left open
        values: list[bytes] = []
        deadline = time.monotonic() + 120
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"reading {topic} did not reach {end}"
            for records in consumer.poll(timeout_ms=1000, max_records=5000).values():
                values.extend(r.value for r in records)
        return values
    finally:
        consumer.close()


def readers(records: list[app.SinkRecord], tp: tuple[str, int]) -> list[str]:
    """The consumers that read a partition, in the order their stints began (repeats collapsed)."""
    first: dict[tuple[str, str, int], float] = {}
    for r in records:
        if r.tp == tp:
            first[r.stint] = min(first.get(r.stint, r.started), r.started)
    order = [s[0] for s in sorted(first, key=lambda s: first[s])]
    return [c for i, c in enumerate(order) if i == 0 or order[i - 1] != c]


# -- the proof -----------------------------------------------------------------------------------


def test_three_pipelines_in_their_own_namespaces_hand_partitions_over_safely(
    kafka: LocalKafka, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace_check()
    began = time.monotonic()
    bootstrap = kafka.bootstrap_servers
    for topic, n in PARTITIONS.items():
        create_topic(bootstrap, topic, n)
    create_topic(bootstrap, SINK, 1)
    create_topic(bootstrap, app.markers_topic(SINK), 1)
    # the group exists before any pipeline commits, as a group that pipelines feed does
    commit(bootstrap, GROUP, {(t, p): 0 for t, n in PARTITIONS.items() for p in range(n)})

    s = Scenario(kafka, tmp_path / "logs")
    producers = Producers(bootstrap, PARTITIONS)
    sampler = CommitSampler(bootstrap)
    producers.start()
    sampler.start()
    a_stopped = c_stopped = a_pause = c_pause = 0.0
    try:
        # generation 1: A and B
        g1 = s.plan("A,B")
        s.pipeline("A")
        s.pipeline("B")
        s.wait(lambda: s.reading("A", g1) and s.reading("B", g1), f"A and B read generation {g1}")
        s.wait(lambda: s.committed_beyond(sampler, {}, [(ORDERS, 0), (ORDERS, 3)]), "A and B committed batches")

        # generation 2: C joins; C stops itself after reading the plan, before its first claim
        g2 = s.plan("A,B,C")
        c = s.pipeline("C", "--sigstop-before-claim")
        c.wait_stopped(STEP_TIMEOUT)
        c_stopped = time.monotonic()
        s.note("C is SIGSTOPped (driver and JVM) before its first claim")
        assert not [e for e in s.events("C") if e["kind"] == "claim"]
        s.wait(lambda: s.reading("B", g2), f"B reads generation {g2} (t1-3 released for C)")

        # generation 3: A leaves while SIGSTOPped; B takes A's partitions once A's lease ran out
        a = s.pipelines["A"]
        baseline = sampler.latest()
        a_stopped_wall = time.time()  # what A reports after this was emitted after it resumed
        a.stop()
        a_stopped = time.monotonic()
        a.wait_stopped(10)
        s.note("A is SIGSTOPped (driver and JVM)")
        g3 = s.plan("B,C")
        s.wait(lambda: s.reading("B", g3), f"B reads generation {g3}, A's partitions included")
        s.wait(
            lambda: s.committed_beyond(sampler, baseline, [(ORDERS, 0), (ORDERS, 1), (PAYMENTS, 0)]),
            "B committed batches of A's former partitions",
        )
        c.cont()
        c_pause = time.monotonic() - c_stopped
        s.note(f"C resumed after {c_pause:.1f}s stopped, two generations later")

        # generation 4: A is back in the plan, still stopped; B gives its partitions back
        g4 = s.plan("A,B,C")
        s.wait(lambda: s.reading("B", g4), f"B reads generation {g4} without A's partitions")
        a.cont()
        a_pause = time.monotonic() - a_stopped
        s.note(f"A resumed after {a_pause:.1f}s stopped (lease {LEASE:g}s), across generations {g3} and {g4}")
        s.wait(lambda: s.reading("A", g4), f"A reads generation {g4} again")
        s.wait(lambda: s.reading("C", g4), f"C reads generation {g4}")

        # generation 5: a topic grows
        from kafka import KafkaAdminClient
        from kafka.admin import NewPartitions

        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="hp-admin")
        try:
            admin.create_partitions({PAYMENTS: NewPartitions(GROWN)})
        finally:
            admin.close()
        producers.grow(PAYMENTS, GROWN)
        s.note(f"{PAYMENTS} grew to {GROWN} partitions")
        g5 = s.plan("A,B,C")
        s.wait(lambda: all(s.reading(x, g5) for x in "ABC"), f"A, B and C read generation {g5}")

        # B is SIGKILLed while reading and restarted under the same consumer id
        time.sleep(2.0)
        killed = s.pipelines["B"]
        status = killed.kill()
        s.note(f"B SIGKILLed (exit {status})")
        time.sleep(1.0)
        s.pipeline("B", run=2)
        s.wait(lambda: s.reading("B", g5), f"the new B reads generation {g5}")

        # the end: producers stop, pipelines drain, SIGTERM
        time.sleep(3.0)
        sent = producers.stop()
        s.note(f"producers stopped: {sum(sent.values())} records")
        tps = sorted(sent)
        ends = end_offsets(bootstrap, tps)
        assert ends == sent, "the broker's end offsets differ from what the producers had acknowledged"
        s.wait(lambda: all(sampler.latest().get(tp, -1) >= ends[tp] for tp in tps), "the group's commits reached the end offsets")
        statuses = {}
        for consumer in "ABC":
            statuses[consumer] = s.pipelines[consumer].terminate(90)
        s.note(f"pipelines ended: {statuses}")
        sampler.halt.set()
        sampler.join(10)
        assert statuses == {"A": 0, "B": 0, "C": 0}, statuses
        final = sampler.latest()

        # -- what the sinks say
        records = [app.parse_record(v) for v in read_committed(bootstrap, SINK)]
        markers = dict(app.parse_marker(v) for v in read_committed(bootstrap, app.markers_topic(SINK)))
        batches = app.batches_of(records, markers)
        lost = app.losses(records, ends)
        overlapping = app.overlaps(batches)
        dups = app.duplicates(records, MAX_PER_TRIGGER)
        went_back = app.backwards(sampler.samples)
        gaps = app.handover_gaps(batches)
        incarnations = {(r.consumer, r.incarnation) for r in records}
        summary = [
            f"handover proof: {time.monotonic() - began:.0f}s; planner runs {len(s.planner_seconds)} "
            f"({', '.join(f'{x:.0f}s' for x in s.planner_seconds)}); A stopped {a_pause:.1f}s, C {c_pause:.1f}s (lease {LEASE:g}s)",
            f"  produced {sum(ends.values())} records on {len(tps)} partitions; sink {len(records)} records in "
            f"{len(batches)} batches of {len(incarnations)} incarnations ({sum(not b.ended_known for b in batches)} without marker)",
            f"  lost {sum(b - a for ranges in lost.values() for a, b in ranges if b >= 0)}; overlapping batch pairs {len(overlapping)}; "
            f"duplicates {dups.records} records ({dups.offsets} offsets) over {dups.handovers} handovers / "
            f"{dups.boundaries} reader changes (bound: {MAX_PER_TRIGGER} per moved partition per handover); "
            f"closest reader change {min((g for _, g, _, _ in gaps), default=float('nan')):.2f}s apart",
            f"  commit samples {len(sampler.samples)} (missed {sampler.errors}); backwards {len(went_back)}; "
            f"readers of {ORDERS}-0: {' -> '.join(readers(records, (ORDERS, 0)))}",
        ]
        lapses = {p.name: p.log_text().count("stops reading: the lease lapsed") for p in s.processes if p.name.startswith("pipeline")}
        summary.append(f"  queries stopped because their lease lapsed: {lapses}")
        with capsys.disabled():
            print("\n" + "\n".join(summary), flush=True)

        assert lost == {}, f"records lost: {lost}"
        assert overlapping == [], "\n".join(o.describe() for o in overlapping[:20])
        assert dups.violations == [], "\n".join(dups.violations[:20])
        assert dups.records <= dups.handovers * MAX_PER_TRIGGER
        assert went_back == [], went_back[:20]
        assert {tp: final.get(tp) for tp in tps} == ends, "the group's commits are not the end offsets"

        # -- and the faults happened as staged
        assert a_pause > 2 * LEASE
        # A noticed on resuming that its lease had lapsed and stopped without committing (I2),
        # whether it saw generation 4's plan first or not, and whether its query's Kafka calls
        # timed out first (the follower then logs that the query ended while its lease had lapsed)
        a_resumed = [e for e in s.events("A") if e["wall"] >= a_stopped_wall]
        assert any(e["kind"] == "stop" and e["detail"] == "{}" for e in a_resumed), a_resumed
        assert lapses["pipeline-A-1"] >= 1
        assert readers(records, (ORDERS, 0)) == ["A", "B", "A"], readers(records, (ORDERS, 0))
        assert readers(records, (PAYMENTS, 1))[-1] == "A"  # moved from B to A by generation 5
        assert {r.partition for r in records if r.topic == PAYMENTS} == set(range(GROWN))
        b_runs = {r.incarnation for r in records if r.consumer == "B"}
        assert len(b_runs) >= 2, "the restarted B wrote nothing under a new incarnation"
        c_claims = [e for e in s.events("C") if e["kind"] == "claim"]
        assert c_claims and c_claims[0]["generation"] >= g2
    except BaseException:
        with capsys.disabled():
            print("\n" + s.dump(), flush=True)
        raise
    finally:
        producers.halt.set()
        sampler.halt.set()
        s.close()
