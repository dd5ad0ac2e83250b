"""Proof without a cluster: the planner and three pipelines as
separate OS processes, each in its own mount namespace with a private /tmp
(``NamespacedProcess``), sharing only the local broker and the ``kafka://`` store in it,
while producers keep writing.

The plan changes five times: A and B (1), C joins (2), A leaves (3), A comes back (4), a
topic grows (5). A writes its records with a plain producer and commits its offsets through
the follower's listener (``--sink plain``: whatever a replaced A writes stays visible, so
duplicates show); B and C put records and offsets in one transaction (``write_batch``).
Faults, each on a whole process group (driver and Spark JVM), staged at the moment they
are dangerous:

- C is SIGSTOPped after it read the plan and before its first claim, and resumed only after
  the next generation was published;
- A freezes itself on a progress report of a batch that read records, just before that
  batch's commit; the plan moves its partitions to B, which waits out A's lease, fences A's
  commits and reads them; A is resumed *while B reads them*: its commit is refused, it stops
  and leaves, and a new A process reads them again under generation 4;
- the broker is stopped, just after one of A's batches (its commit follows), for longer
  than the lease, and started again on the same port and data while everyone reads;
- B is SIGKILLed while reading, and restarted under the same consumer id.

The verdict (``judge``) rests on what the sinks and the broker recorded, not on what the
processes say of themselves: the sinks' records as a ``read_committed`` reader sees them,
and the broker's log of every offset commit it accepted (``__consumer_offsets``,
``spark_lag_assign.testing.offsets_log``). The pipelines' events (with the wall-clock time
each happened) say only when each query started and stopped and when each claim was sent,
from which each query's *live interval* follows: from its start until it stopped or its
lease lapsed. Checked: nothing lost; no two live intervals on one partition intersect (I1),
nor do two readers' batches, but for the at most one batch a pipeline completes after its
lease lapsed (I2); every commit in the broker's log moves its partition forward (I3), names
a known consumer and generation, comes from the newest query on its partition (I6), and
none of a fenced pipeline's earlier queries lands after its fence; duplicates only past the
earlier reader's last accepted commit and within the batches the protocol lets through (D);
the group's final offsets are the end offsets and the log's last commits. The group's
offsets are also sampled every 0.5 s: the waits use the samples, and they show the offsets
as a new reader sees them (``backwards`` of the samples, a second view of I3).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from spark_lag_assign.testing import offsets_log, pipeline_app as app, verdict
from spark_lag_assign.testing.localkafka import LocalKafka, commit, create_topic
from spark_lag_assign.testing.namespaces import NamespacedProcess, require_namespaces

STORE_NAME = "handover-proof"
GROUP = "handover-proof"
ORDERS, PAYMENTS = "hp-orders", "hp-payments"
PARTITIONS = {ORDERS: 4, PAYMENTS: 2}
GROWN = 4  # PAYMENTS grows to this many partitions in generation 5
SINK = "hp-sink"
SINKS = {"A": "plain", "B": "kafka", "C": "kafka"}  # A, the pause victim, writes with a plain producer
LEASE = 6.0
POLL = 0.5
MAX_PER_TRIGGER = 200  # one micro-batch holds at most this many records: the duplicate bound
PER_ROUND, ROUND_PAUSE = 2, 0.1  # records per partition every 100 ms
STEP_TIMEOUT = 180.0  # a bound on liveness, not a timing figure: the shared machine can be slow
#: The pipelines' claim writers get a transaction timeout longer than the broker outage the
#: proof stages (the store's default is 10 s). With the default, a claim write in flight when
#: the broker stops outlives its transaction: the restarted broker aborts it with a new epoch,
#: the writer takes that for a newer incarnation's fence and the pipeline exits "fenced" (a
#: liveness defect of the Kafka store, seen here: B exited 3 after a 37 s outage).
CLAIM_TRANSACTION_TIMEOUT_MS = 120_000

TP = tuple[str, int]


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


def test_the_brokers_log_shows_every_accepted_commit_and_no_aborted_one(kafka: LocalKafka) -> None:
    """``offsets_log`` against the real broker: a plain commit, two fenced-id commits, and a
    transactional commit that was aborted, which a read_committed reader must not see; and
    when each took effect, from the broker's segment files."""
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    from spark_lag_assign.consume.kafka_commit import FencedGroupCommit

    bootstrap, group, topic = kafka.bootstrap_servers, f"olog-{time.time_ns()}", f"olog-{time.time_ns()}"
    create_topic(bootstrap, topic, 2)
    commit(bootstrap, group, {(topic, 0): 0, (topic, 1): 0})
    committer = FencedGroupCommit(bootstrap, group, f"olog-{group}-A", "A")
    committer.open()
    committer.allow(new_query=True)
    committer({(topic, 0): 5}, 3)
    aborted = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"olog-{group}-Z")
    try:
        aborted.init_transactions()
        aborted.begin_transaction()
        aborted.send_offsets_to_transaction({TopicPartition(topic, 1): OffsetAndMetadata(99, "aborted", -1)}, group)
        aborted.abort_transaction()
    finally:
        aborted.close()
    committer({(topic, 0): 6, (topic, 1): 7}, 3)
    committer.close()
    found = [(c.tp, c.offset, c.by) for c in offsets_log.read_commits(bootstrap, group)]
    mine = ("A", 3)
    assert found == [((topic, 0), 0, None), ((topic, 1), 0, None), ((topic, 0), 5, mine), ((topic, 0), 6, mine), ((topic, 1), 7, mine)]
    # the fenced-id commits took effect at their COMMIT markers, moments later; the plain ones when appended
    seen = offsets_log.with_visibility(offsets_log.read_commits(bootstrap, group), kafka.workdir / "data")
    assert [c.visible_at is None for c in seen] == [True, True, False, False, False]
    assert all(c.committed_at <= c.visible_at < c.committed_at + 5 for c in seen[2:]), [c.describe() for c in seen]


