"""A live pipeline's Prometheus endpoint, scraped over HTTP while it reads and hands over, on the
real broker and real Spark; every exposition parsed with prometheus_client's own parser.

Generation 1: A reads metered-0 and -1; Z (a pipeline paused for minutes: its claim, written
here, keeps a 600 s lease) holds metered-2 and -3. Generation 2 gives A only metered-0 and B the
other three: A hands metered-1 over (its handover counter goes to one), and B waits for Z, its
wait growing between scrapes, until Z's claim releases them; then B reads. B's records-read and
lease-renewal counters are broken (every update raises, as a registry whose collector broke
would): it reads its whole backlog and renews its claim all the same.
"""

from __future__ import annotations

import socket
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from spark_lag_assign.consume import PlanFollower
from spark_lag_assign.errors import ConfigError
from spark_lag_assign.store import open_store
from spark_lag_assign.testing.localkafka import LocalKafka, commit, create_topic, produce
from tests.integration.test_follower import Running, caught_up, follower, hand_plan, holds, wait_until

pytestmark = pytest.mark.kafka_source  # the pipelines read with Spark's Kafka source, also when this file runs alone

TOPIC, GROUP, BACKLOG = "metered", "metered-it", 40


def scrape(port: int | None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    assert port is not None, "the follower serves no metrics"
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: dict[Any, float], name: str, **labels: str) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


class Broken:
    """A metric whose every update raises."""

    def labels(self, *args: Any) -> Any:
        raise RuntimeError("collector broke")


