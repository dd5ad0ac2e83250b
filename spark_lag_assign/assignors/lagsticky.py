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

Steps (``_fresh`` and ``_sticky`` run them in this order):

1. Quotas (``_distribute``, ``_sticky_quotas``). Which readers get each topic's P mod C
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
4. Even counts (``_even_counts``), where subscriptions differ: extras move from a consumer
   two partitions above another to that other, each time the partition that best evens
   their lags.
5. Improve (``_Search``). Local search on the most loaded consumer, with steps that keep
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

from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from spark_lag_assign.assignors.base import GroupProblem, Strategy
from spark_lag_assign.errors import InputError, StrategyError

#: the options ``assign(..., strategy="lag-sticky", **options)`` takes, with their defaults
DEFAULTS: dict[str, float | int] = {"tolerance": 0.05, "max_swaps": 1_000}


@dataclass(frozen=True)
class _Group:
    """The problem in integer arrays: rows sorted by (topic, partition), consumers by id."""

    lag: np.ndarray  # int64 per row
    topic: np.ndarray  # int64 topic index per row
    start: np.ndarray  # first row of each topic
    stop: np.ndarray  # one past the last row of each topic
    reads: np.ndarray  # bool (topics, consumers): consumer reads topic
    readers: list[np.ndarray]  # per topic, the indices of its readers (ascending)
    identical: bool  # every consumer reads every topic with rows
    lower_bound: float  # max(total lag / consumers, largest lag): the metric's LB (in times where speed is set)
    #: None: every consumer equal, loads compared as they are (lag-sticky). Otherwise each
    #: consumer's relative speed (``drain``): a load counts as ``load / speed``, its *time*
    speed: np.ndarray | None = None

    @property
    def consumers(self) -> int:
        return self.reads.shape[1]

    def times(self, load: np.ndarray, who: np.ndarray | None = None) -> np.ndarray:
        """``load`` (of the consumers ``who``, or of all) as times; the loads themselves without speeds."""
        if self.speed is None:
            return load
        return load / (self.speed if who is None else self.speed[who])

    def peak(self, load: np.ndarray) -> float:
        """The largest time of any consumer."""
        return float(self.times(load).max())

    def fair(self, load: np.ndarray) -> np.ndarray | float:
        """Each consumer's fair share of the total load: equal, or in proportion to its speed."""
        total = load.sum()
        if self.speed is None:
            return total / self.consumers
        return total * self.speed / self.speed.sum()


@dataclass
class _State:
    owner: np.ndarray  # int64 consumer index per row (-1: not placed yet)
    previous: np.ndarray  # int64 previous owner per row (-1: none or no longer valid)
    load: np.ndarray  # int64 lag per consumer
    count: np.ndarray  # int64 partitions per consumer
    extra: np.ndarray  # bool (topics, consumers): consumer holds ceil(P/C) of the topic, not floor

    @classmethod
    def begin(cls, group: _Group, previous: np.ndarray) -> _State:
        """Every row with its previous owner, loads counted from them; counts come later."""
        held = previous >= 0
        return cls(
            owner=previous.copy(),
            previous=previous,
            load=_sum_by(previous[held], group.lag[held], group.consumers),
            count=np.zeros(group.consumers, dtype=np.int64),
            extra=np.zeros(group.reads.shape, dtype=bool),
        )


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
    group = _group(problem, consumers)
    previous = _previous(group, problem, consumers)
    if (previous >= 0).any():
        state = _sticky(group, previous, tolerance, max_swaps)
    else:
        state = _fresh(group, tolerance, max_swaps)
    return state.owner


def assign_group(problem: GroupProblem) -> list[str]:
    return np.asarray(list(problem.consumers), dtype=object)[assign_codes(problem)].tolist()


def _fresh(group: _Group, tolerance: float, max_swaps: int) -> _State:
    """A plan from scratch, improved until within a quarter of the tolerance of the bound:
    headroom so that the next runs, sticky, need not move anything while lags drift a little."""
    state = _State.begin(group, np.full(len(group.lag), -1, dtype=np.int64))
    _distribute(group, state, sticky=False)
    if not group.identical:
        _even_counts(group, state.count, state.extra, state.load, *_move_extra(group, state))
    _improve(group, state, (1 + tolerance / 4) * group.lower_bound, max_swaps)
    return state


def _sticky(group: _Group, previous: np.ndarray, tolerance: float, max_swaps: int) -> _State:
    """The previous plan with the count rules restored (step 1-3); improved (step 5) only if
    its heaviest consumer carries more than 1 + tolerance times the bound, and then only down
    to 1 + tolerance times what a plan from scratch achieves (the counts can put the bound
    out of reach). If the search gets stuck above that, balance wins: the plan from scratch
    is returned. If ``max_swaps`` stops it first, the plan as far as it got is returned: it
    only ever lowered the heaviest load, and it moved at most two partitions a step beyond
    what the counts forced, where the plan from scratch would move most of them."""
    state = _State.begin(group, previous)
    _distribute(group, state, sticky=True)
    limit = (1 + tolerance) * group.lower_bound
    if group.peak(state.load) <= limit:
        return state
    fresh = _fresh(group, tolerance, max_swaps)
    limit = max(limit, (1 + tolerance) * group.peak(fresh.load))
    taken = _improve(group, state, limit, max_swaps)
    if group.peak(state.load) <= limit or taken >= max_swaps:
        return state
    return fresh


def _improve(group: _Group, state: _State, limit: float, max_swaps: int) -> int:
    """Step 5, then step 4 again where subscriptions differ: a move of the search can leave
    a consumer two above another that could take one of its extras. Returns the steps taken."""
    taken = _Search(group, state).run(limit, max_swaps)
    if not group.identical:
        _even_counts(group, state.count, state.extra, state.load, *_move_extra(group, state))
    return taken


