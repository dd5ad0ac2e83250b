"""What only the Kafka store does, against a real broker: topics, chunks, transactions.

The contract every store keeps is in ``tests/contract``; here are the Kafka mechanics behind
it: the topics it creates and refuses, plans split over many records, a claim writer killed
inside a transaction, a zombie planner, and how long things take.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.structs import TopicPartition

from spark_lag_assign.errors import ConfigError
from spark_lag_assign.store import ClaimRecord, PublishFencedError, StoreError, open_store
from spark_lag_assign.store.kafka import TopicLayoutError
from spark_lag_assign.store.kafka_names import CHUNK_BYTES, MAX_MESSAGE_BYTES, claims_topic, plans_topic
from tests.contract.test_store_contract import make_plan

REPO = Path(__file__).resolve().parents[2]


def fresh_name() -> str:
    return f"kstore-{uuid.uuid4().hex[:10]}"


def raw_records(bootstrap: str, topic: str, isolation_level: str = "read_uncommitted") -> list[Any]:
    """Every record stored in partition 0 of ``topic``, as a plain consumer reads it."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, isolation_level=isolation_level
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out: list[Any] = []
        while consumer.position(tp) < end:
            out += consumer.poll(timeout_ms=200, max_records=100_000).get(tp, [])
        return out
    finally:
        consumer.close()


def topic_config(admin: KafkaAdminClient, topic: str, key: str) -> str:
    found = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {key: None})], config_filter="all")
    return str(found["topic"][topic][key]["value"])


# -- topics -----------------------------------------------------------------------------------


def test_topics_are_created_compacted_with_one_partition(kafka: Any) -> None:
    """The plans topic when the store opens, each consumer's claims topic when a plan names
    it (or its claim writer finds it missing)."""
    name = fresh_name()
    with open_store(f"kafka://{kafka.bootstrap_servers}/{name}") as store:
        assert store.latest() is None
        with store.publisher() as publisher:
            publisher.publish(make_plan(publisher.next_generation(), consumers=2))
        store.claim_writer("X").close()
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        assert {t for t in admin.list_topics() if t.startswith(name + ".")} == {
            plans_topic(name), claims_topic(name, "c0"), claims_topic(name, "c1"), claims_topic(name, "X")
        }
        for topic in (plans_topic(name), claims_topic(name, "c0"), claims_topic(name, "X")):
            (described,) = admin.describe_topics([topic])
            assert len(described["partitions"]) == 1
            assert len(described["partitions"][0]["replica_nodes"]) == 1  # min(3, one broker)
            assert topic_config(admin, topic, "cleanup.policy") == "compact"
            assert int(topic_config(admin, topic, "max.message.bytes")) == MAX_MESSAGE_BYTES
    finally:
        admin.close()
    with open_store(f"kafka://{kafka.bootstrap_servers}/{name}") as again:  # existing, valid: accepted
        assert again.generations() == [1]


@pytest.mark.parametrize(
    ("partitions", "configs", "complaint"),
    [
        (3, {"cleanup.policy": "compact"}, "has 3 partitions; the store needs exactly 1"),
        (1, {"cleanup.policy": "delete"}, "has cleanup.policy=delete; the store needs compact"),
    ],
)
def test_a_wrong_existing_topic_is_refused_and_nothing_is_written(
    kafka: Any, partitions: int, configs: dict[str, str], complaint: str
) -> None:
    name = fresh_name()
    plans = plans_topic(name)
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        admin.create_topics(
            {plans: {"num_partitions": partitions, "replication_factor": 1, "configs": configs}}, wait_for_metadata=True
        )
        with pytest.raises(TopicLayoutError) as caught:
            open_store(f"kafka://{kafka.bootstrap_servers}/{name}")
        message = str(caught.value)
        assert "\n" not in message and plans in message and complaint in message
        assert isinstance(caught.value, StoreError) and isinstance(caught.value, ConfigError)
        assert not [t for t in admin.list_topics() if t.startswith(name + ".") and t != plans]  # refused before creating anything
        assert raw_records(kafka.bootstrap_servers, plans) == []
    finally:
        admin.delete_topics([plans])
        admin.close()


