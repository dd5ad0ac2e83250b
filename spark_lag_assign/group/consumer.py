"""Joining a group safely with kafka-python 3.0.12.

kafka-python 3.0.12 can abandon a leader's completed join: ``join_group_async`` loops
``while need_rejoin()``, and a leader rejoining because its first assignment was made
without the topic's metadata stops "needing" the rejoin as soon as its in-flight join has
run ``assign()`` (which records the metadata it used). If ``poll(timeout_ms)`` expires
between that ``assign()`` and the SyncGroup response, the next poll finds nothing to do,
never applies the assignment, and leaves heartbeats disabled: the broker evicts the
leader a session timeout later. Measured here: three consumers with a 200 ms poll formed
their group in about half the runs with an assignor taking 40 ms, in four of five with
kafka-python's own RangePartitionAssignor, and in every run once the topics' metadata was
loaded before the first poll, which is what ``subscribe`` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def subscribe(consumer: Any, topics: Iterable[str], listener: Any = None) -> set[str]:
    """``consumer.subscribe(topics, listener)``, then load the cluster's topic metadata (one
    blocking round trip on the calling thread) so the first rebalance sees every partition.

    Returns the subscribed topics the cluster does not know (yet).
    """
    wanted = sorted(set(topics))
    consumer.subscribe(wanted, listener=listener)
    known = consumer.topics()  # a full metadata fetch: the coordinator snapshots it before joining
    return set(wanted) - set(known)
