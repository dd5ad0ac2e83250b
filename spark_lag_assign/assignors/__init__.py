"""The assignor library: every strategy of README's "Strategies" as a pure, deterministic function.

One module per strategy (``range``, ``roundrobin``, ``lagbased``, ``shuffle``, ``sticky``,
``lagsticky``, ``drain``), the problem types they share (``base``), and the front end that
turns a DataFrame of lags into owners and back (``frontend``), whose public names are
re-exported here. Nothing here imports Spark or talks to Kafka.
"""

from spark_lag_assign.assignors.base import GroupProblem, Strategy
from spark_lag_assign.assignors.frontend import (
    ASSIGNMENT_COLUMNS,
    DEFAULT_STRATEGY,
    LIMITS,
    STRATEGIES,
    assign,
    get_strategy,
    owners,
    problem,
    run,
    run_codes,
    unassigned,
    validate_lags,
)
from spark_lag_assign.core.previous import previous_codes
from spark_lag_assign.core.subscriptions import validate_subscriptions

__all__ = [
    "ASSIGNMENT_COLUMNS",
    "DEFAULT_STRATEGY",
    "LIMITS",
    "STRATEGIES",
    "GroupProblem",
    "Strategy",
    "assign",
    "get_strategy",
    "owners",
    "previous_codes",
    "problem",
    "run",
    "run_codes",
    "unassigned",
    "validate_lags",
    "validate_subscriptions",
]
