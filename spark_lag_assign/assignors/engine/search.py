"""The lag-balancing engine's step 5 (see ``spark_lag_assign.assignors.lagsticky``): local
search on the most loaded consumer, with steps that keep every count rule."""

from __future__ import annotations

from typing import Literal

import numpy as np

from spark_lag_assign.assignors.engine.model import Group, State

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


class Search:
    """Local search on the most loaded consumer (step 5). Three kinds of step keep every
    count rule: a swap of two partitions of one topic; a move of a topic's extra partition
    to a reader at the topic's floor with fewer partitions in all; an exchange of two extra
    partitions of different topics. A step is taken only if it lowers the higher load of
    the two consumers it touches."""

    def __init__(self, group: Group, state: State) -> None:
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
