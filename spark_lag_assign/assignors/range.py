"""Kafka's RangeAssignor, exactly (seed 003).

Per topic, independently: partitions in numeric order, the topic's subscribers in
lexicographic order; each gets ``P // C`` consecutive partitions and the first ``P % C``
get one more. Two consumers C0, C1 and topics t0, t1 of three partitions each give::

    C0: [t0p0, t0p1, t1p0, t1p1]
    C1: [t0p2, t1p2]

The remainder lands on the same first consumers for every topic: the imbalance of seed 002.

The rule is closed-form: the j-th partition of a topic goes to subscriber number
``j // (P // C + 1)`` while ``j < (P % C) * (P // C + 1)``, and to ``P % C + (j - that) // (P // C)``
after. For the whole group (``assign_codes``) topics with the same subscribers and the same
number of partitions share one pattern, computed once and laid over all of them.
"""

from __future__ import annotations

import numpy as np

from spark_lag_assign.assignors.base import GroupProblem, Strategy


def blocks(n_partitions: int, n_consumers: int) -> np.ndarray:
    """How many consecutive partitions each of ``n_consumers`` subscribers gets."""
    per_consumer, extra = divmod(n_partitions, n_consumers)
    counts = np.full(n_consumers, per_consumer, dtype=np.int64)
    counts[:extra] += 1
    return counts


def assign_codes(problem: GroupProblem) -> np.ndarray:
    codes = problem.codes()
    index = codes.index
    starts, ends = problem.topic_bounds()
    owner = np.empty(len(codes.row_topic), dtype=np.int64)
    if len(starts) == 0:
        return owner
    sizes = ends - starts
    classes = index.topic_class[codes.row_topic[starts]]
    # one pattern per (subscribers, size): uniform groups have one in all
    wide = int(sizes.max()) + 1
    shapes, shape_of = np.unique(classes * wide + sizes, return_inverse=True)
    shape_of = shape_of.reshape(-1)
    if len(shapes) * 8 > len(starts):  # topics of many sizes: the formula row by row
        return _by_formula(problem, starts, sizes, classes)
    by_shape = np.argsort(shape_of, kind="stable")
    bounds = np.searchsorted(shape_of[by_shape], np.arange(len(shapes) + 1))
    for s in range(len(shapes)):
        members = index.class_members[int(shapes[s] // wide)]
        size = int(shapes[s] % wide)
        pattern = np.repeat(members, blocks(size, len(members)))
        topics = by_shape[bounds[s] : bounds[s + 1]]
        first = starts[topics]
        if len(topics) == len(starts):  # every topic: the rows are the pattern over and over
            return np.tile(pattern, len(topics))
        owner[(first[:, None] + np.arange(size)).ravel()] = np.tile(pattern, len(topics))
    return owner


def _by_formula(problem: GroupProblem, starts: np.ndarray, sizes: np.ndarray, classes: np.ndarray) -> np.ndarray:
    index = problem.codes().index
    n_subs = np.array([len(m) for m in index.class_members], dtype=np.int64)[classes]
    flat = np.concatenate(index.class_members)
    offset = (np.cumsum([len(m) for m in index.class_members]) - [len(m) for m in index.class_members])[classes]
    per, extra = np.divmod(sizes, n_subs)
    wide = extra * (per + 1)  # the rows of the consumers that take one more
    j = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(starts, sizes)
    per_r, wide_r, extra_r = np.repeat(per, sizes), np.repeat(wide, sizes), np.repeat(extra, sizes)
    rank = np.where(j < wide_r, j // (per_r + 1), extra_r + (j - wide_r) // np.maximum(per_r, 1))
    return flat[np.repeat(offset, sizes) + rank]


STRATEGY = Strategy(
    "range", "topic", "Kafka's RangeAssignor: per topic, consecutive blocks", assign_codes=assign_codes,
)
