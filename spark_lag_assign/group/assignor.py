"""The planner's strategies as kafka-python partition assignors.

Priorities, in order:

1. Never fail and never wait. ``assign()`` runs on the leader's network thread; it reads
   the latest background ``LagSnapshot`` as it stands (no snapshot, or one older than
   ``max_age_s``: every lag counts as 0, so the strategy balances by count, and one line
   says so). If the strategy raised anyway, roundrobin without lags answers.
2. The same plan as the planner: the strategy is ``spark_lag_assign.assignors.assign``
   itself, fed the group's lags, subscriptions and what each member reports it owns.
3. Stickiness across leaders: every member sends what it owns (``memberdata``), so any
   member that becomes leader knows the previous plan.
4. Cooperative (KIP-429) variants never hand a partition to a member while another may
   still hold it: such a move is left out of the first round and *promised* to its new
   owner (in the member's assignment, which the member sends back when it rejoins); its
   holder revokes it and rejoins, and the second round completes it. The cooperative
   protocol must end where the eager one ends and move no more: the second round hands out
   the first round's target as it stands if the group is unchanged (the leader remembers
   it; fresher lags do not reopen it); if a member joined or left in between, or the leader
   is new, it plans again with that target, promises included, as the previous plan, as
   the eager protocol would after the first round completed.

Steps of ``assign``:

1. Read the members: topics, owned partitions, generation (bad data: owns nothing, warning).
2. Lags of every partition of the subscribed topics: the snapshot's, 0 where it has none.
3. Settle conflicting claims (newer generation wins) into the previous plan; cooperative:
   a promised partition counts as its promised member's.
4. Run the strategy (cooperative, mid-move with an unchanged group: the remembered target)
   on the members numbered in Kafka's order (``planner_ids``: member ids need not be
   valid consumer ids); check the invariants (``assign`` does); fall back if it raised.
5. Cooperative only: what another member still holds is left out of each member's share
   and promised to it instead.
6. One log line: lag source, partitions, optimality, count spread, moves.

Example (seed 000, the ``lag`` strategy): members C0 and C1 subscribe to t0 whose
partitions have lags 100,000 / 50,000 / 60,000; the leader's snapshot says so::

    C0: [t0p0]          100,000
    C1: [t0p1, t0p2]    110,000
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor, RebalanceProtocol
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from spark_lag_assign.assignors import assign as plan_assign, get_strategy
from spark_lag_assign.core.quality import quality
from spark_lag_assign.errors import one_line
from spark_lag_assign.group.lagsource import LagSource
from spark_lag_assign.group.memberdata import (
    NO_GENERATION,
    Claims,
    MemberDataError,
    MemberInfo,
    TopicPartitionKey,
    decode_user_data,
    encode_user_data,
    read_member,
    settle_claims,
)
from spark_lag_assign.metrics import GroupMetrics

log = logging.getLogger(__name__)

#: the subscription version a cooperative member sends: owned partitions (v1) and generation (v2)
COOPERATIVE_SUBSCRIPTION_VERSION = 2


@dataclass(frozen=True)
class Rebalance:
    """What one ``assign()`` did, kept on the leader's assignor (``last``) for logs and tests."""

    plan: pd.DataFrame  # member_id, consumer (key), topic, partition, lag: the target
    lag_source: str  # how the lags were obtained, in words
    lagged: bool  # whether real lags were used (False: count balance)
    moved: int  # partitions of the target whose settled previous owner differs
    deferred: int  # cooperative: moves left for the next round
    optimality: float
    count_spread: int
    seconds: float
    members: int = 0
    bad_members: tuple[str, ...] = ()
    fallback: str | None = None  # why the strategy's plan was not used, if it was not


@dataclass
class _Target:
    """A cooperative leader's plan, kept while its moves are in flight."""

    shape: tuple[Any, ...]
    plan: pd.DataFrame  # consumer, topic, partition, lag
    pending: int


