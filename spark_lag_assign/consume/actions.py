"""What the handover's state machine tells its driver to do (``protocol.Handover.next``
returns one of these), and the partition sets they carry. Plain records: every decision is
``spark_lag_assign.consume.protocol``'s, which re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_lag_assign.store.base import TopicPartition, Version

Holds = frozenset[TopicPartition]
NOTHING: Holds = frozenset()


def names(partitions: Holds | set[TopicPartition]) -> str:  # pragma: no mutate block
    """``t-0, t-3``: partitions for people, sorted."""
    return ", ".join(f"{t}-{p}" for t, p in sorted(partitions)) or "nothing"


# -- actions: what the driver is told to do ---------------------------------------------------


@dataclass(frozen=True)
class Write:
    """Write this pipeline's claim: it acts on ``generation`` and may read ``holds``; it fences
    (or is about to fence) the commits of each consumer in ``fences`` at that claim version."""

    generation: int
    holds: Holds
    state: str  # waiting | reading | idle | stopping | released | left: for people
    fences: tuple[tuple[str, Version], ...] = ()


@dataclass(frozen=True)
class ReadClaims:
    """Read every claim to the end of the store (the decision needs a view read after our own
    last write, or after our committer's producer was opened)."""


@dataclass(frozen=True)
class ReadPlan:
    """A claim shows a generation newer than ``newer_than``: read the plan, waiting for it
    at most until ``until`` (own clock; renewals are due then)."""

    newer_than: int
    until: float


@dataclass(frozen=True)
class Fence:
    """``consumer``'s lease ran out while it held partitions we want, and our claim records
    that we fence it: fence its offset commits."""

    consumer: str
    version: Version


@dataclass(frozen=True)
class OpenCommits:
    """Open a producer of our commit id (a new epoch: it fences our own earlier producers).
    Nothing is committed through it until ``Start`` or ``AllowCommits``; report the open
    with ``commits_opened(version, now)``."""

    version: Version


@dataclass(frozen=True)
class AllowCommits:
    """The producer reopened while reading passed the check: let commits go."""


@dataclass(frozen=True)
class FinishCommit:
    """Retry the final commit of the query that stopped under ``generation`` (it waited for a
    producer); report the outcome with ``stopped``."""

    generation: int


@dataclass(frozen=True)
class Start:
    """Start reading ``holds`` from the group's committed offsets, acting on ``generation``;
    the committer's producer is open and checked: let commits go."""

    generation: int
    holds: Holds


@dataclass(frozen=True)
class Stop:
    """Stop the query; with ``commit``, stop between batches and commit what completed first.
    Then close the committer's producer (every start opens a new one). Without a running
    query, drop a final commit that still waits."""

    commit: bool
    reason: str


@dataclass(frozen=True)
class Blocker:
    """A claim that keeps this pipeline from starting: who, under which generation, which partitions."""

    holder: str
    generation: int | None  # None: the claim cannot be read
    partitions: Holds
    expires: float | None  # when its lease runs out by our clock (None: unreadable, never)
    detail: str = ""

    def describe(self) -> str:
        if self.generation is None:
            return f"{self.holder}'s claim is unreadable ({self.detail})"
        return f"{self.holder} holds {names(self.partitions)} under generation {self.generation} ({self.detail})"


@dataclass(frozen=True)
class Wait:
    """Nothing to do until ``until`` (own clock) or until a new plan or claim is seen."""

    until: float
    reason: str
    blockers: tuple[Blocker, ...] = ()


@dataclass(frozen=True)
class Exit:
    """The run ends: stopped | drained | idle | left | fenced | commit-failed | handover-timeout | failed."""

    reason: str
    blockers: tuple[Blocker, ...] = ()


Action = Write | ReadClaims | ReadPlan | Fence | OpenCommits | AllowCommits | FinishCommit | Start | Stop | Wait | Exit


__all__ = [
    "NOTHING", "Action", "AllowCommits", "Blocker", "Exit", "Fence", "FinishCommit", "Holds", "OpenCommits",
    "ReadClaims", "ReadPlan", "Start", "Stop", "Wait", "Write", "names",
]  # fmt: skip
