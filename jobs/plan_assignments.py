"""spark-submit entry point of the planner: ``spark-lag-assign plan`` on the submitted session.

    spark-submit --archives dist/spark_lag_assign-env.tar.gz#environment \
        --conf spark.pyspark.python=./environment/bin/python ... jobs/plan_assignments.py \
        --config conf/cluster.example.toml

(README, "On a cluster", has the whole line: ``make dist`` packs this package and its
dependencies for the cluster's hosts.)

Takes exactly the options of ``spark-lag-assign plan`` (see ``--help``); the Spark master
and resources come from spark-submit. Exit status 0 when the plan was written, 1 on bad
input (one line on stderr; nothing written).
"""

from __future__ import annotations

import sys
from typing import Any

from spark_lag_assign.cli import PLANNER_SPARK_CONF, main


def submitted_session(spark_conf: dict[str, str], master: str | None) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("spark-lag-assign")
    for key, value in {**PLANNER_SPARK_CONF, **spark_conf}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


if __name__ == "__main__":
    sys.exit(main(["plan", *sys.argv[1:]], session_factory=submitted_session))