class GroupAssignor(AbstractPartitionAssignor):
    """A strategy of ``spark_lag_assign.assignors`` as a kafka-python assignor (eager).

    ``lags``: a ``LagSource`` (usually a ``GroupLagMonitor`` shared by the process's
    consumers of the group); without one the strategy balances by count. Give each consumer
    its own assignor instance: it remembers what its consumer owns. Passing the class instead
    of an instance works too (kafka-python instantiates it), without lags.
    """

    strategy: ClassVar[str] = "lag-sticky"
    name: ClassVar[str] = "sla-lag-sticky"  # the group protocol name; every member must offer it
    protocol: ClassVar[RebalanceProtocol] = RebalanceProtocol.EAGER
    version: ClassVar[int] = 0

    def __init__(
        self,
        lags: LagSource | None = None,
        *,
        max_age_s: float = 120.0,
        seed: int = 0,
        options: Mapping[str, Any] | None = None,
        metrics: GroupMetrics | None = None,
    ) -> None:
        self.seed = get_strategy(self.strategy).check_call(seed, options or {})
        self.lags = lags
        self.max_age_s = float(max_age_s)
        self.options = dict(options or {})
        self._owned: tuple[TopicPartitionKey, ...] = ()
        self._promised: tuple[TopicPartitionKey, ...] = ()  # cooperative: planned for us, not yet ours
        self._generation = NO_GENERATION
        self._target: _Target | None = None
        #: what the latest assign() on this member did (None until it led a rebalance)
        self.last: Rebalance | None = None
        #: rebalances led, the lag snapshot's age, fallbacks to count balance (Prometheus)
        self.metrics = metrics if metrics is not None else GroupMetrics()
        self._snapshot_age: float | None = None
        self._count_balance: str | None = None  # why this round balanced by count (metrics.FALLBACKS)

    @property
    def cooperative(self) -> bool:
        return self.protocol == RebalanceProtocol.COOPERATIVE

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [self.protocol]

    # -- every member ------------------------------------------------------------------------

    def metadata(self, topics: Any) -> ConsumerProtocolSubscription:
        """The subscription: topics, what this member owns and, cooperative, what it was
        promised (of topics it still reads)."""
        names = sorted(set(topics))
        if self.lags is not None:
            self.lags.watch(names)  # only notes the topics; the monitor reads on its own thread
        keep = set(names)
        owned = [tp for tp in self._owned if tp[0] in keep]
        if self.cooperative:
            by_topic: dict[str, list[int]] = {}
            for t, p in owned:
                by_topic.setdefault(t, []).append(p)
            entry = ConsumerProtocolSubscription.TopicPartition
            promised = [tp for tp in self._promised if tp[0] in keep]
            return ConsumerProtocolSubscription(
                version=COOPERATIVE_SUBSCRIPTION_VERSION,
                topics=names,
                user_data=encode_user_data(promised, self._generation) if promised else b"",
                owned_partitions=[entry(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())],
                generation_id=self._generation,
            )
        user_data = encode_user_data(owned, self._generation) if self._generation != NO_GENERATION else b""
        return ConsumerProtocolSubscription(version=self.version, topics=names, user_data=user_data)

    def on_assignment(self, assignment: Any, generation: int) -> None:
        self._owned = tuple(sorted((tp.topic, tp.partition) for tp in assignment.partitions()))
        self._generation = int(generation)
        self._promised = ()
        user_data = getattr(assignment, "user_data", None)
        if self.cooperative and user_data:
            try:
                _, promised = decode_user_data(user_data)
            except (MemberDataError, TypeError, ValueError) as exc:  # runs in kafka-python's join: never raise there
                log.warning("%s: the promises in this member's assignment are unreadable (%s); ignored", self.name, exc)
            else:
                self._promised = tuple(promised)

    # -- the leader --------------------------------------------------------------------------

    def assign(self, cluster: Any, members: Sequence[Any]) -> dict[str, ConsumerProtocolAssignment]:
        started = time.monotonic()
        self._snapshot_age, self._count_balance = None, None
        try:
            infos = [read_member(m, self.cooperative) for m in members]
        except Exception as exc:  # noqa: BLE001 - a member object kafka-python never builds; still, never fail
            log.error("%s: cannot read the group's members (%s); assigning nothing", self.name, one_line(exc))
            return {m.member_id: self._encode([]) for m in members}
        bad = tuple(m.member_id for m in infos if m.problem is not None)
        for m in infos:
            if m.problem is not None:
                log.warning("%s: member %s owns nothing this round: %s", self.name, m.member_id, m.problem)
            if m.promise_problem is not None:
                log.warning("%s: member %s's promised partitions are ignored: %s", self.name, m.member_id, m.promise_problem)
        try:
            result, rebalance = self._assign(cluster, infos, started, bad)
        except Exception as exc:
            log.exception("%s: assignment failed (%s); falling back to roundrobin by count", self.name, one_line(exc))
            self._count_balance = "strategy-failed"
            try:
                result, rebalance = self._assign(cluster, infos, started, bad, fallback=one_line(exc))
            except Exception as again:  # noqa: BLE001 - nothing sensible is left: an empty round beats a stuck group
                log.error("%s: the fallback failed too (%s); assigning nothing this round", self.name, one_line(again))
                self._target = None
                self.metrics.rebalance(self.name, self._snapshot_age, self._count_balance)
                return {m.member_id: self._encode([]) for m in infos}
        self.last = rebalance
        self.metrics.rebalance(self.name, self._snapshot_age, self._count_balance)
        return result

    def _assign(
        self,
        cluster: Any,
        infos: list[MemberInfo],
        started: float,
        bad: tuple[str, ...],
        fallback: str | None = None,
    ) -> tuple[dict[str, ConsumerProtocolAssignment], Rebalance]:
        """One rebalance as the leader runs it (``fallback``: balance by count, and why).
        Long because each step (partitions, lags, claims, plan, cooperative revocations,
        the record of what was done) feeds the next and falls back in its own way."""
        subs = {m.key: list(m.topics) for m in infos}
        topics = sorted({t for m in infos for t in m.topics})
        if self.lags is not None and topics:
            self.lags.watch(topics)
        partitions = _partitions(cluster, topics)
        if fallback is None:
            lags, source, lagged = self._lags(partitions)
            claims = settle_claims(infos)
        else:  # as little as possible that could fail again: no lags, no previous owners
            lags, source, lagged = partitions.assign(lag=np.zeros(len(partitions), dtype=np.int64)), "nowhere", False
            claims = settle_claims([])
        if claims.conflicts:
            log.warning(
                "%s: %d partition(s) claimed by two members in one generation (e.g. %s-%d); neither keeps them",
                self.name,
                len(claims.conflicts),
                *claims.conflicts[0],
            )
        # cooperative: a partition promised in the last round counts as its new owner's, so a
        # plan made again mid-move starts from that round's target, not from its half-done state
        previous = pd.DataFrame(
            [(owner, t, p) for (t, p), owner in sorted(claims.target().items())], columns=["consumer", "topic", "partition"]
        )
        shape = (tuple(sorted(subs.items())), tuple(zip(partitions["topic"], partitions["partition"])))
        # the planner sees conforming ids in the members' order, never their keys (which hold
        # ':', and whatever a client id holds): every strategy depends on that order alone
        ids = planner_ids(subs)
        keys = {i: k for k, i in ids.items()}
        planner_subs = {ids[k]: topics for k, topics in subs.items()}
        reused = False
        in_flight = self._in_flight(shape, claims) if self.cooperative and fallback is None else None
        if fallback is not None:
            plan = _renamed(plan_assign(lags, planner_subs, "roundrobin"), keys) if subs else _empty_plan()
            source = "nowhere (fallback)"
        elif in_flight is not None:
            plan = in_flight
            source, reused = "the previous round's target (completing its moves)", True
        else:
            plan = (
                _renamed(plan_assign(lags, planner_subs, self.strategy, _renamed(previous, ids), self.seed, **self.options), keys)
                if subs
                else _empty_plan()
            )
        held = dict(claims.holders)
        shares: dict[str, list[TopicPartitionKey]] = {m.key: [] for m in infos}
        promises: dict[str, list[TopicPartitionKey]] = {m.key: [] for m in infos}
        deferred = 0
        moved = 0
        for consumer, topic, partition in zip(plan["consumer"], plan["topic"], plan["partition"]):
            tp = (str(topic), int(partition))
            owner = claims.owners.get(tp)
            if owner is not None and owner != consumer:
                moved += 1
            if self.cooperative and held.get(tp, frozenset()) - {consumer}:
                deferred += 1  # another member may still hold it: it revokes first, next round hands it on
                promises[consumer].append(tp)
                continue
            shares[consumer].append(tp)
        if self.cooperative:
            self._target = _Target(shape, plan, deferred) if deferred else None
        result = {m.member_id: self._encode(shares[m.key], promises[m.key]) for m in infos}
        q = quality(plan, subs) if len(subs) else None
        rebalance = Rebalance(
            plan=plan.assign(member_id=plan["consumer"].map({m.key: m.member_id for m in infos})),
            lag_source=source,
            lagged=lagged,
            moved=moved,
            deferred=deferred,
            optimality=q.optimality if q else 1.0,
            count_spread=q.count_spread if q else 0,
            seconds=time.monotonic() - started,
            members=len(infos),
            bad_members=bad,
            fallback=fallback,
        )
        log.info(
            "%s: %d partition(s) of %d topic(s) to %d member(s), lags from %s; optimality %.3f, count spread %d, "
            "%d moved%s in %.0f ms",
            self.name,
            len(plan),
            len(topics),
            len(infos),
            source,
            rebalance.optimality,
            rebalance.count_spread,
            moved,
            f", {deferred} left for the next round" if deferred else (" (round 2)" if reused else ""),
            1000 * rebalance.seconds,
        )
        return result, rebalance

    def _in_flight(self, shape: tuple[Any, ...], claims: Claims) -> pd.DataFrame | None:
        """The target this leader made last if this round is to complete its moves: the group
        is the one it was made for, and every claim agrees with it (a target that a later
        round, led elsewhere, overtook is not handed out again); else None."""
        target = self._target
        if target is None or not target.pending or target.shape != shape:
            return None
        meant = dict(zip(zip(target.plan["topic"], target.plan["partition"]), target.plan["consumer"]))
        if any(meant.get(tp) != key for tp, key in claims.target().items()):
            return None
        return target.plan

    def _lags(self, partitions: pd.DataFrame) -> tuple[pd.DataFrame, str, bool]:
        """(lags of ``partitions``, where they came from, whether they are real); never waits."""
        snap = self.lags.snapshot() if self.lags is not None else None
        why = None
        self._snapshot_age = snap.age() if snap is not None else None
        if self.lags is None:
            why, self._count_balance = "no lag source configured", "no-lag-source"
        elif snap is None:
            why, self._count_balance = "no lag snapshot yet", "no-snapshot"
        elif snap.age() > self.max_age_s:
            why, self._count_balance = f"the lag snapshot is {snap.age():.0f} s old (max_age_s={self.max_age_s:.0f})", "stale-snapshot"
        if why is not None or snap is None:
            log.warning("%s: %s; balancing by partition count", self.name, why)
            return partitions.assign(lag=np.zeros(len(partitions), dtype=np.int64)), f"nowhere ({why})", False
        merged = partitions.merge(snap.lags, on=["topic", "partition"], how="left")
        unknown = int(merged["lag"].isna().sum())
        merged["lag"] = merged["lag"].fillna(0).astype(np.int64)
        source = f"a snapshot {snap.age():.1f} s old"
        if unknown:
            source += f" ({unknown} partition(s) not in it count as lag 0)"
        return merged, source, True

    def _encode(
        self, partitions: Sequence[TopicPartitionKey], promised: Sequence[TopicPartitionKey] = ()
    ) -> ConsumerProtocolAssignment:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        # the generation of the promise is the member's to add: the broker numbers the round after assign()
        user_data = encode_user_data(promised, NO_GENERATION) if promised else b""
        return ConsumerProtocolAssignment(self.version, sorted((t, sorted(ps)) for t, ps in by_topic.items()), user_data)


