"""The local SparkSession of the demo, the tests and the CLI (never used by transforms)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from spark_lag_assign import jvm
from spark_lag_assign.spark import tuning

if TYPE_CHECKING:  # the annotation only: importing this module starts nothing
    from pyspark.sql import SparkSession

LOG4J_CONF = jvm.REPO_ROOT / "conf" / "log4j2-spark.properties"


def local_conf(
    *, with_kafka: bool = True, master: str = "local[2]", shuffle_partitions: int = 4, c1_only: bool = False
) -> dict[str, str]:
    """Spark settings for local mode: small, quiet, UTC, and the Kafka source's jars when asked.

    ``c1_only``: the JVM options of ``tuning.C1_ONLY_JVM_OPTIONS`` (the planner's console
    script: a run of seconds; the figure is there)."""
    conf = {
        "spark.master": master,
        # loopback only: nothing here needs the network, and no warning about the host name
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # bigger Arrow batches: fewer round trips between the JVM and the pandas UDF workers
        "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
        "spark.driver.memory": "2g",
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
    }
    log4j = [f"-Dlog4j2.configurationFile=file:{LOG4J_CONF}"] if LOG4J_CONF.exists() else []
    driver = [*tuning.C1_ONLY_JVM_OPTIONS, *log4j] if c1_only else log4j
    if driver:
        conf["spark.driver.extraJavaOptions"] = " ".join(driver)
    if log4j:
        conf["spark.executor.extraJavaOptions"] = log4j[0]
    if with_kafka:
        conf["spark.jars"] = jvm.spark_kafka_jars()
    return conf


def local_session(
    app_name: str = "spark-lag-assign",
    *,
    with_kafka: bool = True,
    master: str = "local[2]",
    extra: Mapping[str, str] | None = None,
    c1_only: bool = False,
) -> SparkSession:
    """A local SparkSession whose pandas-UDF workers run this interpreter (they need pyarrow);
    ``c1_only`` as in ``local_conf``."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    for key, value in {**local_conf(with_kafka=with_kafka, master=master, c1_only=c1_only), **(extra or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def spark_submit() -> Path:
    """The spark-submit script of the installed PySpark."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-submit"


def submit_command(script: str | Path, *args: str, with_kafka: bool = False) -> list[str]:
    """``spark-submit`` of a Python script on local Spark with the settings of ``local_conf``."""
    conf = local_conf(with_kafka=with_kafka)
    cmd = [str(spark_submit())]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    return [*cmd, str(script), *args]


def submit_env() -> dict[str, str]:
    """The environment spark-submit needs here: workers run this interpreter, Spark stays on loopback."""
    return {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
