"""sticky's steps 1-6 (see ``spark_lag_assign.assignors.sticky``): the problem as classes of
topics and (class, consumer) pairs, and how many partitions each pair ends up with."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from spark_lag_assign.assignors.base import GroupProblem


@dataclass(frozen=True)
class StickyLayout:
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


def sticky_layout(problem: GroupProblem) -> StickyLayout:
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
    return StickyLayout(n_cons, n_topics, row_topic, row_class, prev, row_pair, ptr, pair_class, pair_consumer, class_size)


def balance_score(loads: np.ndarray) -> int:
    """KIP-54's balance score: the sum of ``|n_i - n_j|`` over all consumer pairs; 0 is perfect."""
    s = np.sort(np.asarray(loads, dtype=np.int64))
    weights = 2 * np.arange(len(s), dtype=np.int64) - len(s) + 1
    return int((s * weights).sum())


# -- step 2: quotas ---------------------------------------------------------------------------


def quota_counts(lay: StickyLayout, kept_before: np.ndarray) -> np.ndarray:
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

    def __init__(self, lay: StickyLayout, kept_before: np.ndarray) -> None:
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
        return _chain_to(lay, best[2], via_pair_c, via_pair_k), reached

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


def _chain_to(lay: StickyLayout, c: int, via_pair_c: np.ndarray, via_pair_k: np.ndarray) -> list[int]:
    """The path ``_Balancer._cheapest_chain`` found to consumer ``c``, walked back from it: the
    pairs, alternating give and take, from a source to ``c``."""
    path: list[int] = []
    while via_pair_c[c] >= 0:  # sources were never reached through a class
        take = int(via_pair_c[c])
        give = int(via_pair_k[lay.pair_class[take]])
        path[:0] = [give, take]
        c = int(lay.pair_consumer[give])
    return path


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


def general_counts(lay: StickyLayout, kept_before: np.ndarray) -> np.ndarray:
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
