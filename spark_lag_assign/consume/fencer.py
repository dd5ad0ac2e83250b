"""The fencer: fences a pipeline's offset commits on behalf of the pipeline taking over.

With the plan's ``fencing = "service"``, no pipeline may fence another (its credentials have
WRITE on its own commit id only); a pipeline that finds an earlier owner's lease run out
notes the fence it wants in its own claim, as it always does before fencing, and waits. The
fencer, one long-running process per store (``spark-lag-assign fencer``) whose principal may
write every commit id of the store, acts on such a request only when it sees for itself that
the holder's lease ran out, the way every reader judges a lease: a read that began a whole
lease after a read that showed that claim version first returned still shows it. So a pipeline that
writes a request on purpose fences nobody whose lease runs. Its steps, numbered as its
decisions (``FencerCore.next``) go:

1. Read every claim (its own included).
2. A request is a fence note in a pipeline's claim that names another consumer's claim
   version, still that consumer's newest claim, and not fenced yet. The first whose lease ran
   out by the fencer's own reads is the one it takes up.
3. Note the fence in the fencer's own record (key ``FENCER``), ``state = "fencing <holder>"``,
   *before* fencing: a fenced pipeline that reopens its producer reads the note after its
   open (``spark_lag_assign.consume.protocol``).
4. Fence the holder's commit id (``kafka_commit.fence``).
5. Write the record again with ``state = "fenced"``: the requester, which reads the fencer's
   record, starts only then. Notes stay in the record as long as a pipeline's would
   (``protocol.still_fenced``).

The fencer's own claim writer takes the fencer's id over, so a second fencer fences the
first's writes: run one, supervised. A restarted fencer carries its predecessor's notes on
(``FencerCore.took_over``; dropped, they would let a fenced pipeline reopen its producer
unseen), fences again the holder its predecessor noted but may not have fenced (step 3 done,
4 maybe not), and otherwise waits a lease before it fences anyone, since it has seen nothing yet.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_lag_assign.consume.protocol import date_claims, still_fenced
from spark_lag_assign.store.base import FENCER, ClaimRecord, Store, Version

log = logging.getLogger(__name__)

#: the lease the fencer's own record carries: it holds no partitions, so nobody waits on it
RECORD_LEASE = 3600.0


@dataclass(frozen=True)
class NoteFence:
    """Write the fencer's record: these fences, and the state (``fencing <holder>`` or ``fenced``)."""

    fences: tuple[tuple[str, Version], ...]
    state: str


@dataclass(frozen=True)
class FenceCommits:
    """Fence ``consumer``'s commit id: its claim ``version`` ran out and the record notes it."""

    consumer: str
    version: Version


@dataclass(frozen=True)
class Look:
    """Nothing to do but read the claims again, by ``until`` (own clock) at the latest."""

    until: float


FencerAction = NoteFence | FenceCommits | Look


def fence_done(record: ClaimRecord | str | None, holder: str, version: Version) -> bool:
    """Does the fencer's ``record`` say the commits of ``holder``'s claim ``version`` are fenced?"""
    return (
        isinstance(record, ClaimRecord)
        and record.fences.get(holder) == version
        and record.state != f"fencing {holder}"
    )


