"""The LagBasedPartitionAssignor of seeds 000 and 001, exactly.

Per topic, independently: partitions in decreasing lag (ties: lower partition id first);
each goes to the subscriber with the fewest partitions of this topic so far, ties to the
least lag assigned from this topic, then to the smallest consumer id. Counts per topic
therefore differ by at most one. Seed 000: C0, C1 and t0 with lags 100,000 / 50,000 /
60,000 give::

    C0: [t0p0]          100,000
    C1: [t0p1, t0p2]    110,000

Totals restart for every topic, so with many topics the biggest partitions of each topic
all go to the same first consumer; ``lag-sticky`` balances across the whole group.

The rule as the seeds state it (a heap per topic) is the tests' oracle (``tests/oracles.py``).
``assign_codes`` is the same rule for the whole group at once, on arrays. In a topic with
``n`` subscribers, take its partitions in the order above; the one at position ``j`` falls in
round ``j // n``, at slot ``j % n``. In round 0 every count and total is 0, so slot ``s``
goes to the ``s``-th subscriber by id. At the start of round ``r >= 1`` every subscriber has
``r`` partitions, so slot ``s`` goes to the subscriber ranked ``s``-th by (lag taken from the
topic so far, id): a stable argsort of the totals, their columns in id order. Topics with the
same number of subscribers share the matrix of totals, one row each, so one argsort per round
serves them all (with 1,000 consumers and topics of 100 or 2,000 partitions that is one or
two rounds in all). Topics that would keep a round going with few rows of work (a few huge
topics over few subscribers) take the heap instead.
"""

from __future__ import annotations

import heapq

import numpy as np

from spark_lag_assign.assignors.base import GroupProblem, Strategy
from spark_lag_assign.core.limits import INT64_LIMIT

#: a round of the vectorised rule must hand out at least this many partitions (active topics
#: x subscribers); topics whose later rounds would not are left to the heap (``_heap``)
MIN_ROUND_ROWS = 64


def assign_codes(problem: GroupProblem) -> np.ndarray:
    codes = problem.codes()
    index = codes.index
    n_rows = len(codes.row_topic)
    owner = np.empty(n_rows, dtype=np.int64)
    starts, ends = problem.topic_bounds()
    if n_rows == 0:
        return owner
    lags = np.asarray(problem.lags, dtype=np.int64)
    sizes = ends - starts
    order = _by_topic_then_lag(codes.row_topic, lags, starts, sizes)
    ranked = lags[order]  # per topic, decreasing lag (ties: lower partition first)
    # each topic's subscribers, in id order: flat[offset[t] : offset[t] + width[t]]
    widths_of_class = np.array([len(m) for m in index.class_members], dtype=np.int64)
    flat = np.concatenate(index.class_members).astype(np.int64, copy=False)
    offsets_of_class = np.cumsum(widths_of_class) - widths_of_class
    classes = index.topic_class[codes.row_topic[starts]]
    width, offset = widths_of_class[classes], offsets_of_class[classes]
    # round 0, and every row of a topic with one subscriber: slot j % n of the round, n = 1 or j < n
    position = np.arange(n_rows, dtype=np.int64) - np.repeat(starts, sizes)
    slot = np.minimum(position, np.repeat(width - 1, sizes))
    result = flat[np.repeat(offset, sizes) + slot]  # right for rows with j < n, and for n = 1
    # later rounds: topics with more partitions than subscribers (and more than one of them)
    later = np.flatnonzero((sizes > width) & (width > 1))
    if len(later):
        by_width = later[np.argsort(width[later], kind="stable")]
        cuts = np.flatnonzero(np.diff(width[by_width])) + 1
        for topics in np.split(by_width, cuts):
            _rounds(ranked, result, flat, starts[topics], ends[topics], offset[topics], int(width[topics[0]]))
    owner[order] = result
    return owner


