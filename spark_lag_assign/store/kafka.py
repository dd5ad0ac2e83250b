"""The Kafka backend of the control plane: compacted single-partition topics per plan name.

``kafka://HOST:PORT[,HOST:PORT]/NAME`` keeps everything in the cluster the pipelines already
share. The log is the state; every reader keeps a position and a view derived from what it
has read (as Schema Registry does with ``_schemas``), and reads to the end before answering.

Topics (created if missing: ``cleanup.policy=compact``, 1 partition, replication factor
min(3, brokers), ``max.message.bytes`` 1 MiB; validated if present)::

    NAME.plans               g/0000000007/plan/0000           the plan's header fields (consumers: null), chunked
                             g/0000000007/c/<consumer>/0000   one consumer's entry as JSON, chunked
                             g/0000000007/manifest            written LAST: generation, header chunks,
                                                              [consumer, chunks] in order, record count, sha256
    NAME.claims.<consumer>   <consumer>                       ClaimRecord.to_json(), newest wins
    NAME.claims._fencer      _fencer                          the fencer's record (service fencing)

Each consumer writes its claims into a topic of its own, so that an ACL can let exactly one
principal write them (WRITE on ``Topic:NAME.claims.<consumer>``, literal) while every
pipeline reads all of them (READ on ``Topic:NAME.claims.``, prefixed): no pipeline can forge
another's claim, and a writer that leaves a transaction open holds back only its own topic.
Plan and consumer names hold no ".", which separates the parts of every topic and
transactional id, so no prefix of one store's or consumer's names covers another's. The
planner creates the claims topics of the consumers a plan names before it publishes it; a
claim writer creates its own if it is missing (and it may).

Chunks hold at most 256 KiB (a record over ~1 MB is refused by the broker), compressed with
gzip in batches of at most 512 KiB. The sha256 covers every record the manifest names, in
order (key and value, each length-prefixed), so a record overwritten by a stray producer
makes its generation *damaged*: readers skip it and log why, ``next_generation()`` still
counts it.

Plans: the planner publishes one generation in ONE transaction under the transactional id
``spark-lag-assign.NAME.planner``. ``publisher()`` calls ``init_transactions()`` first, which
fences an older or zombie planner and aborts its open transaction, and only then reads the
plans topic to the end. In the same transaction it tombstones every key of generations older
than the newest ``history`` (default 20), so that compaction removes them.

Claims: each consumer id writes under ``spark-lag-assign.NAME.claim.<consumer>``, one record
per short transaction, with a low ``transaction_timeout_ms`` (``claim_transaction_timeout_ms``,
10 s): a writer that dies inside a transaction holds back its topic's last stable offset,
hiding its later claims from read_committed readers until the broker aborts it (the timeout
plus up to ``transaction.abort.timed.out.transaction.cleanup.interval.ms``, 10 s by default)
or a new incarnation of the same consumer calls ``init_transactions()``; other consumers'
claims are not held back. A reader reads the claims topics of every consumer that a plan it
has read named (the plans topic is read first), of the fencer, and of every claims topic the
cluster listed when the reader opened or at most 30 s ago.

Read-your-writes: ``commit_transaction()`` returns before the coordinator has written the
commit markers, so ``publish`` and ``write`` return only once the store's own read_committed
reader has read past the record they wrote (bounded by ``timeout`` -> ``StoreError``).

Measured on one local KRaft broker (Kafka 4.x), kafka-python 3.0.12 with its pure-Python
CRC32C, on this development machine (``tests/integration/test_kafka_store.py`` prints them):

- opening a store whose topics exist: ~10-20 ms (creating them: ~200 ms); its first read
  ~110 ms more, because kafka-python waits 100 ms after bootstrapping before it asks for a
  topic's metadata. The reader is kept, so later reads pay nothing of this again.
- ``publisher()`` / ``claim_writer()`` (init_transactions, then read to the end): ~55 ms,
  ~170 ms the first time a transactional id is used. (kafka-python's default 100 ms
  ``retry_backoff_ms`` made it ~220 ms; the store uses 20 ms.)
- a publish of 3 consumers / 12 partitions: ~20-60 ms; 50 consumers / 60,000 partitions
  (~1.0 MB of JSON in 51 records): ~0.2-0.3 s; one consumer with 200,000 partitions
  (~3.6 MB in 14 chunks): ~0.6-1.0 s; a new reader reads that back in ~0.2-0.3 s, and decodes it again (each
  ``latest()`` returns a fresh document) in ~0.13 s.
- a claim ``write``: median ~9-14 ms, of which ~3.5 ms (up to ~80 ms) is the wait from
  ``commit_transaction()`` returning until the record is readable with read_committed;
  ``claims()`` with nothing new: ~1-2 ms (a ListOffsets request for the plans topic, one for
  the claims topics).
- a reader blocked in ``wait_for_plan`` / ``wait_for_claims`` returns ~15-35 ms after the
  publish or write *began*, i.e. within a few ms of its commit becoming visible.
- a claim writer SIGKILLed inside a transaction, with the default 10 s transaction timeout:
  its later claims stayed hidden for ~16 s (the timeout, then the broker's abort sweep every
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms``, 10 s), or until a new
  incarnation of the same consumer took its transactional id over; others' were not.

A writer paused for longer than its transaction timeout inside a transaction is aborted by
the broker and its producer epoch bumped; its next write is then refused as fenced, which
is the safe reading ("stop reading now") even though no newer incarnation exists.

The store is four modules: this one (``KafkaStore``: clients, topics, the ``Store`` calls),
``kafka_names`` (topic names, transactional ids, record keys and sizes, a plan's records),
``kafka_log`` (the topics as read: ``_TopicLog``, and the plans' and claims' views over it)
and ``kafka_writers`` (the publisher and the claim writers).
"""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from spark_lag_assign.errors import ConfigError, one_line
from spark_lag_assign.extract.acls import Acl, cluster, not_authorized
from spark_lag_assign.plan.build import Plan
from spark_lag_assign.store.base import (
    Claims,
    ClaimWriter,
    Publisher,
    Store,
    StoreError,
    StoreNotAuthorizedError,
    claim_versions,
)
from spark_lag_assign.store.kafka_log import ClaimsView, PlansView
from spark_lag_assign.store.kafka_names import (
    BATCH_BYTES,
    MAX_MESSAGE_BYTES,
    claim_transactional_id,
    claims_prefix,
    claims_topic,
    consumer_key,
    encode_plan,
    header_key,
    manifest_key,
    planner_transactional_id,
    plans_topic,
)
from spark_lag_assign.store.kafka_writers import KafkaClaimWriter, KafkaPublisher, close_quietly

