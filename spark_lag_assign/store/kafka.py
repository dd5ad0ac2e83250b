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
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from spark_lag_assign.errors import ConfigError, one_line
from spark_lag_assign.extract.acls import Acl, cluster, not_authorized
from spark_lag_assign.plan.build import Plan, check_consumer_ids
from spark_lag_assign.plan.document import check_plan, parse_plan_parts
from spark_lag_assign.store.base import (
    FENCER,
    ClaimFencedError,
    ClaimRecord,
    Claims,
    ClaimWriter,
    Publisher,
    PublishFencedError,
    Store,
    StoreError,
    StoreNotAuthorizedError,
    TopicPartition,
    Version,
    _now,
    _versions,
)

log = logging.getLogger(__name__)

#: largest value of one plan record; well under the ~1 MB a broker accepts by default
CHUNK_BYTES = 256 * 1024
#: the producer's batch size: several small records share one compressed batch
BATCH_BYTES = 512 * 1024
#: the topics' max.message.bytes: a whole batch (uncompressed bound) fits with room to spare
MAX_MESSAGE_BYTES = 1024 * 1024
MANIFEST_FORMAT = 1
PLANS_SUFFIX = ".plans"
CLAIMS_INFIX = ".claims."
#: how often a claims reader lists the cluster's claims topics anew (consumers no plan named yet)
RELIST_SECONDS = 30.0

_FENCED = ("ProducerFenced", "InvalidProducerEpoch", "TransactionCoordinatorFenced")


class TopicLayoutError(StoreError, ConfigError):
    """A store topic exists but cannot hold the store (partitions, cleanup policy, size limit)."""


def plans_topic(name: str) -> str:
    """The plans topic of a plan name."""
    return name + PLANS_SUFFIX


def claims_prefix(name: str) -> str:
    """What every claims topic of a plan name begins with (a prefixed READ ACL on it reads them all)."""
    return name + CLAIMS_INFIX


def claims_topic(name: str, consumer: str) -> str:
    """The topic ``consumer`` (or the fencer, ``FENCER``) writes its claims to."""
    return claims_prefix(name) + consumer


def planner_transactional_id(name: str) -> str:
    return f"spark-lag-assign.{name}.planner"


def claim_transactional_id(name: str, consumer: str) -> str:
    return f"spark-lag-assign.{name}.claim.{consumer}"


def generation_prefix(generation: int) -> str:
    return f"g/{generation:010d}/"


def manifest_key(generation: int) -> str:
    return generation_prefix(generation) + "manifest"


def header_key(generation: int, chunk: int) -> str:
    return f"{generation_prefix(generation)}plan/{chunk:04d}"


def consumer_key(generation: int, consumer: str, chunk: int) -> str:
    return f"{generation_prefix(generation)}c/{consumer}/{chunk:04d}"


def _generation_of(key: str) -> int | None:
    parts = key.split("/", 2)
    if len(parts) == 3 and parts[0] == "g" and len(parts[1]) == 10 and parts[1].isdigit():
        return int(parts[1])
    return None


def _consumer_of(key: str) -> str | None:
    """The consumer a plan record's key names (``g/<generation>/c/<consumer>/<chunk>``), if any."""
    parts = key.split("/")
    return parts[3] if len(parts) == 5 and parts[2] == "c" else None


def _chunks(data: bytes) -> list[bytes]:
    return [data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)] or [b""]


def _digest(records: Iterable[tuple[str, bytes]]) -> str:
    """sha256 over (key, value) pairs, each length-prefixed so that no two layouts collide."""
    h = hashlib.sha256()
    for key, value in records:
        k = key.encode()
        h.update(len(k).to_bytes(4, "big") + k + len(value).to_bytes(8, "big"))
        h.update(value)
    return h.hexdigest()


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def encode_plan(plan: Plan) -> tuple[list[tuple[str, bytes]], tuple[str, bytes]]:
    """A generation's records in publishing order, and its manifest (written after them)."""
    generation = int(plan["generation"])
    records: list[tuple[str, bytes]] = []
    header = {k: (None if k == "consumers" else v) for k, v in plan.items()}
    header_chunks = _chunks(_dumps(header))
    records += [(header_key(generation, i), c) for i, c in enumerate(header_chunks)]
    listed: list[list[Any]] = []
    for consumer, entry in plan["consumers"].items():
        chunks = _chunks(_dumps(entry))
        listed.append([consumer, len(chunks)])
        records += [(consumer_key(generation, consumer, i), c) for i, c in enumerate(chunks)]
    manifest = {
        "format": MANIFEST_FORMAT,
        "generation": generation,
        "plan": len(header_chunks),
        "consumers": listed,
        "records": len(records),
        "sha256": _digest(records),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "written": _now(),
    }
    value = _dumps(manifest)
    if len(value) > CHUNK_BYTES:
        raise StoreError(
            f"generation {generation}: {len(plan['consumers'])} consumers make a manifest of {len(value)} bytes, "
            f"over the {CHUNK_BYTES} a record may hold; use fewer or shorter consumer ids"
        )
    return records, (manifest_key(generation), value)


