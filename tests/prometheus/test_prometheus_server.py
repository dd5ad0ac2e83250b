"""A real Prometheus server scrapes a live pipeline, and answers every query of the dashboard.

The server is Prometheus itself, built from its Go module by ``make prometheus`` (the binary
is ``PROMETHEUS_BIN``, else ``.tools/bin/prometheus``), started with a scrape config that
points at the follower's endpoint. Pipeline A reads a two-partition backlog on the real
broker with real Spark; then the server's own query API must give what A's endpoint says
(the records it read, its state, its generation), and every query of
conf/grafana-dashboard.json must be PromQL the server accepts, the pipelines' panels with
data in them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_follower import Running, caught_up, follower, hand_plan, wait_until
from tests.integration.test_follower_metrics import scrape, value

pytestmark = pytest.mark.kafka_source

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS = Path(os.environ.get("PROMETHEUS_BIN", REPO / ".tools" / "bin" / "prometheus"))
DASHBOARD = REPO / "conf" / "grafana-dashboard.json"
TOPIC, GROUP, BACKLOG = "scraped", "scraped-it", 40
#: the dashboard's panels over the pipelines: each must show data once A was scraped a few times
PIPELINE_PANELS_WITH_DATA = (
    "sum by (consumer) (increase(spark_lag_assign_follower_handovers_total[1h]))",
    'sum(spark_lag_assign_follower_state{state="waiting"})',
    "sum by (consumer, topic) (spark_lag_assign_follower_committed_lag_records)",
    "sum by (consumer) (rate(spark_lag_assign_follower_records_read_total[5m]))",
    "spark_lag_assign_follower_plan_generation - spark_lag_assign_follower_generation",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    """One Prometheus server on loopback scraping ``targets`` every second."""

    def __init__(self, root: Path, targets: list[str]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        config = root / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: pipelines\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n"
        )
        self.port = free_port()
        self.log = root / "prometheus.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={root / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        wait_until(self._ready, 60, "Prometheus is ready", pause=0.5)

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"Prometheus exited {self.process.returncode}: {self.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def query(self, expr: str) -> dict[str, Any]:
        """The API's answer to an instant query: {"status": ..., "data": {"result": [...]}} or the error."""
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:  # a bad query: 400 with the error in the body
            return json.loads(exc.read())

    def values(self, expr: str) -> list[float]:
        answer = self.query(expr)
        assert answer["status"] == "success", (expr, answer)
        return [float(sample["value"][1]) for sample in answer["data"]["result"]]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def dashboard_queries() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [target["expr"] for panel in panels for target in panel.get("targets", [])]


def test_prometheus_scrapes_a_live_pipeline_and_answers_every_dashboard_query(kafka: Any, spark: Any, tmp_path: Path) -> None:
    if not PROMETHEUS.is_file():
        pytest.fail(f"no Prometheus server at {PROMETHEUS}: `make prometheus` builds one", pytrace=False)
    bootstrap = kafka.bootstrap_servers
    from spark_lag_assign.testing.localkafka import commit, create_topic, produce

    create_topic(bootstrap, TOPIC, 2)
    produce(bootstrap, TOPIC, dict.fromkeys(range(2), BACKLOG))
    commit(bootstrap, GROUP, {(TOPIC, p): 0 for p in range(2)})
    plan_dir = tmp_path / "plan"
    hand_plan(plan_dir, 1, {"A": {TOPIC: [0, 1]}}, {}, group=GROUP)
    with ExitStack() as stack:
        a = Running(follower(spark, plan_dir, "A", tmp_path, bootstrap, metrics_port=0))
        stack.callback(a.follower.stop)
        wait_until(lambda: a.started(1), 120, "A reads generation 1")
        port = a.follower.metrics_port
        assert port is not None
        wait_until(lambda: caught_up(bootstrap, GROUP, TOPIC, dict.fromkeys(range(2), BACKLOG)), 120, "A read its backlog")
        wait_until(
            lambda: value(scrape(port), "spark_lag_assign_follower_records_read_total", consumer="A") == 2 * BACKLOG,
            60,
            "A's endpoint counts its backlog",
        )
        server = Prometheus(tmp_path / "prometheus", [f"127.0.0.1:{port}"])
        stack.callback(server.stop)

        read = 'spark_lag_assign_follower_records_read_total{consumer="A",job="pipelines"}'
        wait_until(lambda: server.values(read) == [2.0 * BACKLOG], 60, "Prometheus has A's records read", pause=0.5)
        assert server.values('up{job="pipelines"}') == [1.0]
        assert server.values('spark_lag_assign_follower_state{consumer="A",state="reading"}') == [1.0]
        assert server.values('spark_lag_assign_follower_generation{consumer="A"}') == [1.0]
        assert server.values(f'spark_lag_assign_follower_committed_lag_records{{consumer="A",topic="{TOPIC}"}}') == [0.0]

        # a few more scrapes, so that increase() and rate() have two samples each
        time.sleep(3)
        queries = dashboard_queries()
        assert len(queries) >= 20
        refused = {expr: answer for expr in queries if (answer := server.query(expr))["status"] != "success"}
        assert refused == {}, refused  # every panel is PromQL this server accepts
        assert set(PIPELINE_PANELS_WITH_DATA) <= set(queries), "the panels named here are the dashboard's"
        empty = [expr for expr in PIPELINE_PANELS_WITH_DATA if not server.values(expr)]
        assert empty == [], empty
        print(f"\nPrometheus answered {len(queries)} dashboard queries; A's records read: {server.values(read)}")
        summary = a.finish()
    assert summary.reason == "stopped"
