"""The store of the control plane: plans and the pipelines' claims, behind one small interface.

The planner and every pipeline are separate applications, often on different hosts; what
they share is the Kafka cluster and the cluster's storage. A ``Store`` is the one place
where plan generations are published and read, and where each pipeline states which
partitions it may be reading (its *claim*). Backends (chosen by URI, see
``spark_lag_assign.store.open_store``):

- ``kafka://HOST:PORT[,HOST:PORT]/NAME``: two compacted single-partition topics;
- a directory: a local path or ``file:`` URI (and, through Hadoop, ``hdfs://``).

Every backend passes the same contract suite (``tests/contract``). What the contract says:

Plans
  - A generation is published whole or not at all: readers see the previous generation or
    the new one, never a mix, never a torn document.
  - Generations grow by one per publish. ``latest()`` is the highest *complete* generation;
    a damaged generation (bad checksum, undecodable) is skipped by readers and reported.
  - Only one planner publishes at a time: ``publisher()`` takes the planner's role and
    fences any older holder of it; a fenced or outrun publisher's ``publish`` raises
    ``PublishFencedError`` and writes nothing. A publisher reads ``previous()`` only after
    it holds the role, so the generation it computes cannot collide with a live planner's.
  - Older generations stay readable (``get(n)``) for at least ``history`` generations.
  - ``wait_for_plan(newer_than, timeout)`` returns as soon as a newer generation is
    complete (a long poll where the backend has one).

Claims
  - Each consumer id has at most one live *claim writer*; ``claim_writer(consumer)`` takes
    the id over and fences every older writer of it (an earlier incarnation of the same
    pipeline: a restarted driver fences its zombie). A fenced writer's ``write`` raises
    ``ClaimFencedError`` and writes nothing: "I am the zombie: stop reading now".
  - ``claims()`` reads to the end: it returns the newest claim of every consumer that a plan
    of the store named, and of the fencer (``FENCER``), including every claim whose write
    returned before the call began (read-your-writes). A consumer that no plan named yet is
    seen too once the backend finds it (the Kafka store lists the claims topics at a
    reader's first read and again within 30 s; a directory lists them at every read).
  - Only a consumer's own claim writer can write its claims where the backend can enforce
    it (the Kafka store: a topic per consumer, for an ACL; a directory: a directory per
    consumer, for file permissions).
  - Each claim written carries the writer's ``incarnation`` and a ``seq`` that grows with
    every write of that incarnation, so a reader can tell a renewal from a stale record.

The protocol that gives claims their meaning lives in ``spark_lag_assign.consume``; a
store stores and orders records, it never interprets them.
"""

from __future__ import annotations

import json
import numbers
import os
import socket
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from spark_lag_assign.errors import NotAuthorizedError, PlanError, SparkLagAssignError
from spark_lag_assign.plan.build import compact_json

if TYPE_CHECKING:
    from spark_lag_assign.plan.build import Plan

TopicPartition = tuple[str, int]
#: a claim's version: (incarnation, seq); what a fence note names
Version = tuple[str, int]
#: the claims key of the fencer (``spark-lag-assign fencer``): no consumer id begins with "_"
FENCER = "_fencer"


class StoreError(PlanError):
    """The store could not be reached, read or written (one line: which store, what failed)."""


class StoreNotAuthorizedError(StoreError, NotAuthorizedError):
    """The store's cluster refused a request for want of an ACL; the message names it."""


class FencedError(SparkLagAssignError):
    """A newer holder of the same role exists; this one must stop and write nothing."""


class PublishFencedError(FencedError):
    """Another planner published first or took the planner's role: nothing was published."""


class ClaimFencedError(FencedError):
    """A newer incarnation of this consumer took its id over: stop reading, write nothing."""


