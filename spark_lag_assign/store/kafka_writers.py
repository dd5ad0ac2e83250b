"""The Kafka store's writing roles: the planner's publisher and a consumer's claim writer,
each under its own transactional id (see ``spark_lag_assign.store.kafka``)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from spark_lag_assign.core.ids import check_consumer_id
from spark_lag_assign.extract.acls import Acl
from spark_lag_assign.plan.build import Plan
from spark_lag_assign.plan.document import check_plan
from spark_lag_assign.store.base import (
    FENCER,
    ClaimFencedError,
    ClaimRecord,
    ClaimWriter,
    Publisher,
    PublishFencedError,
    StoreError,
    TopicPartition,
    Version,
)
from spark_lag_assign.store.kafka_names import (
    claim_transactional_id,
    claims_prefix,
    encode_plan,
    planner_transactional_id,
)

if TYPE_CHECKING:
    from spark_lag_assign.store.kafka import KafkaStore


#: the store's one logger, whichever of its modules logs (log settings name it)
log = logging.getLogger("spark_lag_assign.store.kafka")

_FENCED = ("ProducerFenced", "InvalidProducerEpoch", "TransactionCoordinatorFenced")


def _is_fenced(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}"
    return any(name in text for name in _FENCED)


def close_quietly(producer: Any) -> None:
    try:
        producer.close(timeout=5)
    except Exception:
        log.debug("closing a producer failed", exc_info=True)


class KafkaPublisher(Publisher):
    """The planner's role: the planner's transactional id, taken before reading the plans."""

    def __init__(self, store: KafkaStore) -> None:
        self.store = store
        self.transactional_id = planner_transactional_id(store.name)
        self._producer: Any = store.new_producer(self.transactional_id, store.publish_transaction_timeout_ms)
        self._fenced = False
        try:
            with store.plans_view.log.lock:
                store.plans_view.log.sync()  # only now: a generation we compute cannot collide
                self._previous = store.plans_view.latest()
                self._next = store.plans_view.highest + 1
        except BaseException:
            self.close()
            raise

    def previous(self) -> Plan | None:
        return self._previous

    def next_generation(self) -> int:
        return self._next

    def publish(self, plan: Plan) -> None:
        store = self.store
        if self._producer is None:
            raise StoreError(f"store {store.uri}: this publisher is closed")
        if self._fenced:
            raise PublishFencedError(
                f"store {store.uri}: another planner took the role {self.transactional_id}; nothing was published"
            )
        generation = plan.get("generation") if isinstance(plan, dict) else None
        if generation != self._next:
            raise ValueError(f"plan generation {generation!r} is not the next generation {self._next} of {store.uri}")
        check_plan(plan, f"{store.uri} generation {generation}")
        # every consumer the plan names can claim from the moment it reads the plan
        prefix = claims_prefix(store.name)
        store.ensure_topics(
            [store.claims_topic(c) for c in sorted(plan["consumers"])],
            creator=f"the planner creates {prefix}<consumer> for each consumer it plans; or create it yourself",
            check_existing=False,
            acl=lambda operation, _topic: Acl(operation, "Topic", prefix, "prefixed"),
        )
        records, manifest = encode_plan(plan)
        with store.plans_view.log.lock:
            cutoff = self._next - store.history + 1
            tombstones: list[tuple[str, bytes | None]] = [(k, None) for k in store.plans_view.keys_before(cutoff)]
        batch: list[tuple[str, bytes | None]] = [*records, *tombstones, manifest]
        from kafka.errors import KafkaError

        try:
            offsets = store.transact(self._producer, self.transactional_id, store.plans_topic, batch)
        except KafkaError as exc:
            if _is_fenced(exc):
                self._fenced = True
                raise PublishFencedError(
                    f"store {store.uri}: generation {generation} not published: another planner took the role "
                    f"{self.transactional_id} ({type(exc).__name__})"
                ) from None
            raise store.error(
                f"publishing generation {generation}", exc,
                [Acl("WRITE", "Topic", store.plans_topic), Acl("WRITE", "TransactionalId", self.transactional_id)],
            ) from None  # fmt: skip
        self._previous = plan
        self._next = generation + 1  # committed: the number is used even if the wait below fails
        store.plans_view.log.read_past(store.plans_topic, offsets[-1], f"waiting for generation {generation} to become visible")
        log.info("%s: published generation %d in %d records", store.uri, generation, len(batch))

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            close_quietly(producer)


class KafkaClaimWriter(ClaimWriter):
    """One consumer id's claims, under the id's own transactional id."""

    def __init__(self, store: KafkaStore, consumer: str) -> None:
        if consumer != FENCER:
            check_consumer_id(consumer)  # it names a topic, a key and a transactional id
        self.store = store
        self.consumer = consumer
        self.topic = store.claims_topic(consumer)
        self.incarnation = uuid.uuid4().hex
        self.transactional_id = claim_transactional_id(store.name, consumer)
        store.ensure_topics([self.topic], creator=f"the planner creates it when a plan names {consumer}; or create it yourself")
        self._producer: Any = store.new_producer(self.transactional_id, store.claim_transaction_timeout_ms)
        self._fenced = False
        try:
            with store.claims_view.log.lock:
                store.claims_view.log.add([self.topic])
                store.sync_claims()
                found = store.claims_view.read(consumer)
        except BaseException:
            self.close()
            raise
        if isinstance(found, str):
            log.warning("%s: %s; taking %s over without a predecessor", store.uri, found, consumer)
            found = None
        self.predecessor = found if found is not None and found.incarnation != self.incarnation else None
        self._seq = found.seq if found is not None else 0

    def write(
        self,
        generation: int,
        holds: Iterable[TopicPartition],
        lease: float,
        state: str = "",
        committed: Mapping[str, Mapping[str, int]] | None = None,
        fences: Mapping[str, Version] | None = None,
    ) -> ClaimRecord:
        store = self.store
        if self._fenced:
            raise ClaimFencedError(f"store {store.uri}: a newer incarnation of {self.consumer} took its id over")
        if self._producer is None:
            raise StoreError(f"store {store.uri}: the claim writer of {self.consumer} is closed")
        record = ClaimRecord.to_write(
            self.consumer, self.incarnation, self._seq + 1, generation, holds, lease, state, committed, fences
        )
        from kafka.errors import KafkaError

        try:
            (offset,) = store.transact(
                self._producer, self.transactional_id, self.topic, [(self.consumer, record.to_json().encode())]
            )
        except KafkaError as exc:
            if _is_fenced(exc):
                self._fenced = True
                raise ClaimFencedError(
                    f"store {store.uri}: the claim id of {self.consumer} has a newer epoch ({type(exc).__name__}): a newer "
                    "incarnation took it over, or the broker aborted a claim transaction that outlived "
                    "claim_transaction_timeout_ms (an outage longer than it); either way this one stops"
                ) from None
            raise store.error(
                f"writing the claim of {self.consumer}", exc,
                [Acl("WRITE", "Topic", self.topic), Acl("WRITE", "TransactionalId", self.transactional_id)],
            ) from None  # fmt: skip
        self._seq += 1
        store.claims_view.log.read_past(self.topic, offset, f"waiting for the claim of {self.consumer} to become visible")
        return record

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            close_quietly(producer)
