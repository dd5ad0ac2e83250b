"""``spark-lag-assign simulate`` offline: snapshots on disk, plans from the pure assignors, no Spark."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from spark_lag_assign import cli
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.store import open_store

HEADER = "topic,partition,beginning_offset,end_offset,committed_offset\n"


def snapshot(path: Path, *rows: tuple[str, int, int, int | None]) -> Path:
    """rows: (topic, partition, end offset, committed offset or None); beginning offsets 0."""
    lines = [f"{t},{p},0,{end},{'' if c is None else c}\n" for t, p, end, c in rows]
    path.write_text(HEADER + "".join(lines))
    return path


def summary(out: str) -> dict[str, list[str]]:
    """The comparison table at the end: plan -> its cells."""
    table = out.strip().split("\n\n")[-1].splitlines()
    assert table[0].split()[0] == "plan"
    return {line.split()[0]: line.split()[1:] for line in table[1:]}


def seconds(out: str, plan: str) -> float:
    cells = summary(out)[plan]
    # "drains in" is two tokens ("12.5 s") or one ("never"), the seconds column follows
    return float("inf") if cells[0] == "never" else float(cells[2].replace(",", ""))


@pytest.fixture
def three(tmp_path: Path) -> Path:
    # one topic, lags 600, 200, 200 (nothing committed beyond 0)
    return snapshot(tmp_path / "offsets.csv", ("t", 0, 600, 0), ("t", 1, 200, 0), ("t", 2, 200, 0))


def test_each_strategy_drains_in_the_time_worked_out_by_hand(three: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["simulate", "--offsets", str(three), "--consumers", "c0,c1", "--rate", "100", "--strategies", "range,lag"])
    out = capsys.readouterr().out
    assert code == 0
    # range: c0 gets p0, p1 (800 at 100/s), c1 gets p2. lag: c0 gets 600, c1 both 200s
    assert seconds(out, "range") == pytest.approx(8.0)
    assert seconds(out, "lag") == pytest.approx(6.0)
    # the bound is max(1000 / 200, 600 / 100) = 6 s: lag is optimal, range 8 / 6 of it
    assert summary(out)["lag"][3] == "1.000"
    assert summary(out)["range"][3] == "1.333"
    assert "range: drains in 8.0 s" in out
    assert re.search(r"^c0\s+2\s+800\s+0\.0\s+100\.0\s+8\.0 s$", out, re.MULTILINE)


def test_every_strategy_by_default(three: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["simulate", "--offsets", str(three), "--consumers", "c0,c1", "--rate", "100"]) == 0
    assert list(summary(capsys.readouterr().out)) == ["range", "roundrobin", "lag", "shuffle", "sticky", "lag-sticky", "drain"]


def test_produce_rates_from_a_later_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    earlier = snapshot(tmp_path / "a.csv", ("t", 0, 1000, 0))
    later = snapshot(tmp_path / "b.csv", ("t", 0, 1600, 0))
    argv = ["simulate", "--offsets", str(earlier), "--offsets-later", str(later), "--interval", "10"]
    assert cli.main([*argv, "--consumers", "c0", "--rate", "100", "--strategies", "range"]) == 0
    out = capsys.readouterr().out
    # 600 appended in 10 s: 60/s; the later backlog of 1600 falls at 100 - 60 = 40/s
    assert "producers append 60.0 msg/s" in out
    assert seconds(out, "range") == pytest.approx(40.0)


def test_producers_outrunning_the_group_never_drain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    earlier = snapshot(tmp_path / "a.csv", ("t", 0, 0, 0))
    later = snapshot(tmp_path / "b.csv", ("t", 0, 3000, 0))
    argv = ["simulate", "--offsets", str(earlier), "--offsets-later", str(later), "--interval", "10"]
    assert cli.main([*argv, "--consumers", "c0", "--rate", "100", "--strategies", "lag"]) == 0
    out = capsys.readouterr().out
    assert "lag: drains in never" in out
    assert "never drain (producers append at least as fast as they read): c0" in out
    assert summary(out)["lag"][0] == "never"


def test_subscriptions_file_leaves_unread_topics_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    offsets = snapshot(tmp_path / "o.csv", ("t", 0, 500, 0), ("u", 0, 9000, 0))
    subs = tmp_path / "subs.json"
    subs.write_text(json.dumps({"a": ["t"], "b": ["t"]}))
    assert (
        cli.main(["simulate", "--offsets", str(offsets), "--subscriptions", str(subs), "--rate", "100", "--strategies", "lag"])
        == 0
    )
    out = capsys.readouterr().out
    assert "not simulated: 1 partition(s) of topics nobody reads: u" in out
    assert seconds(out, "lag") == pytest.approx(5.0)  # u's 9000 would take 90 s


def test_reset_earliest_counts_the_whole_log_where_nothing_is_committed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    offsets = snapshot(tmp_path / "o.csv", ("t", 0, 700, None))
    base = ["simulate", "--offsets", str(offsets), "--consumers", "c", "--rate", "100", "--strategies", "lag"]
    assert cli.main(base) == 0
    assert seconds(capsys.readouterr().out, "lag") == 0.0  # latest: nothing to read
    assert cli.main([*base, "--reset", "earliest"]) == 0
    assert seconds(capsys.readouterr().out, "lag") == pytest.approx(7.0)


def test_the_current_plan_is_simulated_and_sticky_strategies_start_from_it(
    three: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a hand-written current plan: everything on c0
    rows = pd.DataFrame(
        {"consumer": ["c0"] * 3, "topic": ["t"] * 3, "partition": [0, 1, 2], "lag": [600, 200, 200], "starting_offset": [0, 0, 0]}
    )
    doc = plan_io.build_plan(rows, {"c0": ["t"], "c1": ["t"]}, generation=1, strategy="range", reset="latest")
    with open_store(str(tmp_path / "plan")) as store, store.publisher() as publisher:
        publisher.publish(doc)
    assert (
        cli.main(
            [
                "simulate",
                "--offsets",
                str(three),
                "--consumers",
                "c0,c1",
                "--rate",
                "100",
                "--strategies",
                "sticky",
                "--previous",
                str(tmp_path / "plan"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    table = summary(out)
    assert seconds(out, "current") == pytest.approx(10.0)  # 1000 on one consumer
    # sticky keeps two of c0's three and moves one to c1: a moved column appears
    assert table["sticky"][-2] == "1"
    assert table["current"][-2] == "-"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rate", "0"], "--rate must be a positive number"),
        (["--rate", "-3"], "--rate must be a positive number"),
        (["--rate", "100", "--strategies", "fastest"], "unknown strategy 'fastest'"),
        (["--rate", "100", "--interval", "5"], "--interval: offsets_later and interval go together"),
        (["--rate", "100", "--seed", "2.9"], "--seed: input should be a valid integer"),
        (["--rate", "100", "--option", "max_swaps=abc", "--strategies", "lag-sticky"], "max_swaps must be an integer"),
        (["--rate", "100", "--option", "tolerance=-1"], "--option tolerance=-1: lag-sticky: tolerance must be a number >= 0"),
        (["--rate", "soon"], "--rate: input should be a valid number"),
        (["--rate", "100", "--option", "tolerance=0.1", "--strategies", "range"], "none of the chosen strategies takes it"),
    ],
)
def test_bad_input_fails_in_one_line(three: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    assert cli.main(["simulate", "--offsets", str(three), "--consumers", "c0,c1", *extra]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("spark-lag-assign: error: ")
    assert message in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_a_missing_snapshot_or_a_bad_consumer_id_fails(tmp_path: Path, three: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["simulate", "--offsets", str(tmp_path / "nope.csv"), "--consumers", "c", "--rate", "1"]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert cli.main(["simulate", "--offsets", str(three), "--consumers", "c0,-x", "--rate", "1"]) == 1
    assert "invalid consumer id '-x'" in capsys.readouterr().err


def test_rate_and_consumers_are_required(three: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["simulate", "--offsets", str(three), "--consumers", "c0"]) == 1
    no_rate = capsys.readouterr().err
    assert cli.main(["simulate", "--offsets", str(three), "--rate", "5"]) == 1
    no_consumers = capsys.readouterr().err
    assert "--rate" in no_rate and len(no_rate.strip().splitlines()) == 1
    assert "--consumers" in no_consumers and len(no_consumers.strip().splitlines()) == 1


def test_the_config_file_gives_the_group_and_the_rate(three: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text('[plan]\nconsumers = ["c0", "c1"]\nrate = 100\n[plan.options]\ntolerance = 0.1\n')
    assert cli.main(["simulate", "--config", str(conf), "--offsets", str(three), "--strategies", "lag"]) == 0
    assert seconds(capsys.readouterr().out, "lag") == pytest.approx(6.0)
    conf.write_text('[plan]\nconsumers = ["c0", "c1"]\nrate = "fast"\n')
    assert cli.main(["simulate", "--config", str(conf), "--offsets", str(three)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"spark-lag-assign: error: {conf}: [plan] rate: input should be a valid number, not 'fast'"


def test_simulate_starts_no_spark(three: Path) -> None:
    code = (
        "import sys\nfrom spark_lag_assign import cli\n"
        f"rc = cli.main(['simulate', '--offsets', {str(three)!r}, '--consumers', 'c0,c1', '--rate', '100'])\n"
        "print(rc, sorted(m for m in sys.modules if m.startswith(('pyspark', 'py4j'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "0 []"
