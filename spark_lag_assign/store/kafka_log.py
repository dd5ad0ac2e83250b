"""The Kafka store's reading side: its single-partition topics read to a position, and the
views of plans and claims built from what was read (see ``spark_lag_assign.store.kafka``)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from spark_lag_assign.errors import one_line
from spark_lag_assign.extract.acls import Acl
from spark_lag_assign.plan.build import Plan
from spark_lag_assign.plan.document import parse_plan_parts
from spark_lag_assign.store.base import (
    FENCER,
    ClaimRecord,
    Claims,
    StoreError,
)
from spark_lag_assign.store.kafka_names import (
    MANIFEST_FORMAT,
    claims_prefix,
    claims_topic,
    consumer_key,
    header_key,
    manifest_key,
    record_consumer,
    record_generation,
    records_digest,
)

if TYPE_CHECKING:
    from spark_lag_assign.store.kafka import KafkaStore


#: the store's one logger, whichever of its modules logs (log settings name it)
log = logging.getLogger("spark_lag_assign.store.kafka")

#: how often a claims reader lists the cluster's claims topics anew (consumers no plan named yet)
RELIST_SECONDS = 30.0


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

            consumer = self.store.client(
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
            raise self.store.error(f"listing the topics {prefix}*", exc, [Acl("READ", "Topic", prefix, "prefixed")]) from None

    def _fail(self, doing: str, exc: BaseException, topics: Iterable[str]) -> StoreError:
        topics = list(topics)
        return self.store.error(f"{doing} {', '.join(topics)}", exc, sorted({self.read_acl(t) for t in topics}))

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


class PlansView:
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
        generation = record_generation(key) if key else None
        if key is None or generation is None:
            log.warning("%s: ignoring a record at offset %d with a foreign key %r", self.topic, record.offset, record.key)
            return
        consumer = record_consumer(key)
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
        if verify and records_digest(zip(keys, values)) != manifest["sha256"]:
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


class ClaimsView:
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

            codes = self.store.describe_topics(hidden)
            if any(code == TopicAuthorizationFailedError.errno for code in codes.values()):
                raise self.store.error(f"reading the claims of {self.prefix}*", TopicAuthorizationFailedError(), [self.read_acl])
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
