"""The lag-balancing engine's steps 1-4 (see ``spark_lag_assign.assignors.lagsticky``):
quotas, keep and shed, placement, and the global count balance where subscriptions differ."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from spark_lag_assign.assignors.engine.model import Group, State

# ---------------------------------------------------------------------------------------------
# steps 1-3: quotas, sheds, placement


def distribute(group: Group, state: State, sticky: bool) -> None:
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


def _batches(group: Group, weight: np.ndarray, laps: np.ndarray | None = None) -> list[np.ndarray]:
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
    group: Group, state: State, t: int, base: np.ndarray, extras: np.ndarray, expected: np.ndarray, scale: int
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
    group: Group, state: State, topics: np.ndarray, base: np.ndarray, extras: np.ndarray, expected: np.ndarray,
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
    group: Group, state: State, topics: np.ndarray, rows: np.ndarray, room_t: np.ndarray, room_c: np.ndarray,
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
    def of(cls, group: Group, previous: np.ndarray) -> _Held:
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
    group: Group, state: State, base: np.ndarray, order: np.ndarray, holdings: _Held
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


def _base(group: Group) -> tuple[np.ndarray, np.ndarray]:
    """Per topic, the partitions every reader gets (floor P/C) and how many get one more (P mod C)."""
    size = group.stop - group.start
    n_readers = group.reads.sum(axis=1)
    return size // n_readers, size % n_readers


def _sticky_quotas(group: Group, state: State, base: np.ndarray, extras: np.ndarray, holdings: _Held) -> None:
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
    # consumer-major, as even_counts reads them: the rows of one consumer
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

    even_counts(group, expected, state.extra, state.load, price, lambda giver, taker, topic: None)


def _ranked(fits: bool, scale: int, count: np.ndarray, load: np.ndarray, group: Group, who: np.ndarray) -> np.ndarray:
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


def _place(rows: np.ndarray, readers: np.ndarray, room: np.ndarray, group: Group, state: State) -> None:
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


def even_counts(
    group: Group, count: np.ndarray, extra: np.ndarray, load: np.ndarray, price: HandOver,
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


def move_extra(group: Group, state: State) -> tuple[HandOver, Callable[[int, int, int], None]]:
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