# ---------------------------------------------------------------------------------------------
# the problem as arrays


def _group(
    problem: GroupProblem, consumers: list[str], weights: np.ndarray | None = None, speed: np.ndarray | None = None
) -> _Group:
    """The problem as arrays; ``weights`` (int64 per row) replace the lags, ``speed`` makes
    consumers unequal (see ``_Group.speed``)."""
    lag = np.asarray(problem.lags if weights is None else weights, dtype=np.int64)
    # loads are exact int64 sums; refuse totals that could wrap rather than plan on garbage
    if float(lag.sum(dtype=np.float64)) >= 2.0**62:
        raise InputError("lag-sticky: the total lag exceeds 2^62 messages; loads would overflow")
    # each topic's rows from the codes (comparing a million names would cost 10 ms)
    codes = problem.codes()
    start, stop = problem.topic_bounds()
    names = [str(t) for t in codes.index.topics[codes.row_topic[start]]]
    topic = np.repeat(np.arange(len(start), dtype=np.int64), stop - start)
    n_consumers = len(consumers)
    lists = [problem.subscriptions[c] for c in consumers]
    # assign() hands identical subscriptions as one shared list: identity settles most of them
    first = list(lists[0])
    identical = all(s is lists[0] or list(s) == first for s in lists[1:])
    if identical:
        reads = np.ones((len(start), n_consumers), dtype=bool)
        everyone = np.arange(n_consumers, dtype=np.int64)
        readers = [everyone] * len(start)
    else:
        index = {t: i for i, t in enumerate(names)}
        reads = np.zeros((len(start), n_consumers), dtype=bool)
        for c, consumer in enumerate(consumers):
            for t in problem.subscriptions[consumer]:
                if t in index:
                    reads[index[t], c] = True
        readers = [np.flatnonzero(row) for row in reads]
    total = int(lag.sum())
    if speed is None:
        lower_bound = max(total / n_consumers, float(lag.max()))
    else:
        speed = np.asarray(speed, dtype=np.float64)
        lower_bound = max(total / float(speed.sum()), float(lag.max()) / float(speed.max()))
    return _Group(lag, topic, start, stop, reads, readers, identical, lower_bound, speed)


def _previous(group: _Group, problem: GroupProblem, consumers: list[str]) -> np.ndarray:
    """The previous owner of each row as a consumer index, -1 where there is none."""
    encoded = problem.encoded
    if encoded is not None and len(encoded.previous) == len(group.lag) and list(encoded.index.consumers) == consumers:
        # the front end has looked the names up already, numbered as ``consumers`` are
        previous = np.asarray(encoded.previous, dtype=np.int64).copy()
    else:
        given = problem.previous
        # list.count compares by identity first: the cheapest way to see a list of nothing but None
        if not len(given) or (isinstance(given, list) and given.count(None) == len(given)):
            return np.full(len(group.lag), -1, dtype=np.int64)
        previous = pd.Index(consumers).get_indexer(pd.Index(np.asarray(given, dtype=object))).astype(np.int64)
    # an owner that no longer reads the topic is no owner (assign() filters these already)
    held = previous >= 0
    held[held] = group.reads[group.topic[held], previous[held]]
    previous[~held] = -1
    return previous


