"""The assignors' rules as their sources state them, topic by topic: the oracles that the
library's one form (``Strategy.assign_codes``, the whole group on codes at once) is tested
against. Slow and plain on purpose; nothing in the library calls them.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from spark_lag_assign.assignors.base import GroupProblem
from spark_lag_assign.assignors.shuffle import topic_rng


@dataclass(frozen=True)
class TopicProblem:
    """One topic: its partitions (ascending), their lags, and its subscribers (sorted)."""

    topic: str
    partitions: np.ndarray  # int64, ascending
    lags: np.ndarray  # int64, >= 0, aligned with partitions
    consumers: Sequence[str]  # the topic's subscribers, sorted, never empty
    seed: int = 0


TopicRule = Callable[[TopicProblem], list[str]]


def range_topic(problem: TopicProblem) -> list[str]:
    """Kafka's RangeAssignor: consecutive blocks, the first ``P % C`` subscribers one more."""
    per_consumer, extra = divmod(len(problem.partitions), len(problem.consumers))
    owners: list[str] = []
    for rank, consumer in enumerate(problem.consumers):
        owners += [consumer] * (per_consumer + (1 if rank < extra else 0))
    return owners


def lag_topic(problem: TopicProblem) -> list[str]:
    """Seeds 000/001: partitions by decreasing lag (ties: lower id first), each to the
    subscriber with the fewest so far, then the least lag so far, then the smallest id."""
    order = np.argsort(-problem.lags, kind="stable")
    heap = [(0, 0, consumer) for consumer in problem.consumers]  # (count, lag, id)
    heapq.heapify(heap)
    owners = [""] * len(problem.lags)
    for row in order.tolist():
        count, total, consumer = heap[0]
        owners[row] = consumer
        heapq.heapreplace(heap, (count + 1, total + int(problem.lags[row]), consumer))
    return owners


def shuffle_topic(problem: TopicProblem) -> list[str]:
    """Range blocks over the subscribers in the order ``topic_rng(seed, topic)`` draws."""
    consumers = sorted(problem.consumers)
    order = topic_rng(problem.seed, problem.topic).permutation(len(consumers))
    return range_topic(TopicProblem(problem.topic, problem.partitions, problem.lags, [consumers[i] for i in order]))


def per_topic(rule: TopicRule, problem: GroupProblem) -> list[str]:
    """The owner of every row of ``problem``, ``rule`` run on each topic in row order."""
    subscribers = problem.subscribers()
    owners: list[str] = []
    for topic, rows in problem.topic_slices():
        owners += rule(TopicProblem(topic, problem.partitions[rows], problem.lags[rows], subscribers[topic], problem.seed))
    return owners


def ring_walk(problem: GroupProblem) -> list[str]:
    """Kafka's RoundRobinAssignor for any subscriptions: one pointer walks the sorted
    consumers as a ring, topic after topic, skipping those that do not read the topic."""
    consumers = sorted(problem.consumers)
    subscribers = problem.subscribers()
    owners: list[str] = []
    pointer = 0
    for topic, rows in problem.topic_slices():
        readers = set(subscribers[topic])
        for _ in range(rows.stop - rows.start):
            while consumers[pointer] not in readers:
                pointer = (pointer + 1) % len(consumers)
            owners.append(consumers[pointer])
            pointer = (pointer + 1) % len(consumers)
    return owners


#: the per-topic strategies' oracles, by strategy name
TOPIC_RULES: dict[str, TopicRule] = {"range": range_topic, "lag": lag_topic, "shuffle": shuffle_topic}
