"""A consumer group without a broker: assignor instances driven through rebalances the way
kafka-python 3.0.12's coordinator drives them, for tests and for trying a strategy offline.

Each round: every member's ``metadata()`` goes over the wire (encoded, then decoded as the
leader's coordinator decodes it), the leader's ``assign()`` answers, and every member gets
its assignment (encoded and decoded) through ``on_assignment()``. Under the cooperative
protocol a member keeps what it owns across the join, revokes what its new assignment
lacks, and a round in which anyone revoked is followed by another, as in KIP-429.

    group = SimulatedGroup({"t0": 3})
    group.join("C0", LagAssignor(StaticLags(lags)), ["t0"])
    group.rebalance()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor, RebalanceProtocol
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

TP = tuple[str, int]


class SimulatedCluster:
    """The one question an assignor asks of cluster metadata."""

    def __init__(self, partitions: Mapping[str, int | Sequence[int]]) -> None:
        self.partitions = {t: set(range(n)) if isinstance(n, int) else set(n) for t, n in partitions.items()}

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return self.partitions.get(topic)

    def topics(self) -> set[str]:
        return set(self.partitions)


@dataclass
class JoinedMember:
    """A member as the JoinGroup response lists it."""

    member_id: str
    metadata: Any
    group_instance_id: str | None = None


@dataclass
class _Member:
    name: str
    assignor: AbstractPartitionAssignor
    topics: list[str]
    instance_id: str | None
    member_id: str
    owned: set[TP] = field(default_factory=set)


@dataclass(frozen=True)
class Round:
    """One JoinGroup/SyncGroup round."""

    generation: int
    leader: str
    assignment: dict[str, frozenset[TP]]  # member name -> its assignment this round
    revoked: dict[str, frozenset[TP]]  # member name -> what it gave up (cooperative)
    handed_over_while_held: frozenset[TP]  # partitions given to one member while another held them


class SimulatedGroup:
    """Members, their assignors and what they own; ``rebalance()`` runs one round."""

    def __init__(self, partitions: Mapping[str, int | Sequence[int]]) -> None:
        self.cluster = SimulatedCluster(partitions)
        self.members: dict[str, _Member] = {}
        self.generation = 0
        self._joins = 0

    def join(self, name: str, assignor: AbstractPartitionAssignor, topics: Sequence[str], instance_id: str | None = None) -> None:
        self._joins += 1
        self.members[name] = _Member(name, assignor, list(topics), instance_id, f"{name}-{self._joins:04d}")

    def leave(self, name: str) -> None:
        del self.members[name]

    def subscribe(self, name: str, topics: Sequence[str]) -> None:
        self.members[name].topics = list(topics)

    def set_partitions(self, topic: str, count: int) -> None:
        self.cluster.partitions[topic] = set(range(count))

    def owned(self) -> dict[str, frozenset[TP]]:
        return {n: frozenset(m.owned) for n, m in self.members.items()}

    def rebalance(self, leader: str | None = None, *, mangle: Mapping[str, Any] | None = None) -> Round:
        """One round led by ``leader`` (default: the first member); ``mangle`` replaces the
        metadata a member sends (name -> ConsumerProtocolSubscription or raw bytes)."""
        if not self.members:
            raise ValueError("no members")
        leader = leader or next(iter(self.members))
        self.generation += 1
        cooperative = {m.name: RebalanceProtocol.COOPERATIVE in m.assignor.supported_protocols() for m in self.members.values()}
        joined = []
        for m in self.members.values():
            if cooperative[m.name]:  # what the member no longer reads it revokes before the join
                m.owned = {tp for tp in m.owned if tp[0] in m.topics}
            else:
                m.owned = set()
            meta = (mangle or {}).get(m.name) or m.assignor.metadata(set(m.topics))
            wire = meta if isinstance(meta, bytes) else meta.encode()
            joined.append(JoinedMember(m.member_id, ConsumerProtocolSubscription.decode(wire), m.instance_id))
        result = self.members[leader].assignor.assign(self.cluster, joined)
        held_before = {n: set(m.owned) for n, m in self.members.items()}
        assignment: dict[str, frozenset[TP]] = {}
        revoked: dict[str, frozenset[TP]] = {}
        clash: set[TP] = set()
        for m in self.members.values():
            decoded = ConsumerProtocolAssignment.decode(result[m.member_id].encode())
            new = {(tp.topic, tp.partition) for tp in decoded.partitions()}
            others = set().union(*(h for n, h in held_before.items() if n != m.name))
            clash |= (new - held_before[m.name]) & others
            revoked[m.name] = frozenset(m.owned - new)
            m.owned = new
            assignment[m.name] = frozenset(new)
            m.assignor.on_assignment(decoded, self.generation)
        return Round(self.generation, leader, assignment, revoked, frozenset(clash))

    def settle(self, leader: str | None = None, max_rounds: int = 5) -> list[Round]:
        """Rounds until nobody revoked anything (one round under the eager protocol)."""
        rounds = [self.rebalance(leader)]
        while any(rounds[-1].revoked.values()) and len(rounds) < max_rounds:
            rounds.append(self.rebalance(leader if leader in self.members else None))
        return rounds