def _by_topic_then_lag(row_topic: np.ndarray, lags: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The rows (sorted by topic, partition) by topic, then decreasing lag, ties in row order."""
    if (sizes == sizes[0]).all():  # topics of one size: one sort per row of a matrix
        size = int(sizes[0])
        within = np.argsort(-lags.reshape(-1, size), axis=1, kind="stable")
        return (within + (np.arange(len(starts), dtype=np.int64) * size)[:, None]).ravel()
    top = int(lags.max())
    if (int(row_topic[-1]) + 1) * (top + 1) < INT64_LIMIT:  # one int64 key: topic, then the lag turned down
        return np.argsort(row_topic * (top + 1) + (top - lags), kind="stable")
    return np.lexsort((-lags, row_topic))


def _rounds(
    ranked: np.ndarray,
    result: np.ndarray,
    flat: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    offsets: np.ndarray,
    n: int,
) -> None:
    """Rounds 1 and later of topics with ``n`` subscribers each (and more partitions than
    that): fills ``result`` at their rows, in the order ``ranked`` (round 0 is done)."""
    rounds = -(-(ends - starts) // n)
    by_rounds = np.argsort(-rounds, kind="stable")  # most rounds first: a round's topics are a prefix
    starts, ends, offsets, rounds = starts[by_rounds], ends[by_rounds], offsets[by_rounds], rounds[by_rounds]
    # round r hands out a partition of each topic of more than r rounds to each subscriber; the
    # rounds with at least MIN_ROUND_ROWS of them are a prefix, and topics beyond it take the heap
    active = np.searchsorted(-rounds, -np.arange(int(rounds[0])), side="left")  # topics of > r rounds
    kept = int(np.count_nonzero(active * n >= MIN_ROUND_ROWS))
    heaped = int(np.searchsorted(-rounds, -kept, side="left"))  # rounds[:heaped] > kept
    for t in range(heaped):
        lo, hi = int(starts[t]), int(ends[t])
        members = flat[int(offsets[t]) : int(offsets[t]) + n]
        result[lo:hi] = _heap(ranked[lo:hi], members)
    starts, ends, offsets, rounds = starts[heaped:], ends[heaped:], offsets[heaped:], rounds[heaped:]
    if len(rounds) == 0:
        return
    slots = np.arange(n, dtype=np.int64)
    totals = ranked[starts[:, None] + slots]  # after round 0: slot s went to subscriber s
    for r in range(1, int(rounds[0])):
        count = int(np.searchsorted(-rounds, -r, side="left"))  # topics of more than r rounds
        rows = starts[:count, None] + (r * n + slots)
        running = totals[:count]
        rank = np.argsort(running, axis=1, kind="stable")  # (total, id): columns in id order
        owners = flat[offsets[:count, None] + rank]
        inside = rows < ends[:count, None]
        if inside.all():
            taken = ranked[rows]
            result[rows] = owners
        else:  # the last round of some topics is short
            taken = np.where(inside, ranked[np.minimum(rows, len(ranked) - 1)], 0)
            result[rows[inside]] = owners[inside]
        running[np.arange(count)[:, None], rank] += taken


def _heap(ranked: np.ndarray, members: np.ndarray) -> np.ndarray:
    """The seeds' heap on codes: the owner of each partition of one topic, given in the
    order of the rule (decreasing lag, ties by partition), among ``members`` (ascending codes)."""
    heap = [(0, 0, int(consumer)) for consumer in members.tolist()]  # (count, lag, code)
    heapq.heapify(heap)
    owners = np.empty(len(ranked), dtype=np.int64)
    for i, lag in enumerate(ranked.tolist()):
        count, total, consumer = heap[0]
        owners[i] = consumer
        heapq.heapreplace(heap, (count + 1, total + lag, consumer))
    return owners


STRATEGY = Strategy(
    "lag", "topic", "the seeds' LagBasedPartitionAssignor: per topic, by decreasing lag", assign_codes=assign_codes,
)
