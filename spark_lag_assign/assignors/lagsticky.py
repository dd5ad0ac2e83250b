"""lag-sticky, the default. TODO(helper): implement."""

from __future__ import annotations

from spark_lag_assign.assignors.base import GroupProblem, Strategy


def assign_group(problem: GroupProblem) -> list[str]:
    raise NotImplementedError("lag-sticky")


STRATEGY = Strategy(
    "lag-sticky", "group", "count-balanced, lag-balanced across the group, sticky", assign_group=assign_group,
    uses_previous=True,
)