def _sum_by(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of ``values`` grouped by ``index`` (bincount would go through float)."""
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, index, values)
    return out


# ---------------------------------------------------------------------------------------------
# steps 1-3: quotas, sheds, placement


def _distribute(group: _Group, state: _State, sticky: bool) -> None:
    """Steps 1-3: quotas, then (previous plan) keep and shed, then placement, topics heaviest
    partition first. Topics are placed in batches (``_batches``), each against the loads at
    its start; a batch of one topic is placed round by round with fresh loads."""
    base, extras = _base(group)
    heaviest = np.maximum.reduceat(group.lag, group.start)
    order = np.lexsort((np.arange(len(heaviest)), -heaviest))
    slot = np.empty(len(heaviest), dtype=np.int64)  # scratch: a topic's position in its batch
    if sticky:
        held = _Held.of(group, state.previous)
        _sticky_quotas(group, state, base, extras, held)
        free, room = _keep(group, state, base, order, held)
        free_rows = np.flatnonzero(free)  # ascending, so grouped by topic
        row_topic = group.topic[free_rows]
        per_topic = np.bincount(row_topic, minlength=len(heaviest))
        todo = order[per_topic[order] > 0]
        firsts = np.searchsorted(row_topic, todo)
        lasts = firsts + per_topic[todo]
        tops = np.zeros(len(heaviest), dtype=np.int64)
        np.maximum.at(tops, row_topic, group.lag[free_rows])
        rounds = np.array([int(room[t][1].max()) for t in todo.tolist()], dtype=np.int64)
        for batch in _batches(group, rounds * tops[todo]):
            topics = todo[batch]
            if len(topics) == 1:
                t, i = int(topics[0]), int(batch[0])
                _place(free_rows[firsts[i] : lasts[i]], *room[t], group, state)
                continue
            ts = topics.tolist()
            room_t = np.repeat(topics, [len(room[t][0]) for t in ts])
            room_c = np.concatenate([room[t][0] for t in ts])
            room_m = np.concatenate([room[t][1] for t in ts])
            rows = free_rows[_ranges(firsts[batch], lasts[batch])]
            _fill(group, state, topics, rows, room_t, room_c, room_m, slot)
        state.count[:] = np.bincount(state.owner, minlength=group.consumers)
        return
    expected = np.full(group.consumers, int(base.sum()), dtype=np.int64) if group.identical else base @ group.reads
    n_readers = group.reads.sum(axis=1)
    if group.identical:
        # a batch deals its extras along one ring: a consumer gets at most one more than its
        # share of them, so a topic weighs its rows per reader, not its rounds (_batches)
        rounds = (group.stop - group.start) / n_readers
    else:
        rounds = (group.stop - group.start + n_readers - 1) // n_readers
    scale = int(group.lag.sum()) + 1
    laps = (extras / n_readers)[order] if group.identical else None  # full rounds go in a snake, not round the ring
    for batch in _batches(group, (rounds * heaviest)[order], laps):
        topics = order[batch]
        if len(topics) == 1:
            _fresh_topic(group, state, int(topics[0]), base, extras, expected, scale)
        else:
            _fresh_batch(group, state, topics, base, extras, expected, slot)
    state.count[:] = np.bincount(state.owner, minlength=group.consumers)


#: a batch of topics is placed against the loads at its start; a batch may add at most this
#: fraction of the bound to a consumer before the loads are looked at again
STALE = 1 / 32


#: a batch dealt along one ring goes round it at most this many times: the ranking it deals
#: by is the one at its start, and an old ranking dealt over and over piles up its errors
LAPS = 2


def _batches(group: _Group, weight: np.ndarray, laps: np.ndarray | None = None) -> list[np.ndarray]:
    """Positions 0..len(weight)-1 cut into runs: a new run after the one whose cumulative
    weight (what one topic can add to a consumer: its rounds, or its rows per reader where
    the extras go round one ring, x its heaviest row) crosses a
    multiple of ``STALE`` x the bound, and a topic that alone weighs that much stands
    alone; with ``laps`` (extras per reader of each topic), also after the one that completes
    another ``LAPS`` times round the consumers. Where subscriptions differ, every topic
    stands alone (the readers differ)."""
    n = len(weight)
    if n == 0:
        return []
    if not group.identical or n == 1:
        return [np.array([i]) for i in range(n)]
    scale = float(group.speed.min()) if group.speed is not None else 1.0
    quantum = STALE * group.lower_bound * scale
    if quantum <= 0:
        return [np.arange(n)]
    weight = weight.astype(np.float64)
    level = np.floor(np.cumsum(weight) / quantum)
    crossed = np.diff(np.r_[0.0, level]) > 0
    cut = crossed[:-1] | (weight[1:] >= quantum)
    if laps is not None:
        cut |= (np.diff(np.r_[0.0, np.floor(np.cumsum(laps) / LAPS)]) > 0)[:-1]
    return np.split(np.arange(n), np.flatnonzero(cut) + 1)


def _ranges(firsts: np.ndarray, lasts: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(first, last)`` for each pair."""
    sizes = lasts - firsts
    total = int(sizes.sum())
    return np.repeat(firsts - (np.cumsum(sizes) - sizes), sizes) + np.arange(total)


def _fresh_topic(
    group: _Group, state: _State, t: int, base: np.ndarray, extras: np.ndarray, expected: np.ndarray, scale: int
) -> None:
    """One topic from scratch: water-filling of its extras to the readers with the fewest
    partitions expected, then the least lag so far, then the smallest id; then LPT rounds.
    (``scale``: the total lag + 1, to rank by count and load in one integer key.)"""
    s, e = int(group.start[t]), int(group.stop[t])
    readers = group.readers[t]
    quota = np.full(len(readers), base[t], dtype=np.int64)
    if extras[t]:
        fits = 2 * (len(group.lag) + 1) * scale < 2**62
        rank = _ranked(fits, scale, expected[readers], state.load[readers], group, readers)[: extras[t]]
        quota[rank] += 1
        state.extra[t, readers[rank]] = True
        expected[readers[rank]] += 1
    _place(np.arange(s, e), readers, quota, group, state)


def _fresh_batch(
    group: _Group, state: _State, topics: np.ndarray, base: np.ndarray, extras: np.ndarray, expected: np.ndarray,
    slot: np.ndarray,
) -> None:
    """Several topics from scratch (identical subscriptions), against the loads at the start:
    the extras dealt along one ring of the consumers ranked as ``_fresh_topic`` ranks them
    (a topic's extras go to distinct consumers, and the group stays within one), then
    ``_fill``."""
    n = group.consumers
    everyone = np.arange(n, dtype=np.int64)
    e = extras[topics]
    ranking = np.lexsort((everyone, group.times(state.load), expected))
    holders = ranking[np.arange(int(e.sum())) % n]
    hold_t = np.repeat(topics, e)
    state.extra[hold_t, holders] = True
    expected += np.bincount(holders, minlength=n)
    b = base[topics]
    full = topics[b > 0]
    full_t = np.repeat(full, n)
    full_c = np.tile(everyone, len(full))
    bare = base[hold_t] == 0
    room_t = np.r_[full_t, hold_t[bare]]
    room_c = np.r_[full_c, holders[bare]]
    room_m = np.r_[base[full_t] + state.extra[full_t, full_c], np.ones(int(bare.sum()), dtype=np.int64)]
    rows = _ranges(group.start[topics], group.stop[topics])
    _fill(group, state, topics, rows, room_t, room_c, room_m, slot)


def _fill(
    group: _Group, state: _State, topics: np.ndarray, rows: np.ndarray, room_t: np.ndarray, room_c: np.ndarray,
    room_m: np.ndarray, slot: np.ndarray,
) -> None:
    """LPT rounds for several topics at once, against the loads at the start: per topic, the
    heaviest rows to the least loaded readers with room, round by round; every other round
    that gives every consumer a row reversed, a snake, so that the least loaded consumer
    does not take the heaviest row of every topic. (``room_*``: reader ``c`` of topic ``t``
    takes ``m`` more rows; per topic they add up to its rows.)"""
    n = group.consumers
    slot[topics] = np.arange(len(topics))
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(group.times(state.load), kind="stable")] = np.arange(n)
    room_m = room_m.astype(np.int64)
    keep = room_m > 0
    room_t, room_c, room_m = room_t[keep], room_c[keep], room_m[keep]
    j = np.repeat(slot[room_t], room_m)
    c = np.repeat(room_c, room_m)
    r = np.arange(len(j)) - np.repeat(np.cumsum(room_m) - room_m, room_m)
    round_ = j * int(room_m.max()) + r
    # only a round that gives every consumer a row is reversed: in a partial one the rows go
    # to the least loaded of those with room, as one topic alone would place them
    full = np.bincount(round_)[round_] == n
    place = np.where(full & ((j + r) % 2 == 1), n - 1 - rank[c], rank[c])
    c = c[np.argsort(round_ * n + place)]
    lag = group.lag[rows]
    top = int(lag.max()) + 1 if len(lag) else 1
    if len(topics) * top < 2**62:
        rows = rows[np.argsort(slot[group.topic[rows]] * top + (top - 1 - lag), kind="stable")]
    else:
        rows = rows[np.lexsort((-lag, slot[group.topic[rows]]))]
    if len(rows) != len(c):
        raise AssertionError(f"lag-sticky: {len(rows)} rows for {len(c)} free slots")
    state.owner[rows] = c
    np.add.at(state.load, c, group.lag[rows])


