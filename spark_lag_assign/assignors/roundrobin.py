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
pointer, then give consecutive partitions to consecutive subscribers (circularly). Over
consecutive topics with the same subscribers the ring simply carries on, so the code takes
one numpy step per run of such topics: one step for the whole group when every consumer
reads every topic (row i goes to consumer i mod C). The rule walked topic by topic is the
tests' oracle (``tests/oracles.py``).
"""

from __future__ import annotations

import numpy as np

from spark_lag_assign.assignors.base import GroupProblem, Strategy


def assign_codes(problem: GroupProblem) -> np.ndarray:
    codes = problem.codes()
    index = codes.index
    n_consumers = len(index.consumers)
    starts, _ = problem.topic_bounds()
    owners = np.empty(len(codes.row_topic), dtype=np.int64)
    if len(starts) == 0:
        return owners
    classes = index.topic_class[codes.row_topic[starts]]
    # runs of consecutive topics with the same subscribers: the ring carries on across them
    heads = np.flatnonzero(np.r_[True, classes[1:] != classes[:-1]])
    first_rows = starts[heads]
    last_rows = np.r_[first_rows[1:], len(owners)]
    pointer = 0
    for run, lo, hi in zip(heads.tolist(), first_rows.tolist(), last_rows.tolist()):
        ring = index.class_members[int(classes[run])]  # ascending codes: the sorted consumers
        first = int(np.searchsorted(ring, pointer)) % len(ring)
        turned = np.roll(ring, -first)
        owners[lo:hi] = np.tile(turned, -(-(hi - lo) // len(ring)))[: hi - lo]
        pointer = (int(owners[hi - 1]) + 1) % n_consumers
    return owners


STRATEGY = Strategy(
    "roundrobin", "group", "Kafka's RoundRobinAssignor: one ring over all partitions", assign_codes=assign_codes,
)