def _is_fenced(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}"
    return any(name in text for name in _FENCED)


class _TopicLog:
    """Single-partition topics read with ``read_committed``: a position in each, and each one's
    records handed to ``apply(topic, record)`` in log order. One consumer, opened on first use
    and kept; topics are added with ``add`` and read from their beginning."""

    def __init__(
        self,
        store: KafkaStore,
        apply: Callable[[str, Any], None],
        fetch_bytes: int,
        topics: Iterable[str] = (),
        read_acl: Callable[[str], Acl] = lambda topic: Acl("READ", "Topic", topic),
    ) -> None:
        self.store = store
        self.apply = apply
        self.read_acl = read_acl  # what a refused read lacks: the topic's READ, or a prefix's
        self.fetch_bytes = fetch_bytes
        self.lock = threading.RLock()
        self.topics: list[str] = list(topics)
        self._consumer: Any = None

    def _tps(self, topics: Iterable[str]) -> list[Any]:
        from kafka.structs import TopicPartition as KafkaTP

        return [KafkaTP(t, 0) for t in topics]

    def _open(self) -> Any:
        if self._consumer is None:
            from kafka import KafkaConsumer

            consumer = self.store._client(
                KafkaConsumer,
                f"reading {', '.join(self.topics) or 'the store'}",
                group_id=None,
                enable_auto_commit=False,
                isolation_level="read_committed",
                auto_offset_reset="earliest",
                max_partition_fetch_bytes=self.fetch_bytes,
                fetch_max_wait_ms=500,
            )
            self._consumer = consumer
            self._known(self.topics)
            tps = self._tps(self.topics)
            consumer.assign(tps)
            if tps:
                consumer.seek_to_beginning(*tps)
        return self._consumer

    def add(self, topics: Iterable[str]) -> None:
        """Read these topics too, from their beginning (topics read already keep their position)."""
        with self.lock:
            new = [t for t in dict.fromkeys(topics) if t not in self.topics]
            if not new:
                return
            self.topics += new
            if self._consumer is not None:
                self._known(new)
                self._consumer.assign(self._tps(self.topics))  # kafka-python keeps the positions of those read already
                self._consumer.seek_to_beginning(*self._tps(new))

    def _known(self, topics: Iterable[str]) -> None:
        """Wait until the client's metadata has these topics (a topic created a moment ago may
        not be in it yet, and kafka-python asks nothing of a topic it does not know)."""
        deadline = time.monotonic() + self.store.timeout
        for topic in topics:
            while self._consumer.partitions_for_topic(topic) is None:
                if time.monotonic() >= deadline:
                    raise StoreError(f"store {self.store.uri}: topic {topic} did not appear in the cluster's metadata")
                time.sleep(0.05)

    def listed(self, prefix: str) -> set[str]:
        """The topics the cluster lists (those this principal may describe) that begin with ``prefix``."""
        from kafka.errors import KafkaError

        consumer = self._open()
        try:
            return {t for t in consumer.topics() if t.startswith(prefix)}
        except KafkaError as exc:
            raise self.store._error(f"listing the topics {prefix}*", exc, [Acl("READ", "Topic", prefix, "prefixed")]) from None

    def _fail(self, doing: str, exc: BaseException, topics: Iterable[str]) -> StoreError:
        topics = list(topics)
        return self.store._error(f"{doing} {', '.join(topics)}", exc, sorted({self.read_acl(t) for t in topics}))

    def position(self, topic: str) -> int:
        from kafka.errors import KafkaError

        consumer = self._open()
        (tp,) = self._tps([topic])
        try:
            return int(consumer.position(tp, timeout_ms=self.store.timeout_ms))
        except KafkaError as exc:
            raise self._fail("reading", exc, [topic]) from None

    def ends(self) -> dict[str, int]:
        """Each topic's end as a read_committed reader sees it: its last stable offset."""
        from kafka.errors import KafkaError

        consumer = self._open()
        if not self.topics:
            return {}
        try:
            found = consumer.end_offsets(self._tps(self.topics), timeout_ms=self.store.timeout_ms)
        except KafkaError as exc:
            raise self._fail("reading the end of", exc, self.topics) from None
        return {tp.topic: int(offset) for tp, offset in found.items()}

    def poll(self, timeout: float) -> int:
        """One long poll: returns as soon as records arrive, or after ``timeout`` seconds."""
        from kafka.errors import KafkaError

        consumer = self._open()
        if not self.topics:
            time.sleep(max(0.0, timeout))
            return 0
        try:
            batch = consumer.poll(timeout_ms=max(0, int(timeout * 1000)), max_records=1_000_000)
        except KafkaError as exc:
            raise self._fail("reading", exc, self.topics) from None
        count = 0
        for tp, records in batch.items():
            for record in records:
                self.apply(tp.topic, record)
            count += len(records)
        return count

    def read_until(self, targets: Mapping[str, int], deadline: float, what: str) -> None:
        """Read until each topic's position reaches its target (an offset below its last stable offset)."""
        step = 0.01
        behind = [t for t, target in targets.items() if target > 0]
        while True:
            behind = [t for t in behind if self.position(t) < targets[t]]
            if not behind:
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                t = behind[0]
                raise StoreError(
                    f"store {self.store.uri}: {what}: {t} did not reach offset {targets[t]} within "
                    f"{self.store.timeout:g} s (an open transaction holds it back?)"
                )
            # a poll returns on records only; a tail of commit markers moves the position
            # without records, so poll in short slices and look at the position between them
            if self.poll(min(step, remaining)) == 0:
                step = min(step * 2, 0.2)

    def sync(self) -> None:
        """Read every topic to its end (the last stable offset as of now)."""
        with self.lock:
            self.read_until(self.ends(), time.monotonic() + self.store.timeout, "reading to the end")

    def read_past(self, topic: str, offset: int, what: str) -> None:
        """Wait until the record at ``offset`` of ``topic`` is readable with read_committed, and read it."""
        with self.lock:
            self.read_until({topic: offset + 1}, time.monotonic() + self.store.timeout, what)

    def close(self) -> None:
        with self.lock:
            if self._consumer is not None:
                try:
                    self._consumer.close()
                finally:
                    self._consumer = None


