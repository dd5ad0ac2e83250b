"""KIP-54 sticky assignment (seed 004): balance over stickiness.

Priorities, in order:

1. Balance by partition count across the whole group. With identical subscriptions the
   counts differ by at most one. With differing subscriptions no partition can travel, in
   one move or along a chain of moves, from a consumer to one holding two or more fewer
   (the global optimum; KIP-54 itself only asks that no single move helps).
2. Stickiness: of all plans that balanced, one keeping the most partitions with their
   previous owner.

Partitions of topics with the same subscribers are interchangeable for both goals, so the
algorithm counts per (class of such topics, consumer) and picks concrete partitions last.

1. Drop what no longer holds: owners that left or unsubscribed, deleted partitions.
2. When every consumer reads one class at most (identical subscriptions, or groups of
   consumers on disjoint topics), split each class by quota: ``N // S`` per subscriber,
   ``N % S`` of them one more, the extra going to those that held the most. Everyone keeps
   its previous partitions up to its quota and only the excess moves: the fewest moves
   any balanced plan can make. Skip to step 7.
3. Otherwise everyone keeps its previous partitions, and unowned ones go, classes with the
   fewest subscribers first, each to the least-loaded subscriber (ties: smaller id).
4. Rebalance: move a partition to an eligible consumer holding two or more fewer, largest
   gaps first, newly assigned partitions before previously owned ones; when no direct move
   is left, pass one along a chain (A to B, B to C), the cheapest in lost previous owners.
5. A reassignment that does not lower the balance score (the sum of count differences
   over all pairs of consumers) is reverted: stickiness wins when fairness cannot improve.
6. Trade back: with the balance fixed, exchange partitions around cycles that return more
   partitions to their previous owners than they take; when none is left, no plan this
   balanced keeps more (the optimality test of a min-cost flow).
7. Materialise: a consumer over its count gives up first the partitions whose lag is
   nearest the group's average (so that neither side's lag per partition shifts), then
   those of topics it holds most of relative to their size, then by a per-consumer rotation
   over topics; what is left is dealt to the consumers still short, each topic to those
   holding least of it, heaviest partitions first to the receivers holding the least lag;
   a group starting afresh is dealt round-robin in (topic, partition) order. Lag never
   changes a count or a move, only which of equally good partitions moves.

Example. Topics a (3 partitions), b and c (2 each); C0, C1 and C2 subscribe to all three.
Seven partitions over three consumers: quotas 3, 2, 2, dealt round-robin::

    C0: [a0, b0, c1]    C1: [a1, b1]    C2: [a2, c0]

C1 leaves. Quotas 4 and 3, the extra to C0, which held more. Nobody is over quota: C1's a1
goes to C0 and b1 to C2; the other five partitions stay where they were::

    C0: [a0, a1, b0, c1]    C2: [a2, b1, c0]

C3 joins. Quotas 3, 2, 2, the extra to C0 again. C0 gives up a1, its second partition of
a. C2's a2 is just its share of a (3 partitions, 3 consumers) while b1 and c0 are each over
a share of b or c (2/3 of a partition); its rotation over topics gives up c0. C3 gets a1
and c0: two moves, the fewest possible::

    C0: [a0, b0, c1]    C2: [a2, b1]    C3: [a1, c0]
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from spark_lag_assign.assignors.base import GroupProblem, Strategy


@dataclass(frozen=True)
class _Layout:
    """The problem as integer arrays.

    A *class* is a set of topics with the same subscribers; classes are numbered by fewest
    subscribers first. A *pair* is (class, subscriber of the class); pairs are ordered by
    class, then consumer, so ``pair_class * n_consumers + pair_consumer`` is ascending.
    """

    n_consumers: int
    n_topics: int
    row_topic: np.ndarray  # topic code per row (codes follow the sorted topic names)
    row_class: np.ndarray  # class per row
    row_prev: np.ndarray  # previous owner per row, -1 if none or no longer eligible
    row_pair: np.ndarray  # pair (row class, previous owner) per row, -1 if none
    ptr: np.ndarray  # pairs of class k are ptr[k]:ptr[k + 1]
    pair_class: np.ndarray
    pair_consumer: np.ndarray
    class_size: np.ndarray  # partitions per class


def _layout(problem: GroupProblem) -> _Layout:
    codes = problem.codes()
    index = codes.index
    n_cons = len(index.consumers)
    n_rows = len(codes.row_topic)
    starts, ends = problem.topic_bounds()
    n_topics = len(starts)
    sizes = ends - starts

    # Consumers with the same subscription list (a kind) share one row of the membership
    # matrix, so a group of 1,000 identical consumers costs one lookup, not 1,000; topics
    # without partitions drop out.
    consumer_group = index.kind_of
    member = index.reads[:, codes.row_topic[starts]]

    # classes: distinct columns of the membership matrix, fewest subscribers first
    columns, topic_class = np.unique(member.T, axis=0, return_inverse=True)
    topic_class = topic_class.reshape(-1)
    class_members = columns[:, consumer_group]  # (classes, consumers)
    n_subs = class_members.sum(axis=1)
    first_topic = np.full(len(columns), n_topics, dtype=np.int64)
    np.minimum.at(first_topic, topic_class, np.arange(n_topics))
    order = np.lexsort((first_topic, n_subs))
    relabel = np.empty_like(order)
    relabel[order] = np.arange(len(order))
    topic_class = relabel[topic_class]
    class_members = class_members[order]

    pair_class, pair_consumer = np.nonzero(class_members)
    pair_class = pair_class.astype(np.int64)
    pair_consumer = pair_consumer.astype(np.int64)
    ptr = np.searchsorted(pair_class, np.arange(len(order) + 1))
    row_topic = np.repeat(np.arange(n_topics, dtype=np.int64), sizes)
    row_class = np.repeat(topic_class, sizes)
    class_size = np.bincount(topic_class, weights=sizes, minlength=len(order)).astype(np.int64)

    prev = codes.previous
    has = prev >= 0
    # the contract promises eligible previous owners; a stale one is treated as none
    if has.any():
        has[has] = member[consumer_group[prev[has]], row_topic[has]]
        prev = np.where(has, prev, -1)
    row_pair = np.full(n_rows, -1, dtype=np.int64)
    if has.any():
        n_classes = len(order)
        if n_classes * n_cons <= 4 * n_rows + (1 << 16):  # a dense (class, consumer) -> pair table
            table = np.full(n_classes * n_cons, -1, dtype=np.int64)
            table[pair_class * n_cons + pair_consumer] = np.arange(len(pair_class))
            row_pair[has] = table[row_class[has] * n_cons + prev[has]]
        else:
            pair_key = pair_class * n_cons + pair_consumer
            row_pair[has] = np.searchsorted(pair_key, row_class[has] * n_cons + prev[has])
    return _Layout(n_cons, n_topics, row_topic, row_class, prev, row_pair, ptr, pair_class, pair_consumer, class_size)


def balance_score(loads: np.ndarray) -> int:
    """KIP-54's balance score: the sum of ``|n_i - n_j|`` over all consumer pairs; 0 is perfect."""
    s = np.sort(np.asarray(loads, dtype=np.int64))
    weights = 2 * np.arange(len(s), dtype=np.int64) - len(s) + 1
    return int((s * weights).sum())