def utc_stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class ClaimRecord:
    """One consumer's claim as stored: the generation it acts on and what it may be reading.

    ``holds``: the partitions it may be reading now, or may start reading before it writes
    another claim; a partition missing from ``holds`` is released. ``lease``: seconds within
    which the writer stops reading after its last write, by its own clock, if it cannot
    write again (readers measure it with their own clock, from when they first see a record).
    ``fences``: consumer -> the claim version of it whose lease this writer saw run out and
    whose commits it fences (or fenced): written *before* the fence, so that a pipeline that
    reopens its committer and then reads the claims learns it was replaced.
    ``state`` and the fields after ``fences`` are for people and logs; the protocol reads only
    consumer, incarnation, seq, generation, holds, lease and fences.
    """

    consumer: str
    incarnation: str
    seq: int
    generation: int
    holds: frozenset[TopicPartition]
    lease: float
    state: str = ""
    fences: Mapping[str, Version] = field(default_factory=dict)
    committed: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    host: str = ""
    pid: int = 0
    written: str = ""

    @property
    def version(self) -> tuple[str, int]:
        """What changes with every write: a reader that sees the same version saw no renewal."""
        return (self.incarnation, self.seq)

    def assign(self) -> dict[str, list[int]]:
        """``holds`` as an ``assign`` object (topic -> partitions ascending)."""
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self.holds):
            out.setdefault(topic, []).append(partition)
        return out

    def to_json(self) -> str:
        return compact_json(
            {
                "consumer": self.consumer,
                "incarnation": self.incarnation,
                "seq": self.seq,
                "generation": self.generation,
                "holds": self.assign(),
                "lease": self.lease,
                "state": self.state,
                "fences": {c: [v[0], v[1]] for c, v in sorted(self.fences.items())},
                "committed": {t: dict(ps) for t, ps in self.committed.items()},
                "host": self.host or socket.gethostname(),
                "pid": self.pid or os.getpid(),
                "written": self.written or utc_stamp(),
            },
            sort_keys=True,
        )

    @classmethod
    def to_write(
        cls,
        consumer: str,
        incarnation: str,
        seq: int,
        generation: int,
        holds: Iterable[TopicPartition],
        lease: float,
        state: str = "",
        committed: Mapping[str, Mapping[str, int]] | None = None,
        fences: Mapping[str, Version] | None = None,
    ) -> ClaimRecord:
        """The record a claim writer of any store writes next, from ``ClaimWriter.write``'s
        arguments: checked (a lease is a positive number of seconds), in the stored types and
        stamped with host, pid and time, so that the record ``write`` returns is the one that
        every reader reads back."""
        if isinstance(lease, bool) or not isinstance(lease, numbers.Real) or not lease > 0:
            raise ValueError(f"lease must be a positive number of seconds, not {lease!r}")
        return cls(
            consumer=consumer,
            incarnation=incarnation,
            seq=seq,
            generation=int(generation),
            holds=frozenset((str(t), int(p)) for t, p in holds),
            lease=float(lease),
            state=state,
            fences={str(c): (str(v[0]), int(v[1])) for c, v in (fences or {}).items()},
            committed={str(t): {str(p): int(o) for p, o in ps.items()} for t, ps in (committed or {}).items()},
            host=socket.gethostname(),
            pid=os.getpid(),
            written=utc_stamp(),
        )

    @classmethod
    def from_json(cls, text: str | bytes, consumer: str | None = None) -> ClaimRecord:
        """Parse a stored claim; ``ValueError`` (one line) if it is not one of ours."""
        try:
            doc = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise ValueError("not a claim (expected a JSON object)")
        try:
            holds = doc["holds"]
            if not isinstance(holds, dict):
                raise TypeError("holds")
            parts = frozenset((str(t), _int(p, "partition")) for t, ps in holds.items() for p in _list(ps, "holds"))
            record = cls(
                consumer=_str(doc["consumer"], "consumer"),
                incarnation=_str(doc["incarnation"], "incarnation"),
                seq=_int(doc["seq"], "seq"),
                generation=_int(doc["generation"], "generation"),
                holds=parts,
                lease=_number(doc["lease"], "lease"),
                state=str(doc.get("state", "")),
                fences=_fences(doc.get("fences") or {}),
                committed=_committed(doc.get("committed") or {}),
                host=str(doc.get("host", "")),
                pid=int(doc.get("pid", 0) or 0),
                written=str(doc.get("written", "")),
            )
        except KeyError as exc:
            raise ValueError(f"not a claim (no {exc.args[0]})") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a claim ({exc})") from None
        if consumer is not None and record.consumer != consumer:
            raise ValueError(f"a claim of {record.consumer!r} stored under {consumer!r}")
        return record


def _fences(value: Any) -> dict[str, Version]:
    if not isinstance(value, dict):
        raise TypeError("fences must map consumers to [incarnation, seq]")
    out: dict[str, Version] = {}
    for consumer, version in value.items():
        if not isinstance(version, list) or len(version) != 2:
            raise TypeError(f"fences of {consumer!r} must be [incarnation, seq]")
        out[str(consumer)] = (_str(version[0], "a fenced incarnation"), _int(version[1], "a fenced seq"))
    return out