def test_a_transaction_left_open_in_the_offsets_log_is_named_never_read_past(kafka: LocalKafka) -> None:
    """A read_committed reader stops at an open transaction; the verdict's reader waits for it
    and, past its timeout, names it instead of judging the commits before it as all there are."""
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    bootstrap, group, topic = kafka.bootstrap_servers, f"open-{time.time_ns()}", f"open-{time.time_ns()}"
    create_topic(bootstrap, topic, 1)
    commit(bootstrap, group, {(topic, 0): 0})
    # its own transaction timeout, short: should the test fail while it is open, the broker
    # aborts it soon, and the offsets log is not held for the tests that follow
    pending = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"open-{group}", transaction_timeout_ms=10000)
    try:
        pending.init_transactions()
        pending.begin_transaction()
        pending.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(5, "open", -1)}, group)
        commit(bootstrap, group, {(topic, 0): 1})  # a plain commit behind the open transaction
        with pytest.raises(TimeoutError, match=r"a transaction in __consumer_offsets-\d+ stayed open for 2s at offset \d+"):
            offsets_log.read_commits(bootstrap, group, timeout=2)
        pending.commit_transaction()
    finally:
        pending.close()
    assert [c.offset for c in offsets_log.read_commits(bootstrap, group)] == [0, 5, 1]


# -- the scenario's moving parts -----------------------------------------------------------------


class Producers(threading.Thread):
    """Appends ``PER_ROUND`` records to every partition of every topic each ``ROUND_PAUSE``,
    counting what the broker acknowledged; ``grow`` adds partitions as it runs. Through a
    broker outage it waits and retries (idempotent: a retry never writes a record twice)."""

    def __init__(self, bootstrap: str, partitions: dict[str, int], *, client_options: Mapping[str, Any] | None = None) -> None:
        super().__init__(name="producers", daemon=True)
        self.bootstrap = bootstrap
        self.client_options = dict(client_options or {})
        self.partitions = dict(partitions)
        self.sent: dict[TP, int] = {(t, p): 0 for t, n in partitions.items() for p in range(n)}
        self.halt = threading.Event()
        self.error: BaseException | None = None
        self.waited = 0.0  # seconds spent waiting for the broker's acknowledgements beyond a round
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
            return KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5, client_id="hp-producer",
                                 enable_idempotence=True, reconnect_backoff_max_ms=1000, **self.client_options)  # fmt: skip

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
                began = time.monotonic()
                producer.flush(timeout=180)  # the broker may be away: the producer retries until it is back
                for tp, f in futures:
                    f.get(timeout=60)
                    self.sent[tp] += 1
                self.waited += max(0.0, time.monotonic() - began - 1.0)
                self.halt.wait(ROUND_PAUSE)
        except BaseException as exc:  # the test reports it
            self.error = exc
        finally:
            producer.close()

    def stop(self) -> dict[TP, int]:
        self.halt.set()
        self.join(60)
        assert not self.is_alive(), "the producers did not stop"
        if self.error is not None:
            raise AssertionError("the producers failed") from self.error
        return dict(self.sent)


