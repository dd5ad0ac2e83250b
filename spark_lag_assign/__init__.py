"""spark-lag-assign: plan which consumer reads which Kafka partitions, so that lag is spread
evenly across a group; Spark runs the plan, pipelines feed it to the Kafka source's ``assign``.

The pure core (lag rules, assignors, invariants) imports no Spark.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from spark_lag_assign.assignors import DEFAULT_STRATEGY, STRATEGIES, assign, unassigned
    from spark_lag_assign.consume import AssignedStream, PlanFollower, read_assigned
    from spark_lag_assign.core.invariants import check_assignment
    from spark_lag_assign.core.lag import compute_lag
    from spark_lag_assign.plan.document import PlanFormatError, parse_plan
    from spark_lag_assign.store import ClaimFencedError, PublishFencedError, StoreError, open_store

__version__ = "0.1.0"

#: the public names, each imported from its module on first use: a pandas-UDF worker that
#: runs the lag rules (``spark_lag_assign.core.lag``) then loads neither the assignors nor
#: pydantic (a few hundred ms per worker), and the consuming side needs kafka-python only
#: when it is used
_LAZY = {
    **dict.fromkeys(("DEFAULT_STRATEGY", "STRATEGIES", "assign", "unassigned"), "assignors"),
    **dict.fromkeys(("read_assigned", "PlanFollower", "AssignedStream"), "consume"),
    "check_assignment": "invariants",
    "compute_lag": "lag",
    **dict.fromkeys(("PlanFormatError", "parse_plan"), "document"),
    **dict.fromkeys(("ClaimFencedError", "PublishFencedError", "StoreError", "open_store"), "store"),
}


def __getattr__(name: str) -> Any:
    module: ModuleType
    where = _LAZY.get(name)
    if where == "assignors":
        from spark_lag_assign import assignors as module
    elif where == "consume":
        from spark_lag_assign import consume as module
    elif where == "invariants":
        from spark_lag_assign.core import invariants as module
    elif where == "lag":
        from spark_lag_assign.core import lag as module
    elif where == "document":
        from spark_lag_assign.plan import document as module
    elif where == "store":
        from spark_lag_assign import store as module
    else:
        raise AttributeError(f"module 'spark_lag_assign' has no attribute {name!r}")
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


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