class _PlansView:
    """The plans topic as read so far: every live key by generation, verified lazily."""

    def __init__(self, store: KafkaStore, topic: str) -> None:
        self.store = store
        self.topic = topic
        self.records: dict[int, dict[str, bytes]] = {}
        self.highest = 0  # the highest generation any key has named (damaged, tombstoned included)
        self._verdict: dict[int, bool] = {}  # generation -> complete and intact
        self._reported: set[tuple[int, str]] = set()
        self._fresh: tuple[int, Plan] | None = None  # decoded while verifying, handed out once
        self.consumers: set[str] = set()  # every consumer a record of any generation named: their claims are read
        self.log = _TopicLog(store, self._apply, fetch_bytes=8 * 1024 * 1024, topics=[topic])

    def _apply(self, topic: str, record: Any) -> None:
        try:
            key = record.key.decode() if record.key is not None else None
        except UnicodeDecodeError:
            key = None
        generation = _generation_of(key) if key else None
        if key is None or generation is None:
            log.warning("%s: ignoring a record at offset %d with a foreign key %r", self.topic, record.offset, record.key)
            return
        consumer = _consumer_of(key)
        if consumer is not None:
            self.consumers.add(consumer)
        self.highest = max(self.highest, generation)
        self._verdict.pop(generation, None)
        kept = self.records.setdefault(generation, {})
        if record.value is None:
            kept.pop(key, None)
            if not kept:
                del self.records[generation]
        else:
            kept[key] = record.value

    def _decode(self, generation: int, verify: bool) -> Plan:
        """The generation's plan; ``LookupError`` without a manifest, ``ValueError`` (one line)
        if incomplete, damaged or undecodable. ``verify``: check the records' sha256."""
        kept = self.records.get(generation, {})
        raw = kept.get(manifest_key(generation))
        if raw is None:
            raise LookupError("no manifest")
        try:
            manifest = json.loads(raw)
            if manifest.get("format") != MANIFEST_FORMAT or manifest.get("generation") != generation:
                raise ValueError("manifest names another format or generation")
            keys = [header_key(generation, i) for i in range(int(manifest["plan"]))]
            spans: list[tuple[str, int, int]] = []
            for consumer, count in manifest["consumers"]:
                spans.append((str(consumer), len(keys), len(keys) + int(count)))
                keys += [consumer_key(generation, consumer, i) for i in range(int(count))]
            if len(keys) != manifest["records"]:
                raise ValueError(f"manifest counts {manifest['records']} records but names {len(keys)}")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"undecodable manifest ({one_line(exc)})") from None
        missing = [k for k in keys if k not in kept]
        if missing:
            raise ValueError(f"{len(missing)} of {len(keys)} records missing (first {missing[0]})")
        values = [kept[k] for k in keys]
        if verify and _digest(zip(keys, values)) != manifest["sha256"]:
            raise ValueError("checksum mismatch: a record was overwritten")
        plan = parse_plan_parts(
            b"".join(values[: int(manifest["plan"])]),
            {c: b"".join(values[a:b]) for c, a, b in spans},
            f"{self.store.uri} generation {generation}",
        )
        if plan["generation"] != generation:
            raise ValueError(f"holds generation {plan['generation']}")
        return plan

    def intact(self, generation: int) -> bool:
        """Is the generation complete and intact? Decided once per change of its records."""
        verdict = self._verdict.get(generation)
        if verdict is not None or generation not in self.records:
            return bool(verdict)
        try:
            self._fresh = (generation, self._decode(generation, verify=True))
        except LookupError:
            return False  # no manifest: not published (or its tombstones are half read)
        except Exception as exc:  # noqa: BLE001 - a damaged generation is reported, never raised
            self._verdict[generation] = False
            reason = one_line(exc)
            if (generation, reason) not in self._reported:
                self._reported.add((generation, reason))
                log.warning("%s: skipping damaged generation %d: %s", self.store.uri, generation, reason)
            return False
        self._verdict[generation] = True
        return True

    def plan(self, generation: int) -> Plan | None:
        """A complete, intact generation, freshly decoded (callers may keep or change it)."""
        if not self.intact(generation):
            return None
        fresh, self._fresh = self._fresh, None
        if fresh is not None and fresh[0] == generation:
            return fresh[1]
        return self._decode(generation, verify=False)

    def complete(self) -> list[int]:
        return [g for g in sorted(self.records) if self.intact(g)]

    def newest(self) -> int:
        """The highest complete, intact generation (0: none)."""
        return next((g for g in sorted(self.records, reverse=True) if self.intact(g)), 0)

    def latest(self) -> Plan | None:
        newest = self.newest()
        return self.plan(newest) if newest else None

    def consumers_of(self, generation: int) -> list[str]:
        """The consumers a complete generation names, from its manifest alone."""
        raw = self.records.get(generation, {}).get(manifest_key(generation))
        try:
            return [str(c) for c, _ in json.loads(raw)["consumers"]] if raw is not None else []
        except (ValueError, KeyError, TypeError):
            return []

    def keys_before(self, generation: int) -> list[str]:
        """Every live key of the generations older than ``generation``."""
        return [k for g in sorted(self.records) if g < generation for k in self.records[g]]