def _committed(value: Any) -> dict[str, dict[str, int]]:
    if not isinstance(value, dict) or not all(isinstance(ps, dict) for ps in value.values()):
        raise TypeError("committed must map topics to {partition: offset}")
    return {str(t): {str(p): _int(o, f"the committed offset of {t}-{p}") for p, o in ps.items()} for t, ps in value.items()}


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an integer, not {value!r}")
    return value


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise TypeError(f"{what} must be a positive number, not {value!r}")
    return float(value)


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{what} must be a non-empty string")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{what} must map topics to lists")
    return value


#: what ``Store.claims()`` returns: consumer -> its newest claim, or why it cannot be read
Claims = dict[str, "ClaimRecord | str"]


class Publisher(ABC):
    """The planner's role on a store, held from ``Store.publisher()`` until ``close()``."""

    @abstractmethod
    def previous(self) -> Plan | None:
        """The newest complete generation, read after the role was taken (None: no plan yet)."""

    @abstractmethod
    def next_generation(self) -> int:
        """The number the next published plan must carry: one more than any generation seen
        (a damaged one included, so that a number is never used twice)."""

    @abstractmethod
    def publish(self, plan: Plan) -> None:
        """Publish ``plan`` (its ``generation`` must be ``next_generation()``) whole or not at
        all; ``PublishFencedError`` if another planner took the role or published first."""

    def close(self) -> None:
        """Give the role up (a later planner needs no fencing then)."""

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class ClaimWriter(ABC):
    """The only writer of one consumer id's claims, from ``Store.claim_writer()`` until fenced.

    Taking the id over fences every older writer of it at once, and ``predecessor`` is the
    newest claim of the id that another incarnation wrote, read after the fencing (None if
    there was none). The new incarnation cannot know whether its predecessor is still
    reading (a paused or partitioned driver), so the protocol keeps the predecessor's
    partitions claimed until its lease has run out. A backend that can only fence by
    writing (a directory) writes a copy of the predecessor's claim under the new
    incarnation, so that readers keep seeing those partitions held.
    """

    consumer: str
    incarnation: str
    predecessor: ClaimRecord | None

    @abstractmethod
    def write(
        self,
        generation: int,
        holds: Iterable[TopicPartition],
        lease: float,
        state: str = "",
        committed: Mapping[str, Mapping[str, int]] | None = None,
        fences: Mapping[str, Version] | None = None,
    ) -> ClaimRecord:
        """Write the next claim of this incarnation and return it as stored; when this returns,
        every later ``claims()`` call (by anyone) sees it or a newer one. ``ClaimFencedError``
        if a newer incarnation took the id over; ``StoreError`` if the store failed (the
        write may or may not have happened: write again)."""

    def close(self) -> None:
        """Release resources; the id stays taken until another incarnation takes it."""

    def __enter__(self) -> ClaimWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


class Store(ABC):
    """Plans and claims of one planned group (one planner, its pipelines)."""

    #: the URI the store was opened with, as users write it
    uri: str
    #: a short name, safe in Kafka transactional ids and topic names
    name: str

    # -- plans

    @abstractmethod
    def latest(self) -> Plan | None:
        """The newest complete generation, read to the end of the store (None: no plan yet)."""

    @abstractmethod
    def get(self, generation: int) -> Plan | None:
        """One generation, if the store still keeps it."""

    @abstractmethod
    def generations(self) -> list[int]:
        """The readable generations, ascending."""

    @abstractmethod
    def wait_for_plan(self, newer_than: int, timeout: float) -> Plan | None:
        """The newest complete generation once it is newer than ``newer_than``, waiting at
        most ``timeout`` seconds; None if none came."""

    @abstractmethod
    def publisher(self) -> Publisher:
        """Take the planner's role (fencing an older planner); see ``Publisher``."""

    # -- claims

    @abstractmethod
    def claim_writer(self, consumer: str) -> ClaimWriter:
        """Take ``consumer``'s id over (fencing its older incarnations) and write its claims."""

    @abstractmethod
    def claims(self) -> Claims:
        """Every consumer's newest claim, read to the end (see the module docstring)."""

    def wait_for_claims(self, after: Claims, timeout: float) -> Claims:
        """The claims once they differ from ``after``, or after ``timeout`` seconds."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            now = self.claims()
            if claim_versions(now) != claim_versions(after) or time.monotonic() >= deadline:
                return now
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))

    def close(self) -> None:
        """Release clients and background readers."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def claim_versions(claims: Claims) -> dict[str, object]:
    return {c: (r.version if isinstance(r, ClaimRecord) else r) for c, r in claims.items()}


__all__ = [
    "FENCER",
    "ClaimFencedError",
    "ClaimRecord",
    "ClaimWriter",
    "Claims",
    "FencedError",
    "PublishFencedError",
    "Publisher",
    "Store",
    "StoreError",
    "TopicPartition",
    "Version",
]
