"""``plan --strategy drain`` offline through Spark: rates from two snapshots and a rates file,
times in plan.json and on the console, bad input in one line with the previous plan untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from spark_lag_assign import cli
from spark_lag_assign.extract import offsets as offsets_io
from spark_lag_assign.store import open_store

NOW = pd.DataFrame(
    {
        "topic": ["t0"] * 6,
        "partition": range(6),
        "beginning_offset": 0,
        "end_offset": [61_000, 51_000, 41_000, 31_000, 21_000, 11_000],
        "committed_offset": pd.array([1_000] * 6, dtype="Int64"),
    }
)


def run(spark, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = cli.main(list(args), session_factory=lambda conf, master: spark)
    out = capsys.readouterr()
    return code, out.out, out.err.strip()


def latest(path: Path) -> dict:  # type: ignore[type-arg]
    with open_store(str(path)) as store:
        doc = store.latest()
    assert doc is not None
    return dict(doc)


def test_drain_plans_for_time_from_two_snapshots_and_a_rates_file(spark, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    now = offsets_io.write_snapshot(NOW, tmp_path / "now.csv")
    # ten seconds later producers appended 100/s to t0-0 and 10/s elsewhere
    later_frame = NOW.assign(end_offset=NOW["end_offset"] + [1_000, 100, 100, 100, 100, 100])
    later = offsets_io.write_snapshot(later_frame, tmp_path / "later.csv")
    speeds = tmp_path / "rates.csv"
    speeds.write_text("consumer,records_per_second\nslow,500\nfast,1500\n")
    out_dir = tmp_path / "plans"
    code, out, err = run(
        spark,
        capsys,
        "plan",
        "--offsets",
        str(now),
        "--offsets-later",
        str(later),
        "--interval",
        "10",
        "--rates",
        str(speeds),
        "--strategy",
        "drain",
        "--consumers",
        "slow,fast",
        "--output",
        str(out_dir),
    )
    assert code == 0, err
    doc = latest(out_dir)
    assert doc["rates_source"] == "measured+configured" and doc["rates_estimated"] is False
    slow, fast = doc["consumers"]["slow"], doc["consumers"]["fast"]
    assert (slow["read_rate"], fast["read_rate"]) == (500.0, 1500.0)
    assert slow["produce_rate"] + fast["produce_rate"] == pytest.approx(150.0)
    # the fast pipeline takes the heavier half; both drain, the group at the slower of the two
    assert fast["lag"] > slow["lag"] and slow["partitions"] == fast["partitions"] == 3
    assert doc["drain_seconds"] == pytest.approx(max(slow["drain_seconds"], fast["drain_seconds"]), abs=1e-3)
    assert set(fast["partition_drain_seconds"]["t0"]) == {str(p) for p in fast["assign"]["t0"]}
    assert "drains in" in out and "time to drain" in out

    # bad input: one line, exit 1, the plan as it was
    before = json.dumps(latest(out_dir), sort_keys=True)
    bad_rates = tmp_path / "bad.csv"
    bad_rates.write_text("consumer,records_per_second\nslow,0\nfast,10\n")
    for args in (
        ["--interval", "0", "--offsets-later", str(later), "--rate", "5"],
        ["--interval", "10", "--offsets-later", str(later), "--rate", "-5"],
        ["--interval", "10", "--offsets-later", str(later), "--rates", str(bad_rates)],
    ):
        code, _, err = run(
            spark,
            capsys,
            "plan",
            "--offsets",
            str(now),
            *args,
            "--strategy",
            "drain",
            "--consumers",
            "slow,fast",
            "--output",
            str(out_dir),
        )
        assert code == 1 and len(err.splitlines()) == 1, err
    assert json.dumps(latest(out_dir), sort_keys=True) == before


def test_a_recreated_partition_gets_an_unknown_rate_and_a_note(spark, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    now = offsets_io.write_snapshot(NOW, tmp_path / "now.csv")
    later_frame = NOW.assign(
        end_offset=[61_500, 500, 41_100, 31_100, 21_100, 11_100],
        committed_offset=pd.array([1_000, 0, 1_000, 1_000, 1_000, 1_000], dtype="Int64"),
    )
    later = offsets_io.write_snapshot(later_frame, tmp_path / "later.csv")
    code, out, err = run(
        spark,
        capsys,
        "plan",
        "--offsets",
        str(now),
        "--offsets-later",
        str(later),
        "--interval",
        "10",
        "--rate",
        "1000",
        "--strategy",
        "drain",
        "--consumers",
        "a,b",
        "--output",
        str(tmp_path / "p"),
    )
    assert code == 0, err
    doc = latest(tmp_path / "p")
    assert any("t0-1" in n and "went back" in n for n in doc["rates_notes"])
    assert "t0-1" in out


def test_producers_faster_than_every_pipeline_make_a_loud_plan(spark, capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    now = offsets_io.write_snapshot(NOW, tmp_path / "now.csv")
    later = offsets_io.write_snapshot(NOW.assign(end_offset=NOW["end_offset"] + 50_000), tmp_path / "later.csv")
    code, out, err = run(
        spark,
        capsys,
        "plan",
        "--offsets",
        str(now),
        "--offsets-later",
        str(later),
        "--interval",
        "10",
        "--rate",
        "100",
        "--strategy",
        "drain",
        "--consumers",
        "a,b",
        "--output",
        str(tmp_path / "p"),
    )
    assert code == 0, err
    doc = latest(tmp_path / "p")
    assert doc["cannot_keep_up"] == ["a", "b"] and doc["drain_seconds"] is None
    assert "WARNING" in out and "cannot keep up" in err