def planner_ids(keys: Iterable[str]) -> dict[str, str]:
    """Member key -> the consumer id the planner sees: ``m0``, ``m1``, ... (zero-padded to one
    width) in the keys' order as Kafka's Java assignors sort them (``String.compareTo``:
    UTF-16 code units, which for ids beyond U+FFFF differs from Python's code points).

    Member ids are ``<client_id>-<uuid>`` with whatever the client id holds (kafka-python's
    default ``kafka-python-3.0.12`` has dots, a user's may have spaces), and keys add a
    ``0:``/``1:`` prefix: few would pass ``spark_lag_assign.core.ids``. The strategies
    depend on the order of consumer ids alone (codes, sorted lists, heaps, the seed mixed
    with topic names only), so numbered ids in the same order give the same plan.
    """
    ordered = sorted(keys, key=lambda key: key.encode("utf-16-be", "surrogatepass"))
    width = len(str(max(len(ordered) - 1, 0)))
    return {key: f"m{i:0{width}d}" for i, key in enumerate(ordered)}


def _renamed(plan: pd.DataFrame, names: Mapping[str, str]) -> pd.DataFrame:
    """``plan`` with its consumer column renamed by ``names``."""
    return plan.assign(consumer=plan["consumer"].map(names))


def _partitions(cluster: Any, topics: Sequence[str]) -> pd.DataFrame:
    """Every partition the leader's metadata knows of the topics, sorted; unknown topics are skipped."""
    rows: list[tuple[str, int]] = []
    for topic in topics:
        found = cluster.partitions_for_topic(topic)
        if found is None:
            log.warning("no partition metadata for topic %s; it is left out of this rebalance", topic)
            continue
        rows.extend((topic, int(p)) for p in sorted(found))
    return pd.DataFrame(
        {"topic": pd.Series([r[0] for r in rows], dtype=object), "partition": np.array([r[1] for r in rows], dtype=np.int64)}
    )


