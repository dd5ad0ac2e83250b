"""Range blocks over a seeded random consumer order per topic (seeds 002, 003).

Priorities, in order:

1. Reproducible: the same seed, topics, partitions and subscribers give the same plan,
   on any machine and in any process. The order of a topic's subscribers comes from a
   generator seeded by SHA-256 of ``(seed, topic)``, never from Python's salted ``hash()``.
2. Balanced by count within each topic: partitions in numeric order are cut into
   consecutive blocks as Range does, so a topic's subscribers hold ``P // C`` or
   ``P // C + 1`` of its partitions.
3. No favourite consumer: the ``P % C`` extra partitions of each topic go to the first
   consumers of that topic's own shuffled order, not to the lexicographically smallest
   ids. With many topics and ``host-uuid`` consumer ids, seed 002's pile-up on the first
   hosts disappears.

Lag is ignored. Example: topics t0 and t1 of three partitions each, consumers C0 and C1.
If the seed orders t0's subscribers (C0, C1) and t1's (C1, C0), then::

    C0: [t0p0, t0p1, t1p2]
    C1: [t0p2, t1p0, t1p1]

where Range would give C0 both extras. Another seed may draw other orders.
"""

from __future__ import annotations

import hashlib

import numpy as np

from spark_lag_assign.assignors.base import GroupProblem, Strategy
from spark_lag_assign.assignors.range import blocks


def topic_rng(seed: int, topic: str) -> np.random.Generator:
    """A generator that depends only on ``seed`` and ``topic`` (any int seed, negative too)."""
    digest = hashlib.sha256(f"{int(seed)}\x00{topic}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "big"))


def assign_codes(problem: GroupProblem) -> np.ndarray:
    """Range blocks over each topic's subscribers in the order ``topic_rng(seed, topic)`` draws
    (a permutation of the subscribers sorted by id: codes are numbered in id order)."""
    codes = problem.codes()
    index = codes.index
    owner = np.empty(len(codes.row_topic), dtype=np.int64)
    starts, ends = problem.topic_bounds()
    for start, end in zip(starts.tolist(), ends.tolist()):
        topic = int(codes.row_topic[start])
        members = index.class_members[int(index.topic_class[topic])]
        order = members[topic_rng(problem.seed, str(index.topics[topic])).permutation(len(members))]
        owner[start:end] = np.repeat(order, blocks(end - start, len(members)))
    return owner


STRATEGY = Strategy(
    "shuffle", "topic", "Range blocks over a seeded random consumer order per topic", assign_codes=assign_codes,
    uses_seed=True,
)
