"""spark-submit entry point: the planner (``jobs/plan_assignments.py``) frozen in the middle of
writing a generation, for the test to SIGKILL it there.

    spark-submit --master spark://... tests/cluster/planner_midwrite.py <spark-lag-assign plan options>

Exactly ``spark-lag-assign plan`` on the submitted session, except that publishing stops
half-way and the process SIGSTOPs its whole process group (Python driver and Spark JVM),
after printing one line ``MIDWRITE <what was written>``:

- ``kafka://`` store: every record of the generation but its manifest is sent and flushed in
  the planner's transaction, which stays open (neither committed nor aborted);
- directory store (``hdfs://``, ``file:``): the generation is staged and its manifest is
  created (the generation number is taken), but the staged directory is not renamed into
  place.

Killed there, the planner leaves a half-written generation; the store must keep serving the
previous one and the next planner run must publish.
"""

from __future__ import annotations

import os
import posixpath
import re
import signal
import sys
import time
from typing import Any

from spark_lag_assign.cli import main


def _freeze(what: str) -> None:
    print(f"MIDWRITE {what}", flush=True)
    # under spark-submit this process's output reaches the log through a thread of the Spark
    # JVM (PythonRunner): let it copy the line before the whole group stops
    time.sleep(3.0)
    os.killpg(os.getpgid(0), signal.SIGSTOP)
    # resumed instead of killed: fail rather than publish
    raise SystemExit("planner_midwrite: resumed after the mid-write stop; publishing nothing")


def _patch() -> None:
    from spark_lag_assign.store import fs, hadoop, kafka as kafka_store

    transact = kafka_store.KafkaStore.transact

    def frozen_transact(self: Any, producer: Any, transactional_id: str, topic: str, records: list[tuple[str, Any]]) -> Any:
        if topic != self.plans_topic:
            return transact(self, producer, transactional_id, topic, records)
        producer.begin_transaction()
        for key, value in records[:-1]:
            producer.send(topic, key=key.encode(), value=value, partition=0)
        producer.flush()
        _freeze(f"{len(records) - 1} of {len(records)} records of the generation sent in an open transaction (no manifest, no commit)")

    kafka_store.KafkaStore.transact = frozen_transact

    def frozen_rename(original: Any) -> Any:
        def rename(self: Any, src: str, dst: str) -> bool:
            if re.fullmatch(r"\d{6}", posixpath.basename(dst.rstrip("/"))):
                _freeze(f"generation staged in {posixpath.basename(src)} and its manifest created, not moved to {dst}")
            return original(self, src, dst)

        return rename

    hadoop.HadoopFileSystem.rename = frozen_rename(hadoop.HadoopFileSystem.rename)
    fs.LocalFileSystem.rename = frozen_rename(fs.LocalFileSystem.rename)


def submitted_session(spark_conf: dict[str, str], master: str | None) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("spark-lag-assign")
    for key, value in spark_conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


if __name__ == "__main__":
    _patch()
    sys.exit(main(["plan", *sys.argv[1:]], session_factory=submitted_session))
