"""KIP-54 sticky assignment (seed 004). TODO(helper): implement."""

from __future__ import annotations

from spark_lag_assign.assignors.base import GroupProblem, Strategy


def assign_group(problem: GroupProblem) -> list[str]:
    raise NotImplementedError("sticky")


STRATEGY = Strategy("sticky", "group", "KIP-54: balanced by count, then sticky", assign_group=assign_group, uses_previous=True)
