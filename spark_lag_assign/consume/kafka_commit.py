"""Offset commits that a newer owner of the partitions can refuse (KIP-848's epochs, in Kafka).

Every pipeline commits its progress to the group through a transactional producer whose
``transactional_id`` belongs to its consumer id (``commit_id``), in a transaction of its
own per commit (``TxnOffsetCommit``). Two things follow from Kafka's transaction protocol:

- a restarted pipeline opens the same id and so fences its zombie: an earlier incarnation's
  commit fails with ProducerFenced from then on;
- a pipeline that takes partitions over from a holder whose lease ran out first *fences the
  holder's id* (``fence``: ``init_transactions`` under it, which also aborts a transaction
  the holder left open), and only then reads the group's committed offsets. Whatever the
  holder commits after that is refused, so the group's offsets never move under the new
  owner's feet, and a holder paused past its lease learns on its first commit that it has
  been replaced (``CommitFencedError``: stop reading now).

Each commit carries the plan generation and the consumer in its metadata string
(``spark-lag-assign consumer=C generation=N``), so the group's offsets say who committed
them under which plan. A sink that writes to Kafka can put its records in the same
transaction as the offsets (``write``): a fenced pipeline's records are then aborted too and
never reach a ``read_committed`` reader. Measured on the local broker: ``init_transactions``
~0.2-0.4 s, a commit ~0.2 s.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from spark_lag_assign.consume.gate import CommitGate
from spark_lag_assign.consume.options import TopicPartition, metadata, parse_metadata
from spark_lag_assign.errors import (
    CommitFencedError,
    CommitHeldError,
    CommitNotAuthorizedError,
    ConfigError,
    KafkaCommitError,
    one_line,
)
from spark_lag_assign.extract.acls import Acl, not_authorized
from spark_lag_assign.store import KAFKA_NAME

log = logging.getLogger(__name__)

#: text in kafka-python's errors when the transactional id has a newer holder (a refused ACL
#: on the id is no fencing: nobody newer holds it, and waiting will not end it)
_FENCED = ("ProducerFenced", "InvalidProducerEpoch", "InvalidProducerIdMapping")

#: how long an open commit transaction may stall ``read_committed`` readers of a sink topic
TRANSACTION_TIMEOUT_MS = 15000


def commit_namespace(store_name: str) -> str:
    """The start of every transactional id under which the pipelines of ``store_name`` commit.

    Two stores with one name on one Kafka cluster share these ids and fence each other's
    pipelines; a name with a "." would also let one store's ids (and their prefix ACLs)
    cover another's, so such a name is refused here, whatever the store's kind.
    """
    if not KAFKA_NAME.fullmatch(store_name):
        raise ConfigError(
            f"store name {store_name!r} cannot name the pipelines' commit ids (spark-lag-assign.NAME.commit.CONSUMER): "
            "use letters, digits, '_' and '-', at most 100, starting with a letter or digit (a plan directory's name is "
            "its last path element)"
        )
    return f"spark-lag-assign.{store_name}.commit."


def commit_id(store_name: str, consumer: str) -> str:
    """The transactional id under which ``consumer`` of the store ``store_name`` commits."""
    return commit_namespace(store_name) + consumer


def _bounded(producer: Any, step: str, timeout_ms: int, *args: Any) -> None:  # pragma: no mutate block
    """``send_offsets_to_transaction`` or ``commit_transaction``, waiting at most ``timeout_ms``.

    kafka-python 3.0.12 waits for both without a bound, so a broker that is away would hang
    the commit (and the micro-batch listener behind it) until it came back. This does what
    those two methods do, through the same transaction manager, but with a bounded wait; a
    timeout leaves the transaction undecided, so the caller closes the producer; the next
    one, opened through the handover, aborts it with its ``init_transactions``.
    """
    from kafka.errors import KafkaTimeoutError

    manager, sender = getattr(producer, "_transaction_manager", None), getattr(producer, "_sender", None)
    if manager is None or sender is None:  # another kafka-python: its own (unbounded) calls
        getattr(producer, step)(*args)
        return
    result = manager.send_offsets_to_transaction(*args) if step == "send_offsets_to_transaction" else manager.begin_commit()
    sender.wakeup()
    if not result.wait(timeout_ms=timeout_ms):
        raise KafkaTimeoutError(f"{step} did not complete within {timeout_ms} ms")


def _is_fenced(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}"
    return any(name in text for name in _FENCED)


def _failed(doing: str, exc: BaseException, needed: Iterable[Acl]) -> KafkaCommitError:  # pragma: no mutate block
    """One line: a refusal names the ACL of ``needed`` to grant, anything else says what failed."""
    return not_authorized(exc, needed, CommitNotAuthorizedError, doing) or KafkaCommitError(f"{doing}: {one_line(exc)}")


def _producer(
    bootstrap_servers: str, transactional_id: str, client_options: Mapping[str, Any], timeout_ms: int
) -> Any:  # pragma: no mutate block
    from kafka import KafkaProducer

    # opening waits twice: the constructor's bootstrap (kafka-python's default: 30 s) and
    # init_transactions (max_block_ms); half of ``timeout_ms`` each keeps the open within it
    waits = {"request_timeout_ms": timeout_ms, "max_block_ms": timeout_ms // 2, "bootstrap_timeout_ms": timeout_ms // 2}
    return KafkaProducer(**{
        "client_id": "spark-lag-assign-committer",
        **waits,
        **dict(client_options),  # the cluster's settings may set any of those
        "bootstrap_servers": bootstrap_servers,
        "transactional_id": transactional_id,
        "transaction_timeout_ms": TRANSACTION_TIMEOUT_MS,
    })


def _discard(producer: Any) -> None:  # pragma: no mutate block
    """Close a producer at once once its ``init_transactions`` returned or failed: what it
    still waits for is an answer nobody will use, and waiting would hold the follower's loop."""
    producer.close(timeout=0)


