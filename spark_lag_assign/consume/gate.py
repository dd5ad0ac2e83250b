"""What a pipeline's committer may send, decided without I/O.

``FencedGroupCommit`` (``kafka_commit``) performs the commits; ``CommitGate`` makes its
decisions, so that the handover model (``tests/unit/test_handover_model.py``) drives the
same decisions against a model broker. The gate's states::

    closed ──open──> held ──allow──> open ──a fenced commit──> fenced
      ^                                │
      └────── a commit failed ─────────┘   (the producer is gone; so is its epoch)

- ``closed``: no producer. Nothing is sent, and the committer never opens one by itself:
  ``init_transactions`` takes a new epoch of the consumer's transactional id, which would
  undo a successor's fence. Only the handover reopens it (``OpenCommits``), and only the
  handover allows commits again, after a claims read that began after the open showed no
  successor's fence note and a valid lease (``spark_lag_assign.consume.protocol``).
- ``held``: a producer is open (its epoch taken) but not yet confirmed by the handover.
- ``open``: commits are sent, and only forward: within one query a partition's committed
  offset never goes down, whatever order progress reports and sink transactions arrive in.
- ``fenced``: a commit was refused because a newer owner fenced the id; every later commit
  is refused at once until the handover opens a new producer for a new start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from spark_lag_assign.consume.options import TopicPartition

State = Literal["closed", "held", "open", "fenced"]
Verdict = Literal["skip", "refuse", "hold", "send"]


@dataclass
class CommitGate:
    """The committer's decisions (module docstring): what to send, and what its failures mean."""

    state: State = "closed"
    high: dict[TopicPartition, int] = field(default_factory=dict)  # the furthest committed since the query began

    def opened(self) -> None:
        """A new producer holds the id (its ``init_transactions`` succeeded): held until allowed."""
        self.state = "held"

    def allow(self, *, new_query: bool) -> None:
        """The handover confirmed the producer; a new query's offsets start afresh."""
        if self.state == "held":
            self.state = "open"
        if new_query:
            self.high = {}

    def decide(self, offsets: Mapping[TopicPartition, int], records: bool = False) -> tuple[Verdict, dict[TopicPartition, int]]:
        """What to do with a commit of ``offsets`` (and a sink's records): the verdict and the
        offsets that would move the group forward."""
        forward = {tp: o for tp, o in offsets.items() if o > self.high.get(tp, -1)}
        if not forward and not records:
            return "skip", forward
        if self.state == "fenced":
            return "refuse", forward
        if self.state != "open":
            return "hold", forward
        return "send", forward

    def sent(self, offsets: Mapping[TopicPartition, int]) -> None:
        """The commit of ``offsets`` succeeded."""
        for tp, o in offsets.items():
            self.high[tp] = max(o, self.high.get(tp, -1))

    def failed(self, *, fenced: bool) -> None:
        """A commit failed: refused as fenced, or otherwise (the producer is closed either way)."""
        self.state = "fenced" if fenced else "closed"

    def closed(self) -> None:
        """The producer was closed on purpose (a stop): only the handover opens another."""
        if self.state != "fenced":
            self.state = "closed"

    @property
    def lost(self) -> bool:
        """No producer: commits wait until the handover opens one."""
        return self.state == "closed"


__all__ = ["CommitGate", "State", "Verdict"]