# -- step 2: quotas ---------------------------------------------------------------------------


def _quota_counts(lay: _Layout, kept_before: np.ndarray) -> np.ndarray:
    """Partitions per pair when every consumer reads one class at most."""
    sizes = np.diff(lay.ptr)
    low, extra = np.divmod(lay.class_size, sizes)
    # the extra partitions go to those that held the most, so they give up the fewest
    order = np.lexsort((lay.pair_consumer, -kept_before, lay.pair_class))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - lay.ptr[lay.pair_class[order]]
    return low[lay.pair_class] + (rank < extra[lay.pair_class])


# -- steps 3 to 6: the general path -----------------------------------------------------------


def _water_fill(loads: np.ndarray, units: int) -> np.ndarray:
    """How many of ``units`` each consumer gets if each unit goes to the least loaded, ties to
    the earlier position; computed at once instead of one unit at a time."""
    order = np.argsort(loads, kind="stable")
    s = loads[order]
    prefix = np.cumsum(s)
    need = np.arange(1, len(s) + 1) * s - prefix  # units that lift the first j to s[j - 1]
    j = int(np.searchsorted(need, units, side="right"))
    level, extra = divmod(int(units) + int(prefix[j - 1]), j)
    lifted = order[:j]
    target = np.full(j, level, dtype=np.int64)
    target[np.argsort(lifted, kind="stable")[:extra]] += 1
    out = np.zeros(len(s), dtype=np.int64)
    out[lifted] = target - s[:j]
    return out


