"""``jobs/example_pipeline.py --metrics-port``: each consumer's ``PlanFollower`` serves on its own
port. No Spark and no broker: the real followers serve first, before they touch either, so a
port in use, and the ports each consumer was given, show before any Spark work (the live
scrape is tests/integration/test_follower_metrics.py's)."""

from __future__ import annotations

import importlib.util
import logging
import socket
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest

from spark_lag_assign.errors import SparkLagAssignError
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.store import open_store

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_pipeline_metrics", REPO / "jobs" / "example_pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def groupless_plan(directory: Path) -> None:
    """A plan for A and B that names no consumer group: a follower that got past serving its
    metrics stops there, with one line, before any Kafka or Spark work."""
    frame = pd.DataFrame([("A", "t", 0, 0, -2), ("B", "t", 1, 0, -2)], columns=list(plan_io.PLAN_COLUMNS))
    doc = plan_io.build_plan(frame, {"A": ["t"], "B": ["t"]}, generation=1, strategy="range", reset="earliest", group=None)
    with open_store(str(directory)) as store, store.publisher() as publisher:
        publisher.publish(doc)


def free_pair() -> int:
    """A port P with P+1 free too (at the time of asking)."""
    for _ in range(50):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port = int(a.getsockname()[1])
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return port
    raise AssertionError("no two adjacent free ports")


def test_each_consumer_serves_on_its_own_port_and_a_port_in_use_is_one_line(
    example: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    groupless_plan(tmp_path / "plan")
    port = free_pair()
    base = ["--plan", str(tmp_path / "plan"), "--consumers", "A,B", "--bootstrap-servers", "127.0.0.1:1",
            "--output", str(tmp_path / "sink"), "--checkpoints", str(tmp_path / "chk"), "--metrics-port", str(port)]  # fmt: skip
    with socket.socket() as taken:  # B's port, PORT+1, is in use
        taken.bind(("0.0.0.0", port + 1))
        taken.listen()
        with caplog.at_level(logging.INFO, logger="spark_lag_assign"):
            assert example.run(None, example.build_parser().parse_args(base)) == 1
    errors = sorted(capsys.readouterr().err.strip().splitlines())
    # A served on PORT and went on to the plan (which names no group); B never got past its port
    assert errors[0].startswith("error: A: the plan in ") and "names no consumer group" in errors[0], errors
    assert errors[1].startswith(f"error: B: metrics_port {port + 1}: cannot serve metrics there ("), errors
    assert len(errors) == 2
    assert f"A: serving its metrics on 0.0.0.0:{port}" in caplog.text
    # without the option nobody serves: both reach the plan
    assert example.run(None, example.build_parser().parse_args(base[:-2])) == 1
    assert all("names no consumer group" in line for line in capsys.readouterr().err.strip().splitlines())


@pytest.mark.parametrize(
    ("first", "consumers", "ports"), [(None, 2, [None, None]), (0, 3, [0, 0, 0]), (9400, 3, [9400, 9401, 9402])]
)
def test_the_ports_each_consumer_gets(example: ModuleType, first: int | None, consumers: int, ports: list[int | None]) -> None:
    assert example.metrics_ports(first, consumers) == ports


@pytest.mark.parametrize(("first", "consumers"), [(-1, 1), (65535, 2), (70000, 1)])
def test_ports_out_of_range_are_one_line(example: ModuleType, first: int, consumers: int) -> None:
    with pytest.raises(SparkLagAssignError, match=rf"^--metrics-port {first}: {consumers} consumer\(s\) need ports "):
        example.metrics_ports(first, consumers)
