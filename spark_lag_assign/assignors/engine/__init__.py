"""The lag-balancing engine that ``lagsticky`` and ``drain`` share.

``model`` (the problem as integer arrays and the plan being built), ``placement`` (steps
1-4: quotas, keep and shed, placement, count balance), ``search`` (step 5: local search)
and ``runs`` (the steps in order, from scratch or from a previous plan). The steps are
described in ``spark_lag_assign.assignors.lagsticky``.
"""