class _ClaimsView:
    """The claims topics as read so far: each consumer's newest value and where it was."""

    def __init__(self, store: KafkaStore) -> None:
        self.store = store
        self.prefix = claims_prefix(store.name)
        self.values: dict[str, tuple[str, int, bytes]] = {}  # consumer -> (topic, offset, value)
        self.read_acl = Acl("READ", "Topic", self.prefix, "prefixed")
        self.log = _TopicLog(store, self._apply, fetch_bytes=1024 * 1024, read_acl=lambda _: self.read_acl)
        self._listed_at = float("-inf")
        self._absent: set[str] = set()  # wanted at the last listing, no topic then
        self._unseen: dict[str, str] = {}  # consumers of the newest plan whose claims cannot be read, and why

    def _apply(self, topic: str, record: Any) -> None:
        owner = topic[len(self.prefix) :]
        key = record.key.decode("utf-8", "replace") if record.key is not None else None
        if key != owner:  # only the owner may write its topic; a stray key is nobody's claim
            log.warning(
                "%s: ignoring a record keyed %r at offset %d (the topic holds %s's claims)", topic, key, record.offset, owner
            )
            return
        if record.value is None:
            self.values.pop(owner, None)
        else:
            self.values[owner] = (topic, record.offset, record.value)

    def follow(self, consumers: Iterable[str], planned: Iterable[str]) -> None:
        """Read the claims topics of ``consumers`` (every one a plan named) and of the fencer:
        the cluster's claims topics are listed again when one of them is not read yet and was
        not missing at the last listing (a consumer a new plan names: the planner created its
        topic first), and at least every ``RELIST_SECONDS``. A consumer of the newest plan
        (``planned``) whose topic stays out of sight has an unreadable claim: it may hold
        anything (a principal without READ on the claims topics sees none of them listed)."""
        wanted = {claims_topic(self.store.name, c) for c in (*consumers, FENCER)} - set(self.log.topics)
        now = time.monotonic()
        if now - self._listed_at >= RELIST_SECONDS or wanted - self._absent:
            listed = self.log.listed(self.prefix)
            self._listed_at = now
            self._absent = wanted - listed
            self.log.add(sorted(listed))
        hidden = [claims_topic(self.store.name, c) for c in planned if claims_topic(self.store.name, c) not in self.log.topics]
        if hidden:  # a topic the listing hides may be one this principal may not read: ask for it by name
            from kafka.errors import TopicAuthorizationFailedError

            codes = self.store._describe(hidden)
            if any(code == TopicAuthorizationFailedError.errno for code in codes.values()):
                raise self.store._error(f"reading the claims of {self.prefix}*", TopicAuthorizationFailedError(), [self.read_acl])
        self._unseen = {
            topic[len(self.prefix) :]: f"its claims topic {topic} does not exist (the planner creates it before it publishes)"
            for topic in hidden
        }

    def read(self, consumer: str) -> ClaimRecord | str | None:
        if consumer not in self.values:
            return None
        topic, offset, value = self.values[consumer]
        try:
            return ClaimRecord.from_json(value, consumer=consumer)
        except ValueError as exc:
            return f"claim of {consumer} at offset {offset} of {topic} is unreadable: {exc}"

    def claims(self) -> Claims:
        found: Claims = {consumer: self.read(consumer) for consumer in sorted(self.values)}  # type: ignore[misc]
        return {**self._unseen, **found}


