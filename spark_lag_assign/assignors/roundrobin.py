"""Kafka's RoundRobinAssignor, exactly (seed 003).

Ordering rules:

1. Every partition of every subscribed topic goes into one list, sorted by topic name,
   then by partition number.
2. Consumers are sorted by id and dealt from a single circular pointer that carries over
   from one topic to the next (it does not restart per topic).
3. Each partition goes to the consumer under the pointer if that consumer subscribes to
   the partition's topic; otherwise the pointer moves on until it finds one that does.
   After each assignment the pointer advances past the consumer that got the partition.

With identical subscriptions the counts differ by at most one. Say consumers C0, C1 and C2
all read topics t0 (two partitions) and t1 (four partitions); the list is t0p0, t0p1,
t1p0, t1p1, t1p2, t1p3. t0 ends on C1, so t1 starts at C2, not back at C0::

    C0: [t0p0, t1p1]
    C1: [t0p1, t1p2]
    C2: [t1p0, t1p3]

With different subscriptions the skipping can pile partitions onto a few consumers. Seed
003: C0 reads t0; C1 reads t0, t1; C2 reads t0, t1, t2; t0, t1, t2 have 1, 2, 3
partitions. t0p0 goes to C0, t1p0 to C1, t1p1 to C2. For each partition of t2 the pointer
is back on C0, which reads only t0, then on C1, which does not read t2 either, so all of
t2 lands on C2::

    C0: [t0p0]
    C1: [t1p0]
    C2: [t1p1, t2p0, t2p1, t2p2]

Within one topic the rules reduce to: start at the first subscriber at or after the
pointer, then give consecutive partitions to consecutive subscribers (circularly). That
is what the code computes, one numpy expression per topic, and one for the whole group
when every consumer reads every topic.
"""

from __future__ import annotations

import numpy as np

from spark_lag_assign.assignors.base import GroupProblem, Strategy


def assign_group(problem: GroupProblem) -> list[str]:
    consumers = sorted(problem.consumers)
    names = np.asarray(consumers, dtype=object)
    n_rows = len(problem.partitions)
    if n_rows == 0:
        return []
    # Every row's topic has a subscriber, so when all consumers read the same topics nobody is
    # ever skipped and row i goes to consumer i mod C; this is the million-partition path.
    topics = set(problem.subscriptions[consumers[0]])
    if all(set(problem.subscriptions[c]) == topics for c in consumers[1:]):
        return names[np.arange(n_rows) % len(consumers)].tolist()
    return ring_walk(problem)


def ring_walk(problem: GroupProblem) -> list[str]:
    """The general path, for any subscriptions: one vectorised step per topic."""
    consumers = sorted(problem.consumers)
    subscribers = problem.subscribers()
    position = {c: i for i, c in enumerate(consumers)}
    owners = np.empty(len(problem.partitions), dtype=np.int64)
    pointer = 0
    for topic, rows in problem.topic_slices():
        # positions in the sorted consumer list, so searchsorted finds the next subscriber on the ring
        ring = np.asarray(sorted(position[c] for c in subscribers[topic]), dtype=np.int64)
        first = int(np.searchsorted(ring, pointer)) % len(ring)
        count = rows.stop - rows.start
        owners[rows] = ring[(first + np.arange(count)) % len(ring)]
        pointer = (int(owners[rows.stop - 1]) + 1) % len(consumers)
    return np.asarray(consumers, dtype=object)[owners].tolist()


STRATEGY = Strategy(
    "roundrobin", "group", "Kafka's RoundRobinAssignor: one ring over all partitions", assign_group=assign_group
)
