"""``spark-lag-assign plan`` and ``show`` offline, from snapshots, on the shared SparkSession.

Bad input, with what it must leave behind, is one table: ``tests/spark/test_cli_bad_input.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from spark_lag_assign import cli
from spark_lag_assign.extract import offsets as offsets_io
from spark_lag_assign.plan import build as plan_io

SNAPSHOT = pd.DataFrame(
    {
        "topic": ["t0", "t0", "t0", "t1", "t1"],
        "partition": [0, 1, 2, 0, 1],
        "beginning_offset": [0, 0, 0, 10, 10],
        "end_offset": [101_000, 51_000, 61_000, 510, 30],
        "committed_offset": pd.array([1_000, 1_000, 1_000, None, 20], dtype="Int64"),
    }
)


def run(spark, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = cli.main(list(args), session_factory=lambda conf, master: spark)
    out = capsys.readouterr()
    return code, out.out, out.err.strip()


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    return offsets_io.write_snapshot(SNAPSHOT, tmp_path / "offsets.csv")


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_plan_from_each_snapshot_format(spark, capsys, tmp_path: Path, suffix: str) -> None:  # type: ignore[no-untyped-def]
    snap = offsets_io.write_snapshot(SNAPSHOT, tmp_path / f"offsets{suffix}")
    code, out, err = run(
        spark,
        capsys,
        "plan",
        "--offsets",
        str(snap),
        "--consumers",
        "C0,C1",
        "--strategy",
        "lag",
        "--reset",
        "earliest",
        "--output",
        str(tmp_path / "p"),
    )
    assert code == 0, err
    doc = plan_io.read_plan(tmp_path / "p")
    # t0 is seed 000: lags 100,000 / 50,000 / 60,000; t1: 500 (no commit, earliest) and 10
    assert doc["consumers"]["C0"]["assign"] == {"t0": [0], "t1": [0]}
    assert doc["consumers"]["C1"]["assign"] == {"t0": [1, 2], "t1": [1]}
    assert doc["consumers"]["C0"]["startingOffsets"] == {"t0": {"0": 1000}, "t1": {"0": -2}}
    assert "generation 1 (lag, reset=earliest)" in out and "C1" in out


def test_subscriptions_file_and_unassigned_topics(spark, capsys, tmp_path: Path, snapshot: Path) -> None:  # type: ignore[no-untyped-def]
    subs = tmp_path / "subs.json"
    subs.write_text(json.dumps({"only-t0": ["t0"], "idle": ["t0"]}))
    code, out, err = run(
        spark,
        capsys,
        "plan",
        "--offsets",
        str(snapshot),
        "--subscriptions",
        str(subs),
        "--strategy",
        "range",
        "--output",
        str(tmp_path / "p"),
    )
    assert code == 0, err
    doc = plan_io.read_plan(tmp_path / "p")
    assert doc["unassigned"] == {"t1": [0, 1]}  # nobody subscribes to t1: listed, not dropped
    assert doc["consumers"]["idle"]["assign"] == {"t0": [0, 1]}
    assert doc["consumers"]["only-t0"]["assign"] == {"t0": [2]}
    assert "unassigned (no subscriber): 2 partition(s) of t1" in out


def test_runs_are_sticky_and_generations_grow(spark, capsys, tmp_path: Path, snapshot: Path) -> None:  # type: ignore[no-untyped-def]
    out_dir = tmp_path / "p"
    base = ["plan", "--offsets", str(snapshot), "--strategy", "sticky", "--output", str(out_dir)]
    assert run(spark, capsys, *base, "--consumers", "a,b")[0] == 0
    first = plan_io.read_plan(out_dir)
    # nothing changed: the plan is rewritten as the next generation with the same assignment
    assert run(spark, capsys, *base, "--consumers", "a,b")[0] == 0
    second = plan_io.read_plan(out_dir)
    assert second["generation"] == 2 and second["quality"]["moved"] == 0
    assert {c: e["assign"] for c, e in second["consumers"].items()} == {c: e["assign"] for c, e in first["consumers"].items()}
    # a consumer joins: the previous plan is the starting point, so only the newcomer's share moves
    code, out, err = run(spark, capsys, *base, "--consumers", "a,b,c")
    assert code == 0, err
    third = plan_io.read_plan(out_dir)
    assert third["generation"] == 3
    assert third["consumers"]["c"]["partitions"] >= 1
    assert third["quality"]["moved"] == third["consumers"]["c"]["partitions"]
    # show: the table, the metrics and what moved since the generation before
    code, out, err = run(spark, capsys, "show", str(out_dir))
    assert code == 0, err
    assert f"{third['quality']['moved']} partition(s) moved since generation 2" in out
    assert "optimality" in out


_JVM_FLAGS = """
import json
from spark_lag_assign.cli import local_session_factory
spark = local_session_factory({}, None)
print("FLAGS " + json.dumps(list(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())))
"""


def test_the_planners_own_session_compiles_with_c1_alone_and_streaming_sessions_do_not(spark) -> None:  # type: ignore[no-untyped-def]
    import json
    import subprocess
    import sys

    # what the JVMs were started with, not what a conf says: a later setting could override it
    out = subprocess.run([sys.executable, "-c", _JVM_FLAGS], capture_output=True, text=True, timeout=300, check=True).stdout
    planner = json.loads(next(line for line in out.splitlines() if line.startswith("FLAGS "))[len("FLAGS ") :])
    assert "-XX:TieredStopAtLevel=1" in planner, planner
    assert any(f.startswith("-Dlog4j2.configurationFile=") for f in planner), planner
    shared = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert "-XX:TieredStopAtLevel=1" not in shared and any(f.startswith("-Dlog4j2.configurationFile=") for f in shared), shared
