"""The slice against a real broker: offsets from Kafka, the plan, and Spark's Kafka source
reading exactly the partitions the plan gives a consumer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_lag_assign import cli, config
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.spark import job
from spark_lag_assign.testing.localkafka import LocalKafka, commit, create_topic, free_port, produce
from tests.unit.test_plan import tree

PRODUCED = {0: 300, 1: 50, 2: 120, 3: 10}
COMMITTED = {0: 100, 1: 0, 2: 20}  # partition 3: nothing committed


@pytest.fixture(scope="module")
def orders(kafka: LocalKafka) -> str:
    create_topic(kafka.bootstrap_servers, "orders", 4)
    produce(kafka.bootstrap_servers, "orders", PRODUCED)
    commit(kafka.bootstrap_servers, "planner-it", {("orders", p): o for p, o in COMMITTED.items()})
    return "orders"


@pytest.fixture(scope="module")
def planned(kafka: LocalKafka, orders: str, spark, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("plan")
    settings = config.settings(
        bootstrap_servers=kafka.bootstrap_servers,
        group="planner-it",
        topics=orders,
        consumers="C0,C1",
        strategy="lag",
        reset="earliest",
        output=str(out),
    )
    job.run(settings, spark)
    return out


def test_the_plan_follows_the_lag_rules_and_the_lag_strategy(planned: Path) -> None:
    doc = plan_io.read_plan(planned)
    # lags: p0 300-100=200, p1 50-0=50, p2 120-20=100, p3 no commit + earliest = 10.
    # by decreasing lag: p0 -> C0; p2 -> C1; p1 -> C1 (equal counts, less lag); p3 -> C0 (fewer partitions)
    assert doc["consumers"]["C0"]["assign"] == {"orders": [0, 3]}
    assert doc["consumers"]["C1"]["assign"] == {"orders": [1, 2]}
    assert (doc["consumers"]["C0"]["lag"], doc["consumers"]["C1"]["lag"]) == (210, 150)
    assert doc["consumers"]["C0"]["startingOffsets"] == {"orders": {"0": 100, "3": -2}}
    assert doc["consumers"]["C1"]["startingOffsets"] == {"orders": {"1": 0, "2": 20}}
    assert (doc["generation"], doc["strategy"], doc["group"]) == (1, "lag", "planner-it")
    assert json.loads((planned / "assign" / "C1.json").read_text()) == {"orders": [1, 2]}


@pytest.mark.kafka_source
def test_the_kafka_source_reads_exactly_the_records_of_the_consumers_partitions(
    planned: Path,
    kafka: LocalKafka,
    spark,  # type: ignore[no-untyped-def]
) -> None:
    for consumer in ("C0", "C1"):
        assign = (planned / "assign" / f"{consumer}.json").read_text().strip()
        starting = (planned / "starting-offsets" / f"{consumer}.json").read_text().strip()
        records = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("assign", assign)
            .option("startingOffsets", starting)
            .option("endingOffsets", "latest")
            .load()
            .selectExpr("CAST(value AS STRING) AS value")
        )
        got = sorted(r.value for r in records.collect())
        partitions = json.loads(assign)["orders"]
        want = sorted(f"orders:{p}:{seq}" for p in partitions for seq in range(COMMITTED.get(p, 0), PRODUCED[p]))
        assert got == want, consumer


def run_cli(spark, *args: str) -> int:  # type: ignore[no-untyped-def]
    return cli.main(["plan", *args], session_factory=lambda conf, master: spark)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--group", "planner-it", "--topics", "orders", "--consumers", "C0"], "cannot reach Kafka"),
        (["--group", "nobody-home", "--topics", "orders", "--consumers", "C0"], "unknown consumer group 'nobody-home'"),
        (
            ["--group", "planner-it", "--topics", "orders,missing", "--consumers", "C0"],
            "topic(s) not found in the cluster: missing",
        ),
        (["--group", "planner-it", "--topics", "orders", "--consumers", ","], "no consumers"),
        (["--group", "planner-it", "--topics", "orders", "--consumers", "C0,C1,C0"], "consumer id 'C0' is given twice"),
    ],
    ids=["unreachable", "unknown-group", "missing-topic", "zero-consumers", "consumer-twice"],
)
def test_bad_input_is_one_line_and_leaves_the_previous_plan_untouched(
    planned: Path,
    kafka: LocalKafka,
    spark,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,  # type: ignore[no-untyped-def]
) -> None:
    bootstrap = f"127.0.0.1:{free_port()}" if message == "cannot reach Kafka" else kafka.bootstrap_servers
    before = tree(planned)
    code = run_cli(spark, "--bootstrap-servers", bootstrap, "--timeout-ms", "3000", *args, "--output", str(planned))
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert message in err and len(err.splitlines()) == 1, err
    assert tree(planned) == before
