"""The shapes every assignor shares: a problem in plain arrays, and the strategy record.

An assignor never sees Spark, Kafka or pandas: it gets a ``TopicProblem`` (one topic) or a
``GroupProblem`` (the whole group) and returns the owner of each row, aligned with the
problem's rows. ``spark_lag_assign.assignors.assign`` builds the problems from DataFrames,
validates, and checks the invariants of the result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from spark_lag_assign.subscriptions import distinct


@dataclass(frozen=True)
class TopicProblem:
    """One topic: its partitions (ascending), their lags, and its subscribers (sorted)."""

    topic: str
    partitions: np.ndarray  # int64, ascending
    lags: np.ndarray  # int64, >= 0, aligned with partitions
    consumers: Sequence[str]  # the topic's subscribers, sorted, never empty
    previous: Sequence[str | None] = ()  # previous owner per partition (a current subscriber) or None
    seed: int = 0


@dataclass(frozen=True)
class GroupProblem:
    """Every partition of every subscribed topic, sorted by (topic, partition)."""

    topics: np.ndarray  # object (str), sorted with partitions
    partitions: np.ndarray  # int64
    lags: np.ndarray  # int64, >= 0
    subscriptions: Mapping[str, Sequence[str]]  # consumer -> subscribed topics (sorted), every consumer
    consumers: Sequence[str]  # all consumers, sorted
    previous: Sequence[str | None] = ()  # previous owner per row (a current subscriber) or None
    seed: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)

    def topic_slices(self) -> list[tuple[str, slice]]:
        """(topic, row slice) for each topic, in row order."""
        if len(self.topics) == 0:
            return []
        starts = np.flatnonzero(np.r_[True, self.topics[1:] != self.topics[:-1]])
        ends = np.r_[starts[1:], len(self.topics)]
        return [(str(self.topics[s]), slice(int(s), int(e))) for s, e in zip(starts, ends)]

    def subscribers(self) -> dict[str, list[str]]:
        """topic -> its subscribers, sorted (the lists may be shared between topics: do not mutate)."""
        readers: dict[str, list[list[str]]] = {}
        for topic_list, members in distinct({c: self.subscriptions[c] for c in self.consumers}).items():
            for topic in topic_list:
                readers.setdefault(topic, []).append(members)
        return {t: groups[0] if len(groups) == 1 else sorted(c for g in groups for c in g) for t, groups in readers.items()}


TopicAssignor = Callable[[TopicProblem], Sequence[str]]
GroupAssignor = Callable[[GroupProblem], Sequence[str]]


@dataclass(frozen=True)
class Strategy:
    """A named assignor. ``scope="topic"`` runs once per topic (Spark: one applyInPandas group
    per topic); ``scope="group"`` needs the whole group at once (Spark: one global stage)."""

    name: str
    scope: Literal["topic", "group"]
    summary: str
    assign_topic: TopicAssignor | None = None
    assign_group: GroupAssignor | None = None
    options: tuple[str, ...] = ()
    uses_previous: bool = False
    uses_seed: bool = False
