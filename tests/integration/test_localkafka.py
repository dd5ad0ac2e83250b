"""The local broker tooling: it always stops, whatever ends the run."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from spark_lag_assign.testing.localkafka import LocalKafka

pytestmark = pytest.mark.broker


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def gone(port: int, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not listening(port):
            return True
        time.sleep(0.5)
    return False


def test_a_failing_block_still_stops_the_broker(tmp_path: Path) -> None:
    broker = LocalKafka(tmp_path)
    with pytest.raises(RuntimeError, match="test body failed"), broker:  # noqa: PT012 - the failure must happen inside the broker's block
        assert listening(broker.port)
        raise RuntimeError("test body failed")
    assert gone(broker.port)
    assert broker.stopped_by == "SIGTERM", "the broker needed SIGKILL: it did not shut down in order"
    # it was a real KRaft broker that saw the SIGTERM, and its log stays for a failing test to point to.
    # (Lines logged during the JVM's shutdown are not asserted: log4j may lose them when its own
    # shutdown hook races the broker's, which happens on a loaded machine.)
    log = broker.log_path.read_text()
    assert "Kafka Server started" in log
    assert "Terminating process due to signal SIGTERM" in log


SCRIPT = """
import sys, time
from spark_lag_assign.testing.localkafka import LocalKafka
broker = LocalKafka(sys.argv[1]).start()
print(broker.port, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["killed", "interrupted"])
def test_the_broker_dies_with_the_process_that_started_it(tmp_path: Path, sig: signal.Signals) -> None:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())  # type: ignore[union-attr]
        assert listening(port)
        proc.send_signal(sig)  # SIGKILL runs no Python cleanup: only the parent-death signal stops it
        proc.wait(timeout=30)
        assert gone(port), "the broker outlived the process that started it"
    finally:
        proc.kill()


# -- the authorizing broker -------------------------------------------------------------------


def test_an_authorizing_broker_allows_a_user_only_what_it_was_granted(kafka_acl: LocalKafka) -> None:
    from kafka import KafkaAdminClient

    from spark_lag_assign.extract.acls import Acl
    from spark_lag_assign.testing.localkafka import create_topic

    topic = f"granted-{time.monotonic_ns()}"
    create_topic(kafka_acl.bootstrap_servers, topic, 1, client_options=kafka_acl.client_options())  # the super user may
    user = f"u{time.monotonic_ns()}"
    kafka_acl.add_user(user)
    admin = KafkaAdminClient(bootstrap_servers=kafka_acl.bootstrap_servers, **kafka_acl.client_options(user))
    try:
        assert admin.list_topics() == []  # no ACL: it may not even see that the topic exists
        (refused,) = admin.describe_topics([topic])
        assert refused["error_code"] == 29  # TOPIC_AUTHORIZATION_FAILED
        kafka_acl.grant(user, [Acl("DESCRIBE", "Topic", topic[:8], "prefixed")])
        (seen,) = admin.describe_topics([topic])
        assert seen["error_code"] == 0 and len(seen["partitions"]) == 1
        assert seen["authorized_operations"] == ["DESCRIBE"]  # and nothing more
    finally:
        admin.close()


def test_an_authorizing_broker_takes_only_scram_logins_of_its_users(kafka_acl: LocalKafka) -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    wrong = {**kafka_acl.client_options(), "sasl_plain_password": "not-the-password"}
    with pytest.raises(KafkaError):
        KafkaAdminClient(bootstrap_servers=kafka_acl.bootstrap_servers, bootstrap_timeout_ms=3000, **wrong)
    with pytest.raises(KafkaError):  # no anonymous PLAINTEXT clients
        KafkaAdminClient(bootstrap_servers=kafka_acl.bootstrap_servers, bootstrap_timeout_ms=3000)


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ({"acl_users": {"admin": "x"}, "sasl_users": {"planner": "y"}}, "exclude each other"),
        ({"acl_users": {"planner": "x"}}, "super users must be among acl_users"),
        ({"acl_users": {"admin": "x", "broker": "y"}}, "'broker' is the broker's own principal"),
        ({"acl_users": {"admin": "a,b]"}}, "may hold only letters, digits"),
    ],
)
def test_a_contradictory_authorizing_setup_is_refused_before_anything_starts(
    tmp_path: Path, options: dict[str, Any], complaint: str
) -> None:
    from spark_lag_assign.errors import BrokerError

    with pytest.raises(BrokerError, match=complaint):
        LocalKafka(tmp_path, **options)
    assert not (tmp_path / "data").exists()