class _Balancer:
    """Counts per pair and consumer loads, with the moves of steps 3 to 6."""

    def __init__(self, lay: _Layout, kept_before: np.ndarray) -> None:
        self.lay = lay
        self.p = kept_before
        self.restore(kept_before)

    def fill(self) -> None:
        lay = self.lay
        sums = np.add.reduceat(self.x, lay.ptr[:-1]) if len(self.x) else np.zeros(0, dtype=np.int64)
        free = lay.class_size - sums
        for k in np.flatnonzero(free > 0).tolist():  # classes are numbered fewest subscribers first
            seg = slice(int(lay.ptr[k]), int(lay.ptr[k + 1]))
            cons = lay.pair_consumer[seg]
            add = _water_fill(self.loads[cons], int(free[k]))
            self.x[seg] += add
            self.loads[cons] += add

    def direct_moves(self, newly_assigned_only: bool) -> None:
        """Improving one-hop moves until none is left, many per round.

        Each class proposes one move, from its most loaded holder to its least loaded
        subscriber; the largest gaps go first, ties to moves that hand over a newly assigned
        partition or give a previous owner one back. A proposal is taken while, with the
        loads the round has already changed, it still closes a gap of two or more, so every
        move lowers the balance score. A giver gives once per round, so one heavy consumer is
        not drained below the others; a taker (one that just joined) may take many.
        """
        lay = self.lay
        n = lay.n_consumers
        starts = lay.ptr[:-1]
        if len(self.x) == 0:
            return
        while True:
            load = self.loads[lay.pair_consumer]
            extra = self.x > self.p  # holds partitions of the class it did not hold before
            can_give = extra if newly_assigned_only else self.x > 0
            # one integer key per pair: load first, then stickiness, then consumer id
            give_key = np.where(can_give, load * (2 * n) + extra * n + (n - 1 - lay.pair_consumer), -1)
            take_key = load * (2 * n) + (self.x >= self.p) * n + lay.pair_consumer
            best_give = np.maximum.reduceat(give_key, starts)
            best_take = np.minimum.reduceat(take_key, starts)
            gap = np.where(best_give >= 0, best_give // (2 * n) - best_take // (2 * n), 0)
            classes = np.flatnonzero(gap >= 2)
            if len(classes) == 0:
                return
            cost = (best_take[classes] // n) % 2 - (best_give[classes] // n) % 2
            classes = classes[np.lexsort((classes, cost, -gap[classes]))]
            giver = n - 1 - (best_give[classes] % n)
            taker = best_take[classes] % n
            gave: set[int] = set()
            took: set[int] = set()
            for k, a, b in zip(classes.tolist(), giver.tolist(), taker.tolist()):
                if a in gave or a in took or b in gave or self.loads[a] - self.loads[b] < 2:
                    continue
                gave.add(a)
                took.add(b)
                seg = lay.pair_consumer[lay.ptr[k] : lay.ptr[k + 1]]
                base = int(lay.ptr[k])
                self._shift(base + int(np.searchsorted(seg, a)), -1)
                self._shift(base + int(np.searchsorted(seg, b)), 1)

    def _cheapest_chain(self, sources: np.ndarray, frozen: np.ndarray, top: int) -> tuple[list[int], np.ndarray]:
        """Dijkstra over consumers and classes from ``sources``: a consumer reaches a class it
        holds (cost 1 if it only holds previously owned partitions of it, else 0) and a class
        reaches its subscribers. Returns the cheapest path (pairs, alternating give/take) to a
        consumer with load <= top - 2, or [] and the set of consumers reached."""
        lay = self.lay
        n = lay.n_consumers
        holds = np.flatnonzero(self.x > 0)
        by_consumer = holds[np.argsort(lay.pair_consumer[holds], kind="stable")]
        cstart = np.searchsorted(lay.pair_consumer[by_consumer], np.arange(n + 1))
        dist_c = np.full(n, np.iinfo(np.int64).max)
        dist_k = np.full(len(lay.ptr) - 1, np.iinfo(np.int64).max)
        via_pair_c = np.full(n, -1, dtype=np.int64)  # taking pair that reached the consumer
        via_pair_k = np.full(len(lay.ptr) - 1, -1, dtype=np.int64)  # giving pair that reached the class
        heap: list[tuple[int, int, int]] = []
        for c in sources.tolist():
            dist_c[c] = 0
            heap.append((0, 0, c))
        heapq.heapify(heap)
        reached = np.zeros(n, dtype=bool)
        best: tuple[int, int, int] | None = None
        while heap:
            d, kind, node = heapq.heappop(heap)
            if kind == 0:
                if reached[node] or d > dist_c[node]:
                    continue
                reached[node] = True
                if self.loads[node] <= top - 2:
                    cand = (d, int(self.loads[node]), node)
                    if best is None or cand < best:
                        best = cand
                    continue  # a target is an end point, not a relay
                if best is not None and d >= best[0]:
                    continue
                for pair in by_consumer[cstart[node] : cstart[node + 1]].tolist():
                    k = int(lay.pair_class[pair])
                    w = d + (0 if self.x[pair] > self.p[pair] else 1)
                    if w < dist_k[k]:
                        dist_k[k] = w
                        via_pair_k[k] = pair
                        heapq.heappush(heap, (w, 1, k))
            else:
                if d > dist_k[node]:
                    continue
                lo, hi = int(lay.ptr[node]), int(lay.ptr[node + 1])
                for pair in range(lo, hi):
                    c = int(lay.pair_consumer[pair])
                    if frozen[c] or d >= dist_c[c]:
                        continue
                    dist_c[c] = d
                    via_pair_c[c] = pair
                    heapq.heappush(heap, (d, 0, c))
        if best is None:
            return [], reached
        path: list[int] = []
        c = best[2]
        while via_pair_c[c] >= 0:  # sources were never reached through a class
            take = int(via_pair_c[c])
            give = int(via_pair_k[lay.pair_class[take]])
            path[:0] = [give, take]
            c = int(lay.pair_consumer[give])
        return path, reached

    def chain_moves(self) -> bool:
        """Improving chains, level by level from the most loaded; True if any was made."""
        lay = self.lay
        active = np.bincount(lay.pair_consumer, minlength=lay.n_consumers) > 0
        frozen = ~active
        moved = False
        while True:
            live = ~frozen
            if not live.any():
                return moved
            top = int(self.loads[live].max())
            if int(self.loads[live].min()) > top - 2:
                return moved
            sources = np.flatnonzero(live & (self.loads == top))
            path, reached = self._cheapest_chain(sources, frozen, top)
            if not path:
                # nothing reachable from the top level can improve: those consumers are final
                frozen |= reached
                continue
            for give, take in zip(path[0::2], path[1::2]):
                self._shift(give, -1)
                self._shift(take, 1)
            moved = True
            self.direct_moves(newly_assigned_only=False)


    def trade_back(self) -> None:
        """Cancel cycles of hand-overs that return more partitions to their previous owners
        than they take away, until none is left.

        Nodes are consumers, classes and one node per load level; a consumer gives a class it
        holds (cost 1 if only previous partitions of it are left), a class goes to a
        subscriber (cost -1 if that subscriber lost some of it), and level v passes a unit
        from a consumer at v + 1 to one at v (so the multiset of loads, and the balance
        score, stay the same). With the balance fixed, a plan with no negative cycle keeps
        the most previous partitions: the optimality test of a min-cost flow.
        """
        lay = self.lay
        n = lay.n_consumers
        n_classes = len(lay.ptr) - 1
        while (self.x < self.p).any():  # only a lost previous partition can pay for a cycle
            give = np.flatnonzero(self.x > 0)
            levels, load_level = np.unique(np.r_[self.loads, self.loads - 1], return_inverse=True)
            down = n + n_classes + load_level[n:]  # the level one below each consumer's load
            here = n + n_classes + load_level[:n]
            cons = np.arange(n)
            src = np.r_[lay.pair_consumer[give], n + lay.pair_class, down, cons]
            dst = np.r_[n + lay.pair_class[give], lay.pair_consumer, cons, here]
            cost = np.r_[
                (self.x[give] <= self.p[give]).astype(np.int64),
                -(self.x < self.p).astype(np.int64),
                np.zeros(2 * n, dtype=np.int64),
            ]
            cycles = _negative_cycles(n + n_classes + len(levels), src, dst, cost)
            if not cycles:
                return
            for cycle in cycles:  # node-disjoint, so no two share an arc
                arcs = np.asarray(cycle, dtype=np.int64)
                gives = give[arcs[arcs < len(give)]]
                takes = arcs[(arcs >= len(give)) & (arcs < len(give) + len(self.x))] - len(give)
                # as many units as every arc carries at the same cost; a level arc carries one
                room = [
                    np.where(self.x[gives] > self.p[gives], self.x[gives] - self.p[gives], self.x[gives]),
                    np.where(self.x[takes] < self.p[takes], self.p[takes] - self.x[takes], len(lay.row_class)),
                ]
                units = 1 if len(arcs) > len(gives) + len(takes) else int(min(r.min() for r in room if len(r)))
                for pair in gives.tolist():
                    self._shift(pair, -units)
                for pair in takes.tolist():
                    self._shift(pair, units)

    def restore(self, x: np.ndarray) -> None:
        self.x = x.copy()
        loads = np.bincount(self.lay.pair_consumer, weights=self.x, minlength=self.lay.n_consumers)
        self.loads = loads.astype(np.int64)

    def _shift(self, pair: int, by: int) -> None:
        self.x[pair] += by
        self.loads[self.lay.pair_consumer[pair]] += by


def _negative_cycles(n_nodes: int, src: np.ndarray, dst: np.ndarray, cost: np.ndarray) -> list[list[int]]:
    """Node-disjoint negative-cost cycles (as arc lists), none if there is none: Bellman-Ford
    from every node at once, relaxing all arcs per round; every cycle among the predecessor
    links is negative."""
    dist = np.zeros(n_nodes, dtype=np.int64)
    pred = np.full(n_nodes, -1, dtype=np.int64)
    for _ in range(n_nodes + 1):
        reach = dist[src] + cost
        better = np.flatnonzero(reach < dist[dst])
        if len(better) == 0:
            return []
        best = np.full(n_nodes, np.iinfo(np.int64).max)
        np.minimum.at(best, dst[better], reach[better])
        better = better[reach[better] == best[dst[better]]]
        _, first = np.unique(dst[better], return_index=True)  # lowest arc id per node
        better = better[first]
        dist[dst[better]] = reach[better]
        pred[dst[better]] = better
        cycles = _pred_cycles(pred, src)
        if cycles:
            return cycles
    raise AssertionError("sticky: Bellman-Ford neither converged nor found a cycle")


def _pred_cycles(pred: np.ndarray, src: np.ndarray) -> list[list[int]]:
    """The cycles among the predecessor links, found by pointer doubling: after as many steps
    as there are nodes, a walk that has not reached a root is on a cycle."""
    n_nodes = len(pred)
    up = np.append(np.where(pred >= 0, src[np.maximum(pred, 0)], n_nodes), n_nodes)  # n_nodes: root
    jump = up
    for _ in range(int(n_nodes).bit_length() + 1):
        jump = jump[jump]
    cycles = []
    seen: set[int] = set()
    for start in np.unique(jump[:-1][jump[:-1] != n_nodes]).tolist():
        if start in seen:
            continue
        nodes = []
        node = start
        while True:
            nodes.append(node)
            seen.add(node)
            node = int(up[node])
            if node == start:
                break
        cycles.append([int(pred[v]) for v in reversed(nodes)])
    return cycles


def _general_counts(lay: _Layout, kept_before: np.ndarray) -> np.ndarray:
    bal = _Balancer(lay, kept_before)
    bal.fill()  # step 3
    before_x, before_score = bal.x.copy(), balance_score(bal.loads)
    bal.direct_moves(newly_assigned_only=True)  # step 4
    bal.direct_moves(newly_assigned_only=False)
    bal.chain_moves()
    if balance_score(bal.loads) >= before_score:  # step 5
        bal.restore(before_x)
    bal.trade_back()  # step 6
    return bal.x


# -- step 7 -----------------------------------------------------------------------------------


def _capped_fill(held: np.ndarray, cap: np.ndarray, units: int) -> np.ndarray:
    """How many of ``units`` partitions of one topic each consumer gets, at most ``cap`` each,
    if each goes to whoever holds the fewest of the topic (ties: the most places left, then
    the earlier position): the lowest holders are lifted to a common level at once."""
    out = np.zeros(len(held), dtype=np.int64)
    room = np.flatnonzero(cap > 0)
    held, cap = held[room], cap[room]
    if units == 1:  # the common case on a rebalance: one partition here, one there
        out[room[np.lexsort((room, -cap, held))[0]]] = 1
        return out

    def given(level: int) -> np.ndarray:
        return np.clip(level - held, 0, cap)

    lo, hi = int(held.min()), int((held + cap).max())
    while lo < hi:  # the smallest level that places every unit
        mid = (lo + hi) // 2
        if int(given(mid).sum()) >= units:
            hi = mid
        else:
            lo = mid + 1
    got = given(lo - 1)
    rest = units - int(got.sum())
    can = np.flatnonzero(given(lo) > got)
    got[can[np.lexsort((can, got[can] - cap[can]))][:rest]] += 1
    out[room] = got
    return out


#: the packed keys of ``_kept_of_shrinking`` must stay below this (int64, with room to spare)
_PACK_LIMIT = 2**62
#: up to this many partitions given up per owner are found as maxima, beyond it by sorting
_FEW_DROPS = 4
#: ``_Held`` keeps a dense (topic, consumer) table up to this many cells per row, plus a floor
_DENSE_PER_ROW, _DENSE_FLOOR = 4, 1 << 16


def _stable_order(key: np.ndarray) -> np.ndarray:
    """``np.argsort(key, kind="stable")`` for non-negative integer keys: below 2^32 as one or
    two passes of numpy's radix sort on 16-bit digits, several times faster than a merge sort."""
    if len(key) == 0:
        return np.zeros(0, dtype=np.int64)
    top = int(key.max())
    if top < 2**16:
        return np.argsort(key.astype(np.uint16), kind="stable")
    if top < 2**32:
        order = np.argsort((key & 0xFFFF).astype(np.uint16), kind="stable")
        return order[np.argsort((key[order] >> 16).astype(np.uint16), kind="stable")]
    return np.argsort(key, kind="stable")


def _interleave(owners: np.ndarray, amounts: np.ndarray) -> np.ndarray:
    """``owners`` repeated by ``amounts`` in round-robin order: o0, o1, o2, o0, o2, ..."""
    if len(amounts) and (amounts[1:] <= amounts[:-1]).all() and amounts[0] - amounts[-1] <= 1:
        return np.resize(owners, int(amounts.sum()))  # q + 1 for a first few, q for the rest: a cycle
    slots = np.repeat(owners, amounts)
    rounds = np.arange(len(slots)) - np.repeat(np.cumsum(amounts) - amounts, amounts)
    if len(owners) > 1 and not (owners[1:] > owners[:-1]).all():
        return slots[np.lexsort((slots, rounds))]
    return slots[_stable_order(rounds)]  # ascending owners: within a round, already in order


def _segments(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of each run of equal values of a sorted array."""
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return starts, np.diff(np.r_[starts, len(keys)])


def _kept_of_shrinking(
    lay: _Layout, rows: np.ndarray, keep: np.ndarray, kept_before: np.ndarray, lags: np.ndarray
) -> np.ndarray:
    """Which of ``rows`` (ascending; their pairs keep some but not all) stay with their owner.

    In keeping order, each pair keeps its first ``keep`` rows: the partitions farthest from
    the group's average lag, then those of topics the owner holds least of relative to their
    size (the j-th partition, from 0, an owner holds of a topic is over its fair share by
    ``(j + 1) - size / subscribers``, so a plan stays spread over topics and a later topic
    deletion unbalances it less), then by a per-owner rotation over topics, then row order.
    """
    n_rows, n_topics, n = len(lay.row_class), lay.n_topics, len(rows)
    every = n == n_rows  # a join: every row is a candidate, so no gathering
    prev = lay.row_prev if every else lay.row_prev[rows]
    topic = lay.row_topic if every else lay.row_topic[rows]
    pair = lay.row_pair if every else lay.row_pair[rows]
    # rows ascend, so a stable sort by owner leaves each (owner, topic) group contiguous
    by_owner = _stable_order(prev)
    topic_by_owner = topic[by_owner]
    prev_by_owner = prev[by_owner]
    group_start = np.flatnonzero(
        np.r_[True, (topic_by_owner[1:] != topic_by_owner[:-1]) | (prev_by_owner[1:] != prev_by_owner[:-1])]
    )
    within = np.empty(n, dtype=np.int64)
    within[by_owner] = np.arange(n) - np.repeat(group_start, np.diff(np.r_[group_start, n]))
    subscribers = np.diff(lay.ptr)[lay.row_class if every else lay.row_class[rows]]
    excess = (within + 1) * subscribers - np.bincount(lay.row_topic, minlength=n_topics)[topic]
    excess -= excess.min()
    widest = int(excess.max()) + 1
    rotation = topic - prev
    rotation %= n_topics
    typical = np.abs((lags if every else lags[rows]) - lags.mean())

    # one integer per row, ascending in keeping order, when the four keys fit in 62 bits
    if typical.min() == typical.max():
        score, spread = excess, 1
    else:
        _, closeness = np.unique(-typical, return_inverse=True)
        spread = int(closeness.max()) + 1
        score = closeness * widest + excess
    drop = kept_before - keep
    if spread * widest * n_topics * n_rows >= _PACK_LIMIT:  # keys too wide to pack: sort by them in turn
        order = np.lexsort((rows, rotation, excess, -typical, pair))
    else:
        score = score * n_topics + rotation
        score *= n_rows
        score += rows
        most = int(drop[(keep > 0) & (drop > 0)].max())
        if most <= _FEW_DROPS:  # a join: each owner gives up one or two, found by a few maxima per pair
            # with a single class pairs follow owners, so the order by owner is the order by pair
            by_pair = by_owner if len(lay.ptr) == 2 else _stable_order(pair)
            score, pair = score[by_pair], pair[by_pair]
            starts, lengths = _segments(pair)
            dropped = np.zeros(n, dtype=bool)
            wanted = drop[pair[starts]]
            for step in range(most):
                top = np.maximum.reduceat(score, starts)
                hit = (score == np.repeat(top, lengths)) & np.repeat(wanted > step, lengths)
                dropped |= hit
                score[hit] = -1
            return rows[by_pair][~dropped]
        order = np.lexsort((score, pair))
    pair_sorted = pair[order]
    rank = np.arange(len(order)) - np.searchsorted(pair_sorted, pair_sorted, side="left")
    return rows[order][rank < keep[pair_sorted]]


class _Held:
    """How many partitions of each of ``topics`` (ascending) each consumer keeps: a dense table
    when topics x consumers is small next to the rows, else sorted (topic, consumer) keys."""

    def __init__(self, lay: _Layout, owner: np.ndarray, kept_rows: np.ndarray, topics: np.ndarray) -> None:
        self.n_cons = n_cons = lay.n_consumers
        slot = np.full(lay.n_topics, -1, dtype=np.int64)
        slot[topics] = np.arange(len(topics))
        kept_slot = slot[lay.row_topic[kept_rows]]
        inside = kept_slot >= 0
        keys = kept_slot[inside] * n_cons + owner[kept_rows[inside]]
        self.dense = len(topics) * n_cons <= _DENSE_PER_ROW * len(lay.row_class) + _DENSE_FLOOR
        if self.dense:
            self.table = np.bincount(keys, minlength=len(topics) * n_cons)
        else:
            self.keys, self.counts = np.unique(keys, return_counts=True)

    def of(self, i: int, cons: np.ndarray) -> np.ndarray:
        """Per consumer of ``cons`` (ascending), its kept partitions of the i-th topic."""
        if self.dense:
            return self.table[i * self.n_cons + cons]
        lo, hi = np.searchsorted(self.keys, [i * self.n_cons, (i + 1) * self.n_cons])
        held = np.zeros(len(cons), dtype=np.int64)
        held[np.searchsorted(cons, self.keys[lo:hi] - i * self.n_cons)] = self.counts[lo:hi]
        return held


def _owners(lay: _Layout, counts: np.ndarray, kept_before: np.ndarray, lags: np.ndarray) -> np.ndarray:
    """Owner index per row, given how many partitions each pair ends up with.

    Counts and moves are fixed by now; lag only decides between equally good partitions: a
    consumer over its count gives up the partitions nearest the group's average lag first,
    and the partitions that move go heaviest first to the receivers holding the least lag.
    With equal lags neither rule changes anything.
    """
    n_rows, n_cons = len(lay.row_class), lay.n_consumers
    keep = np.minimum(counts, kept_before)
    owner = np.full(n_rows, -1, dtype=np.int64)
    topic_class = np.zeros(lay.n_topics, dtype=np.int64)
    topic_class[lay.row_topic] = lay.row_class
    subscribers = np.diff(lay.ptr)

    rows = np.flatnonzero(lay.row_pair >= 0)
    if len(rows) == 0 and len(subscribers) == 1:  # a first plan of one class: deal it round-robin
        return lay.pair_consumer[_interleave(np.arange(len(counts)), counts)]
    pair = lay.row_pair[rows]
    shrinking = keep[pair] < kept_before[pair]
    kept_rows = rows[~shrinking]  # a consumer that keeps everything of a class needs no choice
    choose = rows[shrinking & (keep[pair] > 0)]  # one that keeps nothing of it needs none either
    if len(choose):
        kept_rows = np.concatenate([kept_rows, _kept_of_shrinking(lay, choose, keep, kept_before, lags)])
    owner[kept_rows] = lay.row_prev[kept_rows]

    short = counts - keep
    open_rows = np.flatnonzero(owner < 0)
    if int(short.sum()) != len(open_rows):
        raise AssertionError(f"sticky: {len(open_rows)} partitions to place but {int(short.sum())} places")
    has_kept = np.bincount(lay.row_class[kept_rows], minlength=len(subscribers)) > 0

    # a class where nothing stayed is dealt round-robin in (topic, partition) order: every
    # topic and the group as a whole come out even
    fresh_rows = open_rows[~has_kept[lay.row_class[open_rows]]]
    if len(fresh_rows):
        fresh_pairs = np.flatnonzero(~has_kept[lay.pair_class])
        slots = _interleave(fresh_pairs, short[fresh_pairs])
        if int((~has_kept).sum()) > 1:  # more than one class starts afresh: deal each its own rows
            slots = slots[_stable_order(lay.pair_class[slots])]
            fresh_rows = fresh_rows[_stable_order(lay.row_class[fresh_rows])]
        owner[fresh_rows] = lay.pair_consumer[slots]

    # elsewhere each topic's open partitions go to the short consumers holding the fewest of
    # it; the topics with the most open partitions first, while everyone still has room
    rest = open_rows[has_kept[lay.row_class[open_rows]]]
    if len(rest):
        receivers = np.bincount(lay.pair_class[short > 0], minlength=len(subscribers))
        if (receivers[lay.row_class[rest]] == 1).all():  # a join: one taker per class takes all
            taker = np.full(len(subscribers), -1, dtype=np.int64)
            taker[lay.pair_class[short > 0]] = lay.pair_consumer[short > 0]
            owner[rest] = taker[lay.row_class[rest]]
            return owner
        placed = owner >= 0
        lag_held = np.bincount(owner[placed], weights=lags[placed], minlength=n_cons)
        topics, first, sizes = np.unique(lay.row_topic[rest], return_index=True, return_counts=True)
        held = _Held(lay, owner, kept_rows, topics)
        for i in np.lexsort((topics, -sizes)).tolist():
            t, m = int(topics[i]), int(sizes[i])
            k = int(topic_class[t])
            seg = slice(int(lay.ptr[k]), int(lay.ptr[k + 1]))
            cons = lay.pair_consumer[seg]
            got = _capped_fill(held.of(i, cons), short[seg], m)
            short[seg] -= got
            open_t = rest[first[i] : first[i] + m]
            if m > 1 and lags[open_t].min() != lags[open_t].max():
                # heaviest first, round-robin over the receivers from the least loaded with lag
                open_t = open_t[np.argsort(-lags[open_t], kind="stable")]
                takers = np.flatnonzero(got)
                takers = takers[np.argsort(lag_held[cons[takers]], kind="stable")]
                owner[open_t] = cons[takers[_interleave(np.arange(len(takers)), got[takers])]]
            else:
                owner[open_t] = _interleave(cons, got)
            np.add.at(lag_held, owner[open_t], lags[open_t])
    return owner


def assign_codes(problem: GroupProblem) -> np.ndarray:
    if len(problem.partitions) == 0:  # (the topics column is a million objects made on first read)
        return np.zeros(0, dtype=np.int64)
    lay = _layout(problem)
    kept_before = np.bincount(lay.row_pair[lay.row_pair >= 0], minlength=len(lay.pair_class)).astype(np.int64)
    per_consumer = np.bincount(lay.pair_consumer, minlength=lay.n_consumers)
    if per_consumer.max() <= 1:
        counts = _quota_counts(lay, kept_before)
    else:
        counts = _general_counts(lay, kept_before)
    return _owners(lay, counts, kept_before, np.asarray(problem.lags, dtype=np.float64))


def assign_group(problem: GroupProblem) -> list[str]:
    return problem.codes().index.names[assign_codes(problem)].tolist()


STRATEGY = Strategy(
    "sticky", "group", "KIP-54: balanced by count, then sticky", assign_group=assign_group,
    assign_codes=assign_codes, uses_previous=True,
)
