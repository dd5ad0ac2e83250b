"""Lag-aware assignors inside kafka-python's consumer-group protocol: the seeds' own form.

    from kafka import KafkaConsumer
    from spark_lag_assign.group import GroupLagMonitor, LagStickyAssignor, subscribe

    monitor = GroupLagMonitor("broker:9092", "orders", topics=["orders"], reset="earliest")
    consumer = KafkaConsumer(
        bootstrap_servers="broker:9092", group_id="orders", auto_offset_reset="earliest",
        partition_assignment_strategy=[LagStickyAssignor(monitor)],
    )
    subscribe(consumer, ["orders"])  # subscribes, then loads metadata (why: spark_lag_assign.group.consumer)

The group leader plans with the same pure strategies as the Spark planner
(``spark_lag_assign.assignors``), using the lag snapshot the monitor keeps fresh in the
background; every member reports what it owns so stickiness survives a leader change.
"""

from __future__ import annotations

from spark_lag_assign.group.assignor import (
    CooperativeLagAssignor,
    CooperativeLagStickyAssignor,
    CooperativeStickyAssignor,
    GroupAssignor,
    LagAssignor,
    LagStickyAssignor,
    RangeAssignor,
    Rebalance,
    RoundRobinAssignor,
    StickyAssignor,
    assignor_class,
)
from spark_lag_assign.group.consumer import subscribe
from spark_lag_assign.group.lagsource import (
    AdminOffsetsReader,
    GroupLagMonitor,
    LagSnapshot,
    LagSource,
    StaticLags,
)
from spark_lag_assign.group.memberdata import MemberDataError, decode_user_data, encode_user_data

__all__ = [
    "AdminOffsetsReader",
    "CooperativeLagAssignor",
    "CooperativeLagStickyAssignor",
    "CooperativeStickyAssignor",
    "GroupAssignor",
    "GroupLagMonitor",
    "LagAssignor",
    "LagSnapshot",
    "LagSource",
    "LagStickyAssignor",
    "MemberDataError",
    "RangeAssignor",
    "Rebalance",
    "RoundRobinAssignor",
    "StaticLags",
    "StickyAssignor",
    "assignor_class",
    "decode_user_data",
    "encode_user_data",
    "subscribe",
]