class KafkaStore(Store):
    """Plans and claims of one plan name in two compacted topics (see the module docstring).

    Settings: ``history`` generations kept readable (20); ``timeout`` seconds for connecting,
    reading to the end and waiting for a write to become visible (30);
    ``claim_transaction_timeout_ms`` (10000) and ``publish_transaction_timeout_ms`` (60000),
    how long the broker lets a dead writer's open transaction hold readers back.
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
        self._ensure_topics([self.plans_topic])
        self._plans = _PlansView(self, self.plans_topic)
        self._claims = _ClaimsView(self)

    # -- clients and errors

    def _client(self, factory: Any, doing: str, **settings: Any) -> Any:
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
            raise self._error(doing, exc) from None

    def _error(self, doing: str, exc: BaseException, needed: Iterable[Acl] = ()) -> StoreError:
        """One line: which store, what it was doing, and what to do about it where known; a
        refusal names the ACL of ``needed`` to grant (``StoreNotAuthorizedError``)."""
        refused = not_authorized(exc, needed, StoreNotAuthorizedError, f"store {self.uri}: {doing}")
        if refused is not None:
            return refused
        text = f"{type(exc).__name__} {exc}"
        if "NoBrokersAvailable" in text or "bootstrap" in text.lower():  # never connected: say why
            from spark_lag_assign.extract.offsets import _diagnose

            return StoreError(
                f"store {self.uri}: {doing}: {_diagnose(self.bootstrap_servers, self.client_options, exc, self.timeout_ms)}"
            )
        return StoreError(f"store {self.uri}: {doing}: {one_line(exc)}")

    def claims_topic(self, consumer: str) -> str:
        return claims_topic(self.name, consumer)

    def _describe(self, topics: list[str]) -> dict[str, int]:
        """Each topic's error code in the cluster's metadata (0: there, 3: none, 29: not authorized)."""
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        admin = self._client(KafkaAdminClient, "connecting", bootstrap_timeout_ms=self.timeout_ms)
        try:
            return {t["name"]: int(t.get("error_code", 0)) for t in admin.describe_topics(topics)}
        except KafkaError as exc:
            raise self._error("describing the claims topics", exc) from None
        finally:
            admin.close()

    def _ensure_topics(
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

        admin = self._client(KafkaAdminClient, "connecting", bootstrap_timeout_ms=self.timeout_ms)
        try:
            try:
                described = {t["name"]: t for t in admin.describe_topics(list(wanted))}
            except KafkaError as exc:
                raise self._error("describing the store's topics", exc, sorted({acl("DESCRIBE", t) for t in wanted})) from None
            missing = [t for t in wanted if described.get(t, {}).get("error_code", 3) == 3]
            for topic in wanted:
                code = described.get(topic, {}).get("error_code", 3)
                if code not in (0, 3):  # a refusal (29) among them: a topic one may not describe is hidden
                    from kafka.errors import for_code

                    raise self._error(f"describing {topic}", for_code(code)(), [acl("DESCRIBE", topic)])
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
            raise self._error("describing the cluster", exc) from None
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
                raise self._error(
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
            raise self._error(f"describing the configuration of {topic}", exc, [acl("DESCRIBE_CONFIGS", topic)]) from None
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

    def _producer(self, transactional_id: str, transaction_timeout_ms: int) -> Any:
        """A transactional producer that holds ``transactional_id``: its ``init_transactions()``
        fences every older producer of the id and aborts what it left open."""
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        producer = self._client(
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
            _close_quietly(producer)
            raise self._error(
                f"taking the transactional id {transactional_id}", exc, [Acl("WRITE", "TransactionalId", transactional_id)]
            ) from None
        return producer

    def _transact(self, producer: Any, transactional_id: str, topic: str, records: list[tuple[str, bytes | None]]) -> list[int]:
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
        with self._plans.log.lock:
            self._plans.log.sync()
            return self._plans.latest()

    def get(self, generation: int) -> Plan | None:
        with self._plans.log.lock:
            self._plans.log.sync()
            return self._plans.plan(generation)

    def generations(self) -> list[int]:
        with self._plans.log.lock:
            self._plans.log.sync()
            return self._plans.complete()

    def wait_for_plan(self, newer_than: int, timeout: float) -> Plan | None:
        """A long poll: the reader's fetch waits at the broker until records arrive."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._plans.log.lock:
            while True:
                self._plans.log.sync()
                newest = self._plans.newest()
                if newest and newest > newer_than:
                    return self._plans.plan(newest)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._plans.log.poll(remaining)

    def publisher(self) -> Publisher:
        self._check_open()
        publisher = _KafkaPublisher(self)
        self._roles.add(publisher)
        return publisher

    # -- claims

    def claim_writer(self, consumer: str) -> ClaimWriter:
        self._check_open()
        writer = _KafkaClaimWriter(self, consumer)
        self._roles.add(writer)
        return writer

    def _sync_claims(self) -> None:
        """The plans first (they name the consumers whose claims to read), then every claims topic."""
        with self._plans.log.lock:
            self._plans.log.sync()
            consumers = sorted(self._plans.consumers)
            planned = self._plans.consumers_of(self._plans.newest())
        self._claims.follow(consumers, planned)
        self._claims.log.sync()

    def claims(self) -> Claims:
        with self._claims.log.lock:
            self._sync_claims()
            return self._claims.claims()

    def wait_for_claims(self, after: Claims, timeout: float) -> Claims:
        """A long poll, like ``wait_for_plan``."""
        deadline = time.monotonic() + max(0.0, timeout)
        before = _versions(after)
        with self._claims.log.lock:
            while True:
                self._sync_claims()
                now = self._claims.claims()
                remaining = deadline - time.monotonic()
                if _versions(now) != before or remaining <= 0:
                    return now
                self._claims.log.poll(remaining)

    # -- life cycle

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store {self.uri} is closed")

    def close(self) -> None:
        self._closed = True
        for role in list(self._roles):
            role.close()
        self._plans.log.close()
        self._claims.log.close()

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


