"""Kafka's RoundRobinAssignor, exactly (seed 003). TODO(helper): implement."""

from __future__ import annotations

from spark_lag_assign.assignors.base import GroupProblem, Strategy


def assign_group(problem: GroupProblem) -> list[str]:
    raise NotImplementedError("roundrobin")


STRATEGY = Strategy("roundrobin", "group", "Kafka's RoundRobinAssignor", assign_group=assign_group)
