"""spark-lag-assign: plan which consumer reads which Kafka partitions, so that lag is spread
evenly across a group; Spark runs the plan, pipelines feed it to the Kafka source's ``assign``.

The pure core (lag rules, assignors, invariants) imports no Spark.
"""

from __future__ import annotations

from spark_lag_assign.assignors import DEFAULT_STRATEGY, STRATEGIES, assign, unassigned
from spark_lag_assign.errors import (
    ConfigError,
    InputError,
    InvariantError,
    KafkaReadError,
    PlanError,
    SparkLagAssignError,
    StrategyError,
)
from spark_lag_assign.invariants import check_assignment
from spark_lag_assign.lag import compute_lag

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_STRATEGY",
    "STRATEGIES",
    "ConfigError",
    "InputError",
    "InvariantError",
    "KafkaReadError",
    "PlanError",
    "SparkLagAssignError",
    "StrategyError",
    "assign",
    "check_assignment",
    "compute_lag",
    "unassigned",
]
