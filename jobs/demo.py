"""``make demo``: the planner end to end on the embedded default, a local broker and local Spark.

1. start a real single-node Kafka broker (KRaft) on loopback;
2. create topic t0 with three partitions and a backlog for group ``demo``: the example of
   seed 000, lags 100,000 / 50,000 / 60,000, with the group's offsets committed;
3. run the planning job through ``spark-submit`` (strategy ``lag``, consumers C0 and C1),
   writing the plan to ``<output>/plan.json``;
4. run the example pipeline (``jobs/example_pipeline.py``, through ``spark-submit``) for C0
   and C1 until their backlog is drained: each reads its ``assign`` from the group's
   committed offsets, writes Parquet and commits every micro-batch's end offsets to the
   group; it prints how many records each consumer got from which partitions;
5. show that the group's committed offsets now equal the end offsets (no lag left), and
   stop the broker.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

SEED_000 = {0: 100_000, 1: 50_000, 2: 60_000}  # partition -> lag
ALREADY_CONSUMED = 1_000  # the group committed this far on every partition


def run_planner(bootstrap: str, output: Path) -> None:
    from spark_lag_assign.spark.session import submit_command, submit_env

    cmd = submit_command(
        REPO / "jobs" / "plan_assignments.py",
        "--config", str(REPO / "conf" / "demo.toml"),  # group demo, topic t0, C0 and C1, strategy lag
        "--bootstrap-servers", bootstrap,
        "--output", str(output),
    )  # fmt: skip
    print("$ spark-submit jobs/plan_assignments.py --config conf/demo.toml --bootstrap-servers ... --output ...")
    subprocess.run(cmd, check=True, env=submit_env())


def run_pipelines(bootstrap: str, output: Path) -> None:
    from spark_lag_assign.spark.session import submit_command, submit_env

    cmd = submit_command(
        REPO / "jobs" / "example_pipeline.py",
        "--plan", str(output),
        "--consumers", "C0,C1",
        "--bootstrap-servers", bootstrap,
        "--output", str(output / "sink"),
        "--checkpoints", str(output / "checkpoints"),
        "--available-now",
        "--max-offsets-per-trigger", "50000",
        with_kafka=True,  # Spark's Kafka source, as Maven fetched it
    )  # fmt: skip
    print("$ spark-submit --jars <Kafka source> jobs/example_pipeline.py --plan ... --consumers C0,C1 --available-now ...")
    subprocess.run(cmd, check=True, env=submit_env())


def show_lag(bootstrap: str) -> bool:
    from spark_lag_assign.extract.offsets import read_offsets

    offsets = read_offsets(bootstrap, "demo", topics=["t0"])
    drained = bool((offsets["committed_offset"] == offsets["end_offset"]).all())
    for row in offsets.itertuples():
        print(f"group demo t0p{row.partition}: committed {int(row.committed_offset):,} / end {int(row.end_offset):,}")
    print("the group's committed offsets equal the end offsets: no lag left" if drained else "lag remains!")
    return drained


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="out/demo", help="plan directory (recreated; default out/demo)")
    args = parser.parse_args(argv)
    output = Path(args.output).resolve()

    from spark_lag_assign.testing.localkafka import LocalKafka, commit, create_topic, produce

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
        run_pipelines(bootstrap, output)
        drained = show_lag(bootstrap)
    print(f"demo finished in {time.monotonic() - started:.0f}s; plan: {output / 'plan.json'}; records: {output / 'sink'}")
    return 0 if drained else 1


if __name__ == "__main__":
    raise SystemExit(main())