def _close_quietly(producer: Any) -> None:
    try:
        producer.close(timeout=5)
    except Exception:
        log.debug("closing a producer failed", exc_info=True)


class _KafkaPublisher(Publisher):
    """The planner's role: the planner's transactional id, taken before reading the plans."""

    def __init__(self, store: KafkaStore) -> None:
        self.store = store
        self.transactional_id = planner_transactional_id(store.name)
        self._producer: Any = store._producer(self.transactional_id, store.publish_transaction_timeout_ms)
        self._fenced = False
        try:
            with store._plans.log.lock:
                store._plans.log.sync()  # only now: a generation we compute cannot collide
                self._previous = store._plans.latest()
                self._next = store._plans.highest + 1
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
        store._ensure_topics(
            [store.claims_topic(c) for c in sorted(plan["consumers"])],
            creator=f"the planner creates {prefix}<consumer> for each consumer it plans; or create it yourself",
            check_existing=False,
            acl=lambda operation, _topic: Acl(operation, "Topic", prefix, "prefixed"),
        )
        records, manifest = encode_plan(plan)
        with store._plans.log.lock:
            cutoff = self._next - store.history + 1
            tombstones: list[tuple[str, bytes | None]] = [(k, None) for k in store._plans.keys_before(cutoff)]
        batch: list[tuple[str, bytes | None]] = [*records, *tombstones, manifest]
        from kafka.errors import KafkaError

        try:
            offsets = store._transact(self._producer, self.transactional_id, store.plans_topic, batch)
        except KafkaError as exc:
            if _is_fenced(exc):
                self._fenced = True
                raise PublishFencedError(
                    f"store {store.uri}: generation {generation} not published: another planner took the role "
                    f"{self.transactional_id} ({type(exc).__name__})"
                ) from None
            raise store._error(
                f"publishing generation {generation}", exc,
                [Acl("WRITE", "Topic", store.plans_topic), Acl("WRITE", "TransactionalId", self.transactional_id)],
            ) from None  # fmt: skip
        self._previous = plan
        self._next = generation + 1  # committed: the number is used even if the wait below fails
        store._plans.log.read_past(store.plans_topic, offsets[-1], f"waiting for generation {generation} to become visible")
        log.info("%s: published generation %d in %d records", store.uri, generation, len(batch))

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            _close_quietly(producer)