@dataclass
class FencerCore:
    """The fencer's decisions (module docstring), from what it read and did; no I/O, no clock."""

    poll: float = 1.0
    view: Mapping[str, ClaimRecord | str] = field(default_factory=dict)
    view_read_at: float = float("-inf")
    first_seen: dict[tuple[str, Version], float] = field(default_factory=dict)
    written: ClaimRecord | None = None
    done: dict[str, Version] = field(default_factory=dict)
    fencing: tuple[str, Version] | None = None  # noted, not yet fenced

    def took_over(self, previous: ClaimRecord | None) -> None:
        """This fencer took the id over from ``previous`` (the last fencer's record, if any):
        its notes go on, and a fence it noted as under way (step 3) is made again."""
        if previous is None:
            return
        pending = previous.state[len("fencing ") :] if previous.state.startswith("fencing ") else None
        for holder, version in previous.fences.items():
            if holder == pending:
                self.fencing = (holder, version)
            else:
                self.done.setdefault(holder, version)

    def saw_claims(self, view: Mapping[str, ClaimRecord | str], read_at: float, returned_at: float | None = None) -> None:
        """Every claim, from a read that began at ``read_at`` and returned at ``returned_at``
        (own clock; default: at once): a record it shows may have been written while it ran,
        so its lease counts from the return (``protocol.date_claims``, the handover's rule too)."""
        self.view, self.view_read_at = dict(view), read_at
        date_claims(self.first_seen, self.view, read_at, returned_at)

    def wrote(self, record: ClaimRecord) -> None:
        self.written = record

    def fenced(self, consumer: str, version: Version) -> None:
        self.done[consumer] = version
        self.fencing = None

    def _notes(self) -> tuple[tuple[str, Version], ...]:
        kept = {h: v for h, v in self.done.items() if still_fenced(self.view, h, v)}
        if self.fencing is not None:
            kept[self.fencing[0]] = self.fencing[1]
        return tuple(sorted(kept.items()))

    def requests(self) -> list[tuple[str, Version]]:
        """Fences pipelines ask for that are not done: the named version is still the holder's newest claim."""
        asked = set()
        for requester, record in self.view.items():
            if requester == FENCER or not isinstance(record, ClaimRecord):
                continue
            for holder, version in record.fences.items():
                held = self.view.get(holder)
                if holder != requester and isinstance(held, ClaimRecord) and held.version == version and self.done.get(holder) != version:
                    asked.add((holder, version))
        return sorted(asked)

    def next(self, now: float) -> FencerAction:
        if self.fencing is not None:  # 3-4: noted, so fence it
            holder, version = self.fencing
            if self.written is not None and self.written.fences.get(holder) == version and self.written.state == f"fencing {holder}":
                return FenceCommits(holder, version)
            return NoteFence(self._notes(), f"fencing {holder}")
        for holder, version in self.requests():  # 2: a request whose lease ran out by our own reads
            held = self.view[holder]
            assert isinstance(held, ClaimRecord)
            if self.view_read_at >= self.first_seen[(holder, version)] + held.lease:
                self.fencing = (holder, version)
                return NoteFence(self._notes(), f"fencing {holder}")
        if self.written is not None and self.written.state != "fenced":  # 5: say it is done
            return NoteFence(self._notes(), "fenced")
        return Look(now + self.poll)


class Fencer:  # pragma: no mutate block
    """The fencer's loop against a store and Kafka (``spark-lag-assign fencer`` runs it)."""

    def __init__(
        self,
        store: Store,
        fence: Callable[[str, Version], None],
        *,
        poll: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.fence = fence  # fence(consumer, version): fences the consumer's commit id (raises on failure)
        self.core = FencerCore(poll=poll)
        self.clock = clock
        self.fences = 0
        self._stopping = threading.Event()

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> int:
        """Until ``stop()``; the number of fences made. A newer fencer taking the role over ends it
        (``ClaimFencedError``)."""
        from spark_lag_assign.errors import NotAuthorizedError
        from spark_lag_assign.store import StoreError

        with self.store.claim_writer(FENCER) as writer:
            log.info("%s: the fencer runs (incarnation %s)", self.store.uri, writer.incarnation)
            self.core.took_over(writer.predecessor)
            while not self._stopping.is_set():
                began = self.clock()
                try:
                    view = self.store.claims()
                    self.core.saw_claims(view, began, self.clock())
                    action = self.core.next(self.clock())
                    self._act(writer, action)
                except NotAuthorizedError:
                    raise  # waiting grants no ACL: the line names the one the fencer lacks
                except StoreError as exc:
                    log.warning("%s: the fencer retries: %s", self.store.uri, exc)
                    self._stopping.wait(1.0)
        return self.fences

    def _act(self, writer: Any, action: FencerAction) -> None:
        from spark_lag_assign.errors import KafkaCommitError, NotAuthorizedError

        if isinstance(action, NoteFence):
            self.core.wrote(writer.write(0, (), RECORD_LEASE, action.state, None, dict(action.fences)))
        elif isinstance(action, FenceCommits):
            try:
                self.fence(action.consumer, action.version)
            except NotAuthorizedError:
                raise  # waiting grants no ACL: the line names the one the fencer lacks
            except KafkaCommitError as exc:
                log.warning("%s: fencing %s failed, retrying: %s", self.store.uri, action.consumer, exc)
                self._stopping.wait(1.0)
                return
            self.core.fenced(action.consumer, action.version)
            self.fences += 1
            log.info("%s: fenced the commits of %s (its claim %s/%d ran out)", self.store.uri, action.consumer, *action.version)
        else:
            self.store.wait_for_claims(dict(self.core.view), max(0.0, action.until - self.clock()))


__all__ = ["FenceCommits", "Fencer", "FencerAction", "FencerCore", "Look", "NoteFence", "fence_done"]
