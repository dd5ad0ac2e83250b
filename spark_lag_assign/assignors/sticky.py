"""KIP-54 sticky assignment (seed 004): balance over stickiness.

Priorities, in order:

1. Balance by partition count across the whole group. With identical subscriptions the
   counts differ by at most one. With differing subscriptions no partition can travel, in
   one move or along a chain of moves, from a consumer to one holding two or more fewer
   (the global optimum; KIP-54 itself only asks that no single move helps).
2. Stickiness: of all plans that balanced, one keeping the most partitions with their
   previous owner.

Partitions of topics with the same subscribers are interchangeable for both goals, so the
algorithm counts per (class of such topics, consumer) and picks concrete partitions last.

1. Drop what no longer holds: owners that left or unsubscribed, deleted partitions.
2. When every consumer reads one class at most (identical subscriptions, or groups of
   consumers on disjoint topics), split each class by quota: ``N // S`` per subscriber,
   ``N % S`` of them one more, the extra going to those that held the most. Everyone keeps
   its previous partitions up to its quota and only the excess moves: the fewest moves
   any balanced plan can make. Skip to step 7.
3. Otherwise everyone keeps its previous partitions, and unowned ones go, classes with the
   fewest subscribers first, each to the least-loaded subscriber (ties: smaller id).
4. Rebalance: move a partition to an eligible consumer holding two or more fewer, largest
   gaps first, newly assigned partitions before previously owned ones; when no direct move
   is left, pass one along a chain (A to B, B to C), the cheapest in lost previous owners.
5. A reassignment that does not lower the balance score (the sum of count differences
   over all pairs of consumers) is reverted: stickiness wins when fairness cannot improve.
6. Trade back: with the balance fixed, exchange partitions around cycles that return more
   partitions to their previous owners than they take; when none is left, no plan this
   balanced keeps more (the optimality test of a min-cost flow).
7. Materialise: a consumer over its count gives up first the partitions whose lag is
   nearest the group's average (so that neither side's lag per partition shifts), then
   those of topics it holds most of relative to their size, then by a per-consumer rotation
   over topics; what is left is dealt to the consumers still short, each topic to those
   holding least of it, heaviest partitions first to the receivers holding the least lag;
   a group starting afresh is dealt round-robin in (topic, partition) order. Lag never
   changes a count or a move, only which of equally good partitions moves.

Example. Topics a (3 partitions), b and c (2 each); C0, C1 and C2 subscribe to all three.
Seven partitions over three consumers: quotas 3, 2, 2, dealt round-robin::

    C0: [a0, b0, c1]    C1: [a1, b1]    C2: [a2, c0]

C1 leaves. Quotas 4 and 3, the extra to C0, which held more. Nobody is over quota: C1's a1
goes to C0 and b1 to C2; the other five partitions stay where they were::

    C0: [a0, a1, b0, c1]    C2: [a2, b1, c0]

C3 joins. Quotas 3, 2, 2, the extra to C0 again. C0 gives up a1, its second partition of
a. C2's a2 is just its share of a (3 partitions, 3 consumers) while b1 and c0 are each over
a share of b or c (2/3 of a partition); its rotation over topics gives up c0. C3 gets a1
and c0: two moves, the fewest possible::

    C0: [a0, b0, c1]    C2: [a2, b1]    C3: [a1, c0]
"""

from __future__ import annotations

import numpy as np

from spark_lag_assign.assignors.base import GroupProblem, Strategy
from spark_lag_assign.assignors.sticky_counts import general_counts, quota_counts, sticky_layout
from spark_lag_assign.assignors.sticky_rows import row_owners


def assign_codes(problem: GroupProblem) -> np.ndarray:
    if len(problem.partitions) == 0:  # (the topics column is a million objects made on first read)
        return np.zeros(0, dtype=np.int64)
    lay = sticky_layout(problem)
    kept_before = np.bincount(lay.row_pair[lay.row_pair >= 0], minlength=len(lay.pair_class)).astype(np.int64)
    per_consumer = np.bincount(lay.pair_consumer, minlength=lay.n_consumers)
    if per_consumer.max() <= 1:
        counts = quota_counts(lay, kept_before)
    else:
        counts = general_counts(lay, kept_before)
    return row_owners(lay, counts, kept_before, np.asarray(problem.lags, dtype=np.float64))


STRATEGY = Strategy(
    "sticky", "group", "KIP-54: balanced by count, then sticky", assign_codes=assign_codes,
    uses_previous=True,
)