@dataclass(frozen=True)
class _Held:
    """What the previous plan gave each (topic, consumer) pair that held anything."""

    rows: np.ndarray  # the held rows, grouped by pair (pairs ascending), rows ascending within
    topic: np.ndarray  # per pair
    consumer: np.ndarray  # per pair
    first: np.ndarray  # per pair, its first position in ``rows``
    count: np.ndarray  # per pair, how many rows it held

    @classmethod
    def of(cls, group: _Group, previous: np.ndarray) -> _Held:
        n = group.consumers
        held_rows = np.flatnonzero(previous >= 0)
        key = group.topic[held_rows] * n + previous[held_rows]
        order = np.argsort(key, kind="stable")
        key = key[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
        count = np.diff(np.r_[first, len(key)])
        pairs = key[first]
        return cls(held_rows[order], pairs // n, pairs % n, first, count)


def _keep(
    group: _Group, state: _State, base: np.ndarray, order: np.ndarray, holdings: _Held
) -> tuple[np.ndarray, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Step 2: every row stays with its previous owner up to the owner's quota of its topic;
    an owner above it sheds the surplus (``_sheds``), topics heaviest first. Returns the free
    rows (a mask) and, per topic with free rows, its readers and the room each has left."""
    previous = state.previous
    by_key, first, held = holdings.rows, holdings.first, holdings.count
    topic_of, consumer_of = holdings.topic, holdings.consumer
    quota = base[topic_of] + state.extra[topic_of, consumer_of]
    free = previous < 0
    over = np.flatnonzero(held > quota)
    if len(over):
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        fair = group.fair(group.lag)
        for i in over[np.argsort(position[topic_of[over]], kind="stable")].tolist():
            c = int(consumer_of[i])
            mine = by_key[first[i] : first[i] + held[i]]
            share = fair if group.speed is None else fair[c]  # type: ignore[index]
            drop = mine[_sheds(group.lag[mine], int(held[i] - quota[i]), state.load[c] - share)]
            free[drop] = True
            state.owner[drop] = -1
            state.load[c] -= int(group.lag[drop].sum())
    # the room left: quota less what is kept, for the topics with free rows only
    topics = np.flatnonzero(np.bincount(group.topic[free], minlength=len(group.start)))
    kept = np.minimum(held, quota)
    room: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    at = np.searchsorted(topic_of, topics)
    ends = np.searchsorted(topic_of, topics, side="right")
    for i, t in enumerate(topics.tolist()):
        readers = group.readers[t]
        left = base[t] + state.extra[t, readers].astype(np.int64)
        a, b = int(at[i]), int(ends[i])
        if b > a:
            left[np.searchsorted(readers, consumer_of[a:b])] -= kept[a:b]
        room[t] = (readers, left)
    return free, room


def _base(group: _Group) -> tuple[np.ndarray, np.ndarray]:
    """Per topic, the partitions every reader gets (floor P/C) and how many get one more (P mod C)."""
    size = group.stop - group.start
    n_readers = group.reads.sum(axis=1)
    return size // n_readers, size % n_readers


def _sticky_quotas(group: _Group, state: _State, base: np.ndarray, extras: np.ndarray, holdings: _Held) -> None:
    """Which readers of each topic get its extra partitions, keeping as many previous owners
    as the count rules allow. A reader *claims* an extra where it held more than the base.

    Claims win first, fewest partitions expected among them; then global balance is repaired
    by handing extras from the fullest consumers to the emptiest, cheapest first: an extra
    nobody claimed costs nothing to hand over, a claimed one costs the partition its holder
    sheds, and handing it to a reader that claimed it saves one. Among equals, a claim is
    kept where giving it up would force the holder to shed more lag than it carries above
    its fair share (its lightest partition of the topic is heavier than that excess)."""
    n_consumers = group.consumers
    first, held = holdings.first, holdings.count
    lightest = np.minimum.reduceat(group.lag[holdings.rows], first) if len(first) else first
    topic_of, consumer_of = holdings.topic, holdings.consumer
    claim = (held > base[topic_of]) & (extras[topic_of] > 0)
    # consumer-major, as _even_counts reads them: the rows of one consumer
    claimed_by = np.zeros((n_consumers, len(base)), dtype=bool)
    claimed_by[consumer_of[claim], topic_of[claim]] = True
    excess = state.load - group.fair(group.lag)
    costly_by = np.zeros((n_consumers, len(base)), dtype=bool)
    hurt = claim & (lightest > excess[consumer_of])
    costly_by[consumer_of[hurt], topic_of[hurt]] = True
    expected = np.full(n_consumers, int(base.sum()), dtype=np.int64) if group.identical else base @ group.reads
    # where the claims match the extras (most topics, most of the time) they simply win
    claims_per_topic = np.bincount(topic_of[claim], minlength=len(base))
    settled = claims_per_topic == extras
    won = claim & settled[topic_of]
    state.extra[topic_of[won], consumer_of[won]] = True
    expected += np.bincount(consumer_of[won], minlength=n_consumers)
    for t in np.flatnonzero((extras > 0) & ~settled).tolist():
        readers = group.readers[t]
        mine = claimed_by[readers, t]
        claims = readers[mine]
        if len(claims) > extras[t]:
            # too many claims: keep those of the fewest expected, then where shedding hurts
            order = np.lexsort((claims, group.times(state.load[claims], claims), ~costly_by[claims, t], expected[claims]))
            winners = claims[order[: extras[t]]]
        else:
            others = readers[~mine]
            order = np.lexsort((others, group.times(state.load[others], others), expected[others]))
            winners = np.r_[claims, others[order[: extras[t] - len(claims)]]]
        state.extra[t, winners] = True
        expected[winners] += 1

    def price(giver: int, taker: int, topics: np.ndarray) -> tuple[int, int]:
        # moves it costs: the partition the giver sheds, less the one the taker keeps; then
        # a shed that would cut the giver below its fair share counts as worse
        cost = 2 * (claimed_by[giver, topics].astype(np.int64) - claimed_by[taker, topics]) + costly_by[giver, topics]
        i = int(np.argmin((cost + 2) * len(base) + topics))  # the cheapest, then the first topic
        return int(cost[i]), int(topics[i])

    _even_counts(group, expected, state.extra, state.load, price, lambda giver, taker, topic: None)


def _ranked(fits: bool, scale: int, count: np.ndarray, load: np.ndarray, group: _Group, who: np.ndarray) -> np.ndarray:
    """Positions sorted by (count, load or time, position)."""
    if group.speed is not None:
        return np.lexsort((group.times(load, who), count))
    if fits:
        return np.argsort(count * scale + load, kind="stable")
    return np.lexsort((load, count))


def _sheds(lags: np.ndarray, need: int, excess: float) -> np.ndarray:
    """Which of a consumer's partitions of one topic to give up: while the consumer carries more
    than its fair lag, the heaviest that does not overshoot; then the lightest."""
    order = np.argsort(lags, kind="stable")
    values = lags[order].tolist()
    rest = order.tolist()
    picked: list[int] = []
    while need and excess > 0:
        j = bisect_right(values, excess) - 1
        if j < 0:
            break
        picked.append(rest.pop(j))
        excess -= values.pop(j)
        need -= 1
    picked.extend(rest[:need])
    return np.asarray(picked, dtype=np.int64)


def _place(rows: np.ndarray, readers: np.ndarray, room: np.ndarray, group: _Group, state: _State) -> None:
    """LPT in rounds: heaviest rows first, each round one row to every reader with room left,
    the lightest-loaded reader getting the heaviest row."""
    if len(rows) == 0:
        return
    if int(room.sum()) != len(rows):
        raise AssertionError(f"lag-sticky: {len(rows)} rows for {int(room.sum())} free slots")
    rows = rows[np.argsort(-group.lag[rows], kind="stable")]
    holders, room = readers[room > 0], room[room > 0]
    done = 0
    for round_ in range(int(room.max())):
        active = holders[room > round_]
        # holders are ascending, so a stable sort on load breaks ties by consumer id
        active = active[np.argsort(group.times(state.load[active], active), kind="stable")]
        take = rows[done : done + len(active)]
        state.owner[take] = active
        state.load[active] += group.lag[take]
        done += len(active)


# ---------------------------------------------------------------------------------------------
# step 4: global count balance where subscriptions differ


HandOver = Callable[[int, int, np.ndarray], tuple[int, int]]


def _even_counts(
    group: _Group, count: np.ndarray, extra: np.ndarray, load: np.ndarray, price: HandOver,
    apply: Callable[[int, int, int], None], width: int = 8,
) -> None:
    """Step 4: while a consumer holds 2+ partitions more than another that reads a topic it
    holds an extra of, hand that extra over. ``price(giver, taker, topics)`` gives (cost,
    topic) for the best of ``topics``; the cheapest handover among the ``width`` most loaded
    of the fullest consumers and the ``width`` emptiest is taken, then ``apply``'d. Every
    handover lowers the sum of squared counts, so this ends."""
    # rows per consumer: the scans below read one consumer's topics at a time
    held = np.ascontiguousarray(extra.T)
    reads = None if group.identical else np.ascontiguousarray(group.reads.T)

    def topics_for(giver: int, taker: int) -> np.ndarray:
        mask = held[giver] & ~held[taker]
        return np.flatnonzero(mask if reads is None else mask & reads[taker])

    def hand_over(giver: int, taker: int, t: int) -> None:
        apply(giver, taker, t)
        extra[t, giver], extra[t, taker] = False, True
        held[giver, t], held[taker, t] = False, True
        count[giver] -= 1
        count[taker] += 1

    blocked = np.zeros(group.consumers, dtype=bool)
    while True:
        live = np.flatnonzero(~blocked)
        if len(live) == 0:
            return
        most = int(count[live].max())
        givers = live[count[live] == most]
        givers = givers[np.lexsort((givers, -group.times(load[givers], givers)))]
        takers = np.flatnonzero(count <= most - 2)
        if len(takers) == 0:
            return
        takers = takers[np.lexsort((takers, group.times(load[takers], takers), count[takers]))]
        if len(givers) > 1 and _hand_over_many(givers, takers, count, most, topics_for, price, hand_over):
            blocked[:] = False
            continue
        best: tuple[float, int, int, int] | None = None
        for giver in givers[:width].tolist():
            for taker in takers[:width].tolist():
                topics = topics_for(giver, taker)
                if len(topics):
                    cost, t = price(giver, taker, topics)
                    if best is None or cost < best[0]:
                        best = (cost, giver, taker, t)
        if best is None:
            # where subscriptions differ, the first fullest consumer may have a taker further down
            giver = int(givers[0])
            for taker in takers[width:].tolist():
                topics = topics_for(giver, taker)
                if len(topics):
                    best = (0, giver, taker, price(giver, taker, topics)[1])
                    break
            else:
                blocked[giver] = True
                continue
        hand_over(best[1], best[2], best[3])
        blocked[:] = False


def _hand_over_many(
    givers: np.ndarray, takers: np.ndarray, count: np.ndarray, most: int,
    topics_for: Callable[[int, int], np.ndarray], price: HandOver, hand_over: Callable[[int, int, int], None],
) -> int:
    """One round of step 4's handovers at once, for when many are due (a join hands the
    newcomer one extra from each of hundreds of consumers). The takers' free places, the
    emptiest first, go to the fullest consumers in order; where there are more of those than
    places, the cheapest handovers (against the emptiest taker) win. Returns how many were
    made; every one lowers the sum of squared counts, as a single step does."""
    room = most - 1 - count[takers]
    places = np.repeat(takers, room)
    level = count[places] + np.arange(len(places)) - np.repeat(np.cumsum(room) - room, room)
    places = places[np.argsort(level, kind="stable")]
    if len(places) < 2:
        return 0
    chosen: dict[int, tuple[int, int]] = {}
    if len(givers) > len(places):
        costs: list[float] = []
        for giver in givers.tolist():
            topics = topics_for(giver, int(places[0]))
            if len(topics):
                chosen[giver] = price(giver, int(places[0]), topics)
                costs.append(chosen[giver][0])
            else:
                costs.append(np.inf)
        # the cheapest, kept in the order of the fullest and most loaded first
        givers = givers[np.sort(np.argsort(np.asarray(costs, dtype=np.float64), kind="stable")[: len(places)])]
    made = 0
    for giver, taker in zip(givers.tolist(), places[: len(givers)].tolist()):
        topics = topics_for(giver, taker)
        if not len(topics):
            continue
        pick = chosen.get(giver)
        if pick is not None and taker == int(places[0]) and bool((topics == pick[1]).any()):
            t = pick[1]  # priced against this taker already, and still open
        else:
            t = price(giver, taker, topics)[1]
        hand_over(giver, taker, t)
        made += 1
    return made


def _move_extra(group: _Group, state: _State) -> tuple[HandOver, Callable[[int, int, int], None]]:
    """For a placed plan: any topic; move the giver's partition whose lag best evens out the pair."""

    def price(giver: int, taker: int, topics: np.ndarray) -> tuple[int, int]:
        return 0, int(topics[0])

    def apply(giver: int, taker: int, topic: int) -> None:
        s, e = int(group.start[topic]), int(group.stop[topic])
        rows = s + np.flatnonzero(state.owner[s:e] == giver)
        if group.speed is None:
            half = (int(state.load[giver]) - int(state.load[taker])) / 2
        else:  # the lag that leaves the two with equal times
            sg, st = float(group.speed[giver]), float(group.speed[taker])
            half = (float(state.load[giver]) * st - float(state.load[taker]) * sg) / (sg + st)
        row = int(rows[np.argmin(np.abs(group.lag[rows] - half))])
        state.owner[row] = taker
        state.load[giver] -= int(group.lag[row])
        state.load[taker] += int(group.lag[row])

    return price, apply


# ---------------------------------------------------------------------------------------------
# step 5: local search on the most loaded consumer


class _Holdings:
    """The rows of each consumer, current under moves without rescanning every row."""

    def __init__(self, owner: np.ndarray, n_consumers: int) -> None:
        self.owner = owner
        self.original = owner.copy()
        # a stable sort of small codes is a radix sort: five times faster than of int64
        self.order = np.argsort(owner.astype(np.int16) if n_consumers < 2**15 else owner, kind="stable")
        self.bounds = np.searchsorted(owner[self.order], np.arange(n_consumers + 1))
        self.arrived: dict[int, list[int]] = {}

    def rows(self, c: int) -> np.ndarray:
        """``c``'s rows: those it held when indexed and still holds, then those that came since."""
        rows = self.order[self.bounds[c] : self.bounds[c + 1]]
        rows = rows[self.owner[rows] == c]
        if c not in self.arrived:
            return rows
        came = np.asarray(self.arrived[c], dtype=np.int64)
        came = np.unique(came[(self.owner[came] == c) & (self.original[came] != c)])
        return np.r_[rows, came]

    def move(self, row: int, c: int) -> None:
        self.owner[row] = c
        self.arrived.setdefault(c, []).append(row)


class _Search:
    """Local search on the most loaded consumer (step 5). Three kinds of step keep every
    count rule: a swap of two partitions of one topic; a move of a topic's extra partition
    to a reader at the topic's floor with fewer partitions in all; an exchange of two extra
    partitions of different topics. A step is taken only if it lowers the higher load of
    the two consumers it touches."""

    def __init__(self, group: _Group, state: _State) -> None:
        self.group, self.state = group, state

    def _index(self) -> None:
        """The lookups the steps need; built only once a step is needed (sorting a million
        rows costs about a second)."""
        group = self.group
        self.held = _Holdings(self.state.owner, group.consumers)
        n_rows = len(group.lag)
        # rows sorted by (topic, lag), equal lags in row order: the partners of a swap are a
        # window of this order. Rows come grouped by topic, so one stable sort of topic x
        # (max lag + 1) + lag takes runs it finds (five times faster than sorting every lag);
        # where that key could overflow, lags are ranked first
        top = int(group.lag.max(initial=0)) + 1
        if len(group.start) * top < 2**62:
            key = group.topic * top + group.lag
        else:
            by_lag = np.argsort(group.lag)
            ordered = group.lag[by_lag]
            rank = np.empty(n_rows, dtype=np.int64)
            rank[by_lag] = np.searchsorted(ordered, ordered)  # how many rows are lighter
            key = group.topic * n_rows + rank
        self.by_key = np.argsort(key, kind="stable")
        self.sorted_key = key[self.by_key]
        # where each row sits in that order, and where its run of equal keys begins there: the
        # end of a row's partner window without a search
        self.where = np.empty(n_rows, dtype=np.int64)
        self.where[self.by_key] = np.arange(n_rows)
        heads = np.flatnonzero(np.r_[True, self.sorted_key[1:] != self.sorted_key[:-1]])
        self.key_first = np.repeat(heads, np.diff(np.r_[heads, n_rows]))
        self.key_lag = group.lag[self.by_key]  # ascending within each topic's block

    def run(self, limit: float, max_steps: int) -> int:
        """Steps until no consumer carries more than ``limit``, none helps, or ``max_steps``;
        returns how many were taken."""
        load, group = self.state.load, self.group
        for taken in range(max_steps):
            times = group.times(load)
            top = int(np.argmax(times))
            if times[top] <= limit:
                return taken
            if taken == 0:
                self._index()
            rows = self.held.rows(top)
            step = self._swap(top, rows)
            move = self._move(top, rows)
            if move is not None and (step is None or move[0] < step[0]):
                step = move
            if step is None:
                step = self._exchange(top, rows)
            if step is None or step[0] >= times[top]:
                return taken
            self._apply(top, step)
        return max_steps

    def _apply(self, top: int, step: tuple[float, int, int, int]) -> None:
        _, x, y, other = step
        group, state = self.group, self.state
        tx = int(group.topic[x])
        self.held.move(x, other)
        state.load[top] -= int(group.lag[x])
        state.load[other] += int(group.lag[x])
        if y < 0:
            state.count[top] -= 1
            state.count[other] += 1
        else:
            self.held.move(y, top)
            state.load[top] += int(group.lag[y])
            state.load[other] -= int(group.lag[y])
        ty = int(group.topic[y]) if y >= 0 else -1
        if ty != tx:  # a move or an exchange hands over the extra of x's topic (and back for y's)
            state.extra[tx, top], state.extra[tx, other] = False, True
            if ty >= 0:
                state.extra[ty, other], state.extra[ty, top] = False, True

    def _swap(self, top: int, rows: np.ndarray) -> tuple[float, int, int, int] | None:
        """Best swap of one of ``rows`` with a lighter partition of the same topic.

        Partners of ``x`` are a window of the (topic, lag) order: lighter than ``x`` by less
        than the widest gap to another consumer. A window can hold most of its topic (a
        consumer that just joined has no load: every lighter partition is a partner), so
        first a pair near the middle of each window gives a value ``v`` to beat, and only
        partners that could reach ``v`` are expanded: a swap moving ``d`` ends at
        ``max(top - d, other + d)``, at most ``v`` only if ``top - v <= d <= v - other``.
        Every pair of value ``v`` or less stays, in the same order, so the step chosen is the
        one the whole windows give."""
        group, load = self.group, self.state.load
        speed = group.speed
        gap: float
        if speed is None:
            gap = int(load[top] - load.min())
        else:  # a partner must be lighter by less than the room some consumer has below top's time
            gap = float((load[top] / speed[top] * speed - load).max())
        xlag = group.lag[rows]
        row_topic = group.topic[rows]
        # partners are lighter than x (before x's run of equal lags in its topic's block of the
        # order), by less than the widest gap to another consumer (pairs beyond it never pass)
        start = group.start[row_topic]
        hi = self.key_first[self.where[rows]]
        some = hi > start
        if not some.any():
            return None
        mid = self._seek(start, hi, xlag - gap / 2, "left")
        mid = np.clip(mid, start, hi - 1)[some]
        pos = np.r_[mid, np.maximum(mid - 1, start[some])]
        probe = self._best_pair(top, np.r_[rows[some], rows[some]], self.by_key[pos])
        if probe is None:
            lo = self._seek(start, hi, xlag - gap, "right")
        else:
            v = probe[0]
            if speed is None:
                d_low, d_high = load[top] - v, v - load.min()
            else:  # in time units: widened by a unit and a rounding error, never narrowed
                d_low = load[top] - v * speed[top]
                d_high = float((v * speed - load).max())
                d_low, d_high = d_low - 1 - abs(d_low) * 1e-9, d_high + 1 + abs(d_high) * 1e-9
            lo = self._seek(start, hi, xlag - d_high, "left")
            hi = self._seek(lo, hi, xlag - d_low, "right")
        width = np.maximum(hi - lo, 0)
        if not width.any():
            return probe
        xs = np.repeat(rows, width)
        ys = self.by_key[np.repeat(lo, width) + np.arange(int(width.sum())) - np.repeat(np.cumsum(width) - width, width)]
        return self._best_pair(top, xs, ys)

    def _seek(self, lo: np.ndarray, hi: np.ndarray, lags: np.ndarray, side: Literal["left", "right"]) -> np.ndarray:
        """For each window ``[lo, hi)`` of the (topic, lag) order (inside one topic's block,
        where lags ascend), the first position whose lag is ``>= lags`` ("left") or ``> lags``
        ("right"), ``hi`` if none: a bisection of all windows at once. (A search of the whole
        order by (topic, rank) finds the same positions, but jumps across a million rows at
        each level, a cache miss each time: a step at 5M partitions took 13 times a step at 1M.)"""
        lo, hi = lo.copy(), hi.copy()
        last = len(self.key_lag) - 1
        while True:
            open_ = lo < hi
            if not open_.any():
                return lo
            mid = (lo + hi) >> 1
            value = self.key_lag[np.minimum(mid, last)]
            right = open_ & ((value < lags) if side == "left" else (value <= lags))
            lo = np.where(right, mid + 1, lo)
            hi = np.where(open_ & ~right, mid, hi)

    def _best_pair(self, top: int, xs: np.ndarray, ys: np.ndarray) -> tuple[float, int, int, int] | None:
        """Of the swaps of ``xs[i]`` (``top``'s) with ``ys[i]`` (lighter, same topic), the first
        that leaves the higher of the two loads lowest, if any lowers it."""
        group, owner, load, speed = self.group, self.state.owner, self.state.load, self.group.speed
        others = owner[ys]
        d = group.lag[xs] - group.lag[ys]
        if speed is None:
            ok = (others != top) & (d < load[top] - load[others])
        else:
            ok = (others != top) & ((load[others] + d) / speed[others] < load[top] / speed[top])
        if not ok.any():
            return None
        xs, ys, others, d = xs[ok], ys[ok], others[ok], d[ok]
        if speed is None:
            new = np.maximum(load[top] - d, load[others] + d)
        else:
            new = np.maximum((load[top] - d) / speed[top], (load[others] + d) / speed[others])
        i = int(np.argmin(new))
        return new[i].item(), int(xs[i]), int(ys[i]), int(others[i])

    def _move(self, top: int, rows: np.ndarray, partners: int = 16) -> tuple[float, int, int, int] | None:
        """Best move of one of ``top``'s extra partitions to one of the ``partners`` least
        loaded readers that hold fewer partitions in all and only the base of its topic."""
        group, state = self.group, self.state
        takers = np.flatnonzero(state.count < state.count[top])
        if len(takers) == 0:
            return None
        takers = takers[np.argsort(group.times(state.load[takers], takers), kind="stable")[:partners]]
        extras = rows[state.extra[group.topic[rows], top]]
        if len(extras) == 0:
            return None
        t = group.topic[extras]
        eligible = group.reads[np.ix_(t, takers)] & ~state.extra[np.ix_(t, takers)]
        if group.speed is None:
            # takers are sorted by load, so the first eligible one is the lightest
            first = np.argmax(eligible, axis=1)
        else:  # the least loaded need not be the one that would finish first with x
            after = (state.load[takers][None, :] + group.lag[extras][:, None]) / group.speed[takers][None, :]
            first = np.argmin(np.where(eligible, after, np.inf), axis=1)
        usable = eligible[np.arange(len(extras)), first]
        if not usable.any():
            return None
        xs, to = extras[usable], takers[first[usable]]
        new = np.maximum(
            group.times(state.load[top] - group.lag[xs], np.full(len(xs), top)),
            group.times(state.load[to] + group.lag[xs], to),
        )
        i = int(np.argmin(new))
        return new[i].item(), int(xs[i]), -1, int(to[i])

    def _exchange(self, top: int, rows: np.ndarray, partners: int = 8) -> tuple[float, int, int, int] | None:
        """Best exchange of an extra partition of ``top`` for a lighter extra partition of
        another topic held by one of the ``partners`` least loaded consumers."""
        group, state, load = self.group, self.state, self.state.load
        best: tuple[float, int, int, int] | None = None
        mine = rows[state.extra[group.topic[rows], top]]
        if len(mine) == 0:
            return None
        others = np.argsort(group.times(load), kind="stable")[:partners]
        speed = group.speed
        for other in others[others != top].tolist():
            gap: float
            if speed is None:
                gap = int(load[top] - load[other])
                if gap <= 1:
                    continue
                aim = gap / 2
            else:  # moving d from top to other helps while d < gap; d = aim evens their times
                st, so = float(speed[top]), float(speed[other])
                gap = float(load[top]) / st * so - float(load[other])
                if gap <= 0:
                    continue
                aim = (float(load[top]) * so - float(load[other]) * st) / (st + so)
            tx = group.topic[mine]
            xs = mine[~state.extra[tx, other] & group.reads[tx, other]]
            theirs = self.held.rows(other)
            ty = group.topic[theirs]
            ys = theirs[state.extra[ty, other] & ~state.extra[ty, top] & group.reads[ty, top]]
            if len(xs) == 0 or len(ys) == 0:
                continue
            ys = ys[np.argsort(group.lag[ys], kind="stable")]
            ylag = group.lag[ys]
            # the best partner for x is the nearest to lag(x) - gap/2, from below or above
            at = np.searchsorted(ylag, group.lag[xs] - aim)
            for j in (np.maximum(at - 1, 0), np.minimum(at, len(ys) - 1)):
                d = group.lag[xs] - ylag[j]
                ok = (d > 0) & (d < gap)
                if not ok.any():
                    continue
                if speed is None:
                    new = np.maximum(load[top] - d, load[other] + d)
                    new = np.where(ok, new, np.iinfo(np.int64).max)
                else:
                    new = np.maximum((load[top] - d) / st, (load[other] + d) / so)
                    new = np.where(ok, new, np.inf)
                i = int(np.argmin(new))
                if best is None or new[i].item() < best[0]:
                    best = (new[i].item(), int(xs[i]), int(ys[j[i]]), int(other))
        return best


STRATEGY = Strategy(
    "lag-sticky", "group", "count-balanced, lag-balanced across the group, sticky", assign_group=assign_group,
    assign_codes=assign_codes, options=tuple(DEFAULTS), uses_previous=True,
)