@pytest.mark.broker  # no broker, but network waits: not for the pure suite
def test_an_unreachable_cluster_is_one_line() -> None:
    from spark_lag_assign.testing.localkafka import free_port

    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        open_store(f"kafka://127.0.0.1:{free_port()}/{fresh_name()}", timeout=2)
    assert "cannot reach Kafka" in str(caught.value) and "\n" not in str(caught.value)
    assert time.monotonic() - started < 20


def test_a_refused_login_and_a_bad_client_option_are_one_line(kafka: Any) -> None:
    options = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": "planner", "sasl_plain_password": "wrong"}
    with pytest.raises(StoreError) as caught:
        open_store(f"kafka://{kafka.sasl_bootstrap_servers}/{fresh_name()}", client_options=options, timeout=3)
    assert "authentication failed" in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match="invalid Kafka client option"):
        open_store(f"kafka://{kafka.bootstrap_servers}/{fresh_name()}", client_options={"no_such_option": 1})


def test_the_right_login_works_through_client_options(kafka: Any) -> None:
    options = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": "planner", "sasl_plain_password": "planner-secret"}
    with open_store(f"kafka://{kafka.sasl_bootstrap_servers}/{fresh_name()}", client_options=options) as store:
        with store.publisher() as publisher:
            publisher.publish(make_plan(publisher.next_generation()))
        with store.claim_writer("A") as writer:
            writer.write(1, [("t", 0)], lease=10.0)
        assert store.generations() == [1] and set(store.claims()) == {"A"}


# -- plans ------------------------------------------------------------------------------------


def test_a_plan_too_big_for_one_record_is_chunked_and_round_trips(kafka: Any) -> None:
    name = fresh_name()
    with open_store(f"kafka://{kafka.bootstrap_servers}/{name}") as store, store.publisher() as publisher:
        doc = make_plan(publisher.next_generation(), consumers=1, partitions=200_000)
        publisher.publish(doc)
    records = raw_records(kafka.bootstrap_servers, plans_topic(name), "read_committed")
    chunks = [r for r in records if r.key.decode().startswith("g/0000000001/c/c0/")]
    assert len(chunks) > 4  # ~3.6 MB of JSON
    assert max(len(r.value) for r in records) <= CHUNK_BYTES
    assert records[-1].key == b"g/0000000001/manifest"  # written last
    with open_store(f"kafka://{kafka.bootstrap_servers}/{name}") as reader:
        assert reader.latest() == doc


def test_a_zombie_planner_publishes_nothing(kafka: Any) -> None:
    name = fresh_name()
    uri = f"kafka://{kafka.bootstrap_servers}/{name}"
    with open_store(uri) as a_host, open_store(uri) as b_host:
        with a_host.publisher() as first:
            first.publish(make_plan(1, tag=1))
        zombie = a_host.publisher()  # took the role, then paused (GC, a partition, a stopped VM)
        assert zombie.next_generation() == 2
        live = b_host.publisher()  # re-initialises the same transactional id: the zombie is fenced
        with pytest.raises(PublishFencedError):
            zombie.publish(make_plan(2, tag=666))
        with pytest.raises(PublishFencedError):  # and stays fenced
            zombie.publish(make_plan(2, tag=667))
        zombie.close()
        # nothing of the zombie's reached the log, not even as aborted records
        stored = raw_records(kafka.bootstrap_servers, plans_topic(name))
        assert not [r for r in stored if r.key.startswith(b"g/0000000002/")]
        assert b_host.generations() == [1]
        doc = make_plan(2, tag=2)
        live.publish(doc)
        live.close()
        assert a_host.latest() == doc


# -- claims -----------------------------------------------------------------------------------