log = logging.getLogger(__name__)


class TopicLayoutError(StoreError, ConfigError):
    """A store topic exists but cannot hold the store (partitions, cleanup policy, size limit)."""


class KafkaStore(Store):
    """Plans and claims of one plan name in two compacted topics (see the module docstring).

    Settings: ``history`` generations kept readable (20); ``timeout`` seconds for connecting,
    reading to the end and waiting for a write to become visible (30);
    ``claim_transaction_timeout_ms`` (10000) and ``publish_transaction_timeout_ms`` (60000),
    how long the broker lets a dead writer's open transaction hold readers back.

    Beside the ``Store`` contract it offers the store's other halves (``kafka_log`` reads,
    ``kafka_writers`` writes) what they share: ``plans_view``, ``claims_view``, ``client``,
    ``error``, ``describe_topics``, ``ensure_topics``, ``new_producer``, ``transact`` and
    ``sync_claims``. Nothing outside ``spark_lag_assign.store`` calls them.
    """

    def __init__(
        self,
        parsed: Any,
        *,
        client_options: Mapping[str, Any] | None = None,
        history: int = 20,
        timeout: float = 30.0,
        claim_transaction_timeout_ms: int = 10_000,
        publish_transaction_timeout_ms: int = 60_000,
    ) -> None:
        if isinstance(history, bool) or not isinstance(history, int) or history < 1:
            raise ConfigError(f"store {parsed.uri}: history must be a whole number of generations >= 1, not {history!r}")
        if not isinstance(timeout, int | float) or not timeout > 0:
            raise ConfigError(f"store {parsed.uri}: timeout must be a positive number of seconds, not {timeout!r}")
        self.uri = parsed.uri
        self.name = parsed.name
        self.bootstrap_servers = parsed.location
        self.client_options = dict(client_options or {})
        self.history = history
        self.timeout = float(timeout)
        self.timeout_ms = int(self.timeout * 1000)
        self.claim_transaction_timeout_ms = int(claim_transaction_timeout_ms)
        self.publish_transaction_timeout_ms = int(publish_transaction_timeout_ms)
        self.plans_topic = plans_topic(self.name)
        self._closed = False
        self._roles: weakref.WeakSet[Any] = weakref.WeakSet()
        self.ensure_topics([self.plans_topic])
        self.plans_view = PlansView(self, self.plans_topic)
        self.claims_view = ClaimsView(self)

    # -- clients and errors

    def client(self, factory: Any, doing: str, **settings: Any) -> Any:
        """A kafka-python client with the store's connection and security settings."""
        from kafka.errors import KafkaConfigurationError, KafkaError

        options = {
            "bootstrap_servers": self.bootstrap_servers,
            "client_id": f"spark-lag-assign.{self.name}",
            "request_timeout_ms": max(self.timeout_ms, 1000),
            # kafka-python waits this long before its first coordinator lookup and between
            # steps of init_transactions: 100 ms (its default) made taking a role ~200 ms
            "retry_backoff_ms": 20,
            **settings,
            **self.client_options,
        }
        if factory.__name__ == "KafkaConsumer":
            options["request_timeout_ms"] = max(options["request_timeout_ms"], 2000)  # above fetch_max_wait_ms
        try:
            return factory(**options)
        except (KafkaConfigurationError, TypeError, ValueError, AssertionError) as exc:
            raise ConfigError(f"store {self.uri}: invalid Kafka client option: {one_line(exc)}") from None
        except KafkaError as exc:
            raise self.error(doing, exc) from None

    def error(self, doing: str, exc: BaseException, needed: Iterable[Acl] = ()) -> StoreError:
        """One line: which store, what it was doing, and what to do about it where known; a
        refusal names the ACL of ``needed`` to grant (``StoreNotAuthorizedError``)."""
        refused = not_authorized(exc, needed, StoreNotAuthorizedError, f"store {self.uri}: {doing}")
        if refused is not None:
            return refused
        text = f"{type(exc).__name__} {exc}"
        if "NoBrokersAvailable" in text or "bootstrap" in text.lower():  # never connected: say why
            from spark_lag_assign.extract.offsets import diagnose

            return StoreError(
                f"store {self.uri}: {doing}: {diagnose(self.bootstrap_servers, self.client_options, exc, self.timeout_ms)}"
            )
        return StoreError(f"store {self.uri}: {doing}: {one_line(exc)}")

    def claims_topic(self, consumer: str) -> str:
        return claims_topic(self.name, consumer)

    def describe_topics(self, topics: list[str]) -> dict[str, int]:
        """Each topic's error code in the cluster's metadata (0: there, 3: none, 29: not authorized)."""
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        admin = self.client(KafkaAdminClient, "connecting", bootstrap_timeout_ms=self.timeout_ms)
        try:
            return {t["name"]: int(t.get("error_code", 0)) for t in admin.describe_topics(topics)}
        except KafkaError as exc:
            raise self.error("describing the claims topics", exc) from None
        finally:
            admin.close()

    def ensure_topics(
        self,
        wanted: list[str],
        *,
        creator: str = "",
        check_existing: bool = True,
        acl: Callable[[str, str], Acl] = lambda operation, topic: Acl(operation, "Topic", topic),
    ) -> None:
        """Create the topics if missing, and check that they can hold the store (existing ones
        too, unless ``check_existing`` is off); ``creator`` says who else could create them,
        for the line a refused CREATE gives."""
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        admin = self.client(KafkaAdminClient, "connecting", bootstrap_timeout_ms=self.timeout_ms)
        try:
            try:
                described = {t["name"]: t for t in admin.describe_topics(list(wanted))}
            except KafkaError as exc:
                raise self.error("describing the store's topics", exc, sorted({acl("DESCRIBE", t) for t in wanted})) from None
            missing = [t for t in wanted if described.get(t, {}).get("error_code", 3) == 3]
            for topic in wanted:
                code = described.get(topic, {}).get("error_code", 3)
                if code not in (0, 3):  # a refusal (29) among them: a topic one may not describe is hidden
                    from kafka.errors import for_code

                    raise self.error(f"describing {topic}", for_code(code)(), [acl("DESCRIBE", topic)])
            for topic in wanted:  # existing topics first: a wrong one stops us before we create anything
                if topic not in missing and check_existing:
                    self._validate(admin, topic, described[topic], acl)
            if missing:
                self._create(admin, missing, creator, acl)
                for topic in admin.describe_topics(missing):
                    self._validate(admin, topic["name"], topic, acl)
        finally:
            admin.close()

    def _create(
        self, admin: Any, topics: list[str], creator: str = "", acl: Callable[[str, str], Acl] = lambda o, t: Acl(o, "Topic", t)
    ) -> None:
        from kafka.errors import KafkaError, TopicAlreadyExistsError

        try:
            brokers = len(admin.describe_cluster()["brokers"])
        except KafkaError as exc:
            raise self.error("describing the cluster", exc) from None
        configs = {
            "cleanup.policy": "compact",
            "max.message.bytes": str(MAX_MESSAGE_BYTES),
            "min.compaction.lag.ms": "0",
            "segment.ms": str(6 * 3600 * 1000),  # superseded generations can go within hours
        }
        for topic in topics:
            try:
                admin.create_topics(
                    {topic: {"num_partitions": 1, "replication_factor": max(1, min(3, brokers)), "configs": configs}},
                    timeout_ms=self.timeout_ms,
                    wait_for_metadata=True,
                )
                log.info("%s: created topic %s", self.uri, topic)
            except TopicAlreadyExistsError:
                pass  # another client created it a moment ago: validated below
            except KafkaError as exc:
                raise self.error(
                    f"creating topic {topic} ({creator or 'or create it yourself'}: 1 partition, cleanup.policy=compact)",
                    exc,
                    [acl("CREATE", topic), cluster("CREATE")],
                ) from None

    def _validate(
        self,
        admin: Any,
        topic: str,
        described: Mapping[str, Any],
        acl: Callable[[str, str], Acl] = lambda o, t: Acl(o, "Topic", t),
    ) -> None:
        from kafka.errors import KafkaError

        partitions = len(described.get("partitions") or [])
        if partitions != 1:
            raise TopicLayoutError(
                f"store {self.uri}: topic {topic} has {partitions} partitions; the store needs exactly 1 "
                "(its records must keep one order): delete the topic or choose another plan name"
            )
        try:
            found = _topic_configs(admin, topic, ("cleanup.policy", "max.message.bytes"))
        except KafkaError as exc:
            raise self.error(f"describing the configuration of {topic}", exc, [acl("DESCRIBE_CONFIGS", topic)]) from None
        policy = str(found.get("cleanup.policy") or "")
        if "compact" not in [p.strip() for p in policy.split(",")]:
            raise TopicLayoutError(
                f"store {self.uri}: topic {topic} has cleanup.policy={policy or '?'}; the store needs compact "
                "(retention would delete live plans and claims): set cleanup.policy=compact or choose another plan name"
            )
        limit = int(found.get("max.message.bytes") or MAX_MESSAGE_BYTES)
        if limit < BATCH_BYTES + 64 * 1024:
            raise TopicLayoutError(
                f"store {self.uri}: topic {topic} has max.message.bytes={limit}; the store writes batches of up to "
                f"{BATCH_BYTES} bytes: raise it to {MAX_MESSAGE_BYTES}"
            )

    def new_producer(self, transactional_id: str, transaction_timeout_ms: int) -> Any:
        """A transactional producer that holds ``transactional_id``: its ``init_transactions()``
        fences every older producer of the id and aborts what it left open."""
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        producer = self.client(
            KafkaProducer,
            f"connecting as {transactional_id}",
            transactional_id=transactional_id,
            transaction_timeout_ms=transaction_timeout_ms,
            compression_type="gzip",
            batch_size=BATCH_BYTES,
            max_request_size=MAX_MESSAGE_BYTES,
            linger_ms=0,
            max_block_ms=self.timeout_ms,
        )
        try:
            producer.init_transactions()
        except KafkaError as exc:
            close_quietly(producer)
            raise self.error(
                f"taking the transactional id {transactional_id}", exc, [Acl("WRITE", "TransactionalId", transactional_id)]
            ) from None
        return producer

    def transact(self, producer: Any, transactional_id: str, topic: str, records: list[tuple[str, bytes | None]]) -> list[int]:
        """Send ``records`` in one transaction and commit; their offsets. Raises the KafkaError
        after aborting what can be aborted."""
        from kafka.errors import KafkaError

        try:
            producer.begin_transaction()
            futures = [producer.send(topic, key=key.encode(), value=value, partition=0) for key, value in records]
            # the records first: kafka-python 3.0.12 leaves a commit_transaction() called while
            # the partition is being added to the transaction waiting ~5 minutes if adding it
            # fails (a refused WRITE on the topic); a record's own error comes at once
            offsets = [f.get(timeout=self.timeout).offset for f in futures]
            producer.commit_transaction()
            return offsets
        except KafkaError:
            with contextlib.suppress(Exception):  # a fenced producer cannot abort; its epoch is dead anyway
                producer.abort_transaction()
            raise

    # -- plans

    def latest(self) -> Plan | None:
        with self.plans_view.log.lock:
            self.plans_view.log.sync()
            return self.plans_view.latest()

    def get(self, generation: int) -> Plan | None:
        with self.plans_view.log.lock:
            self.plans_view.log.sync()
            return self.plans_view.plan(generation)

    def generations(self) -> list[int]:
        with self.plans_view.log.lock:
            self.plans_view.log.sync()
            return self.plans_view.complete()

    def wait_for_plan(self, newer_than: int, timeout: float) -> Plan | None:
        """A long poll: the reader's fetch waits at the broker until records arrive."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self.plans_view.log.lock:
            while True:
                self.plans_view.log.sync()
                newest = self.plans_view.newest()
                if newest and newest > newer_than:
                    return self.plans_view.plan(newest)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self.plans_view.log.poll(remaining)

    def publisher(self) -> Publisher:
        self._check_open()
        publisher = KafkaPublisher(self)
        self._roles.add(publisher)
        return publisher

    # -- claims

    def claim_writer(self, consumer: str) -> ClaimWriter:
        self._check_open()
        writer = KafkaClaimWriter(self, consumer)
        self._roles.add(writer)
        return writer

    def sync_claims(self) -> None:
        """The plans first (they name the consumers whose claims to read), then every claims topic."""
        with self.plans_view.log.lock:
            self.plans_view.log.sync()
            consumers = sorted(self.plans_view.consumers)
            planned = self.plans_view.consumers_of(self.plans_view.newest())
        self.claims_view.follow(consumers, planned)
        self.claims_view.log.sync()

    def claims(self) -> Claims:
        with self.claims_view.log.lock:
            self.sync_claims()
            return self.claims_view.claims()

    def wait_for_claims(self, after: Claims, timeout: float) -> Claims:
        """A long poll, like ``wait_for_plan``."""
        deadline = time.monotonic() + max(0.0, timeout)
        before = claim_versions(after)
        with self.claims_view.log.lock:
            while True:
                self.sync_claims()
                now = self.claims_view.claims()
                remaining = deadline - time.monotonic()
                if claim_versions(now) != before or remaining <= 0:
                    return now
                self.claims_view.log.poll(remaining)

    # -- life cycle

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store {self.uri} is closed")

    def close(self) -> None:
        self._closed = True
        for role in list(self._roles):
            role.close()
        self.plans_view.log.close()
        self.claims_view.log.close()

    def __repr__(self) -> str:
        return f"KafkaStore({self.uri!r})"


def _topic_configs(admin: Any, topic: str, keys: Iterable[str]) -> dict[str, str | None]:
    """The values of ``keys`` in ``topic``'s configuration.

    kafka-python 3.0.12's ``describe_configs`` drops each resource's error code: a topic whose
    configuration the broker refused to show comes back with no entries, which would read as
    a topic without ``cleanup.policy``. Every topic has a value for the keys asked here, so an
    answer without them is that refusal (a missing DESCRIBE_CONFIGS), never a value.
    """
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.errors import TopicAuthorizationFailedError

    wanted = ConfigResource(ConfigResourceType.TOPIC, topic, dict.fromkeys(keys))
    found = admin.describe_configs([wanted], config_filter="all").get("topic", {}).get(topic, {})
    if any(k not in found for k in keys):
        raise TopicAuthorizationFailedError(f"the broker showed no configuration of {topic}")
    return {k: found[k].get("value") for k in keys}


__all__ = [
    "KafkaStore",
    "TopicLayoutError",
    "claim_transactional_id",
    "claims_prefix",
    "claims_topic",
    "consumer_key",
    "encode_plan",
    "header_key",
    "manifest_key",
    "planner_transactional_id",
    "plans_topic",
]