def fence(
    bootstrap_servers: str,
    transactional_id: str,
    client_options: Mapping[str, Any] | None = None,
    timeout_ms: int = 15000,
) -> None:  # pragma: no mutate block
    """Fence every holder of ``transactional_id``: their later commits are refused and a
    transaction one of them left open is aborted. ``KafkaCommitError`` if Kafka failed
    (``CommitNotAuthorizedError`` naming the ACL if it refused: WRITE on the id)."""
    from kafka.errors import KafkaError

    try:
        producer = _producer(bootstrap_servers, transactional_id, client_options or {}, timeout_ms)
    except (KafkaError, OSError, ValueError, TypeError, AssertionError) as exc:
        raise KafkaCommitError(f"fencing {transactional_id} failed: {one_line(exc)}") from None
    try:
        producer.init_transactions()
    except (KafkaError, OSError) as exc:
        raise _failed(f"fencing {transactional_id} failed", exc, [Acl("WRITE", "TransactionalId", transactional_id)]) from None
    finally:
        _discard(producer)  # fenced or not, nothing it still waits for matters


class FencedGroupCommit:
    """Commits one consumer's offsets to ``group``, each commit one transaction (module docstring).

    Its decisions are a ``CommitGate``'s (``spark_lag_assign.consume.gate``): it sends only
    while the gate is open, and it never opens a producer by itself. ``open()`` takes a new
    epoch of the id (fencing our own earlier producers); ``allow()`` lets commits go. Both are
    called by the pipeline's handover (``PlanFollower``, through ``PipelineCommits``), after
    it checked that no successor fenced this consumer; a commit after a failure that closed
    the producer raises ``CommitHeldError`` until the handover has reopened it.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        group: str,
        transactional_id: str,
        consumer: str,
        *,
        client_options: Mapping[str, Any] | None = None,
        timeout_ms: int = 15000,
        producer_factory: Callable[[], Any] | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.group = group
        self.transactional_id = transactional_id
        self.consumer = consumer
        self.client_options = dict(client_options or {})
        self.timeout_ms = timeout_ms
        # kafka-python's transactional producer; the handover model passes a model broker's
        self._new_producer = producer_factory or (
            lambda: _producer(self.bootstrap_servers, self.transactional_id, self.client_options, self.timeout_ms)
        )
        self.gate = CommitGate()
        self._producer: Any = None
        self._lock = threading.RLock()

    def open(self) -> None:
        """Open a producer of the id: ``init_transactions`` fences every other producer of it and
        aborts a transaction one of them left open. Commits stay held until ``allow()``."""
        from kafka.errors import KafkaError

        with self._lock:
            self._close_locked()
            try:
                producer = self._new_producer()
            except (KafkaError, OSError, ValueError, TypeError, AssertionError) as exc:
                raise KafkaCommitError(f"opening the committer {self.transactional_id} failed: {one_line(exc)}") from None
            try:
                producer.init_transactions()
            except (KafkaError, OSError) as exc:
                _discard(producer)
                raise _failed(
                    f"opening the committer {self.transactional_id} failed", exc,
                    [Acl("WRITE", "TransactionalId", self.transactional_id)],
                ) from None  # fmt: skip
            self._producer = producer
            self.gate.opened()

    def allow(self, *, new_query: bool) -> None:
        """Let commits go; a new query's forward-only offsets start afresh."""
        with self._lock:
            self.gate.allow(new_query=new_query)

    @property
    def fenced(self) -> bool:
        return self.gate.state == "fenced"

    @property
    def lost(self) -> bool:
        """The producer is gone (a failure closed it): only the handover may open another."""
        return self.gate.lost

    def __call__(self, offsets: Mapping[TopicPartition, int], generation: int) -> None:
        """Commit ``{(topic, partition): next offset}`` under ``generation``."""
        self.write(offsets, generation)

    def write(
        self,
        offsets: Mapping[TopicPartition, int],
        generation: int,
        topic: str | None = None,
        records: Iterable[tuple[bytes | None, bytes]] = (),
    ) -> None:
        """Send ``records`` (key, value) to ``topic`` and commit ``offsets`` in one transaction.

        ``CommitFencedError`` if a newer owner fenced this id (nothing of it becomes visible);
        ``CommitHeldError`` while the producer waits for the handover to (re)open it;
        ``KafkaCommitError`` if Kafka failed (nothing is committed, the producer is closed), a
        ``CommitNotAuthorizedError`` naming the ACL if the cluster refused it. Long because the
        gate's verdict, the transaction's steps and what each failure does to the producer are
        one sequence under one lock, and read as one.
        """
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata, TopicPartition as KafkaTP

        records = list(records)
        with self._lock:
            verdict, offsets = self.gate.decide(offsets, bool(records))
            if verdict == "skip":
                return
            if verdict == "refuse":
                raise CommitFencedError(f"{self.consumer}'s commits are fenced: its partitions have a newer owner")
            if verdict == "hold":
                raise CommitHeldError(
                    f"{self.consumer}'s committer waits for its handover to open a producer of {self.transactional_id}"
                )
            producer = self._producer
            note = metadata(self.consumer, generation)
            try:
                producer.begin_transaction()
                sent = []
                for key, value in records:
                    assert topic is not None, "records need a topic"
                    sent.append(producer.send(topic, key=key, value=value))
                for future in sent:  # the records' own errors first: a refused WRITE on the sink names its ACL
                    if future is not None:  # kafka-python 3.0.12 would leave the commit waiting on it instead
                        future.get(timeout=self.timeout_ms / 1000)
                if offsets:
                    _bounded(
                        producer,
                        "send_offsets_to_transaction",
                        self.timeout_ms,
                        {KafkaTP(t, p): OffsetAndMetadata(o, note, -1) for (t, p), o in sorted(offsets.items())},
                        self.group,
                    )
                _bounded(producer, "commit_transaction", self.timeout_ms)
                self.gate.sent(offsets)
            except (KafkaError, OSError, AssertionError) as exc:
                fenced = _is_fenced(exc)
                self.gate.failed(fenced=fenced)
                # an abortable or broken producer is not reused, and a new one is the handover's to open
                self._close_locked()
                if fenced:
                    raise CommitFencedError(
                        f"{self.consumer}'s commit under generation {generation} was refused: "
                        f"a newer owner fenced {self.transactional_id}"
                    ) from None
                raise _failed(f"committing offsets for group {self.group} failed", exc, [
                    Acl("WRITE", "TransactionalId", self.transactional_id),
                    Acl("READ", "Group", self.group),  # AddOffsetsToTxn, TxnOffsetCommit
                    *(Acl("READ", "Topic", t) for t in sorted({t for t, _ in offsets})),  # TxnOffsetCommit
                    *([Acl("WRITE", "Topic", topic)] if topic is not None and records else []),
                ]) from None  # fmt: skip

    def _close_locked(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=1)
            except Exception:  # closing a broken client must not hide why it broke
                log.debug("closing the committer's producer failed", exc_info=True)

    def close(self) -> None:
        """Close the producer; only ``open()`` (the handover) makes another."""
        with self._lock:
            self.gate.closed()
            self._close_locked()


__all__ = ["TRANSACTION_TIMEOUT_MS", "FencedGroupCommit", "commit_id", "fence", "metadata", "parse_metadata"]