CRASHING_WRITER = textwrap.dedent(
    """
    import sys, time
    from spark_lag_assign.store import ClaimRecord, open_store

    store = open_store(sys.argv[1], claim_transaction_timeout_ms=120_000)
    writer = store.claim_writer("X")
    writer.write(1, [("t", 0)], lease=30.0, state="reading")
    # the next claim, sent inside a transaction that is never committed
    pending = ClaimRecord("X", writer.incarnation, 99, 2, frozenset({("t", 0), ("t", 1)}), 30.0)
    producer = writer._producer
    producer.begin_transaction()
    producer.send(writer.topic, key=b"X", value=pending.to_json().encode(), partition=0)
    producer.flush()
    print("open", flush=True)
    time.sleep(600)
    """
)


def test_a_claim_writer_killed_inside_a_transaction_holds_back_its_own_claims_only(kafka: Any) -> None:
    """Each consumer's claims live in a topic of its own: a writer that dies (or a pipeline that
    means harm) inside a transaction stalls readers of its own claims, never the others'."""
    uri = f"kafka://{kafka.bootstrap_servers}/{fresh_name()}"
    child = subprocess.Popen(
        [sys.executable, "-c", CRASHING_WRITER, uri], cwd=REPO, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "open"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    with open_store(uri, timeout=3) as store, open_store(uri) as reader:
        y = store.claim_writer("Y")
        first = y.write(1, [("t", 5)], lease=10.0)  # visible at once: X's open transaction is in X's topic
        claims = reader.claims()
        assert set(claims) == {"X", "Y"}
        assert isinstance(claims["Y"], ClaimRecord) and claims["Y"].version == first.version
        assert isinstance(claims["X"], ClaimRecord) and claims["X"].generation == 1  # its pending claim is hidden
        # a new incarnation of X takes its transactional id over, which aborts the dead one's
        # transaction: X's pending claim never becomes visible, and X writes promptly again
        restarted = reader.claim_writer("X")
        assert restarted.predecessor is not None and restarted.predecessor.generation == 1
        again = restarted.write(3, [], lease=10.0, state="released")
        record = store.claims()["X"]
        assert isinstance(record, ClaimRecord) and record.version == again.version
        restarted.close()
        y.close()


# -- timings ----------------------------------------------------------------------------------


def test_how_long_things_take(kafka: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The numbers in the store module's docstring; the bounds here only catch a regression
    by an order of magnitude (a sleep loop instead of a long poll, a lost visibility wait)."""
    uri = f"kafka://{kafka.bootstrap_servers}/{fresh_name()}"

    def ms(call: Any) -> tuple[Any, float]:
        started = time.perf_counter()
        result = call()
        return result, (time.perf_counter() - started) * 1000

    with open_store(uri) as store, open_store(uri) as other:
        publisher, took_role = ms(store.publisher)
        _, small = ms(lambda: publisher.publish(make_plan(publisher.next_generation())))
        publisher.close()
        writer, took_id = ms(lambda: store.claim_writer("A"))
        writes = sorted(ms(lambda: writer.write(1, [("t", 0)], lease=10.0))[1] for _ in range(10))
        other.claims()
        reads = sorted(ms(other.claims)[1] for _ in range(10))

        seen: list[float] = []
        for tag in range(5):
            done: dict[str, float] = {}
            waiter = threading.Thread(target=lambda: (other.wait_for_plan(tag + 1, 10), done.setdefault("at", time.perf_counter())))
            waiter.start()
            time.sleep(0.2)
            with store.publisher() as p:
                started = time.perf_counter()
                p.publish(make_plan(p.next_generation(), tag=tag))
            waiter.join(20)
            seen.append((done["at"] - started) * 1000)
        writer.close()
    with capsys.disabled():
        print(
            f"\nkafka store: publisher() {took_role:.0f} ms, small publish {small:.0f} ms, claim_writer() {took_id:.0f} ms, "
            f"claim write median {writes[5]:.1f} ms, claims() median {reads[5]:.1f} ms, "
            f"waiting reader sees a publish {sorted(seen)[2]:.0f} ms after it began"
        )
    assert writes[5] < 500 and reads[5] < 200 and max(seen) < 2000
