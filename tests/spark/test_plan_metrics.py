"""The planner's Prometheus metrics and ``--drain-within`` through the real CLI and Spark: the
textfile and a Pushgateway stand-in parsed with the client library's own parser, their numbers
against the published plan; a failed push is a warning and the plan is still published."""

from __future__ import annotations

import http.server
import math
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest
from prometheus_client.parser import text_string_to_metric_families

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


def run(spark: Any, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args), session_factory=lambda conf, master: spark)
    out = capsys.readouterr()
    return code, out.out, out.err.strip()


def latest(path: Path) -> dict[str, Any]:
    with open_store(str(path)) as store:
        doc = store.latest()
    assert doc is not None
    return dict(doc)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, parsed by prometheus_client's parser: (name, labels) -> value."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value for family in text_string_to_metric_families(text) for s in family.samples
    }


def comparable(found: dict[Any, float]) -> dict[Any, Any]:
    """Samples without the run's timestamp, NaN as a string (NaN equals nothing)."""
    return {k: "NaN" if math.isnan(v) else v for k, v in found.items() if not k[0].endswith("_timestamp_seconds")}


class Gateway(http.server.BaseHTTPRequestHandler):
    """A Pushgateway stand-in: remembers each push's method, path and body, answers 200."""

    pushes: ClassVar[list[tuple[str, str, str]]] = []

    def _push(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
        type(self).pushes.append((self.command, self.path, body))
        self.send_response(200)
        self.end_headers()

    do_PUT = do_POST = _push

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def gateway() -> Iterator[tuple[str, list[tuple[str, str, str]]]]:
    Gateway.pushes = []
    server = http.server.HTTPServer(("127.0.0.1", 0), Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", Gateway.pushes
    server.shutdown()
    server.server_close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_metrics_file_and_the_push_carry_the_published_plan(
    spark: Any, capsys: Any, tmp_path: Path, gateway: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, pushes = gateway
    snapshot = offsets_io.write_snapshot(NOW, tmp_path / "now.csv")
    store, prom = tmp_path / "plans", tmp_path / "planner.prom"
    code, _, err = run(
        spark, capsys, "plan", "--offsets", str(snapshot), "--consumers", "a,b,c", "--strategy", "drain",
        "--rate", "1000", "--output", str(store), "--metrics-file", str(prom), "--pushgateway", url,
    )  # fmt: skip
    assert code == 0, err
    doc = latest(store)
    got = samples(prom.read_text())
    per_consumer = {dict(k[1])["consumer"]: v for k, v in got.items() if k[0] == "spark_lag_assign_plan_consumer_lag_records"}
    assert per_consumer == {c: float(e["lag"]) for c, e in doc["consumers"].items()}
    assert got[("spark_lag_assign_plan_lag_records", ())] == float(doc["totals"]["lag"]) == 210_000
    assert got[("spark_lag_assign_plan_generation", ())] == 1
    assert got[("spark_lag_assign_plan_optimality_ratio", ())] == pytest.approx(doc["quality"]["optimality"])
    assert got[("spark_lag_assign_plan_drain_seconds", ())] == pytest.approx(doc["drain_seconds"])
    assert got[("spark_lag_assign_plan_info", (("rates_source", "configured"), ("strategy", "drain")))] == 1
    assert got[("spark_lag_assign_plan_outcome", (("outcome", "published"), ("reason", "none")))] == 1
    phases = {dict(k[1])["phase"] for k in got if k[0] == "spark_lag_assign_plan_phase_duration_seconds"}
    assert {"extract", "read", "plan", "check", "write"} <= phases
    # the push: one PUT that replaces this job's and store's group, with the same numbers
    assert [(m, p.split("/")[:4]) for m, p, _ in pushes] == [("PUT", ["", "metrics", "job", cli.PUSH_JOB])]
    assert "/store" in pushes[0][1]
    assert comparable(samples(pushes[0][2])) == comparable(got)
    assert math.isnan(got[("spark_lag_assign_plan_moved_partitions", ())])  # a first plan: nothing to compare with

    # an unreachable Pushgateway (from the environment this time): one warning line, and the
    # next generation is still published
    monkeypatch.setenv("SPARK_LAG_ASSIGN_PUSHGATEWAY", f"http://127.0.0.1:{closed_port()}")
    code, _, err = run(spark, capsys, "plan", "--offsets", str(snapshot), "--consumers", "a,b,c", "--output", str(store))
    assert code == 0
    assert len(err.splitlines()) == 1 and err.startswith("spark-lag-assign: warning: pushing metrics to http://127.0.0.1:")
    assert latest(store)["generation"] == 2


def test_a_refused_run_says_so_in_its_metrics(spark: Any, capsys: Any, tmp_path: Path) -> None:
    full = offsets_io.write_snapshot(NOW, tmp_path / "full.csv")
    one = offsets_io.write_snapshot(NOW.head(1), tmp_path / "one.csv")
    store, prom = tmp_path / "plans", tmp_path / "planner.prom"
    assert run(spark, capsys, "plan", "--offsets", str(full), "--consumers", "a,b", "--output", str(store))[0] == 0
    conf = tmp_path / "planner.toml"  # the metrics file from the config file this time
    conf.write_text(f'[plan]\nmetrics_file = "{prom}"\n')
    code, _, err = run(spark, capsys, "plan", "--config", str(conf), "--offsets", str(one), "--consumers", "a,b", "--output", str(store))
    assert code == 1 and len(err.splitlines()) == 1
    got = samples(prom.read_text())
    assert got[("spark_lag_assign_plan_outcome", (("outcome", "refused"), ("reason", "shrink")))] == 1
    # nothing published: no generation and no plan numbers, never a 0 that reads as "no lag"
    assert {k[0] for k in got} == {
        "spark_lag_assign_plan_outcome", "spark_lag_assign_plan_last_run_timestamp_seconds", "spark_lag_assign_plan_phase_duration_seconds",
    }  # fmt: skip


def test_a_change_of_who_fences_is_refused_until_asked_for(spark: Any, capsys: Any, tmp_path: Path) -> None:
    """One line, exit 1, the store as it was and the outcome refused (fencing-change); with
    --fencing-change it is published."""
    snapshot = offsets_io.write_snapshot(NOW, tmp_path / "now.csv")
    store, prom = tmp_path / "plans", tmp_path / "planner.prom"
    common = ("plan", "--offsets", str(snapshot), "--consumers", "a,b", "--output", str(store))
    assert run(spark, capsys, *common)[0] == 0
    before = sorted(p.relative_to(store) for p in store.rglob("*"))
    code, _, err = run(spark, capsys, *common, "--fencing", "service", "--metrics-file", str(prom))
    assert code == 1 and len(err.splitlines()) == 1, err
    assert "the new plan fences by 'service' where generation 1 fences by 'self'" in err
    assert sorted(p.relative_to(store) for p in store.rglob("*")) == before
    got = samples(prom.read_text())
    assert got[("spark_lag_assign_plan_outcome", (("outcome", "refused"), ("reason", "fencing-change")))] == 1
    code, _, err = run(spark, capsys, *common, "--fencing", "service", "--fencing-change")
    assert code == 0, err
    assert latest(store)["generation"] == 2 and latest(store)["fencing"] == "service"


def test_drain_within_sizes_the_group_and_size_to_deadline_publishes_that_plan(spark: Any, capsys: Any, tmp_path: Path) -> None:
    snapshot = offsets_io.write_snapshot(NOW, tmp_path / "now.csv")
    speeds = tmp_path / "rates.csv"
    speeds.write_text("consumer,records_per_second\na,100\nb,400\nc,200\nd,100\n")
    store, prom = tmp_path / "plans", tmp_path / "planner.prom"
    common = ["plan", "--offsets", str(snapshot), "--consumers", "a,b,c,d", "--rates", str(speeds), "--strategy", "drain"]
    # 210,000 records: b alone (400/s) needs 525 s; within 500 s b and c (the two fastest) do it,
    # drain giving b 140,000 and c 70,000: 350 s; all four take 300 s
    code, out, err = run(spark, capsys, *common, "--output", str(store), "--drain-within", "8m20s", "--metrics-file", str(prom))
    assert code == 0, err
    sizing = latest(store)["sizing"]
    assert sizing == {
        "deadline_seconds": 500.0, "pipelines_configured": 4, "pipelines_needed": 2, "pipelines": ["b", "c"],
        "drain_seconds_configured": 300.0, "drain_seconds_needed": 350.0, "produce_excess": 0.0,
    }  # fmt: skip
    assert "drain within 8m 20s: 2 pipeline(s) needed (b, c), draining in 5m 50s; 4 configured pipeline(s) drain in 5m 00s" in out
    got = samples(prom.read_text())
    assert got[("spark_lag_assign_sizing_pipelines_needed", ())] == 2
    assert got[("spark_lag_assign_sizing_drain_seconds", (("pipelines", "needed"),))] == 350
    assert got[("spark_lag_assign_sizing_drain_seconds", (("pipelines", "configured"),))] == 300
    assert set(latest(store)["consumers"]) == {"a", "b", "c", "d"}  # sizing alone changes no plan

    # the deadline and the sized plan from the config file: published for the pipelines needed
    conf = tmp_path / "planner.toml"
    conf.write_text("[plan]\ndrain_within = 500\nsize_to_deadline = true\n")
    code, out, err = run(spark, capsys, "plan", "--config", str(conf), *common[1:], "--output", str(store))
    assert code == 0, err
    doc = latest(store)
    assert sorted(doc["consumers"]) == ["b", "c"]
    assert doc["drain_seconds"] == 350

    # producers outrunning everyone: said, with by how much
    later = offsets_io.write_snapshot(NOW.assign(end_offset=NOW["end_offset"] + 2_000), tmp_path / "later.csv")
    code, out, err = run(
        spark, capsys, "plan", "--offsets", str(snapshot), "--offsets-later", str(later), "--interval", "1",
        "--consumers", "a,b,c,d", "--rates", str(speeds), "--strategy", "drain", "--output", str(tmp_path / "p2"),
        "--drain-within", "1h",
    )  # fmt: skip
    assert code == 0, err
    assert "no number of the 4 configured pipelines does: producers append 11,200.0 records/s more than all of them read" in out


@pytest.mark.parametrize(
    ("deadline", "said"),
    [("-5m", "is negative"), ("soon", "is not a duration"), ("0s", "more than zero"), ("1h30", "is not a duration")],
)
def test_a_bad_deadline_is_one_line(spark: Any, capsys: Any, tmp_path: Path, gateway: Any, deadline: str, said: str) -> None:
    """Either spelling (``--drain-within -5m`` too: argparse must not take it for a flag), and
    the failed run's metrics are written and pushed all the same: failed, reason config."""
    url, pushes = gateway
    snapshot = offsets_io.write_snapshot(NOW, tmp_path / "now.csv")
    prom = tmp_path / "planner.prom"
    for spelling in ([f"--drain-within={deadline}"], ["--drain-within", deadline]):
        prom.unlink(missing_ok=True)
        pushes.clear()
        code, _, err = run(
            spark, capsys, "plan", "--offsets", str(snapshot), "--consumers", "a,b", "--rate", "10",
            "--output", str(tmp_path / "plans"), *spelling, "--metrics-file", str(prom), "--pushgateway", url,
        )  # fmt: skip
        assert code == 1 and len(err.splitlines()) == 1, (spelling, err)
        assert err.startswith("spark-lag-assign: error: --drain-within: ") and said in err
        assert not (tmp_path / "plans").exists() or not list((tmp_path / "plans").rglob("plan.json"))
        got = samples(prom.read_text())
        assert got[("spark_lag_assign_plan_outcome", (("outcome", "failed"), ("reason", "config")))] == 1
        outcomes = [k for k in got if k[0] == "spark_lag_assign_plan_outcome"]
        assert len(outcomes) == 1 and ("spark_lag_assign_plan_generation", ()) not in got
        assert len(pushes) == 1 and comparable(samples(pushes[0][2])) == comparable(got)


def test_settings_that_fail_still_write_the_metrics_file_the_config_names(tmp_path: Path, capsys: Any) -> None:
    """The settings are refused (a pinned pipeline not in the group): the metrics file of the
    config file is written; where the config file itself does not read, --metrics-file still is."""
    snapshot = offsets_io.write_snapshot(NOW, tmp_path / "now.csv")
    prom = tmp_path / "planner.prom"
    conf = tmp_path / "planner.toml"
    conf.write_text(f'[plan]\nmetrics_file = "{prom}"\ndrain_within = "45m"\npinned = ["z"]\n')
    args = ["plan", "--config", str(conf), "--offsets", str(snapshot), "--consumers", "a,b", "--output", str(tmp_path / "p")]
    assert cli.main(args) == 1
    said = f"spark-lag-assign: error: {conf}: [plan] pinned: pinned pipeline(s) not in the group: z"
    assert capsys.readouterr().err.strip() == said
    failed = ("spark_lag_assign_plan_outcome", (("outcome", "failed"), ("reason", "config")))
    assert samples(prom.read_text())[failed] == 1

    prom.unlink()
    conf.write_text(f'[plan]\nmetrics_file = "{prom}"\nseed = "2"\n')  # refused as the file is read
    other = tmp_path / "given.prom"
    assert cli.main([*args, "--metrics-file", str(other)]) == 1
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not prom.exists() and samples(other.read_text())[failed] == 1


def test_size_to_deadline_sizes_from_the_previous_plan_it_publishes_from(spark: Any, capsys: Any, tmp_path: Path) -> None:
    """tests/unit/test_sizing.py's case through Spark: the generation before is lag-sticky's plan
    of the same four pipelines. Sized from scratch, three drain in 71.18 s, but drain keeps the
    previous owners unless it finds a plan 5% sooner: published, those three took 77.32 s, past
    the 75 s deadline plan.json said they met. Sized from the previous plan, all four are needed."""
    lags = [3559, 768, 1912, 1375, 140, 1360, 3598, 3469, 3171, 1814]
    snapshot = offsets_io.write_snapshot(
        pd.DataFrame(
            {
                "topic": "t0", "partition": range(len(lags)), "beginning_offset": 0, "end_offset": lags,
                "committed_offset": pd.array([0] * len(lags), dtype="Int64"),
            }
        ),
        tmp_path / "now.csv",
    )  # fmt: skip
    speeds = tmp_path / "rates.csv"
    speeds.write_text("consumer,records_per_second\nc0,200\nc1,50\nc2,50\nc3,50\n")
    store, prom = tmp_path / "plans", tmp_path / "planner.prom"
    common = ["plan", "--offsets", str(snapshot), "--consumers", "c0,c1,c2,c3", "--output", str(store)]
    assert run(spark, capsys, *common, "--strategy", "lag-sticky")[0] == 0
    code, out, err = run(
        spark, capsys, *common, "--rates", str(speeds), "--strategy", "drain", "--drain-within", "75s", "--size-to-deadline",
        "--metrics-file", str(prom),
    )  # fmt: skip
    assert code == 0, err
    doc = latest(store)
    # what sizing said is what the published plan does, in plan.json and in the metrics
    assert doc["drain_seconds"] == doc["sizing"]["drain_seconds_needed"] <= 75
    assert doc["drain_seconds"] == pytest.approx(68.985)
    four = ["c0", "c1", "c2", "c3"]
    assert (doc["generation"], doc["sizing"]["pipelines"], sorted(doc["consumers"])) == (2, four, four)
    assert "4 pipeline(s) needed (c0, c1, c2, c3)" in out
    got = samples(prom.read_text())
    needed = got[("spark_lag_assign_sizing_drain_seconds", (("pipelines", "needed"),))]
    assert needed == got[("spark_lag_assign_plan_drain_seconds", ())] == pytest.approx(doc["drain_seconds"])