class CommitSampler(threading.Thread):
    """The group's committed offsets every 0.5 s (``samples``: (wall clock, {tp: offset})), as
    a new reader would see them; a failed sample (the broker away) is counted and the client
    opened again. The waits of a scenario use them; every commit is judged from the log."""

    def __init__(self, bootstrap: str, group: str = GROUP, *, client_options: Mapping[str, Any] | None = None) -> None:
        super().__init__(name="commit-sampler", daemon=True)
        self.bootstrap, self.group = bootstrap, group
        self.client_options = dict(client_options or {})
        self.samples: list[tuple[float, dict[TP, int]]] = []
        self.halt = threading.Event()
        self.errors = 0

    def run(self) -> None:
        from kafka import KafkaAdminClient

        admin = None
        while not self.halt.is_set():
            try:
                if admin is None:
                    admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="hp-sampler", request_timeout_ms=5000,
                                             **self.client_options)  # fmt: skip
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

    def latest(self) -> dict[TP, int]:
        return dict(self.samples[-1][1]) if self.samples else {}

    def after(self, wall: float, timeout: float = STEP_TIMEOUT) -> dict[TP, int]:
        """The first sample taken after ``wall`` (time.time())."""
        deadline = time.monotonic() + timeout
        while True:
            found = [offsets for at, offsets in list(self.samples) if at > wall]
            if found:
                return dict(found[0])
            assert time.monotonic() < deadline, f"no commit sample after {wall:.3f}"
            time.sleep(0.2)


