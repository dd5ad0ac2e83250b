"""kafka-python's own assignors, called directly on synthetic input: the independent
implementations our range, roundrobin and sticky strategies are checked and benchmarked
against. Plain data in (as for ``sla.assign``), plain data out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.structs import TopicPartition


class _Cluster:
    """The two questions kafka-python's assignors ask of cluster metadata."""

    def __init__(self, partitions: Mapping[str, Sequence[int]]) -> None:
        self._partitions = {t: set(ps) for t, ps in partitions.items()}

    def topics(self) -> set[str]:
        return set(self._partitions)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return self._partitions.get(topic)


@dataclass
class _Member:
    member_id: str
    metadata: object
    group_instance_id: str | None = None


def _partitions(lags: pd.DataFrame) -> dict[str, list[int]]:
    return {t: sorted(int(p) for p in g["partition"]) for t, g in lags.groupby("topic")}


def _frame(assignment: Mapping[str, object], lags: pd.DataFrame) -> pd.DataFrame:
    rows = [
        (member, topic, int(p))
        for member, a in assignment.items()
        for topic, partitions in a.assignment  # type: ignore[attr-defined]
        for p in partitions
    ]
    out = pd.DataFrame(rows, columns=["consumer", "topic", "partition"])
    out = out.merge(lags[["topic", "partition", "lag"]], on=["topic", "partition"], how="left")
    return out.sort_values(["consumer", "topic", "partition"]).reset_index(drop=True)


def _members(assignor: type, subscriptions: Mapping[str, Sequence[str]]) -> list[_Member]:
    return [_Member(c, assignor.metadata(sorted(topics))) for c, topics in sorted(subscriptions.items())]


def kafka_python_range(lags: pd.DataFrame, subscriptions: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    cluster = _Cluster(_partitions(lags))
    return _frame(RangePartitionAssignor.assign(cluster, _members(RangePartitionAssignor, subscriptions)), lags)


def kafka_python_roundrobin(lags: pd.DataFrame, subscriptions: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """Only for identical subscriptions: kafka-python 3.0.12 crashes when they differ."""
    cluster = _Cluster(_partitions(lags))
    members = _members(RoundRobinPartitionAssignor, subscriptions)
    return _frame(RoundRobinPartitionAssignor.assign(cluster, members), lags)


class KafkaPythonSticky:
    """kafka-python's StickyPartitionAssignor across a sequence of rebalances.

    Each consumer's previous assignment travels in its subscription's user data, as in a
    real group; ``assign`` takes the previous plan as a DataFrame[consumer, topic, partition].
    """

    def assign(
        self,
        lags: pd.DataFrame,
        subscriptions: Mapping[str, Sequence[str]],
        previous: pd.DataFrame | None = None,
        generation: int = 1,
    ) -> pd.DataFrame:
        owned: dict[str, list[TopicPartition]] = {}
        if previous is not None:
            for c, t, p in zip(previous["consumer"], previous["topic"], previous["partition"]):
                owned.setdefault(c, []).append(TopicPartition(t, int(p)))
        members = [
            _Member(
                c,
                StickyPartitionAssignor._metadata(sorted(topics), owned.get(c), generation if c in owned else -1),
            )
            for c, topics in sorted(subscriptions.items())
        ]
        result = StickyPartitionAssignor().assign(_Cluster(_partitions(lags)), members)
        return _frame(result, lags)
