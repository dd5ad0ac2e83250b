"""The lag-balancing engine's two runs: a plan from scratch and one from a previous plan,
each its steps in order (see ``spark_lag_assign.assignors.lagsticky``)."""

from __future__ import annotations

import numpy as np

from spark_lag_assign.assignors.engine.model import Group, State
from spark_lag_assign.assignors.engine.placement import distribute, even_counts, move_extra
from spark_lag_assign.assignors.engine.search import Search


def from_scratch(group: Group, tolerance: float, max_swaps: int) -> State:
    """A plan from scratch, improved until within a quarter of the tolerance of the bound:
    headroom so that the next runs, sticky, need not move anything while lags drift a little."""
    state = State.begin(group, np.full(len(group.lag), -1, dtype=np.int64))
    distribute(group, state, sticky=False)
    if not group.identical:
        even_counts(group, state.count, state.extra, state.load, *move_extra(group, state))
    improve(group, state, (1 + tolerance / 4) * group.lower_bound, max_swaps)
    return state


def from_previous(group: Group, previous: np.ndarray, tolerance: float, max_swaps: int) -> State:
    """The previous plan with the count rules restored (step 1-3); improved (step 5) only if
    its heaviest consumer carries more than 1 + tolerance times the bound, and then only down
    to 1 + tolerance times what a plan from scratch achieves (the counts can put the bound
    out of reach). If the search gets stuck above that, balance wins: the plan from scratch
    is returned. If ``max_swaps`` stops it first, the plan as far as it got is returned: it
    only ever lowered the heaviest load, and it moved at most two partitions a step beyond
    what the counts forced, where the plan from scratch would move most of them."""
    state = State.begin(group, previous)
    distribute(group, state, sticky=True)
    limit = (1 + tolerance) * group.lower_bound
    if group.peak(state.load) <= limit:
        return state
    fresh = from_scratch(group, tolerance, max_swaps)
    limit = max(limit, (1 + tolerance) * group.peak(fresh.load))
    taken = improve(group, state, limit, max_swaps)
    if group.peak(state.load) <= limit or taken >= max_swaps:
        return state
    return fresh


def improve(group: Group, state: State, limit: float, max_swaps: int) -> int:
    """Step 5, then step 4 again where subscriptions differ: a move of the search can leave
    a consumer two above another that could take one of its extras. Returns the steps taken."""
    taken = Search(group, state).run(limit, max_swaps)
    if not group.identical:
        even_counts(group, state.count, state.extra, state.load, *move_extra(group, state))
    return taken
