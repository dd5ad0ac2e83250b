"""The planner job end to end against the real broker: spark-submit, the console script,
snapshots replayed offline, and the faults a scheduled job meets."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_lag_assign import cli
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.spark.session import submit_command, submit_env
from spark_lag_assign.testing.localkafka import LocalKafka, commit, create_topic, produce
from tests.unit.test_plan import tree

REPO = Path(__file__).resolve().parents[2]
PRODUCED = {0: 40, 1: 400, 2: 4, 3: 90, 4: 200, 5: 7}
COMMITTED = {0: 40, 1: 100, 2: 0, 3: 10, 4: 0}  # 5: none


@pytest.fixture(scope="module")
def payments(kafka: LocalKafka) -> str:
    create_topic(kafka.bootstrap_servers, "payments", 6)
    produce(kafka.bootstrap_servers, "payments", PRODUCED)
    commit(kafka.bootstrap_servers, "payments-pipelines", {("payments", p): o for p, o in COMMITTED.items()})
    return "payments"


def submit(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = submit_command(REPO / "jobs" / "plan_assignments.py", *args)
    return subprocess.run(cmd, env=submit_env(), capture_output=True, text=True, timeout=600)


def console(*args: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).parent / "spark-lag-assign"
    return subprocess.run([str(exe), *args], env=submit_env(), capture_output=True, text=True, timeout=600)


def test_spark_submit_live_then_replayed_from_a_snapshot_gives_the_same_plan(
    kafka: LocalKafka, payments: str, tmp_path: Path
) -> None:
    live = submit(
        "--bootstrap-servers",
        kafka.bootstrap_servers,
        "--group",
        "payments-pipelines",
        "--topics",
        payments,
        "--consumers",
        "p-a,p-b,p-c",
        "--reset",
        "earliest",
        "--output",
        str(tmp_path / "live"),
    )
    assert live.returncode == 0, live.stderr[-2000:]
    assert "plan generation 1 (lag-sticky, reset=earliest)" in live.stdout
    snap = console(
        "snapshot",
        "--bootstrap-servers",
        kafka.bootstrap_servers,
        "--group",
        "payments-pipelines",
        "--topics",
        payments,
        "--output",
        str(tmp_path / "offsets.parquet"),
    )
    assert snap.returncode == 0, snap.stderr
    assert "wrote 6 partitions of 1 topic(s)" in snap.stdout
    offline = submit(
        "--offsets",
        str(tmp_path / "offsets.parquet"),
        "--consumers",
        "p-a,p-b,p-c",
        "--reset",
        "earliest",
        "--output",
        str(tmp_path / "offline"),
    )
    assert offline.returncode == 0, offline.stderr[-2000:]
    a, b = plan_io.read_plan(tmp_path / "live"), plan_io.read_plan(tmp_path / "offline")
    assert {c: e["assign"] for c, e in a["consumers"].items()} == {c: e["assign"] for c, e in b["consumers"].items()}
    assert {c: e["startingOffsets"] for c, e in a["consumers"].items()} == {
        c: e["startingOffsets"] for c, e in b["consumers"].items()
    }
    lags = {p: PRODUCED[p] - COMMITTED.get(p, 0) for p in PRODUCED}
    assert a["totals"]["lag"] == sum(lags.values())
    assert sorted(p for e in a["consumers"].values() for p in e["assign"]["payments"]) == list(range(6))
    # startingOffsets: the commit where there is one, earliest (-2) where there is none
    starts = {int(p): o for e in a["consumers"].values() for p, o in e["startingOffsets"]["payments"].items()}
    assert starts == {**COMMITTED, 5: -2}
    shown = console("show", str(tmp_path / "live"))
    assert shown.returncode == 0 and "p-a" in shown.stdout and "optimality" in shown.stdout


def test_spark_submit_with_bad_input_exits_non_zero_with_one_line(kafka: LocalKafka, payments: str, tmp_path: Path) -> None:
    done = submit(
        "--bootstrap-servers",
        kafka.bootstrap_servers,
        "--group",
        "payments-pipelines",
        "--topics",
        "nope",
        "--consumers",
        "a",
        "--output",
        str(tmp_path / "p"),
    )
    assert done.returncode == 1
    # spark-submit's PythonRunner merges the script's stderr into its own stdout
    output = done.stdout + done.stderr
    errors = [line for line in output.splitlines() if line.startswith("spark-lag-assign: error:")]
    assert errors == ["spark-lag-assign: error: topic(s) not found in the cluster: nope"]
    assert not (tmp_path / "p" / "plan.json").exists()


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP port that accepts connections and never answers: a hung broker."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def plan_args(bootstrap: str, out: Path, *extra: str) -> list[str]:
    return [
        "plan",
        "--bootstrap-servers",
        bootstrap,
        "--group",
        "payments-pipelines",
        "--topics",
        "payments",
        "--consumers",
        "a,b",
        "--timeout-ms",
        "3000",
        "--output",
        str(out),
        *extra,
    ]


def test_faults_of_a_scheduled_run_leave_the_previous_plan_untouched(
    kafka: LocalKafka,
    payments: str,
    spark,
    silent_server: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],  # type: ignore[no-untyped-def]
) -> None:
    out = tmp_path / "p"

    def run(args: list[str]) -> tuple[int, str]:
        code = cli.main(args, session_factory=lambda conf, master: spark)
        return code, capsys.readouterr().err.strip()

    assert run(plan_args(kafka.bootstrap_servers, out))[0] == 0
    before = tree(out)
    sasl = [
        "--kafka-option",
        "security_protocol=SASL_PLAINTEXT",
        "--kafka-option",
        "sasl_mechanism=PLAIN",
        "--kafka-option",
        "sasl_plain_username=planner",
    ]
    cases = [
        (plan_args(silent_server, out), "accepted the connection but did not answer within 3000 ms"),
        (
            plan_args(kafka.sasl_bootstrap_servers, out, *sasl, "--kafka-option", "sasl_plain_password=wrong"),
            "authentication failed",
        ),
        (plan_args(kafka.bootstrap_servers, out, "--kafka-option", "no_such_option=1"), "invalid Kafka client option"),
    ]
    for args, message in cases:
        code, err = run(args)
        assert code == 1 and message in err and len(err.splitlines()) == 1, (args, err)
        assert tree(out) == before
    # the right password gets through the same listener: the failure above was the credentials
    code, err = run(plan_args(kafka.sasl_bootstrap_servers, out, *sasl, "--kafka-option", "sasl_plain_password=planner-secret"))
    assert code == 0, err
    assert plan_io.read_plan(out)["generation"] == 2


# -- rates measured between two live generations ------------------------------------


def _plan_live(spark, kafka: LocalKafka, group: str, topics: str, consumers: str, out: Path) -> plan_io.Plan:  # type: ignore[no-untyped-def]
    code = cli.main(
        [
            "plan",
            "--bootstrap-servers",
            kafka.bootstrap_servers,
            "--group",
            group,
            "--topics",
            topics,
            "--consumers",
            consumers,
            "--output",
            str(out),
        ],
        session_factory=lambda conf, master: spark,
    )
    assert code == 0
    return plan_io.read_plan(out)


def _owned(doc: plan_io.Plan, topic: str) -> dict[str, list[int]]:
    return {c: e["assign"].get(topic, []) for c, e in doc["consumers"].items()}


def test_the_second_live_generation_carries_produce_and_read_rates_measured_since_the_first(
    kafka: LocalKafka,
    spark,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    topic, group = "rates-live", "rates-live-pipelines"
    create_topic(kafka.bootstrap_servers, topic, 4)
    produce(kafka.bootstrap_servers, topic, dict.fromkeys(range(4), 100))
    commit(kafka.bootstrap_servers, group, {(topic, p): 0 for p in range(4)})
    first = _plan_live(spark, kafka, group, topic, "a,b", tmp_path)
    assert first["rates_source"] == "none" and first["rates_estimated"] is True
    assert first["observed"]["end_offsets"] == {topic: dict.fromkeys(map(str, range(4)), 100)}

    # between the runs producers append unevenly and both pipelines read 40 records of each partition
    appended = {0: 50, 1: 20, 2: 0, 3: 10}
    produce(kafka.bootstrap_servers, topic, {p: n for p, n in appended.items() if n}, start=dict.fromkeys(range(4), 100))
    commit(kafka.bootstrap_servers, group, {(topic, p): 40 for p in range(4)})
    second = _plan_live(spark, kafka, group, topic, "a,b", tmp_path)

    interval = second["observed"]["time"] - first["observed"]["time"]
    assert interval > 0
    assert second["rates_source"] == "measured" and second["rates_estimated"] is False
    assert second["observed"]["end_offsets"] == {topic: {str(p): 100 + appended[p] for p in range(4)}}
    for consumer, partitions in _owned(first, topic).items():  # rates belong to who read in between
        entry = second["consumers"][consumer]
        assert entry["read_rate_source"] == "measured"  # still behind: the rate is its speed, not a floor
        assert entry["read_rate"] == pytest.approx(40 * len(partitions) / interval, rel=1e-6)
    for consumer, partitions in _owned(second, topic).items():  # produce rates land on the new owners
        want = sum(appended[p] for p in partitions) / interval
        assert second["consumers"][consumer]["produce_rate"] == pytest.approx(want, rel=1e-5, abs=1e-6)
    assert second["cannot_keep_up"] == [] and second["drain_seconds"] is not None


def _recreate(bootstrap_servers: str, topic: str, partitions: int) -> None:
    """Delete ``topic`` and create it again, empty: its end offsets start from 0."""
    import time

    from kafka import KafkaAdminClient
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="sla-test-recreate")
    try:
        admin.delete_topics([topic], timeout_ms=30000)
        deadline = time.monotonic() + 60
        while True:
            try:
                create_topic(bootstrap_servers, topic, partitions)
                return
            except TopicAlreadyExistsError:  # still being deleted
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        admin.close()


def test_a_topic_recreated_between_generations_has_unknown_produce_rates_and_a_warning(
    kafka: LocalKafka,
    spark,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,  # type: ignore[no-untyped-def]
) -> None:
    group = "recreated-pipelines"
    create_topic(kafka.bootstrap_servers, "recreated", 2)
    create_topic(kafka.bootstrap_servers, "steady", 1)
    produce(kafka.bootstrap_servers, "recreated", {0: 60, 1: 60})
    produce(kafka.bootstrap_servers, "steady", {0: 10})
    commit(kafka.bootstrap_servers, group, {("recreated", 0): 20, ("recreated", 1): 20, ("steady", 0): 5})
    first = _plan_live(spark, kafka, group, "recreated,steady", "solo", tmp_path)
    assert first["observed"]["end_offsets"]["recreated"] == {"0": 60, "1": 60}

    _recreate(kafka.bootstrap_servers, "recreated", 2)
    produce(kafka.bootstrap_servers, "recreated", {0: 5, 1: 5})
    produce(kafka.bootstrap_servers, "steady", {0: 30}, start={0: 10})
    caplog.clear()
    with caplog.at_level("WARNING", logger="spark_lag_assign"):
        second = _plan_live(spark, kafka, group, "recreated,steady", "solo", tmp_path)

    assert second["observed"]["end_offsets"]["recreated"] == {"0": 5, "1": 5}  # the offsets went back
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "went back" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    assert warnings[0].startswith("rates: end offsets went back on recreated-0 and 1 more (from 60 to 5")
    assert "produce rate unknown there" in warnings[0]
    assert any("end offsets went back on recreated-0" in n for n in second["rates_notes"])
    # only steady's 30 records count: the recreated partitions' rates are unknown, not negative
    interval = second["observed"]["time"] - first["observed"]["time"]
    assert second["consumers"]["solo"]["produce_rate"] == pytest.approx(30 / interval, rel=1e-5)
    assert second["rates_source"] == "measured"
