"""Pipelines that follow the plan, against the real broker and real Spark: the loop
plan -> pipelines -> committed lag -> plan, handovers between generations while a producer
keeps writing, and the faults a pipeline must survive or report. The store here is a plan
directory (the Kafka store is proven by tests/integration/test_handover_processes.py)."""

from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pytest

from spark_lag_assign import config
from spark_lag_assign.consume import PlanFollower, RunSummary, read_assigned
from spark_lag_assign.consume.kafka_commit import FencedGroupCommit, commit_id
from spark_lag_assign.errors import (
    ConsumerNotInPlanError,
    HandoverTimeoutError,
    KafkaCommitError,
    NothingAssignedError,
    PlanError,
)
from spark_lag_assign.extract.offsets import read_offsets
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.spark import job
from spark_lag_assign.store import ClaimRecord, open_store
from spark_lag_assign.testing.localkafka import LocalKafka, commit, create_topic, produce
from tests.contract import directory_faults

#: every test here reads with Spark's Kafka source: the shared session loads its jars
pytestmark = pytest.mark.kafka_source

REPO = Path(__file__).resolve().parents[2]
MAX_PER_TRIGGER = 50  # a micro-batch holds at most this many records: the duplicate bound per moved partition
LEASE = 10.0


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_pipeline", REPO / "jobs" / "example_pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = load_example()


