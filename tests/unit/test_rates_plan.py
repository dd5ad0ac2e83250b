"""Lag in seconds: plan.json's rate and time fields, the report's columns, the live job's rates
from the previous generation, the configuration of rates and the offline simulate command."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from spark_lag_assign import cli, config
from spark_lag_assign.core import draintime, rates
from spark_lag_assign.errors import ConfigError, InputError
from spark_lag_assign.plan import build as plan_io, report
from spark_lag_assign.spark import job

SUBS = {"a": ["t"], "b": ["t"], "idle": ["t"]}


def rows() -> pd.DataFrame:
    return pd.DataFrame(
        [("a", "t", 0, 100, 5), ("a", "t", 1, 50, 7), ("b", "t", 2, 300, 1), (None, "x", 0, 3, -2)],
        columns=list(plan_io.PLAN_COLUMNS),
    )


PRODUCE = pd.DataFrame({"topic": "t", "partition": [0, 1, 2], "produce_rate": [1.0, 2.0, 100.0]})


def build(r: rates.Rates | None, observed: rates.Observation | None = None) -> plan_io.Plan:
    return plan_io.build_plan(rows(), SUBS, generation=1, strategy="drain", reset="latest", rates=r, observed=observed)


def test_plan_gives_rates_and_seconds_per_consumer_and_partition_and_says_who_cannot_keep_up() -> None:
    r = rates.combine(list(SUBS), configured={"a": 10.0, "b": 50.0}, produce=PRODUCE)
    doc = build(r)
    a, b, idle = (doc["consumers"][c] for c in ("a", "b", "idle"))
    assert (a["read_rate"], a["produce_rate"], a["keeps_up"]) == (10.0, 3.0, True)
    assert a["drain_seconds"] == pytest.approx(150 / 7, abs=1e-3)
    # the independent replay agrees, per consumer and per partition
    d = draintime.simulate(rows().dropna(), rows().dropna(), {"a": 10.0, "b": 50.0}, PRODUCE)
    assert a["drain_seconds"] == pytest.approx(d.consumers.loc["a", "time_to_drain"], abs=1e-3)
    replay = d.partitions.set_index(["topic", "partition"])["time_to_drain"]
    assert a["partition_drain_seconds"]["t"]["1"] == pytest.approx(replay[("t", 1)], abs=1e-3)
    assert (b["drain_seconds"], b["keeps_up"], b["partition_drain_seconds"]) == (None, False, {"t": {"2": None}})
    assert idle["read_rate"] is None and idle["drain_seconds"] is None
    assert doc["cannot_keep_up"] == ["b"] and doc["drain_seconds"] is None
    assert doc["rates_source"] == "measured+configured" and doc["rates_estimated"] is False
    json.loads(plan_io.plan_json(doc))  # null, never Infinity: strict JSON
    text = report.summary(doc)
    assert "drains in" in text and "WARNING: 1 consumer(s) cannot keep up" in text and "never" in text
    assert "t-2 (b) never" in text


def test_without_two_observations_times_are_marked_as_estimates() -> None:
    r = rates.combine(list(SUBS), configured={"a": 10.0, "b": 50.0, "idle": 1.0})
    doc = build(r)
    assert doc["rates_estimated"] is True and doc["rates_source"] == "configured"
    assert doc["drain_seconds"] == pytest.approx(15.0)  # a: 150 / 10, nothing produced
    text = report.summary(doc)
    assert "~15.0 s" in text and "estimate" in text


def test_a_plan_without_rates_keeps_its_old_shape() -> None:
    doc = build(None)
    assert "drain_seconds" not in doc and "read_rate" not in doc["consumers"]["a"]
    assert "drains in" not in report.summary(doc)


def test_the_recorded_observation_round_trips_and_the_next_run_measures_from_it() -> None:
    first = rates.Observation(
        1000.0,
        pd.DataFrame(
            {
                "topic": "t",
                "partition": [0, 1, 2],
                "end_offset": [200, 100, 400],
                "committed_offset": pd.array([100, 50, None], dtype="Int64"),
            }
        ),
    )
    doc = build(rates.combine(list(SUBS)), first)
    back = rates.observation_from_plan(json.loads(plan_io.plan_json(doc)))
    assert back is not None and back.time == 1000.0
    assert back.offsets.sort_values("partition")["end_offset"].tolist() == [200, 100, 400]
    assert set(zip(back.owners["consumer"], back.owners["partition"])) == {("a", 0), ("a", 1), ("b", 2)}
    # ten seconds later: a committed 150 (still behind), b committed nothing before, so no rate
    later = rates.Observation(
        1010.0,
        pd.DataFrame(
            {
                "topic": "t",
                "partition": [0, 1, 2],
                "end_offset": [300, 100, 900],
                "committed_offset": pd.array([200, 100, 500], dtype="Int64"),
            }
        ),
    )
    settings = config.Settings(
        output="x", consumers=("a", "b", "idle"), subscriptions={c: ["*"] for c in SUBS}, bootstrap_servers="k:9092", group="g"
    )
    got = job.measured_rates(settings, list(SUBS), doc, later, None)
    assert got.read == {"a": pytest.approx(15.0)} and got.read_source == {"a": "measured"}
    assert got.produce is not None
    assert got.produce.set_index("partition")["produce_rate"].to_dict() == {0: 10.0, 1: 0.0, 2: 50.0}
    assert got.source == "measured" and not got.estimated
    # the same observation twice (or a clock gone back): nothing measured, and a note says why
    again = job.measured_rates(settings, list(SUBS), doc, first, None)
    assert again.produce is None and "not older" in again.notes[0]


def test_filled_rates_plan_a_consumer_without_one_at_the_median_and_say_so() -> None:
    r = rates.combine(["a", "b", "c"], configured={"a": 10.0, "b": 30.0})
    got = rates.filled(r, ["a", "b", "c"])
    assert got.read == {"a": 10.0, "b": 30.0, "c": 20.0} and "c" in got.notes[-1]


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"rate": 0}, "positive"),
        ({"rate": -2}, "positive"),
        ({"interval": 0, "offsets_later": "later.csv"}, "> 0"),
        ({"interval": -1, "offsets_later": "later.csv"}, "> 0"),
        ({"interval": 5}, "go together"),
        ({"rate": 1, "rates": "r.csv"}, "not both"),
    ],
)
def test_rate_settings_are_checked_in_one_line(overrides: dict[str, object], needle: str) -> None:
    with pytest.raises((ConfigError, InputError)) as err:
        config.settings(None, offsets="now.csv", consumers="a,b", output="out", **overrides)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_plan_refuses_a_rates_file_naming_an_unknown_consumer_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = tmp_path / "now.csv"
    snap.write_text("topic,partition,beginning_offset,end_offset,committed_offset\nt,0,0,10,5\n")
    bad = tmp_path / "r.csv"
    bad.write_text("consumer,records_per_second\na,5\nghost,7\n")

    def no_spark(*_: object) -> None:
        raise AssertionError("Spark must not start on bad input")

    code = cli.main(
        [
            "plan",
            "--offsets",
            str(snap),
            "--consumers",
            "a,b",
            "--rates",
            str(bad),
            "--output",
            str(tmp_path / "out"),
            "--strategy",
            "drain",
        ],
        session_factory=no_spark,
    )
    err = capsys.readouterr().err
    assert code == 1 and "ghost" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_simulate_plans_drain_with_the_rates_it_simulates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    now = tmp_path / "now.csv"
    later = tmp_path / "later.csv"
    head = "topic,partition,beginning_offset,end_offset,committed_offset\n"
    now.write_text(head + "".join(f"t,{p},0,{1000 + 300 * p},0\n" for p in range(8)))
    later.write_text(head + "".join(f"t,{p},0,{1000 + 300 * p + 10 * p},0\n" for p in range(8)))
    speeds = tmp_path / "rates.json"
    speeds.write_text(json.dumps({"a": 100, "b": 300}))
    code = cli.main(
        [
            "simulate",
            "--offsets",
            str(now),
            "--offsets-later",
            str(later),
            "--interval",
            "10",
            "--consumers",
            "a,b",
            "--rates",
            str(speeds),
            "--strategies",
            "lag-sticky,drain",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith(("lag-sticky ", "drain "))}
    head_line = next(line for line in out.splitlines() if line.startswith("plan "))
    at = head_line.index("x bound")
    ratio = {name: float(line[at - 8 : at + 7].split()[-1]) for name, line in lines.items()}
    # four partitions each (the counts), the fast one given the heaviest: well ahead of lag-sticky
    assert math.isfinite(ratio["drain"]) and ratio["drain"] < 0.7 * ratio["lag-sticky"]
