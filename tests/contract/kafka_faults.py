"""Damage a Kafka store the way a stray producer would: a plain, non-transactional producer
overwrites a stored key with bytes that are not ours. Readers see the newer value (it is
the newest of its key), so the generation's checksum fails or the claim cannot be decoded.
"""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition

from spark_lag_assign.store.kafka_names import claims_topic, generation_prefix, plans_topic

GARBAGE = b"\xff\xfe not a record of spark-lag-assign \x00"


def _keys(bootstrap_servers: str, topic: str) -> list[str]:
    """Every key in the topic, read to its end (committed records only)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers, group_id=None, enable_auto_commit=False, isolation_level="read_committed"
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        keys: list[str] = []
        while consumer.position(tp) < end:
            for record in consumer.poll(timeout_ms=200).get(tp, []):
                if record.key is not None and record.value is not None:
                    keys.append(record.key.decode("utf-8", "replace"))
        return keys
    finally:
        consumer.close()


def _overwrite(bootstrap_servers: str, topic: str, key: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, enable_idempotence=False, acks="all")
    try:
        producer.send(topic, key=key.encode(), value=GARBAGE, partition=0).get(timeout=30)
    finally:
        producer.close()


def damage_generation(bootstrap_servers: str, name: str, generation: int) -> None:
    """Overwrite one consumer record of ``generation`` in ``NAME.plans``."""
    plans = plans_topic(name)
    prefix = generation_prefix(generation) + "c/"
    keys = sorted(k for k in _keys(bootstrap_servers, plans) if k.startswith(prefix))
    if not keys:
        raise AssertionError(f"{plans} holds no consumer record of generation {generation}")
    _overwrite(bootstrap_servers, plans, keys[0])


def damage_claim(bootstrap_servers: str, name: str, consumer: str) -> None:
    """Overwrite ``consumer``'s claim in its topic ``NAME.claims.<consumer>``."""
    _overwrite(bootstrap_servers, claims_topic(name, consumer), consumer)
