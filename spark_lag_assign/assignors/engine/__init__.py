"""The lag-balancing engine that ``lagsticky`` and ``drain`` share.

It balances integer loads (lags, or drain's weights) over consumers under lag-sticky's
count rules; the steps are described in ``spark_lag_assign.assignors.lagsticky``. Modules:
``model`` (the problem as integer arrays and the plan being built), ``placement`` (steps
1-4: quotas, keep and shed, placement, count balance), ``search`` (step 5: local search)
and ``runs`` (the steps in order, from scratch or from a previous plan).

The names a strategy uses:

- ``Group``: the problem as integer arrays (rows by topic and partition, consumers by id),
  with optional consumer speeds; ``build_group(problem, consumers, weights=, speed=)``
  makes one from a ``GroupProblem``.
- ``State``: a plan being built (owner, loads, counts, who holds each topic's extras);
  ``State.begin(group, previous)`` starts one from owner codes (-1: none).
- ``previous_owners(group, problem, consumers)``: the previous plan's owner of every row
  as a consumer code, -1 where there is none or it no longer reads the topic.
- ``from_scratch(group, tolerance, max_swaps)`` and ``from_previous(group, previous,
  tolerance, max_swaps)``: a whole plan, steps 1-5 in order.
- ``distribute(group, state, sticky)``: steps 1-3 alone; ``improve(group, state, limit,
  max_swaps)``: step 5 (then step 4 where subscriptions differ), returning the steps taken;
  ``Search``: step 5's local search itself.
- ``sum_by(index, values, size)``: exact int64 sums by consumer.
"""

from spark_lag_assign.assignors.engine.model import Group, State, build_group, previous_owners, sum_by
from spark_lag_assign.assignors.engine.placement import distribute
from spark_lag_assign.assignors.engine.runs import from_previous, from_scratch, improve
from spark_lag_assign.assignors.engine.search import Search

__all__ = [
    "Group",
    "Search",
    "State",
    "build_group",
    "distribute",
    "from_previous",
    "from_scratch",
    "improve",
    "previous_owners",
    "sum_by",
]
