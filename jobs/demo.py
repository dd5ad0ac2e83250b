"""``make demo``: the planner end to end on the embedded default, a local broker and local Spark.

1. start a real single-node Kafka broker (KRaft) on loopback;
2. create topic t0 with three partitions and a backlog for group ``demo``: the example of
   seed 000, lags 100,000 / 50,000 / 60,000, with the group's offsets committed;
3. run the planning job through ``spark-submit`` (strategy ``lag``, consumers C0 and C1),
   writing the plan to ``<output>/plan.json``;
4. for each consumer, read with Spark's Kafka source using its ``assign`` and
   ``startingOffsets`` from the plan, and print how many records came from which partition;
5. stop the broker.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SEED_000 = {0: 100_000, 1: 50_000, 2: 60_000}  # partition -> lag
ALREADY_CONSUMED = 1_000  # the group committed this far on every partition


def spark_submit_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def run_planner(bootstrap: str, output: Path) -> None:
    from spark_lag_assign.session import LOG4J_CONF, spark_submit

    cmd = [
        str(spark_submit()),
        "--master", "local[2]",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=4",
        "--conf", f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=file:{LOG4J_CONF}",
        str(REPO / "jobs" / "plan_assignments.py"),
        "--bootstrap-servers", bootstrap,
        "--group", "demo",
        "--topics", "t0",
        "--consumers", "C0,C1",
        "--strategy", "lag",
        "--reset", "earliest",
        "--output", str(output),
    ]  # fmt: skip
    print("$ spark-submit jobs/plan_assignments.py --group demo --topics t0 --consumers C0,C1 --strategy lag ...")
    subprocess.run(cmd, check=True, env=spark_submit_env())


def read_as_planned(bootstrap: str, output: Path) -> None:
    from pyspark.sql import functions as F

    from spark_lag_assign import plan as plan_io
    from spark_lag_assign.session import local_session

    plan = plan_io.read_plan(output)
    spark = local_session("spark-lag-assign-demo-reader")
    try:
        for consumer, entry in plan["consumers"].items():
            assign = (output / "assign" / f"{consumer}.json").read_text().strip()
            starting = (output / "starting-offsets" / f"{consumer}.json").read_text().strip()
            records = (
                spark.read.format("kafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("assign", assign)
                .option("startingOffsets", starting)
                .option("endingOffsets", "latest")
                .load()
            )
            counts = records.groupBy("topic", "partition").count().orderBy("topic", "partition").collect()
            got = ", ".join(f"{r['topic']}p{r['partition']}: {r['count']:,}" for r in counts)
            total = sum(r["count"] for r in counts)
            print(f"{consumer} read {total:,} records with assign={assign}  ({got}); plan said lag {entry['lag']:,}")
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="out/demo", help="plan directory (recreated; default out/demo)")
    args = parser.parse_args(argv)
    output = Path(args.output).resolve()

    from spark_lag_assign.localkafka import LocalKafka, commit, create_topic, produce

    started = time.monotonic()
    shutil.rmtree(output, ignore_errors=True)
    output.mkdir(parents=True)
    with LocalKafka(output / "broker") as kafka:
        bootstrap = kafka.bootstrap_servers
        print(f"Kafka broker (KRaft) up at {bootstrap}; log: {kafka.log_path}")
        create_topic(bootstrap, "t0", 3)
        produce(bootstrap, "t0", {p: lag + ALREADY_CONSUMED for p, lag in SEED_000.items()})
        commit(bootstrap, "demo", {("t0", p): ALREADY_CONSUMED for p in SEED_000})
        print("backlog of group demo on t0: " + ", ".join(f"t0p{p} {lag:,}" for p, lag in SEED_000.items()))
        run_planner(bootstrap, output)
        read_as_planned(bootstrap, output)
    print(f"demo finished in {time.monotonic() - started:.0f}s; plan: {output / 'plan.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
