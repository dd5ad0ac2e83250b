"""What differs between Spark lines, decided in ``sparkcompat``: versions, jars, progress reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from spark_lag_assign import sparkcompat
from spark_lag_assign.errors import SparkVersionError
from spark_lag_assign.testing import jvmfetch

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("version", "supported"),
    [("3.4.4", False), ("3.5.0", True), ("3.5.7", True), ("4.0.0", True), ("4.3.0", True), ("4.4.0", False), ("5.0.0", False)],
)
def test_the_supported_range_is_3_5_to_4_3(version: str, supported: bool) -> None:
    assert sparkcompat.is_supported(version) is supported


def test_an_unsupported_pyspark_is_one_line_naming_it_and_the_range() -> None:
    with pytest.raises(SparkVersionError) as caught:
        sparkcompat.check_supported("3.4.1")
    assert str(caught.value) == "PySpark 3.4.1 is not supported: spark-lag-assign supports PySpark >=3.5,<4.4 (3.5 to 4.3)"
    with pytest.raises(SparkVersionError, match=r"not a Spark version: 'dev'"):
        sparkcompat.check_supported("dev")


def test_pyprojects_range_is_the_one_checked() -> None:
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"pyspark{sparkcompat.SUPPORTED}" in deps


def test_scala_and_hadoop_are_read_from_the_spark_homes_jars(tmp_path: Path) -> None:
    (tmp_path / "jars").mkdir()
    for name in ("scala-library-2.12.18.jar", "hadoop-client-api-3.3.4.jar", "hadoop-client-runtime-3.3.4.jar"):
        (tmp_path / "jars" / name).write_bytes(b"")
    assert sparkcompat.bundled_scala_binary(tmp_path) == "2.12"
    assert sparkcompat.bundled_hadoop_version(tmp_path) == "3.3.4"
    assert sparkcompat.bundled_scala_binary(tmp_path / "nowhere") is None
    # without jars to read, the line says: PyPI's 3.5 is Scala 2.12, 4.x is 2.13
    assert [sparkcompat.scala_binary_for(v) for v in ("3.5.7", "4.0.0", "4.3.0")] == ["2.12", "2.13", "2.13"]
    assert sparkcompat.kafka_source_coordinate("3.5.7") == "org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.7"


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def _session(version: str, **conf: str) -> Any:
    return SimpleNamespace(version=version, sparkContext=SimpleNamespace(getConf=lambda: _Conf(conf)))


def test_a_kafka_source_of_another_version_is_one_line_naming_both(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_HOME", raising=False)
    jars = "file:/x/commons-pool2-2.12.0.jar,file:/x/spark-sql-kafka-0-10_2.13-4.0.0.jar"
    with pytest.raises(SparkVersionError) as caught:
        sparkcompat.check_kafka_source(_session("3.5.7", **{"spark.jars": jars}))
    assert str(caught.value) == (
        "Spark's Kafka source spark-sql-kafka-0-10_2.13 4.0.0 does not match Spark 3.5.7: "
        "use org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.7"
    )
    with pytest.raises(SparkVersionError, match=r"spark-sql-kafka-0-10_2\.13 4\.0\.1 does not match Spark 4\.0\.0"):
        sparkcompat.check_kafka_source(_session("4.0.0", **{"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.1"}))
    with pytest.raises(SparkVersionError, match=r"_2\.12 4\.0\.0 does not match Spark 4\.0\.0: use .*_2\.13:4\.0\.0"):
        sparkcompat.check_kafka_source(_session("4.0.0", **{"spark.driver.extraClassPath": "/x/spark-sql-kafka-0-10_2.12-4.0.0.jar:/y"}))
    with pytest.raises(SparkVersionError, match=r"Spark 3\.4\.1 is not supported"):
        sparkcompat.check_kafka_source(_session("3.4.1"))
    # the matching source, by jar or by package, and none at all, pass
    sparkcompat.check_kafka_source(_session("4.0.0", **{"spark.jars": "/x/spark-sql-kafka-0-10_2.13-4.0.0.jar"}))
    sparkcompat.check_kafka_source(_session("3.5.7", **{"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.12:3.5.7"}))
    sparkcompat.check_kafka_source(_session("4.3.0"))


def test_end_offsets_read_the_same_from_35s_dict_and_4xs_progress_objects() -> None:
    end = {"events": {"0": 12, "1": 7}}
    as_35 = {"id": "q", "sources": [{"description": "KafkaV2", "endOffset": end}, {"description": "other", "endOffset": None}]}
    as_4x = SimpleNamespace(sources=[SimpleNamespace(endOffset=json.dumps(end)), SimpleNamespace(endOffset=None)])
    got = sparkcompat.source_end_offsets(as_35)
    assert [json.loads(e) if e else e for e in got] == [end, None]
    assert [json.loads(e) if e else e for e in sparkcompat.source_end_offsets(as_4x)] == [end, None]
    assert sparkcompat.source_end_offsets(None) == []


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ("[ERROR] Failed to execute goal on project x: Could not resolve dependencies for project a:b:pom:0: "
         "Could not find artifact org.apache.spark:spark-sql-kafka-0-10_2.13:jar:4.3.0 in central (https://repo.maven.apache.org/maven2) -> [Help 1]",
         "org.apache.spark:spark-sql-kafka-0-10_2.13:jar:4.3.0 is not there"),
        ("[WARNING] The POM for org.apache.spark:spark-token-provider-kafka-0-10_2.13:jar:4.1.0 is missing, no dependency information available",
         "the POM of org.apache.spark:spark-token-provider-kafka-0-10_2.13:jar:4.1.0 is missing"),
        ("[ERROR] something else entirely\n[ERROR] \n", "something else entirely"),
    ],
)  # fmt: skip
def test_mavens_reason_becomes_one_line(output: str, reason: str) -> None:
    assert jvmfetch.maven_reason(output) == reason


def test_a_pyspark_outside_the_range_stops_the_planner_with_one_line(tmp_path: Path) -> None:
    """As a cluster's older Spark would: its pyspark first on the driver's path (spark-submit puts
    SPARK_HOME/python/lib/pyspark.zip there), before anything of Spark is started."""
    stub = tmp_path / "pyspark"
    stub.mkdir()
    (stub / "__init__.py").write_text('__version__ = "3.4.1"\n')
    snapshot = tmp_path / "offsets.csv"
    snapshot.write_text("topic,partition,beginning_offset,end_offset,committed_offset\nt,0,0,10,5\n")
    out = tmp_path / "plans"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    done = subprocess.run(
        [sys.executable, str(REPO / "jobs" / "plan_assignments.py"), "--offsets", str(snapshot), "--consumers", "a", "--output", str(out)],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        "spark-lag-assign: error: PySpark 3.4.1 is not supported: spark-lag-assign supports PySpark >=3.5,<4.4 (3.5 to 4.3)"
    ]
    assert not list(out.rglob("*.json")), "nothing published"
