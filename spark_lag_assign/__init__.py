"""spark-lag-assign: plan which consumer reads which Kafka partitions, so that lag is spread
evenly across a group; Spark runs the plan, pipelines feed it to the Kafka source's ``assign``.

The pure core (lag rules, assignors, invariants) imports no Spark.
"""

from __future__ import annotations

from typing import Any

from spark_lag_assign.assignors import DEFAULT_STRATEGY, STRATEGIES, assign, unassigned
from spark_lag_assign.errors import (
    CommitFencedError,
    ConfigError,
    ConsumerNotInPlanError,
    HandoverTimeoutError,
    InputError,
    InvariantError,
    KafkaCommitError,
    KafkaReadError,
    NothingAssignedError,
    PlanError,
    SparkLagAssignError,
    StrategyError,
)
from spark_lag_assign.invariants import check_assignment
from spark_lag_assign.lag import compute_lag
from spark_lag_assign.planformat import PlanFormatError, parse_plan
from spark_lag_assign.store import ClaimFencedError, PublishFencedError, StoreError, open_store

__version__ = "0.1.0"

#: the consuming side, imported on first use: it needs kafka-python and, when run, Spark
_STREAM_NAMES = ("read_assigned", "PlanFollower", "AssignedStream")


def __getattr__(name: str) -> Any:
    if name in _STREAM_NAMES:
        from spark_lag_assign import consume

        return getattr(consume, name)
    raise AttributeError(f"module 'spark_lag_assign' has no attribute {name!r}")


__all__ = [
    "DEFAULT_STRATEGY",
    "STRATEGIES",
    "AssignedStream",
    "ClaimFencedError",
    "CommitFencedError",
    "ConfigError",
    "ConsumerNotInPlanError",
    "HandoverTimeoutError",
    "InputError",
    "InvariantError",
    "KafkaCommitError",
    "KafkaReadError",
    "NothingAssignedError",
    "PlanError",
    "PlanFollower",
    "PlanFormatError",
    "PublishFencedError",
    "SparkLagAssignError",
    "StoreError",
    "StrategyError",
    "assign",
    "check_assignment",
    "compute_lag",
    "open_store",
    "parse_plan",
    "read_assigned",
    "unassigned",
]