def test_a_live_pipelines_endpoint_counts_its_handover_and_shows_a_wait_growing(
    kafka: LocalKafka, spark: Any, tmp_path: Path
) -> None:
    bootstrap = kafka.bootstrap_servers
    create_topic(bootstrap, TOPIC, 4)
    produce(bootstrap, TOPIC, dict.fromkeys(range(4), BACKLOG))
    commit(bootstrap, GROUP, {(TOPIC, p): 0 for p in range(4)})
    plan_dir = tmp_path / "plan"
    hand_plan(plan_dir, 1, {"A": {TOPIC: [0, 1]}, "Z": {TOPIC: [2, 3]}}, {}, group=GROUP)
    with ExitStack() as stack:
        store = stack.enter_context(open_store(str(plan_dir)))
        paused = stack.enter_context(store.claim_writer("Z"))
        paused.write(1, holds(TOPIC, 2, 3), lease=600.0, state="reading")

        a = Running(follower(spark, plan_dir, "A", tmp_path, bootstrap, metrics_port=0))
        stack.callback(a.follower.stop)  # a failed assertion must not leave it reading
        wait_until(lambda: a.started(1), 120, "A reads generation 1")
        port_a = a.follower.metrics_port

        def a_read_its_backlog() -> bool:
            found = scrape(port_a)
            return (value(found, "spark_lag_assign_follower_records_read_total", consumer="A") or 0) >= 2 * BACKLOG and value(
                found, "spark_lag_assign_follower_committed_lag_records", consumer="A", topic=TOPIC
            ) == 0

        wait_until(a_read_its_backlog, 120, "A's endpoint shows its backlog read and committed")
        found = scrape(port_a)
        assert value(found, "spark_lag_assign_follower_state", consumer="A", state="reading") == 1
        assert value(found, "spark_lag_assign_follower_state", consumer="A", state="waiting") == 0
        assert value(found, "spark_lag_assign_follower_generation", consumer="A") == 1
        assert value(found, "spark_lag_assign_follower_partitions", consumer="A") == 2
        assert value(found, "spark_lag_assign_follower_handovers_total", consumer="A") == 0
        assert (value(found, "spark_lag_assign_follower_commits_total", consumer="A") or 0) >= 1
        assert value(found, "spark_lag_assign_follower_refused_commits_total", consumer="A") == 0

        # generation 2: A keeps metered-0, B gets metered-1 (from A) and -2, -3 (from the paused Z)
        hand_plan(plan_dir, 2, {"A": {TOPIC: [0]}, "B": {TOPIC: [1, 2, 3]}, "Z": {}}, {}, group=GROUP)
        broken = follower(spark, plan_dir, "B", tmp_path, bootstrap, metrics_port=0)
        broken.metrics._records = broken.metrics._renewals = Broken()  # type: ignore[assignment]
        b = Running(broken)
        stack.callback(b.follower.stop)
        wait_until(lambda: a.started(2), 120, "A reads generation 2")
        found = scrape(port_a)
        assert value(found, "spark_lag_assign_follower_handovers_total", consumer="A") == 0  # fewer is no handover
        assert value(found, "spark_lag_assign_follower_handover_duration_seconds_count", consumer="A") == 0
        assert value(found, "spark_lag_assign_follower_generation", consumer="A") == 2
        assert value(found, "spark_lag_assign_follower_partitions", consumer="A") == 1

        def waits() -> float | None:
            return value(scrape(b.follower.metrics_port), "spark_lag_assign_follower_wait_seconds", consumer="B", blocker="Z")

        wait_until(lambda: b.follower.metrics_port is not None and waits() is not None, 120, "B waits for Z")
        first = waits()
        wait_until(lambda: (waits() or 0) > (first or 0) + 1, 60, "B's wait for Z grows", pause=0.5)
        found = scrape(b.follower.metrics_port)
        assert value(found, "spark_lag_assign_follower_state", consumer="B", state="waiting") == 1
        assert value(found, "spark_lag_assign_follower_state", consumer="B", state="reading") == 0
        assert value(found, "spark_lag_assign_follower_generation", consumer="B") == 0
        assert value(found, "spark_lag_assign_follower_plan_generation", consumer="B") == 2
        assert not b.started(2)

        paused.write(2, frozenset(), lease=600.0, state="released")  # Z resumes and lets go
        wait_until(lambda: b.started(2), 120, "B reads once Z released")
        wait_until(
            lambda: value(scrape(b.follower.metrics_port), "spark_lag_assign_follower_state", consumer="B", state="reading") == 1,
            30,
            "B's endpoint says it reads",
        )
        found = scrape(b.follower.metrics_port)
        assert value(found, "spark_lag_assign_follower_wait_seconds", consumer="B", blocker="Z") is None  # no wait left
        assert value(found, "spark_lag_assign_follower_partitions", consumer="B") == 3
        assert value(found, "spark_lag_assign_follower_handovers_total", consumer="B") == 0  # its first start

        # B's broken metrics: every micro-batch's and every renewal's update raised; it read on
        def renewed_while_reading() -> int:
            return sum(e.kind == "claim" and e.detail == "reading" and e.generation == 2 for e in b.follower.events)

        wait_until(lambda: caught_up(bootstrap, GROUP, TOPIC, dict.fromkeys((1, 2, 3), BACKLOG)), 120, "B read its backlog")
        wait_until(lambda: renewed_while_reading() >= 2, 60, "B renews its claim while reading")
        found = scrape(b.follower.metrics_port)
        assert value(found, "spark_lag_assign_follower_records_read_total", consumer="B") == 0  # never counted
        assert value(found, "spark_lag_assign_follower_lease_renewals_total", consumer="B") == 0
        assert b.started(2)  # raises if B's run ended with an error

        # generation 3: metered-1 goes back to A, which waits for B's release: a handover
        hand_plan(plan_dir, 3, {"A": {TOPIC: [0, 1]}, "B": {TOPIC: [2, 3]}, "Z": {}}, {}, group=GROUP)
        wait_until(lambda: a.started(3), 120, "A reads generation 3")
        found = scrape(port_a)
        assert value(found, "spark_lag_assign_follower_handovers_total", consumer="A") == 1
        assert value(found, "spark_lag_assign_follower_handover_duration_seconds_count", consumer="A") == 1
        assert (value(found, "spark_lag_assign_follower_handover_duration_seconds_sum", consumer="A") or 0) > 0

        summaries = {name: r.finish() for name, r in (("A", a), ("B", b))}
    assert {n: s.reason for n, s in summaries.items()} == {"A": "stopped", "B": "stopped"}
    assert a.follower.metrics_port is None  # the endpoint ends with the run


def test_a_metrics_port_in_use_is_one_line_before_anything_is_claimed(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        follower = PlanFollower(
            None,  # never used: the port is checked first
            str(tmp_path),
            "A",
            lambda stream, checkpoint: None,
            checkpoint_root=str(tmp_path / "chk"),
            kafka_options={"kafka.bootstrap.servers": "127.0.0.1:1"},
            metrics_port=port,
            metrics_addr="127.0.0.1",
        )
        with pytest.raises(ConfigError, match=rf"^metrics_port {port}: cannot serve metrics there \(.+\)$"):
            follower.run()
    with open_store(str(tmp_path)) as store:
        assert store.claims() == {}
