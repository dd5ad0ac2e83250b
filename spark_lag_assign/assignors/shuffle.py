"""Seeded random consumer order per topic (seeds 002, 003). TODO(helper): implement."""

from __future__ import annotations

from spark_lag_assign.assignors.base import Strategy, TopicProblem


def assign_topic(problem: TopicProblem) -> list[str]:
    raise NotImplementedError("shuffle")


STRATEGY = Strategy("shuffle", "topic", "consumers in a seeded random order per topic", assign_topic=assign_topic, uses_seed=True)
