"""lag-sticky, the default: count-balanced per topic, lag-balanced over the whole group, sticky.

Priorities, in order (balance over stickiness, as in KIP-54):

1. Counts, a hard rule. A topic with P partitions and C readers gives each reader
   floor(P/C) or ceil(P/C) of them (its *base*, or the base plus one *extra*). Over the
   whole group, with identical subscriptions, partition counts differ by at most one; with
   different subscriptions no consumer keeps two more than a consumer that could take one
   of its extras.
2. Lag balance over the whole group, not topic by topic: the most loaded consumer as close
   as the counts allow to LB = max(total lag / consumers, largest lag), by heuristics (the
   exact problem is NP-hard): LPT placement, then local search.
3. Stickiness: given a previous plan, a partition keeps its owner unless the counts force
   it to move, or the plan's heaviest consumer carries more than (1 + tolerance) times the
   bound.

Steps (``from_scratch`` and ``from_previous`` run them in this order; the functions named
below are in ``spark_lag_assign.assignors.engine``):

1. Quotas (``distribute``, ``_sticky_quotas``). Which readers get each topic's P mod C
   extras. From scratch: water-filling, topic by topic, to the readers expecting the fewest
   partitions, then the least lag placed so far, then the smallest id; with identical
   subscriptions this alone keeps the group within one. With a previous plan: a reader that
   held more than the base *claims* an extra and claims win; then extras are handed from
   the fullest consumers to the emptiest until the counts are even, choosing handovers that
   cost the fewest moves (many at once where many are due, ``_hand_over_many``).
2. Keep and shed (``_keep``, ``_sheds``; previous plan only). A consumer holding more of a
   topic than its quota gives up the surplus, topics heaviest first: while it carries more
   than its fair share (total lag / consumers), the heaviest partition that does not take
   it below that share, then the lightest. Everything else stays.
3. Place (``_place``, ``_fill``). Topics in decreasing order of their heaviest partition;
   within a topic the unowned partitions, heaviest first, go to the readers with room in
   rounds, the least loaded reader taking the heaviest partition of each round (LPT under
   the quotas). Light topics go in batches (``_batches``, identical subscriptions only),
   each placed against the loads at its start, so that no consumer gains more than
   ``STALE`` (1/32) of the bound between two looks at the loads (a light topic counts its
   rows per consumer x its heaviest row) and no batch deals more than ``LAPS`` (2) extras
   per consumer; in a batch the extras are
   dealt along one ring of the consumers ranked as above, and a round that gives everyone
   a row is reversed every other time (a snake). A topic heavy enough to matter on its own
   is always a batch of one, placed round by round: on small groups nothing is batched.
4. Even counts (``even_counts``), where subscriptions differ: extras move from a consumer
   two partitions above another to that other, each time the partition that best evens
   their lags.
5. Improve (``Search``). Local search on the most loaded consumer, with steps that keep
   every count rule: swap two partitions of one topic; move an extra to a reader holding
   only the base of that topic and fewer partitions in all; exchange extras of two topics.
   A step is taken only if it lowers the higher load of the two consumers involved. From
   scratch it runs until the bound is met within tolerance / 4 (headroom, so that the next
   sticky runs need not move anything while lags drift). With a previous plan it runs only
   if the plan exceeds (1 + tolerance) x LB, and only down to (1 + tolerance) x what a plan
   from scratch achieves (the counts can put LB out of reach); if it gets stuck above
   that, balance wins and the plan from scratch is returned; if ``max_swaps`` stops it
   first, the plan as far as it got is kept (it moved at most two partitions a step).

Options (``assign(..., strategy="lag-sticky", tolerance=..., max_swaps=...)``):

- ``tolerance`` (0.05): the imbalance a previous plan may keep. A valid previous plan
  whose heaviest consumer is within 1 + tolerance of the bound comes back unchanged.
  Lower means better balance and more partitions moved as lags drift; 0 chases every bit
  of balance at every run. Since every moved partition restarts a pipeline's read of it,
  keep it above the drift of lags between two runs.
- ``max_swaps`` (1000): a cap on the steps of 5 per plan, to bound the time on huge
  groups (a step costs a few milliseconds at a million partitions). A sticky search that
  hits it keeps what it reached rather than falling back to a plan from scratch.

Cost: steps 1-4 are O(N log N + T x C) numpy work (N partitions, T topics, C consumers),
driven by a Python loop per batch of topics (a few hundred at most for uniform lags, one
per topic where topics are heavy), per topic whose claims on extras conflict, per
(topic, consumer) that sheds and per round of handovers, never per partition; they hold a
few T x C boolean matrices (10 MB each for 10,000 topics and 1,000 consumers). A step of 5
costs a few numpy passes over one consumer's partitions and the partners they could swap
with. A million partitions for a thousand consumers, every consumer on every topic, plan
in about 0.1 s from scratch and 0.2 s when one consumer joins (2 cores, warm).

Worked example. Consumers C0, C1, C2 read t0 (lags 60, 10, 10) and t1 (lags 50, 40, 5);
each must hold one partition of each topic. t0 holds the heaviest partition, so it goes
first: 60, 10, 10 to C0, C1, C2 (all empty, ties by id). Then t1, heaviest first to the
least loaded: 50 to C1 (10), 40 to C2 (10), 5 to C0 (60)::

    C0: [t0p0, t1p2]    65
    C1: [t0p1, t1p0]    60
    C2: [t0p2, t1p1]    50

LB is max(175 / 3, 60) = 60, but whoever holds t0p0 also holds a partition of t1, so 65
is the best the counts allow, and no step lowers it. The seeds' ``lag`` strategy gives C0
the heaviest partition of both topics: 110.

Then C3 joins. Three partitions per topic for four readers: base 0, three extras, all
claimed by their old owners, which would leave C3 with nothing; so one extra is handed to
C3 from the fullest consumers, the most loaded first: C0. Its fair share is 175 / 4 =
43.75; shedding t0p0 (60) would take it far below, shedding t1p2 (5) does not, so t1's
extra goes::

    C0: [t0p0]          60
    C1: [t0p1, t1p0]    60
    C2: [t0p2, t1p1]    50
    C3: [t1p2]           5

One partition moved, the least C3 can get (6 partitions for 4 consumers); the heaviest
consumer carries 60 = LB, so nothing else moves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from spark_lag_assign.assignors.base import GroupProblem, Strategy
from spark_lag_assign.assignors.engine import build_group, from_previous, from_scratch, previous_owners
from spark_lag_assign.errors import StrategyError

#: the options ``assign(..., strategy="lag-sticky", **options)`` takes, with their defaults
DEFAULTS: dict[str, float | int] = {"tolerance": 0.05, "max_swaps": 1_000}


def options(raw: Mapping[str, Any]) -> tuple[float, int]:
    """(tolerance, max_swaps) from the strategy options, defaults filled in; StrategyError if invalid."""
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        raise StrategyError(f"lag-sticky takes no option {', '.join(unknown)}; it takes: {', '.join(DEFAULTS)}")
    tolerance = raw.get("tolerance", DEFAULTS["tolerance"])
    max_swaps = raw.get("max_swaps", DEFAULTS["max_swaps"])
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not tolerance >= 0:
        raise StrategyError(f"lag-sticky: tolerance must be a number >= 0, not {tolerance!r}")
    if isinstance(max_swaps, bool) or not isinstance(max_swaps, int) or max_swaps < 0:
        raise StrategyError(f"lag-sticky: max_swaps must be an integer >= 0, not {max_swaps!r}")
    return float(tolerance), int(max_swaps)


def assign_codes(problem: GroupProblem) -> np.ndarray:
    """The owner of every row as a consumer code (the consumers' sorted order, which is
    ``problem.codes().index``'s): no consumer names are made or looked up on the way."""
    tolerance, max_swaps = options(problem.options)
    consumers = list(problem.consumers)
    if len(problem.partitions) == 0:
        return np.zeros(0, dtype=np.int64)
    group = build_group(problem, consumers)
    previous = previous_owners(group, problem, consumers)
    if (previous >= 0).any():
        state = from_previous(group, previous, tolerance, max_swaps)
    else:
        state = from_scratch(group, tolerance, max_swaps)
    return state.owner


STRATEGY = Strategy(
    "lag-sticky", "group", "count-balanced, lag-balanced across the group, sticky", assign_codes=assign_codes,
    options=tuple(DEFAULTS), uses_previous=True,
)
