"""sticky's step 7 (see ``spark_lag_assign.assignors.sticky``): with the counts per (class,
consumer) pair fixed, which partitions each consumer keeps, gives up and receives."""

from __future__ import annotations

import numpy as np

from spark_lag_assign.assignors.sticky_counts import StickyLayout

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
    lay: StickyLayout, rows: np.ndarray, keep: np.ndarray, kept_before: np.ndarray, lags: np.ndarray
) -> np.ndarray:
    """Which of ``rows`` (ascending; their pairs keep some but not all) stay with their owner.

    In keeping order, each pair keeps its first ``keep`` rows: the partitions farthest from
    the group's average lag, then those of topics the owner holds least of relative to their
    size (the j-th partition, from 0, an owner holds of a topic is over its fair share by
    ``(j + 1) - size / subscribers``, so a plan stays spread over topics and a later topic
    deletion unbalances it less), then by a per-owner rotation over topics, then row order.
    """
    n_rows, n_topics, n = len(lay.row_class), lay.n_topics, len(rows)
    pair, by_owner, excess, rotation, typical = _keeping_keys(lay, rows, lags)
    widest = int(excess.max()) + 1

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


def _keeping_keys(
    lay: StickyLayout, rows: np.ndarray, lags: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What ``_kept_of_shrinking`` orders ``rows`` by: per row its pair, how far its owner is
    over its fair share of the row's topic (shifted to start at 0), its owner's rotation over
    topics and its distance from the group's average lag; and the rows' order by owner."""
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
    rotation = topic - prev
    rotation %= n_topics
    typical = np.abs((lags if every else lags[rows]) - lags.mean())
    return pair, by_owner, excess, rotation, typical


class _Held:
    """How many partitions of each of ``topics`` (ascending) each consumer keeps: a dense table
    when topics x consumers is small next to the rows, else sorted (topic, consumer) keys."""

    def __init__(self, lay: StickyLayout, owner: np.ndarray, kept_rows: np.ndarray, topics: np.ndarray) -> None:
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


def row_owners(lay: StickyLayout, counts: np.ndarray, kept_before: np.ndarray, lags: np.ndarray) -> np.ndarray:
    """Owner index per row, given how many partitions each pair ends up with.

    Counts and moves are fixed by now; lag only decides between equally good partitions: a
    consumer over its count gives up the partitions nearest the group's average lag first,
    and the partitions that move go heaviest first to the receivers holding the least lag.
    With equal lags neither rule changes anything.
    """
    n_rows = len(lay.row_class)
    keep = np.minimum(counts, kept_before)
    owner = np.full(n_rows, -1, dtype=np.int64)
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

    # elsewhere each topic's open partitions go to the short consumers holding the fewest of it
    rest = open_rows[has_kept[lay.row_class[open_rows]]]
    if len(rest):
        _deal_open(lay, owner, rest, short, kept_rows, lags)
    return owner


def _deal_open(
    lay: StickyLayout, owner: np.ndarray, rest: np.ndarray, short: np.ndarray, kept_rows: np.ndarray, lags: np.ndarray
) -> None:
    """The open partitions ``rest`` (of classes where something stayed) into ``owner``: each
    topic's to the consumers still short of their count (``short`` per pair, used up here)
    holding the fewest of it; the topics with the most open partitions first, while everyone
    still has room; within a topic the heaviest first to the receivers holding the least lag."""
    n_classes, n_cons = len(lay.ptr) - 1, lay.n_consumers
    receivers = np.bincount(lay.pair_class[short > 0], minlength=n_classes)
    if (receivers[lay.row_class[rest]] == 1).all():  # a join: one taker per class takes all
        taker = np.full(n_classes, -1, dtype=np.int64)
        taker[lay.pair_class[short > 0]] = lay.pair_consumer[short > 0]
        owner[rest] = taker[lay.row_class[rest]]
        return
    topic_class = np.zeros(lay.n_topics, dtype=np.int64)
    topic_class[lay.row_topic] = lay.row_class
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
