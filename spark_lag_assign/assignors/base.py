"""The shapes every assignor shares: a problem in plain arrays, and the strategy record.

An assignor never sees Spark, Kafka or pandas: it gets a ``TopicProblem`` (one topic) or a
``GroupProblem`` (the whole group) and returns the owner of each row, aligned with the
problem's rows. ``spark_lag_assign.assignors.assign`` builds the problems from DataFrames,
validates, and checks the invariants of the result.

A ``GroupProblem`` also carries its rows as integer codes (``codes()``): the front end builds
them once while validating, and an assignor that works on codes (``Strategy.assign_codes``)
returns consumer codes, so a million partitions never turn into a million strings on the way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import numpy as np

from spark_lag_assign.core.subscriptions import SubscriptionIndex, run_starts


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
class Encoded:
    """The rows of a ``GroupProblem`` as codes of one ``SubscriptionIndex``."""

    index: SubscriptionIndex  # consumers and topics numbered in sorted order, who reads what
    row_topic: np.ndarray  # int64 topic code per row, ascending with the rows
    previous: np.ndarray  # int64 code of the row's previous owner (a current subscriber), -1 for none


@dataclass(frozen=True)
class GroupProblem:
    """Every partition of every subscribed topic, sorted by (topic, partition)."""

    topics: np.ndarray  # object (str), sorted with partitions
    partitions: np.ndarray  # int64
    lags: np.ndarray  # int64, >= 0
    subscriptions: Mapping[str, Sequence[str]]  # consumer -> subscribed topics (sorted), every consumer
    consumers: Sequence[str]  # all consumers, sorted
    previous: Sequence[str | None] | np.ndarray = ()  # previous owner per row (a current subscriber) or None
    seed: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)
    #: the same rows as codes, when the front end built them; ``codes()`` derives them otherwise
    encoded: Encoded | None = field(default=None, compare=False, repr=False)

    def codes(self) -> Encoded:
        """The rows as integer codes (built from the fields above if the front end did not)."""
        return self.encoded if self.encoded is not None else self._derived

    @cached_property
    def _derived(self) -> Encoded:
        topics = np.asarray(self.topics, dtype=object)
        heads = run_starts(topics)  # rows come sorted by topic: hash one name per topic
        names = topics if heads is None else topics[heads]
        index = SubscriptionIndex({c: self.subscriptions[c] for c in self.consumers}, names)
        row_topic = index.topic_codes(names)
        if heads is not None:
            row_topic = np.repeat(row_topic, np.diff(np.r_[heads, len(topics)]))
        previous = np.full(len(topics), -1, dtype=np.int64)
        unowned = isinstance(self.previous, list) and self.previous.count(None) == len(self.previous)
        if len(self.previous) == len(topics) and len(topics) and not unowned:
            named = np.asarray(self.previous, dtype=object)
            previous = index.consumer_codes(named)
            # the contract promises eligible previous owners; a stale one is treated as none
            previous[~index.permitted(previous, row_topic)] = -1
        return Encoded(index, row_topic, previous)

    def topic_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(first row, one past the last row) of each topic with rows, in row order."""
        row_topic = self.codes().row_topic
        if len(row_topic) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        starts = np.flatnonzero(np.r_[True, row_topic[1:] != row_topic[:-1]])
        return starts, np.r_[starts[1:], len(row_topic)]

    def topic_slices(self) -> list[tuple[str, slice]]:
        """(topic, row slice) for each topic, in row order."""
        codes = self.codes()
        starts, ends = self.topic_bounds()
        names = codes.index.topics[codes.row_topic[starts]]
        return [(str(t), slice(int(s), int(e))) for t, s, e in zip(names, starts.tolist(), ends.tolist())]

    def subscribers(self) -> dict[str, list[str]]:
        """topic -> its subscribers, sorted (the lists may be shared between topics: do not mutate)."""
        index = self.codes().index
        lists = [index.names[members].tolist() for members in index.class_members]
        return {str(t): lists[k] for t, k in zip(index.topics, index.topic_class.tolist()) if k >= 0}


TopicAssignor = Callable[[TopicProblem], Sequence[str]]
GroupAssignor = Callable[[GroupProblem], Sequence[str]]
#: the owner of every row of the group as a consumer code of ``problem.codes().index``
CodeAssignor = Callable[[GroupProblem], np.ndarray]


@dataclass(frozen=True)
class Strategy:
    """A named assignor. ``scope="topic"`` runs once per topic (Spark: one applyInPandas group
    per topic); ``scope="group"`` needs the whole group at once (Spark: one global stage)."""

    name: str
    scope: Literal["topic", "group"]
    summary: str
    assign_topic: TopicAssignor | None = None
    assign_group: GroupAssignor | None = None
    #: the same rule on codes, for the whole group at once: the pure path's fast form. A
    #: per-topic strategy may have one too; it must agree with ``assign_topic`` topic by topic
    assign_codes: CodeAssignor | None = None
    options: tuple[str, ...] = ()
    uses_previous: bool = False
    uses_seed: bool = False
