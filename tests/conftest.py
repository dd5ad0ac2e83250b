"""Shared fixtures: one SparkSession, one real Kafka broker and one real HDFS per test session.

Tests that use them carry the ``spark`` / ``broker`` / ``hdfs`` marker (added here
automatically from the fixtures they request), so ``pytest -m "not spark and not broker and
not hdfs"`` runs the pure suite in seconds.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, Phase, settings

if TYPE_CHECKING:
    from spark_lag_assign.testing.localkafka import LocalKafka
    from spark_lag_assign.testing.minihdfs import MiniHDFS

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

# Hypothesis profiles. Every one is derandomized: a red run is reproduced by anyone, on any
# machine, and a green one means the same examples passed in CI. ``deadline=None``: a slow
# first call (imports, numpy warm-up) or a busy shared machine is not a failure; timing is
# the benchmarks' business. Properties set no ``max_examples`` of their own, so the profile
# decides how hard every one of them is tried.
#
#   ci             the default (``make test``, ``make test-unit``): 200 examples per property
#   thorough       ``make test-thorough``: 10,000 per property; hunting bugs, not in CI
#   unit-thorough  ``make test-protocol``: the handover state machine at 1,000 runs of up to
#                  120 steps each
#   mutation       ``make test-mutation``: ci's examples (every phase of ci but shrinking)
settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=200,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", settings.get_profile("ci"), max_examples=10_000)
settings.register_profile("unit-thorough", settings.get_profile("ci"), max_examples=1_000)
# ``make test-mutation``: exactly the ci profile's examples (so a mutant is killed by what
# ``make test`` runs), without shrinking a failure, which only costs time there. So ci's
# phases less ``shrink`` and nothing else: ``target`` stays, since the handover model calls
# ``target()`` and the targeting phase runs examples of its own, which generation alone would
# not; ``explain`` stays too, and does nothing without ``shrink``.
settings.register_profile(
    "mutation", settings.get_profile("ci"), phases=[p for p in settings.get_profile("ci").phases if p != Phase.shrink]
)

# an explicit --hypothesis-profile on the command line wins over the suite's default
if settings.get_current_profile_name() == "default":
    settings.load_profile("ci")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "spark" in fixtures:
            item.add_marker(pytest.mark.spark)
        if "kafka" in fixtures or "kafka_acl" in fixtures:
            item.add_marker(pytest.mark.broker)
        if "hdfs" in fixtures:
            item.add_marker(pytest.mark.hdfs)


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest):  # -> SparkSession
    """The one local session; with Spark's Kafka source only if a selected test reads with it
    (marker ``kafka_source``), so the planner's tests run on a PySpark whose source Maven
    Central does not serve."""
    from spark_lag_assign.spark.session import local_session

    with_kafka = any(item.get_closest_marker("kafka_source") for item in request.session.items)
    session = local_session("spark-lag-assign-tests", with_kafka=with_kafka)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A real single-node KRaft broker on loopback; its log is printed if a test fails."""
    from spark_lag_assign.testing.localkafka import LocalKafka

    # a second listener that requires SASL/PLAIN lets tests see an authentication failure
    with LocalKafka(tmp_path_factory.mktemp("kafka"), sasl_users={"planner": "planner-secret"}) as broker:
        yield broker


@pytest.fixture(scope="session")
def kafka_acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A second real broker that authorizes every request (StandardAuthorizer, no ACL means no
    access), started only for the tests that ask for it. Its clients log in with SCRAM; the
    super user ``admin`` (``kafka_acl.client_options()``) creates topics, users and ACLs, and
    a test makes a fresh user per case (``add_user``) so that no case sees another's ACLs."""
    import secrets

    from spark_lag_assign.testing.localkafka import LocalKafka

    with LocalKafka(tmp_path_factory.mktemp("kafka-acl"), acl_users={"admin": secrets.token_hex(12)}) as broker:
        yield broker


@pytest.fixture(scope="session")
def hdfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MiniHDFS]:
    """A real HDFS (NameNode + DataNode) on loopback; its log is printed if a test fails."""
    from spark_lag_assign.testing.minihdfs import MiniHDFS

    with MiniHDFS(tmp_path_factory.mktemp("hdfs")) as cluster:
        yield cluster


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    for name in ("kafka", "kafka_acl"):
        broker = item.funcargs.get(name) if hasattr(item, "funcargs") else None
        if report.failed and broker is not None:
            report.sections.append((f"local Kafka broker ({name})", f"broker log: {broker.log_path}"))
    cluster = item.funcargs.get("hdfs") if hasattr(item, "funcargs") else None
    if report.failed and cluster is not None:
        report.sections.append(("local HDFS", f"HDFS log: {cluster.log_path}"))