def _empty_plan() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "consumer": pd.Series([], dtype=object),
            "topic": pd.Series([], dtype=object),
            "partition": pd.Series([], dtype=np.int64),
            "lag": pd.Series([], dtype=np.int64),
        }
    )


def assignor_class(strategy: str, *, cooperative: bool = False) -> type[GroupAssignor]:
    """A GroupAssignor subclass for any strategy of ``spark_lag_assign.assignors``."""
    get_strategy(strategy)
    mode = "cooperative-" if cooperative else ""
    attrs: dict[str, Any] = {
        "strategy": strategy,
        "name": f"sla-{mode}{strategy}",
        "protocol": RebalanceProtocol.COOPERATIVE if cooperative else RebalanceProtocol.EAGER,
        "version": 1 if cooperative else 0,
        "__doc__": f"The ``{strategy}`` strategy as a kafka-python assignor ({'cooperative' if cooperative else 'eager'}).",
    }
    title = "".join(part.capitalize() for part in strategy.split("-"))
    return type(f"{'Cooperative' if cooperative else ''}{title}Assignor", (GroupAssignor,), attrs)


class LagAssignor(GroupAssignor):
    """The seeds' LagBasedPartitionAssignor, exactly: per topic, partitions by decreasing lag,
    each to the subscriber with the fewest partitions of that topic, ties to the least lag,
    then the smaller id. Not sticky: every rebalance starts afresh.

    C0, C1 on t0 with lags 100,000 / 50,000 / 60,000: ``C0: [t0p0]``, ``C1: [t0p1, t0p2]``.
    """

    strategy = "lag"
    name = "sla-lag"


