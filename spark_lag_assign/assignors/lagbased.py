"""The LagBasedPartitionAssignor of seeds 000 and 001, exactly.

Per topic, independently: partitions in decreasing lag (ties: lower partition id first);
each goes to the subscriber with the fewest partitions of this topic so far, ties to the
least lag assigned from this topic, then to the smallest consumer id. Counts per topic
therefore differ by at most one. Seed 000: C0, C1 and t0 with lags 100,000 / 50,000 /
60,000 give::

    C0: [t0p0]          100,000
    C1: [t0p1, t0p2]    110,000

Totals restart for every topic, so with many topics the biggest partitions of each topic
all go to the same first consumer; ``lag-sticky`` balances across the whole group.
"""

from __future__ import annotations

import heapq

import numpy as np

from spark_lag_assign.assignors.base import Strategy, TopicProblem


def assign_topic(problem: TopicProblem) -> list[str]:
    lags = problem.lags
    # stable sort on -lag keeps ascending partition order among equal lags
    order = np.argsort(-lags, kind="stable")
    heap = [(0, 0, consumer) for consumer in problem.consumers]  # (count, lag, id)
    heapq.heapify(heap)
    owners: list[str] = [""] * len(lags)
    for row in order.tolist():
        count, total, consumer = heap[0]
        owners[row] = consumer
        heapq.heapreplace(heap, (count + 1, total + int(lags[row]), consumer))
    return owners


STRATEGY = Strategy(
    "lag", "topic", "the seeds' LagBasedPartitionAssignor: per topic, by decreasing lag", assign_topic=assign_topic
)
