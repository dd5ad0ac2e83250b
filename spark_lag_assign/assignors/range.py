"""Kafka's RangeAssignor, exactly (seed 003).

Per topic, independently: partitions in numeric order, the topic's subscribers in
lexicographic order; each gets ``P // C`` consecutive partitions and the first ``P % C``
get one more. Two consumers C0, C1 and topics t0, t1 of three partitions each give::

    C0: [t0p0, t0p1, t1p0, t1p1]
    C1: [t0p2, t1p2]

The remainder lands on the same first consumers for every topic: the imbalance of seed 002.
"""

from __future__ import annotations

from spark_lag_assign.assignors.base import Strategy, TopicProblem


def assign_topic(problem: TopicProblem) -> list[str]:
    consumers = problem.consumers
    per_consumer, extra = divmod(len(problem.partitions), len(consumers))
    owners: list[str] = []
    for i, consumer in enumerate(consumers):
        owners.extend([consumer] * (per_consumer + (1 if i < extra else 0)))
    return owners


STRATEGY = Strategy("range", "topic", "Kafka's RangeAssignor: per topic, consecutive blocks", assign_topic=assign_topic)
