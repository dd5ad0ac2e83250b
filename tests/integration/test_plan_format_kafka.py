"""The plan format in the Kafka store, against the real broker: a generation whose
records are intact (the manifest's checksum holds) but whose plan is not UTF-8 or not of the
plan's shape is skipped by every reader with one line, as a damaged one is."""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import pandas as pd
import pytest

from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.store import open_store
from spark_lag_assign.store.kafka_names import consumer_key, encode_plan, plans_topic, records_digest
from spark_lag_assign.testing.localkafka import LocalKafka

SUBS = {"C0": ["t0"], "C1": ["t0"]}


def make(generation: int) -> plan_io.Plan:
    rows = pd.DataFrame([("C0", "t0", 0, 10, 5), ("C1", "t0", 1, 20, -2)], columns=list(plan_io.PLAN_COLUMNS))
    return plan_io.build_plan(rows, SUBS, generation=generation, strategy="range", reset="latest", group="g")


def forge(bootstrap: str, name: str, generation: int, c1_entry: bytes) -> None:
    """Generation ``generation`` with C1's record replaced by ``c1_entry`` and a manifest that
    vouches for it (a planner of another version would write such a thing): only the format refuses it."""
    from kafka import KafkaProducer

    records, (manifest_key, manifest_value) = encode_plan(make(generation))
    records = [(k, c1_entry if k == consumer_key(generation, "C1", 0) else v) for k, v in records]
    manifest = json.loads(manifest_value)
    manifest["sha256"] = records_digest(records)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False)
    try:
        plans = plans_topic(name)
        for key, value in [*records, (manifest_key, json.dumps(manifest).encode())]:
            producer.send(plans, key=key.encode(), value=value, partition=0).get(timeout=30)
    finally:
        producer.close()


GOOD_C1 = json.dumps(make(1)["consumers"]["C1"]).encode()


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (GOOD_C1.replace(b'"lag"', b'"l\xe4g"'), "not a valid plan: not UTF-8"),
        (GOOD_C1.replace(b'"t0": [1]', b'"t0": ["1"]'), 'consumers.C1.assign.t0[0] must be an integer (got "1")'),
        (b"[]", "consumers.C1 must be an object"),
    ],
)
def test_a_malformed_generation_in_a_kafka_store_is_skipped_with_one_line(
    kafka: LocalKafka, caplog: pytest.LogCaptureFixture, entry: bytes, reason: str
) -> None:
    assert entry != GOOD_C1
    name = f"pf-{uuid.uuid4().hex[:8]}"
    uri = f"kafka://{kafka.bootstrap_servers}/{name}"
    with open_store(uri) as store, store.publisher() as publisher:
        publisher.publish(make(1))
    forge(kafka.bootstrap_servers, name, 2, entry)
    with caplog.at_level(logging.WARNING), open_store(uri) as store:
        latest: Any = store.latest()
        assert latest is not None and latest["generation"] == 1
        assert store.get(2) is None
        assert store.wait_for_plan(1, 0.5) is None  # a follower keeps generation 1
        with store.publisher() as publisher:
            assert publisher.previous() == latest  # the planner's previous plan
            assert publisher.next_generation() == 3  # the number 2 is never reused
            publisher.publish(make(3))
        assert store.wait_for_plan(1, 5)["generation"] == 3  # type: ignore[index]
    said = [r.getMessage() for r in caplog.records if "generation 2" in r.getMessage()]
    assert said and reason in said[0] and all("\n" not in s for s in said)