class MarkerWatch:
    """Waits for the next batch marker of a consumer: its batch has just ended, and (with the
    plain sink) the commit of its offsets is about to be sent or in flight."""

    def __init__(self, bootstrap: str, sink: str) -> None:
        from kafka import KafkaConsumer
        from kafka.structs import TopicPartition

        self.tp = TopicPartition(app.markers_topic(sink), 0)
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="hp-markers", enable_auto_commit=False,
                                      fetch_max_wait_ms=20, reconnect_backoff_max_ms=1000)  # fmt: skip
        self.consumer.assign([self.tp])
        self.consumer.seek_to_end(self.tp)
        self.consumer.position(self.tp)

    def next_of(self, who: str, timeout: float = STEP_TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for records in self.consumer.poll(timeout_ms=200).values():
                for r in records:
                    marker = json.loads(r.value)
                    if marker["consumer"] == who:
                        return dict(marker)
        raise AssertionError(f"no batch marker of {who} within {timeout:g}s")

    def close(self) -> None:
        self.consumer.close()


class ProcessScenario:
    """The processes of one run, their logs, and waiting on what they report (shared by the
    local proof here and the cluster proof in tests/cluster)."""

    def __init__(
        self, bootstrap: str, store: str, logs: Path, *, label: str = "", step_timeout: float = STEP_TIMEOUT,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:  # fmt: skip
        self.bootstrap, self.store, self.logs = bootstrap, store, logs
        #: how the test's own readers (sinks, the offsets log, the group) log in: a super user on a broker with ACLs
        self.client_options = dict(client_options or {})
        self.label, self.step_timeout = label, step_timeout
        self.processes: list[NamespacedProcess] = []
        self.pipelines: dict[str, NamespacedProcess] = {}  # the running process of each consumer
        self.runs: list[tuple[str, NamespacedProcess]] = []  # every pipeline process ever started
        self.died: dict[str, float] = {}  # process name -> wall clock right after it was SIGKILLed
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

    def started(self, consumer: str, proc: NamespacedProcess) -> None:
        self.processes.append(proc)
        self.pipelines[consumer] = proc
        self.runs.append((consumer, proc))

    def retire(self, consumer: str) -> NamespacedProcess:
        """A pipeline that is about to end by itself: waits no longer watch it."""
        return self.pipelines.pop(consumer)

    def resume_beside(self, consumer: str, successor: str, stopped_line: Mapping[str, Any] | None, lease: float) -> Pause:
        """The dangerous moment: ``consumer``, paused past its lease (``stopped_line`` is its
        SIGSTOP report), resumes while ``successor`` reads what it read; waits no longer watch it.

        ``stopped_line`` None: the report is read once the process runs again. A driver whose
        output passes through another process of its group (spark-submit's JVM forwards it)
        may have printed it into a pipe that nobody reads while the group is stopped."""
        proc = self.retire(consumer)
        resumed = time.time()
        proc.cont()
        if stopped_line is None:
            deadline = time.monotonic() + self.step_timeout
            while not self.lines(proc, "SIGSTOP"):
                assert time.monotonic() < deadline, f"{consumer} resumed but never reported its SIGSTOP; see {proc.log_path}"
                time.sleep(0.05)
            stopped_line = self.lines(proc, "SIGSTOP")[-1]
        pause = Pause(consumer, proc.name, float(stopped_line["wall"]), resumed, str(stopped_line["why"]))
        self.note(f"{consumer} resumed after {pause.seconds:.1f}s stopped (lease {lease:g}s) while {successor} reads its partitions")
        return pause

    def ended_leaving(self, proc: NamespacedProcess, what: str) -> dict[str, Any]:
        """Wait for a resumed pipeline whose generation no longer names it: it must end by
        itself, exit 0, as "left"; its summary."""
        status = proc.wait(self.step_timeout)
        summary: dict[str, Any] = (self.lines(proc, "SUMMARY") or [{}])[-1]
        self.note(f"{what} ended: exit {status}, {summary.get('reason')}, commits refused {summary.get('refused')}")
        assert status == 0 and summary.get("reason") == "left", summary
        return summary

    def kill(self, consumer: str) -> int:
        proc = self.pipelines[consumer]
        status = proc.kill()
        self.died[proc.name] = time.time()
        return status

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
    def committed_beyond(sampler: CommitSampler, baseline: dict[TP, int], tps: Sequence[TP]) -> bool:
        latest = sampler.latest()
        return all(latest.get(tp, -1) > baseline.get(tp, -1) for tp in tps)

    def queries(self, lease: float) -> list[verdict.Query]:
        """Every query of every pipeline process, with its live interval."""
        return [q for _, proc in self.runs
                for q in verdict.queries_of(self.lines(proc, "EVENT"), lease, process=proc.name, died=self.died.get(proc.name))]  # fmt: skip

    def fences(self) -> list[tuple[float, str, str]]:
        """(when, whom, by whom): every fence a pipeline set, or saw the fencer set for it
        (service fencing: the event's detail is "<whom> (by the fencer)")."""
        return sorted((float(e["wall"]), str(e["detail"]).split(" ", 1)[0], consumer)
                      for consumer, proc in self.runs for e in self.lines(proc, "EVENT") if e["kind"] == "fence")  # fmt: skip

    def log_count(self, text: str, since: float = 0.0) -> int:
        """Lines of the pipelines' logs that contain ``text`` (logged at or after wall ``since``)."""
        n = 0
        for _, proc in self.runs:
            for line in proc.log_text().splitlines():
                if text in line and (not since or _logged_at(line) >= since):
                    n += 1
        return n

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


def _logged_at(line: str) -> float:
    """The wall clock of a pipeline's log line (``logging``'s asctime), 0.0 if it has none."""
    found = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ", line)
    if not found:
        return 0.0
    return time.mktime(time.strptime(found.group(1), "%Y-%m-%d %H:%M:%S")) + int(found.group(2)) / 1000


class Scenario(ProcessScenario):
    """The local proof: the planner and pipelines as local-Spark processes, the Kafka store."""

    def __init__(self, kafka: LocalKafka, logs: Path) -> None:
        # on a broker that authorizes, the test's own clients log in as its super user
        super().__init__(kafka.bootstrap_servers, f"kafka://{kafka.bootstrap_servers}/{STORE_NAME}", logs,
                         client_options=kafka.client_options())  # fmt: skip

    def plan(self, consumers: str, topics: str = f"{ORDERS},{PAYMENTS}", extra: Sequence[str] = ()) -> int:
        """Run the planner as a process of its own (``extra``: more of its flags); the generation it published."""
        n = len(self.planner_seconds) + 1
        argv = [
            sys.executable, "-m", "spark_lag_assign.cli", "plan",
            "--store", self.store, "--bootstrap-servers", self.bootstrap, "--group", GROUP,
            "--topics", topics, "--consumers", consumers, "--strategy", "range", "--reset", "earliest",
            "--master", "local[1]", *extra,
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
            "--sink-topic", SINK, "--sink", SINKS[consumer], "--lease", str(LEASE), "--poll-interval", str(POLL),
            "--max-offsets-per-trigger", str(MAX_PER_TRIGGER), "--trigger", "1 second",
            "--claim-transaction-timeout-ms", str(CLAIM_TRANSACTION_TIMEOUT_MS), *extra,
        ]  # fmt: skip
        proc = NamespacedProcess(f"pipeline-{consumer}-{run}", argv, self.logs / f"pipeline-{consumer}-{run}.log").start()
        self.started(consumer, proc)
        self.note(f"started pipeline {consumer} (run {run}, pid {proc.pid}, {SINKS[consumer]} sink) {' '.join(extra)}")
        return proc


def end_offsets(bootstrap: str, tps: list[TP], client_options: Mapping[str, Any] | None = None) -> dict[TP, int]:
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="hp-ends", enable_auto_commit=False, **dict(client_options or {}))
    try:
        found = consumer.end_offsets([TopicPartition(t, p) for t, p in tps])
        return {(tp.topic, tp.partition): int(o) for tp, o in found.items()}
    finally:
        consumer.close()


def read_committed(bootstrap: str, topic: str, client_options: Mapping[str, Any] | None = None) -> list[bytes]:
    """Every value of a single-partition topic that a ``read_committed`` reader sees."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, client_id="hp-sink-reader", enable_auto_commit=False,
        isolation_level="read_committed", auto_offset_reset="earliest", max_partition_fetch_bytes=4 * 1024 * 1024,
        **dict(client_options or {}),
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


def readers(records: list[verdict.SinkRecord], tp: TP) -> list[str]:
    """The consumers that read a partition, in the order their stints began (repeats collapsed)."""
    first: dict[tuple[str, str, int], float] = {}
    for r in records:
        if r.tp == tp:
            first[r.stint] = min(first.get(r.stint, r.started), r.started)
    order = [s[0] for s in sorted(first, key=lambda s: first[s])]
    return [c for i, c in enumerate(order) if i == 0 or order[i - 1] != c]


def group_offsets(bootstrap: str, group: str, client_options: Mapping[str, Any] | None = None) -> dict[TP, int]:
    """The group's committed offsets as the broker serves them now (OffsetFetch)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="hp-final", **dict(client_options or {}))
    try:
        found = admin.list_group_offsets(group)[group]
        return {(tp.topic, tp.partition): om.offset for tp, om in found.items() if om.offset >= 0}
    finally:
        admin.close()


def seed_group(
    bootstrap: str, group: str, partitions: dict[str, int], client_options: Mapping[str, Any] | None = None
) -> tuple[int, int]:
    """Commit offset 0 everywhere (the group exists before any pipeline commits, as a group
    that pipelines feed does); the log position of the last of those commits."""
    commit(bootstrap, group, {(t, p): 0 for t, n in partitions.items() for p in range(n)}, client_options=client_options)
    return offsets_log.read_commits(bootstrap, group, client_options=client_options)[-1].position


# -- the verdict: what the sinks and the broker recorded --------------------------------------------


@dataclass
class Verdict:
    """Everything the proof asserts and prints, from the sinks, the broker's log and the events."""

    records: list[verdict.SinkRecord]
    batches: list[verdict.Batch]
    queries: list[verdict.Query]
    commits: list[offsets_log.OffsetCommit]  # the pipelines' commits, in log order (the seed left out)
    lost: dict[TP, list[tuple[int, int]]]
    live: list[str]  # I1: live intervals that intersect
    overlapping: list[verdict.Overlap]  # batches of two readers at once, late batches left out
    late: dict[tuple[str, str, int], list[verdict.Batch]]
    late_problems: list[str]  # I2
    dups: verdict.Duplicates  # D and the bound
    backwards: list[str]  # I3, on every commit
    unknown: list[str]
    stale: list[str]  # I6, on every commit
    after_fence: list[str]
    sampled_backwards: list[str]
    final: dict[TP, int]  # the group's offsets at the end, as the broker serves them
    last_logged: dict[TP, int]  # and as its log's last commits say
    notes: list[str] = field(default_factory=list)

    def query_of(self, process: str, generation: int) -> verdict.Query:
        return next(q for q in self.queries if q.process == process and q.generation == generation)

    def problems(self, ends: dict[TP, int]) -> list[str]:
        """Every safety failure, empty when the run was safe."""
        found = [f"lost: {self.lost}"] if self.lost else []
        found += [f"I1 live: {x}" for x in self.live]
        found += [f"I1 batches: {o.describe()}" for o in self.overlapping]
        found += [f"I2: {x}" for x in self.late_problems]
        found += [f"D: {x}" for x in self.dups.violations]
        if self.dups.records > self.dups.bound:
            found.append(f"D: {self.dups.records} records read twice, more than the bound {self.dups.bound}")
        found += [f"I3: {x}" for x in self.backwards + self.sampled_backwards]
        found += [f"metadata: {x}" for x in self.unknown]
        found += [f"I6: {x}" for x in self.stale]
        found += [f"fence: {x}" for x in self.after_fence]
        tps = sorted(ends)
        if {tp: self.final.get(tp) for tp in tps} != ends:
            found.append(f"the group's commits are not the end offsets: {self.final} != {ends}")
        if {tp: self.last_logged.get(tp) for tp in tps} != ends:
            found.append(f"the broker's log does not end with the end offsets: {self.last_logged} != {ends}")
        return found

    def summary(self) -> list[str]:
        d = self.dups
        lapsed = [q for q in self.queries if q.ended == "lapse"]
        return [
            f"  sink {len(self.records)} records in {len(self.batches)} batches of {len({q.process for q in self.queries})} "
            f"processes, {len(self.queries)} queries ({len(lapsed)} lapsed, "
            f"{sum(q.ended == 'killed' for q in self.queries)} killed); {sum(not b.ended_known for b in self.batches)} batches without marker",
            f"  lost {sum(b - a for ranges in self.lost.values() for a, b in ranges if b >= 0)}; live overlaps {len(self.live)}; "
            f"overlapping batch pairs {len(self.overlapping)}; batches completed after a lapse "
            f"{sum(len(v) for v in self.late.values())} over {len(lapsed)} lapses",
            f"  duplicates {d.records} records ({d.offsets} offsets) vs bound {d.bound} ({MAX_PER_TRIGGER} per allowed batch) "
            f"over {d.handovers} handovers / {d.boundaries} reader changes, {d.reruns} of them re-run on a checkpoint; "
            f"batches read again per earlier query: {sorted(set(d.batches_again.values()))}",
            f"  commits in the broker's log {len(self.commits)}: backwards {len(self.backwards)}, unknown {len(self.unknown)}, "
            f"stale {len(self.stale)}, after a fence {len(self.after_fence)}; sampled backwards {len(self.sampled_backwards)}",
            f"  commits that took effect over 1 s after the broker accepted them (a late COMMIT marker): "
            f"{sum(c.effective_at - c.committed_at > 1 for c in self.commits)}",
            *self.notes,
        ]


def judge(
    s: ProcessScenario, group: str, sink: str, ends: dict[TP, int], seeded: tuple[int, int], lease: float,
    generations: Sequence[int], sampler: CommitSampler, broker: LocalKafka,
) -> Verdict:  # fmt: skip
    """The verdict from the sinks, the pipelines' events and the broker's log of commits; when
    each transactional commit took effect comes from ``broker``'s own segment files."""
    login = s.client_options
    records = [verdict.parse_record(v) for v in read_committed(s.bootstrap, sink, login)]
    markers = dict(verdict.parse_marker(v) for v in read_committed(s.bootstrap, app.markers_topic(sink), login))
    batches = verdict.batches_of(records, markers)
    queries = s.queries(lease)
    commits = [c for c in offsets_log.read_commits(s.bootstrap, group, client_options=login) if c.position > seeded]
    commits = offsets_log.with_visibility(commits, broker.workdir / "data")
    late, late_problems = verdict.late_batches(batches, queries)
    late_keys = {b.key for found in late.values() for b in found}
    last_logged: dict[TP, int] = {}
    for c in commits:
        if c.offset is not None:
            last_logged[c.tp] = c.offset
    return Verdict(
        records=records,
        batches=batches,
        queries=queries,
        commits=commits,
        lost=verdict.losses(records, ends),
        live=verdict.live_overlaps(queries),
        overlapping=verdict.overlaps([b for b in batches if b.key not in late_keys]),
        late=late,
        late_problems=late_problems,
        dups=verdict.duplicates(records, MAX_PER_TRIGGER, commits=commits, allowance=verdict.reread_allowance(queries, records)),
        backwards=verdict.commits_backwards(commits),
        unknown=verdict.unknown_commits(commits, {c for c, _ in s.runs}, generations),
        stale=verdict.stale_commits(commits, queries),
        after_fence=verdict.commits_after_fences(commits, s.fences(), queries),
        sampled_backwards=verdict.backwards(sampler.samples),
        final=group_offsets(s.bootstrap, group, login),
        last_logged=last_logged,
    )


@dataclass
class Pause:
    """The staged pause of a pipeline before a commit, and what the others did meanwhile."""

    consumer: str
    process: str
    stopped: float  # wall clock: it SIGSTOPped itself
    resumed: float  # wall clock: the test sent SIGCONT
    why: str

    @property
    def seconds(self) -> float:
        return self.resumed - self.stopped


def pause_findings(v: Verdict, s: ProcessScenario, pause: Pause, successor: str, summary: dict[str, Any]) -> tuple[list[str], list[str]]:
    """What the staged pause must show, from the sinks and the broker (the problems), and
    its figures (printed): the victim's query lapsed while paused and stopped; the successor
    fenced it while it was paused and was reading its partitions when it resumed; the commit
    the pause caught was refused when the victim resumed, and its batch was read again; at
    most one batch after the lapse."""
    victim = max((q for q in v.queries if q.process == pause.process and q.start < pause.stopped), key=lambda q: q.start)
    fences = [at for at, whom, by in s.fences() if whom == pause.consumer and by == successor and pause.stopped < at < pause.resumed]
    takers = [q for q in v.queries if q.consumer == successor and q.tps & victim.tps and q.start < pause.resumed < q.live_end]
    reread = {tp: n for (tp, stint), n in v.dups.batches_again.items() if stint == victim.key}
    late = v.late.get(victim.key, [])
    mine_after = [c for c in v.commits if c.by == (pause.consumer, victim.generation) and fences and c.committed_at >= fences[0]]
    problems = []
    if victim.ended != "lapse":
        problems.append(f"the paused {victim.describe()} did not lapse")
    if victim.stop is None or victim.stop < pause.resumed:
        problems.append(f"the paused {victim.describe()} did not stop after it resumed")
    if not fences:
        problems.append(f"{successor} did not fence {pause.consumer} while it was paused")
    if not takers:
        problems.append(f"{successor} was not reading {pause.consumer}'s partitions when it resumed")
    if not reread:
        problems.append(f"nothing of {victim.describe()} was read again: the pause caught no commit")
    if mine_after:
        problems.append(f"{pause.consumer}'s commits after the fence: {[c.describe() for c in mine_after]}")
    if int(summary.get("refused") or 0) < 1:  # the commit the pause caught, made once it resumed
        problems.append(f"no commit of {pause.consumer} was refused after it resumed: {summary.get('refused')!r}")
    figures = [
        f"  {pause.consumer} paused {pause.seconds:.1f}s ({pause.why}); fenced by {successor} "
        f"{(fences[0] - pause.stopped) if fences else float('nan'):.1f}s into it; resumed while {successor} read its partitions; "
        f"its commits refused {summary.get('refused', '?')}; its batches completed after its lapse {len(late)}; "
        f"its batches read again {reread}",
    ]
    return problems, figures


def follower_figures(v: Verdict, s: ProcessScenario, pause: Pause | None) -> list[str]:
    """How promptly the followers' loops handled a lapse (printed, never asserted: they are
    times): from each lapse until the loop's stop of that query (a staged pause left out;
    the lease guard stops the query itself at the lapse, the loop's stop follows once the
    call it waited in returns), and queries that started with no lease left (Spark's start
    took longer than the lease had to run: they are stopped at once)."""
    lags = sorted(((q.stop or q.live_end) - q.live_end, q.describe()) for q in v.queries
                  if q.ended == "lapse" and not (pause is not None and q.process == pause.process and q.start < pause.stopped))  # fmt: skip
    unleased = sum(1 for q in v.queries if q.live_end <= q.start)
    worst = f"{lags[-1][0]:.1f}s ({lags[-1][1]})" if lags else "none"
    return [f"  followers' loops handled a lapse up to {worst} after it; "
            f"queries started with no lease left {unleased}"]  # fmt: skip


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
    seeded = seed_group(bootstrap, GROUP, PARTITIONS)

    s = Scenario(kafka, tmp_path / "logs")
    producers = Producers(bootstrap, PARTITIONS)
    sampler = CommitSampler(bootstrap)
    producers.start()
    sampler.start()
    c_pause = outage = down_total = 0.0
    outage_from = 0.0
    pause: Pause | None = None
    try:
        # generation 1: A and B
        g1 = s.plan("A,B")
        s.pipeline("A", "--pause-on-usr1")
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

        # generation 3: A freezes itself just before committing a batch; the plan moves its
        # partitions to B, which fences A once A's lease ran out and reads them
        a = s.pipelines["A"]
        baseline = sampler.latest()
        os.kill(a.pid, signal.SIGUSR1)  # the driver only: the JVM keeps its default for SIGUSR1
        a.wait_stopped(STEP_TIMEOUT)
        stopped_line = s.lines(a, "SIGSTOP")[-1]
        s.note(f"A is SIGSTOPped (driver and JVM) {stopped_line['why']}")
        g3 = s.plan("B,C")
        s.wait(lambda: s.reading("B", g3), f"B reads generation {g3}, A's partitions included")
        s.wait(
            lambda: s.committed_beyond(sampler, baseline, [(ORDERS, 0), (ORDERS, 1), (PAYMENTS, 0)]),
            "B committed batches of A's former partitions",
        )
        # the dangerous moment: A resumes while B reads what A read
        pause = s.resume_beside("A", "B", stopped_line, LEASE)
        c.cont()
        c_pause = time.monotonic() - c_stopped
        s.note(f"C resumed after {c_pause:.1f}s stopped, two generations later")
        a_summary = s.ended_leaving(a, "A (run 1)")  # generation 3 does not name A

        # generation 4: A is back in the plan (a new process, a new incarnation); B gives its partitions back
        g4 = s.plan("A,B,C")
        s.pipeline("A", run=2)
        s.wait(lambda: s.reading("B", g4), f"B reads generation {g4} without A's partitions")
        s.wait(lambda: s.reading("A", g4), f"A reads generation {g4} again")
        s.wait(lambda: s.reading("C", g4), f"C reads generation {g4}")

        # the broker goes away for longer than the lease, just after one of A's batches (its
        # commit follows), while everyone reads; it comes back on the same port and data
        watch = MarkerWatch(bootstrap, SINK)
        try:
            marker = watch.next_of("A")
        finally:
            watch.close()
        outage_from = time.time()
        down = time.monotonic()
        kafka.stop()
        stopped_at = time.monotonic()
        s.note(f"broker stopped ({kafka.stopped_by}, {stopped_at - down:.1f}s) {outage_from - float(marker['ended']):.2f}s "
               f"after A's batch {marker['batch_id']} ended")  # fmt: skip
        time.sleep(LEASE + 1.0)
        restart = time.monotonic()
        kafka.start()
        outage, down_total = restart - stopped_at, time.monotonic() - down
        s.note(f"broker started again: down at least {outage:.1f}s (lease {LEASE:g}s), {down_total:.1f}s in all")
        baseline = sampler.after(time.time())
        s.wait(lambda: s.committed_beyond(sampler, baseline, sorted(producers.sent)), "every partition committed again after the outage")

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
        status = s.kill("B")
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
        statuses = {consumer: s.pipelines[consumer].terminate(90) for consumer in "ABC"}
        s.note(f"pipelines ended: {statuses}")
        sampler.halt.set()
        sampler.join(10)
        assert statuses == {"A": 0, "B": 0, "C": 0}, statuses

        # -- the verdict: the sinks' records and the broker's log of commits
        v = judge(s, GROUP, SINK, ends, seeded, LEASE, [g1, g2, g3, g4, g5], sampler, kafka)
        staged, figures = pause_findings(v, s, pause, "B", a_summary)
        during = [q for q in v.queries if q.ended == "lapse" and outage_from <= q.live_end <= outage_from + down_total + LEASE]
        v.notes += figures
        v.notes.append(
            f"  broker down {outage:.1f}s+ ({down_total:.1f}s in all) from {outage_from - float(marker['ended']):.2f}s after "
            f"one of A's batches ended: queries lapsed {len(during)}, commits that failed or waited since "
            f"{s.log_count('commit of', outage_from)} (failed transactional writes {s.log_count('write failed', outage_from)}); "
            f"producers waited {producers.waited:.1f}s"
        )
        v.notes += follower_figures(v, s, pause)
        v.notes.append(f"  readers of {ORDERS}-0: {' -> '.join(readers(v.records, (ORDERS, 0)))}; commit samples {len(sampler.samples)} "
                       f"(missed {sampler.errors})")  # fmt: skip
        with capsys.disabled():
            print(
                f"\nhandover proof: {time.monotonic() - began:.0f}s; planner runs {len(s.planner_seconds)} "
                f"({', '.join(f'{x:.0f}s' for x in s.planner_seconds)}); C stopped {c_pause:.1f}s (lease {LEASE:g}s)\n"
                + "\n".join(v.summary()),
                flush=True,
            )

        problems = v.problems(ends)
        assert problems == [], "\n".join(problems[:30])
        assert staged == [], "\n".join(staged)
        # -- and the rest of the faults happened as staged
        assert readers(v.records, (ORDERS, 0)) == ["A", "B", "A"], readers(v.records, (ORDERS, 0))
        assert readers(v.records, (PAYMENTS, 1))[-1] == "A"  # moved from B to A by generation 5
        assert {r.partition for r in v.records if r.topic == PAYMENTS} == set(range(GROWN))
        assert outage > LEASE and during, "the outage did not outlast the leases of the queries reading then"
        b_runs = {r.incarnation for r in v.records if r.consumer == "B"}
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