class LagStickyAssignor(GroupAssignor):
    """Count-balanced per topic, lag-balanced over the whole group, sticky (the default).

    C0..C2 read t0 (lags 60, 10, 10) and t1 (50, 40, 5): ``C0: [t0p0, t1p2]`` 65,
    ``C1: [t0p1, t1p0]`` 60, ``C2: [t0p2, t1p1]`` 50; C3 joins and only t1p2 moves, to C3.
    """

    strategy = "lag-sticky"
    name = "sla-lag-sticky"


class StickyAssignor(GroupAssignor):
    """KIP-54: as balanced as possible by count, then keeping the most partitions in place.

    a (3 partitions), b, c (2 each) over C0..C2: ``C0: [a0, b0, c1]``, ``C1: [a1, b1]``,
    ``C2: [a2, c0]``; C1 leaves and only its a1 and b1 move.
    """

    strategy = "sticky"
    name = "sla-sticky"


class RangeAssignor(GroupAssignor):
    """Kafka's RangeAssignor: per topic, consumers in order (static members first), the
    first ``P mod C`` one partition more. C0, C1 on t0, t1 (3 partitions each):
    ``C0: [t0p0, t0p1, t1p0, t1p1]``, ``C1: [t0p2, t1p2]``."""

    strategy = "range"
    name = "sla-range"


class RoundRobinAssignor(GroupAssignor):
    """Kafka's RoundRobinAssignor: every partition by (topic, partition) to the next
    subscriber on a ring. C0, C1 on t0, t1 (3 partitions each):
    ``C0: [t0p0, t0p2, t1p1]``, ``C1: [t0p1, t1p0, t1p2]``."""

    strategy = "roundrobin"
    name = "sla-roundrobin"


class CooperativeLagAssignor(LagAssignor):
    """``lag`` under KIP-429: a moving partition is revoked in one round, assigned in the next."""

    name = "sla-cooperative-lag"
    protocol = RebalanceProtocol.COOPERATIVE
    version = 1


class CooperativeLagStickyAssignor(LagStickyAssignor):
    """``lag-sticky`` under KIP-429: a moving partition is revoked in one round, assigned in the next."""

    name = "sla-cooperative-lag-sticky"
    protocol = RebalanceProtocol.COOPERATIVE
    version = 1


class CooperativeStickyAssignor(StickyAssignor):
    """``sticky`` under KIP-429: a moving partition is revoked in one round, assigned in the next."""

    name = "sla-cooperative-sticky"
    protocol = RebalanceProtocol.COOPERATIVE
    version = 1