class _KafkaClaimWriter(ClaimWriter):
    """One consumer id's claims, under the id's own transactional id."""

    def __init__(self, store: KafkaStore, consumer: str) -> None:
        if consumer != FENCER:
            check_consumer_ids([consumer])  # it names a topic, a key and a transactional id
        self.store = store
        self.consumer = consumer
        self.topic = store.claims_topic(consumer)
        self.incarnation = uuid.uuid4().hex
        self.transactional_id = claim_transactional_id(store.name, consumer)
        store._ensure_topics([self.topic], creator=f"the planner creates it when a plan names {consumer}; or create it yourself")
        self._producer: Any = store._producer(self.transactional_id, store.claim_transaction_timeout_ms)
        self._fenced = False
        try:
            with store._claims.log.lock:
                store._claims.log.add([self.topic])
                store._sync_claims()
                found = store._claims.read(consumer)
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
        if isinstance(lease, bool) or not isinstance(lease, int | float) or not lease > 0:
            raise ValueError(f"lease must be a positive number of seconds, not {lease!r}")
        record = ClaimRecord(
            consumer=self.consumer,
            incarnation=self.incarnation,
            seq=self._seq + 1,
            generation=int(generation),
            holds=frozenset((str(t), int(p)) for t, p in holds),
            lease=float(lease),
            state=state,
            fences={str(c): (str(v[0]), int(v[1])) for c, v in (fences or {}).items()},
            committed={str(t): {str(p): int(o) for p, o in ps.items()} for t, ps in (committed or {}).items()},
            host=socket.gethostname(),
            pid=os.getpid(),
            written=_now(),
        )
        from kafka.errors import KafkaError

        try:
            (offset,) = store._transact(
                self._producer, self.transactional_id, self.topic, [(self.consumer, record.to_json().encode())]
            )
        except KafkaError as exc:
            if _is_fenced(exc):
                self._fenced = True
                raise ClaimFencedError(
                    f"store {store.uri}: a newer incarnation of {self.consumer} took its id over ({type(exc).__name__})"
                ) from None
            raise store._error(
                f"writing the claim of {self.consumer}", exc,
                [Acl("WRITE", "Topic", self.topic), Acl("WRITE", "TransactionalId", self.transactional_id)],
            ) from None  # fmt: skip
        self._seq += 1
        store._claims.log.read_past(self.topic, offset, f"waiting for the claim of {self.consumer} to become visible")
        return record

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            _close_quietly(producer)


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