def wait_until(check: Callable[[], bool], timeout: float, what: str, pause: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting until {what}")
        time.sleep(pause)


def group_offsets(bootstrap: str, group: str, topic: str) -> pd.DataFrame:
    return read_offsets(bootstrap, group, topics=[topic]).set_index("partition")


def caught_up(bootstrap: str, group: str, topic: str, ends: dict[int, int] | None = None) -> bool:
    """Whether the group's commits reached ``ends`` (default: the partitions' end offsets now)."""
    frame = group_offsets(bootstrap, group, topic)
    targets = ends if ends is not None else {int(p): int(e) for p, e in frame["end_offset"].items()}
    committed = frame["committed_offset"]
    return all(pd.notna(committed[p]) and int(committed[p]) >= target for p, target in targets.items())


class Producer(threading.Thread):
    """Keeps appending ``b"<topic>:<partition>:<seq>"`` to every partition until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, start: int, per_round: int = 1, pause: float = 0.4):
        super().__init__(name=f"producer-{topic}", daemon=True)
        self.bootstrap, self.topic, self.per_round, self.pause = bootstrap, topic, per_round, pause
        self.sent = dict.fromkeys(range(partitions), start)  # acknowledged records per partition
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks=1, linger_ms=5, client_id="sla-test-producer")
        try:
            while not self.halt.is_set():
                futures = []
                for p in sorted(self.sent):
                    for seq in range(self.sent[p], self.sent[p] + self.per_round):
                        futures.append(producer.send(self.topic, value=f"{self.topic}:{p}:{seq}".encode(), partition=p))
                producer.flush(timeout=30)
                for f in futures:
                    f.get(timeout=30)
                for p in self.sent:
                    self.sent[p] += self.per_round
                self.halt.wait(self.pause)
        except BaseException as exc:  # surfaced by the test, which owns the failure
            self.error = exc
        finally:
            producer.close()

    def produced(self) -> set[str]:
        return {f"{self.topic}:{p}:{seq}" for p, n in self.sent.items() for seq in range(n)}


class Running:
    """A follower running in its own thread, as one pipeline would run on its own host."""

    def __init__(self, follower: PlanFollower, **run_options: Any) -> None:
        self.follower = follower
        self.summary: RunSummary | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, kwargs=run_options, name=f"follow-{follower.consumer}")
        self.thread.start()

    def _run(self, **run_options: Any) -> None:
        try:
            self.summary = self.follower.run(**run_options)
        except BaseException as exc:
            self.error = exc

    def started(self, generation: int) -> bool:
        if self.error is not None:
            raise AssertionError(f"{self.follower.consumer} failed") from self.error
        return any(e.kind == "start" and e.generation == generation for e in self.follower.events)

    def finish(self, timeout: float = 120) -> RunSummary:
        self.follower.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"{self.follower.consumer} did not stop within {timeout}s"
        if self.error is not None:
            raise self.error
        assert self.summary is not None
        return self.summary


def follower(spark: Any, plan_dir: Path, consumer: str, root: Path, bootstrap: str, **options: Any) -> PlanFollower:
    settings: dict[str, Any] = {
        "checkpoint_root": str(root / "checkpoints"),
        "lease": LEASE,
        "kafka_options": {"kafka.bootstrap.servers": bootstrap, "maxOffsetsPerTrigger": MAX_PER_TRIGGER},
        "poll_interval": 1.0,
        "handover_timeout": 120.0,
        "commit_timeout": 30.0,
        "stop_timeout": 20.0,
    }
    settings.update(options)
    return PlanFollower(spark, str(plan_dir), consumer, example.parquet_sink(str(root / "sink"), interval="1 second"), **settings)


def claims(plan_dir: Path) -> dict[str, ClaimRecord]:
    with open_store(str(plan_dir)) as store:
        found = store.claims()
    assert all(isinstance(c, ClaimRecord) for c in found.values()), found
    return found  # type: ignore[return-value]


def holds(topic: str, *partitions: int) -> frozenset[tuple[str, int]]:
    return frozenset((topic, p) for p in partitions)


def read_sinks(spark: Any, root: Path) -> pd.DataFrame:
    """Every committed record of every consumer's sinks, with the consumer and generation."""
    frames = []
    for d in sorted((root / "sink").glob("*/gen-*")):
        if not (d / "_spark_metadata").is_dir():
            continue
        frame = spark.read.schema(example.SINK_SCHEMA).parquet(str(d)).select("topic", "partition", "offset", "value").toPandas()
        frame["consumer"] = d.parent.name
        frame["generation"] = int(d.name.split("-")[1])
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def plan_range(spark: Any, bootstrap: str, group: str, topic: str, consumers: str, plan_dir: Path) -> plan_io.Plan:
    """Run the planning job live with ``range`` (easy to predict) and write the next generation."""
    settings = config.settings(
        bootstrap_servers=bootstrap, group=group, topics=topic, consumers=consumers,
        strategy="range", reset="earliest", output=str(plan_dir),
    )  # fmt: skip
    return job.run(settings, spark).plan


def owners(plan: plan_io.Plan) -> dict[tuple[str, int], str]:
    return {(t, p): c for c, entry in plan["consumers"].items() for t, ps in entry["assign"].items() for p in ps}


# -- the loop: a consumer joins, then one leaves, while records keep coming ------------------------

TOPIC, GROUP, PARTITIONS, BACKLOG = "events", "stream-it", 6, 30


@pytest.fixture(scope="module")
def events(kafka: LocalKafka) -> str:
    create_topic(kafka.bootstrap_servers, TOPIC, PARTITIONS)
    produce(kafka.bootstrap_servers, TOPIC, dict.fromkeys(range(PARTITIONS), BACKLOG))
    # the group exists from the start, as a group that pipelines feed would
    commit(kafka.bootstrap_servers, GROUP, {(TOPIC, p): 0 for p in range(PARTITIONS)})
    return TOPIC


def test_pipelines_follow_the_plan_through_a_join_and_a_leave_without_losing_records(
    kafka: LocalKafka,
    events: str,
    spark: Any,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    bootstrap = kafka.bootstrap_servers
    plan_dir = tmp_path / "plan"

    def replan(consumers: str) -> plan_io.Plan:
        return plan_range(spark, bootstrap, GROUP, events, consumers, plan_dir)

    plans = {1: replan("C0,C1")}
    assert {c: e["assign"] for c, e in plans[1]["consumers"].items()} == {"C0": {events: [0, 1, 2]}, "C1": {events: [3, 4, 5]}}
    producer = Producer(bootstrap, events, PARTITIONS, start=BACKLOG, pause=1.0)
    producer.start()
    running = {c: Running(follower(spark, plan_dir, c, tmp_path, bootstrap)) for c in ("C0", "C1")}
    try:
        wait_until(lambda: all(r.started(1) for r in running.values()), 120, "C0 and C1 read generation 1")
        wait_until(
            lambda: caught_up(bootstrap, GROUP, events, dict.fromkeys(range(PARTITIONS), BACKLOG)),
            120,
            "the backlog is committed",
        )

        # a consumer joins: range moves t-2 from C0 to C1 and t-4, t-5 from C1 to C2
        plans[2] = replan("C0,C1,C2")
        assert {c: e["assign"] for c, e in plans[2]["consumers"].items()} == {
            "C0": {events: [0, 1]}, "C1": {events: [2, 3]}, "C2": {events: [4, 5]},
        }  # fmt: skip
        running["C2"] = Running(follower(spark, plan_dir, "C2", tmp_path, bootstrap))
        wait_until(lambda: all(r.started(2) for r in running.values()), 180, "all three read generation 2")
        mark = dict(producer.sent.items())
        wait_until(lambda: caught_up(bootstrap, GROUP, events, mark), 120, "the new owners commit past the handover")

        # one leaves: t-2 goes back to C0 and t-3 to C2; C1's follower releases and returns
        plans[3] = replan("C0,C2")
        assert {c: e["assign"] for c, e in plans[3]["consumers"].items()} == {
            "C0": {events: [0, 1, 2]},
            "C2": {events: [3, 4, 5]},
        }
        wait_until(lambda: running["C1"].summary is not None or running["C1"].error is not None, 120, "C1 leaves")
        wait_until(lambda: running["C0"].started(3) and running["C2"].started(3), 180, "C0 and C2 read generation 3")
        mark = dict(producer.sent.items())
        wait_until(lambda: caught_up(bootstrap, GROUP, events, mark), 120, "the owners commit past the second handover")
    finally:
        producer.halt.set()
        producer.join(60)
    assert producer.error is None, producer.error
    wait_until(lambda: caught_up(bootstrap, GROUP, events), 120, "the group's commits reach the end offsets")
    summaries = {c: r.finish() for c, r in running.items()}
    assert {c: s.reason for c, s in summaries.items()} == {"C0": "stopped", "C1": "left", "C2": "stopped"}
    assert all(s.commit_failures == 0 for s in summaries.values())
    end = group_offsets(bootstrap, GROUP, events)
    assert (
        [int(c) for c in end["committed_offset"]]
        == [int(e) for e in end["end_offset"]]
        == [producer.sent[p] for p in range(PARTITIONS)]
    )

    records = read_sinks(spark, tmp_path)
    produced = producer.produced()
    # at least once: nothing produced is missing, nothing else was read
    assert produced - set(records["value"]) == set()
    assert set(records["value"]) - produced == set()
    # each record was read by the partition's owner in the generation that wrote its sink
    for (consumer, generation), part in records.groupby(["consumer", "generation"]):
        own = {p for (_, p), c in owners(plans[generation]).items() if c == consumer}
        assert set(part["partition"]) <= own, (consumer, generation)
    # duplicates: none on a partition that never moved, at most one micro-batch per move
    moves = {
        p: sum(owners(plans[g])[(events, p)] != owners(plans[g + 1])[(events, p)] for g in (1, 2)) for p in range(PARTITIONS)
    }
    assert moves == {0: 0, 1: 0, 2: 2, 3: 1, 4: 1, 5: 1}
    duplicates = {int(p): int(len(g) - g["value"].nunique()) for p, g in records.groupby("partition")}
    for p in range(PARTITIONS):
        assert duplicates.get(p, 0) <= MAX_PER_TRIGGER * moves[p], (p, duplicates)
    # a new owner starts exactly where the old one committed when it let go
    for g in (2, 3):
        for (t, p), new_owner in owners(plans[g]).items():
            old_owner = owners(plans[g - 1])[(t, p)]
            if old_owner == new_owner:
                continue
            released = next(
                e for e in running[old_owner].follower.events
                if e.kind == "claim" and e.generation >= g and p not in e.assign.get(t, [])
            )  # fmt: skip
            started = next(e for e in running[new_owner].follower.events if e.kind == "start" and e.generation == g)
            assert released.at < started.at, f"{new_owner} started {t}-{p} before {old_owner} released it"
            handed = next(e for e in reversed(running[old_owner].follower.events) if e.kind == "stop" and e.at <= released.at)
            final = json.loads(handed.detail)[f"{t}-{p}"]
            assert json.loads(started.detail)[t][str(p)] == final
            first_read = records[(records["consumer"] == new_owner) & (records["generation"] == g) & (records["partition"] == p)]
            assert int(first_read["offset"].min()) == final
    # what the followers left behind: C1 holds nothing, the others released on stop
    assert {c: (x.generation, x.holds, x.state) for c, x in claims(plan_dir).items()} == {
        "C0": (3, frozenset(), "released"), "C1": (3, frozenset(), "left"), "C2": (3, frozenset(), "released"),
    }  # fmt: skip


# -- reading with a plan -------------------------------------------------------------------------


def hand_plan(
    directory: Path,
    generation: int,
    consumers: dict[str, dict[str, list[int]]],
    starting: dict[str, dict[str, dict[str, int]]],
    group: str | None = "fixed-it",
) -> None:
    """Publish a plan written by hand as the store's next generation (which must be ``generation``)."""
    rows = [
        (c, t, p, 0, starting.get(c, {}).get(t, {}).get(str(p), -2))
        for c, assign in consumers.items() for t, ps in assign.items() for p in ps
    ]  # fmt: skip
    frame = pd.DataFrame(rows, columns=list(plan_io.PLAN_COLUMNS))
    doc = plan_io.build_plan(
        frame,
        {c: list(a) or ["fixed"] for c, a in consumers.items()},
        generation=generation,
        strategy="range",
        reset="earliest",
        group=group,
    )
    with open_store(str(directory)) as store, store.publisher() as publisher:
        assert publisher.next_generation() == generation
        publisher.publish(doc)


@pytest.fixture(scope="module")
def fixed(kafka: LocalKafka) -> str:
    create_topic(kafka.bootstrap_servers, "fixed", 3)
    produce(kafka.bootstrap_servers, "fixed", {0: 30, 1: 20, 2: 10})
    return "fixed"


def test_read_assigned_streams_the_consumers_partitions_from_the_planned_offsets(
    kafka: LocalKafka,
    fixed: str,
    spark: Any,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    hand_plan(tmp_path, 1, {"A": {fixed: [0, 2]}, "B": {fixed: [1]}}, {"A": {fixed: {"0": 25, "2": -2}}})
    stream = read_assigned(spark, str(tmp_path), "A", bootstrap_servers=kafka.bootstrap_servers, maxOffsetsPerTrigger=7)
    assert (stream.generation, stream.assign, stream.group) == (1, {fixed: [0, 2]}, "fixed-it")
    assert stream.starting_offsets == {fixed: {"0": 25, "2": -2}}
    assert stream.options == {"kafka.bootstrap.servers": kafka.bootstrap_servers, "maxOffsetsPerTrigger": "7"}
    query = (
        stream.df.selectExpr("CAST(value AS STRING) AS value").writeStream.format("memory")
        .queryName("read_assigned_a").trigger(availableNow=True)
        .option("checkpointLocation", str(tmp_path / "chk")).start()
    )  # fmt: skip
    query.awaitTermination(120)
    got = sorted(r.value for r in spark.sql("SELECT value FROM read_assigned_a").collect())
    query.stop()
    assert got == sorted([f"fixed:0:{s}" for s in range(25, 30)] + [f"fixed:2:{s}" for s in range(10)])


@pytest.mark.parametrize("damage", ["no-plan", "damaged"])
def test_a_missing_or_unreadable_plan_at_start_is_a_clear_error(
    kafka: LocalKafka,
    fixed: str,
    spark: Any,
    tmp_path: Path,
    damage: str,  # type: ignore[no-untyped-def]
) -> None:
    plan_dir = tmp_path / "plan"
    if damage == "damaged":
        hand_plan(plan_dir, 1, {"A": {fixed: [0]}}, {})
        directory_faults.damage_generation(plan_dir, 1)
    expected = r"no plan in the store .*plan"
    with pytest.raises(PlanError, match=expected):
        read_assigned(spark, str(plan_dir), "A", bootstrap_servers=kafka.bootstrap_servers)
    with pytest.raises(PlanError, match=expected):
        follower(spark, plan_dir, "A", tmp_path, kafka.bootstrap_servers).run()
    assert claims(plan_dir) == {}  # it claimed nothing


def test_a_consumer_the_plan_does_not_name_is_a_clear_error(
    kafka: LocalKafka,
    fixed: str,
    spark: Any,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    hand_plan(tmp_path, 1, {"A": {fixed: [0, 1, 2]}, "idle": {}}, {})
    message = r"consumer 'Z' is not in generation 1 of the plan at .* \(consumers: A, idle\)"
    with pytest.raises(ConsumerNotInPlanError, match=message):
        read_assigned(spark, str(tmp_path), "Z", bootstrap_servers=kafka.bootstrap_servers)
    with pytest.raises(ConsumerNotInPlanError, match=message):
        follower(spark, tmp_path, "Z", tmp_path, kafka.bootstrap_servers).run()
    with pytest.raises(NothingAssignedError, match="'idle' has no partitions in generation 1"):
        read_assigned(spark, str(tmp_path), "idle", bootstrap_servers=kafka.bootstrap_servers)


def test_a_partition_whose_old_owner_never_releases_it_times_out_with_a_report(
    kafka: LocalKafka,
    fixed: str,
    spark: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
) -> None:
    plan_dir = tmp_path / "plan"
    hand_plan(plan_dir, 1, {"A": {fixed: [0, 1]}, "B": {fixed: [2]}}, {})
    hand_plan(plan_dir, 2, {"A": {fixed: [0]}, "B": {fixed: [1, 2]}}, {})
    # A read generation 1 and hangs without releasing: its claim names fixed-1, with a long lease
    with open_store(str(plan_dir)) as store, store.claim_writer("A") as writer:
        writer.write(1, holds(fixed, 0, 1), lease=600.0, state="reading")
    started = time.monotonic()
    with (
        caplog.at_level(logging.ERROR, logger="spark_lag_assign"),
        pytest.raises(HandoverTimeoutError, match=r"B waited 3s .* A holds fixed-1 under generation 1"),
    ):
        follower(spark, plan_dir, "B", tmp_path, kafka.bootstrap_servers, handover_timeout=3.0).run()
    assert 3 <= time.monotonic() - started < 30
    assert any("A holds fixed-1 under generation 1" in r.getMessage() for r in caplog.records)
    found = claims(plan_dir)
    assert (found["B"].generation, found["B"].holds) == (2, frozenset())  # it read nothing, so it holds nothing
    assert (found["A"].generation, found["A"].holds) == (1, holds(fixed, 0, 1))
    assert not (tmp_path / "sink" / "B").exists()


def test_the_example_pipeline_runs_locally_reads_the_backlog_and_commits_it(
    kafka: LocalKafka,
    fixed: str,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """``jobs/example_pipeline.py --local --available-now`` in its own process, as a user runs it."""
    plan_dir, out = tmp_path / "plan", tmp_path / "out"
    hand_plan(plan_dir, 1, {"A": {fixed: [0, 2]}, "B": {fixed: [1]}}, {}, group="example-local")
    cmd = [
        sys.executable, str(REPO / "jobs" / "example_pipeline.py"), "--local", "--available-now",
        "--plan", str(plan_dir), "--consumers", "A,B", "--bootstrap-servers", kafka.bootstrap_servers,
        "--output", str(out / "sink"), "--checkpoints", str(out / "chk"), "--poll-interval", "1",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith(("A:", "B:"))]
    assert lines == [
        f"A: 40 records ({fixed}p0 30, {fixed}p2 10); generation(s) 1; committed {fixed}p0@30, {fixed}p2@10; ended: drained",
        f"B: 20 records ({fixed}p1 20); generation(s) 1; committed {fixed}p1@20; ended: drained",
    ], done.stdout
    committed = group_offsets(kafka.bootstrap_servers, "example-local", fixed)["committed_offset"]
    assert [int(committed[p]) for p in range(3)] == [30, 20, 10]
    # bad input: one line, exit status 1
    bad = subprocess.run([*cmd[:6], "--consumers", "Z", *cmd[8:]], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines()[-1].startswith("error: Z: consumer 'Z' is not in generation 1"), bad.stderr[-2000:]


def test_a_kafka_source_of_another_spark_version_stops_the_pipeline_with_one_line_naming_both(
    kafka: LocalKafka, fixed: str, tmp_path: Path
) -> None:
    """The other line's source in ``--jars`` (as a user who copied the wrong ``--packages``
    would have): one line before Spark tries to load it, not the JVM's linkage error."""
    import zipfile

    import pyspark

    from spark_lag_assign import sparkcompat
    from spark_lag_assign.spark import session

    scala, version = ("2.12", "3.5.7") if sparkcompat.scala_binary_for(pyspark.__version__) == "2.13" else ("2.13", "4.0.0")
    foreign = tmp_path / f"spark-sql-kafka-0-10_{scala}-{version}.jar"
    with zipfile.ZipFile(foreign, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    plan_dir, out = tmp_path / "plan", tmp_path / "out"
    hand_plan(plan_dir, 1, {"A": {fixed: [0, 1, 2]}}, {}, group="foreign-source")
    argv = session.submit_command(
        REPO / "jobs" / "example_pipeline.py", "--available-now", "--plan", str(plan_dir), "--consumers", "A",
        "--bootstrap-servers", kafka.bootstrap_servers, "--output", str(out / "sink"), "--checkpoints", str(out / "chk"),
    )  # fmt: skip
    argv[1:1] = ["--jars", str(foreign)]
    done = subprocess.run(argv, env=session.submit_env(), capture_output=True, text=True, timeout=600, cwd=tmp_path)
    said = done.stdout + done.stderr  # spark-submit's Python runner merges the script's streams
    assert done.returncode == 1, said[-3000:]
    errors = [line for line in said.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: A: Spark's Kafka source spark-sql-kafka-0-10_{scala} {version} does not match Spark {pyspark.__version__}: "
        f"use {sparkcompat.kafka_source_coordinate(pyspark.__version__)}"
    ], said[-3000:]
    assert "Traceback" not in said
    assert not (out / "sink").exists()


# -- faults while running -----------------------------------------------------------------------


@pytest.fixture
def trickle(kafka: LocalKafka, request: pytest.FixtureRequest) -> Iterator[tuple[str, str, Producer]]:
    """A fresh two-partition topic and group, with a producer writing to it during the test."""
    topic = group = f"trickle-{request.node.name.split('[')[0][-24:].replace('_', '-')}"
    create_topic(kafka.bootstrap_servers, topic, 2)
    commit(kafka.bootstrap_servers, group, {(topic, 0): 0, (topic, 1): 0})
    producer = Producer(kafka.bootstrap_servers, topic, 2, start=0, pause=0.3)
    producer.start()
    yield topic, group, producer
    producer.halt.set()
    producer.join(60)
    assert producer.error is None


def test_a_failed_commit_is_logged_and_caught_up_by_the_next_batch(
    kafka: LocalKafka,
    spark: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    trickle: tuple[str, str, Producer],  # type: ignore[no-untyped-def]
) -> None:
    topic, group, producer = trickle
    plan_dir = tmp_path / "plan"
    plan_range(spark, kafka.bootstrap_servers, group, topic, "A", plan_dir)
    real = FencedGroupCommit(kafka.bootstrap_servers, group, commit_id("plan", "A"), "A")
    real.open()
    real.allow(new_query=True)
    calls: list[dict[tuple[str, int], int]] = []

    def broker_away_once(offsets: Any, generation: int) -> None:
        calls.append(dict(offsets))
        if len(calls) == 2:  # the broker is unreachable for this one commit
            raise KafkaCommitError(f"committing offsets for group {group} failed: KafkaConnectionError: injected")
        real(offsets, generation)

    caplog.set_level(logging.WARNING, logger="spark_lag_assign")
    run = Running(follower(spark, plan_dir, "A", tmp_path, kafka.bootstrap_servers, commit=broker_away_once))
    try:
        wait_until(lambda: len(calls) >= 3, 120, "a commit after the failed one")
        assert run.follower.query is not None and run.follower.query.isActive
        # the retry carries the failed batch's offsets on: nothing is left behind, nothing goes back
        for tp, offset in calls[1].items():
            assert tp in calls[2] and calls[2][tp] >= offset
        mark = dict(producer.sent)
        wait_until(lambda: caught_up(kafka.bootstrap_servers, group, topic, mark), 120, "the group catches up")
    finally:
        summary = run.finish()
        real.close()
    assert summary.reason == "stopped" and summary.commit_failures == 1
    assert [e.kind for e in summary.events].count("start") == 1
    assert any("retrying with the next batch" in r.getMessage() and "injected" in r.getMessage() for r in caplog.records)


def test_an_old_owner_whose_final_commit_fails_keeps_its_claim_until_it_can_hand_over(
    kafka: LocalKafka,
    spark: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    trickle: tuple[str, str, Producer],  # type: ignore[no-untyped-def]
) -> None:
    """Releasing a partition whose last batch is not committed would start the new owner behind
    what was read and written: the old owner keeps its claim, the new one waits and says who it
    waits for, and once the old owner commits and lets go the new one starts where it stopped."""
    topic, group, producer = trickle
    bootstrap = kafka.bootstrap_servers
    plan_dir = tmp_path / "plan"

    def replan(consumers: str) -> plan_io.Plan:
        return plan_range(spark, bootstrap, group, topic, consumers, plan_dir)

    replan("A")
    real = FencedGroupCommit(bootstrap, group, commit_id("plan", "A"), "A")
    real.open()
    real.allow(new_query=True)
    broker_away = threading.Event()

    def commit_unless_away(offsets: Any, generation: int) -> None:
        if broker_away.is_set():
            raise KafkaCommitError(f"committing offsets for group {group} failed: KafkaConnectionError: injected")
        real(offsets, generation)

    caplog.set_level(logging.WARNING, logger="spark_lag_assign")
    running: list[Running] = []
    first = Running(follower(spark, plan_dir, "A", tmp_path, bootstrap, commit=commit_unless_away, commit_timeout=2.0))
    try:
        wait_until(lambda: first.started(1), 120, "A reads generation 1")
        mark = dict(producer.sent)
        wait_until(lambda: caught_up(bootstrap, group, topic, mark), 120, "A commits what it reads")
        failed = first.follower.committer.failures
        broker_away.set()
        # A must hold a batch it read and could not commit when it stops: without one its final
        # commit has nothing to do, and it releases partition 1 as it should (slow triggers
        # on a loaded machine made that happen)
        wait_until(lambda: first.follower.committer.failures > failed, 120, "a batch of A is read and its commit fails")
        assert replan("A,B")["consumers"]["B"]["assign"] == {topic: [1]}
        first.thread.join(120)
        assert not first.thread.is_alive(), (  # what A's loop last did, should this ever happen
            f"A runs on 120s after generation 2: last events {[(e.kind, e.generation, e.detail) for e in first.follower.events[-8:]]}; "
            f"query active {first.follower.query is not None and first.follower.query.isActive}"
        )
        assert isinstance(first.error, KafkaCommitError) and "did not succeed within 2s" in str(first.error), first.error
        # A read further than the group holds, so it keeps claiming both partitions under generation 1
        claim = claims(plan_dir)["A"]
        assert (claim.generation, claim.holds) == (1, holds(topic, 0, 1))
        assert claim.state != "released"
        assert any("A keeps its claim" in r.getMessage() for r in caplog.records)
        with pytest.raises(HandoverTimeoutError, match=rf"B waited 3s .* A holds {topic}-1 under generation 1"):
            follower(spark, plan_dir, "B", tmp_path, bootstrap, handover_timeout=3.0).run()
        assert not (tmp_path / "sink" / "B").exists()

        # the broker is back: A, restarted, follows generation 2 and gives partition 1 up; B starts
        broker_away.clear()
        held = group_offsets(bootstrap, group, topic)["committed_offset"]
        again = Running(follower(spark, plan_dir, "A", tmp_path, bootstrap, commit=commit_unless_away))
        newcomer = Running(follower(spark, plan_dir, "B", tmp_path, bootstrap))
        running += [again, newcomer]
        wait_until(lambda: again.started(2) and newcomer.started(2), 180, "A and B read generation 2")
        started = next(e for e in newcomer.follower.events if e.kind == "start")
        assert json.loads(started.detail) == {topic: {"1": int(held[1])}}  # where the group's commit stood
        mark = dict(producer.sent)
        wait_until(lambda: caught_up(bootstrap, group, topic, mark), 120, "A and B commit past the handover")
        producer.halt.set()
        producer.join(60)
        wait_until(lambda: caught_up(bootstrap, group, topic), 120, "the group's commits reach the end offsets")
    finally:
        producer.halt.set()
        producer.join(60)
        if first.thread.is_alive():  # the test failed before A gave up: do not leave its query running
            broker_away.clear()
            first.finish()
        summaries = [r.finish() for r in running]
        real.close()
    assert [s.reason for s in summaries] == ["stopped", "stopped"]
    records = read_sinks(spark, tmp_path)
    assert producer.produced() - set(records["value"]) == set()  # the failed handover lost nothing
    assert set(records[records["consumer"] == "B"]["partition"]) == {1}


def test_a_broker_outage_between_a_batch_and_its_commit_is_caught_up_without_a_restart(
    spark: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
) -> None:
    """A broker of its own, stopped while a batch sits in the sink (read, not yet committed) and
    started again on the same port with the same data, away for longer than the lease: the
    commit fails and is logged, the loop's Kafka calls (reopening the committer) return within
    a quarter of the lease, so its claims (a directory: reachable all along) keep the query
    running, and the next batch's commit carries the missed offsets."""
    lease = 6.0
    broker = LocalKafka(tmp_path / "kafka")
    with broker:
        bootstrap, topic, group = broker.bootstrap_servers, "outage", "outage-it"
        create_topic(bootstrap, topic, 2)
        produce(bootstrap, topic, {0: 20, 1: 20})
        commit(bootstrap, group, {(topic, 0): 0, (topic, 1): 0})
        plan_dir = tmp_path / "plan"
        plan_range(spark, bootstrap, group, topic, "A", plan_dir)

        seen: list[str] = []
        hold, held, release = threading.Event(), threading.Event(), threading.Event()

        def sink(batch: Any, batch_id: int) -> None:
            seen.extend(r.value for r in batch.selectExpr("CAST(value AS STRING) AS value").collect())
            if hold.is_set():  # this batch is read; its commit comes after the sink returns
                held.set()
                release.wait(120)

        def start(stream: Any, checkpoint: str) -> Any:
            writer = stream.df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
            return writer.trigger(processingTime="1 second").start()

        caplog.set_level(logging.WARNING, logger="spark_lag_assign")
        run = Running(PlanFollower(
            spark, str(plan_dir), "A", start, checkpoint_root=str(tmp_path / "checkpoints"),
            kafka_options={"kafka.bootstrap.servers": bootstrap}, poll_interval=1.0, lease=lease,
            commit_timeout=30.0, stop_timeout=20.0,
        ))  # fmt: skip
        try:
            wait_until(lambda: run.started(1), 120, "A reads generation 1")
            wait_until(lambda: caught_up(bootstrap, group, topic, {0: 20, 1: 20}), 120, "the backlog is committed")
            hold.set()
            produce(bootstrap, topic, {0: 5, 1: 5}, start={0: 20, 1: 20})
            wait_until(held.is_set, 120, "a batch with the new records reaches the sink")
            broker.stop()
            hold.clear()
            release.set()
            away = time.monotonic()
            wait_until(lambda: run.follower.committer.failures >= 1, 120, "the commit fails while the broker is away")
            time.sleep(max(0.0, away + lease + 2.0 - time.monotonic()))  # away for longer than the lease
            broker.start()  # same port, same data: the group's earlier commits are still there
            assert caught_up(bootstrap, group, topic, {0: 20, 1: 20})
            produce(bootstrap, topic, {0: 5, 1: 5}, start={0: 25, 1: 25})
            wait_until(lambda: caught_up(bootstrap, group, topic, {0: 30, 1: 30}), 180, "the commits catch up")
            assert run.follower.query is not None and run.follower.query.isActive
        finally:
            release.set()
            summary = run.finish()
    assert summary.reason == "stopped" and summary.commit_failures >= 1
    assert [e.kind for e in summary.events].count("start") == 1  # the query was never restarted
    assert not any("lapsed" in r.getMessage() for r in caplog.records)
    assert set(seen) >= {f"{topic}:{p}:{s}" for p in (0, 1) for s in range(30)}
    assert any("retrying with the next batch" in r.getMessage() for r in caplog.records)
