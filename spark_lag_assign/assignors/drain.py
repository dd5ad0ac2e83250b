"""drain: plan for time, not messages. The largest time-to-drain as small as the counts allow.

The time model is ``spark_lag_assign.core.draintime``'s: consumer ``c`` reads ``r_c`` records per
second, producers append ``p_i`` per second to partition ``i``, so ``c`` drains its lag
``L_c`` in ``L_c / (r_c - P_c)`` (``P_c``: the produce rate of its partitions), never if
``P_c >= r_c``. The plan drains when its slowest consumer does: that makespan is what
``drain`` minimises.

Priorities, in order:

1. Counts, per unit of speed. Consumer ``c`` counts as ``k_c`` readers, its read rate over
   the slowest consumer's rounded to a whole number (1 to ``MAX_SHARE`` = 8; ``shares``).
   Per topic every one of those readers holds floor or ceil of P / (their number), and over
   the group they differ by at most one where subscriptions agree: partitions per unit of
   speed (count / k_c) have spreads of at most one, per topic and over the group. Where the
   rates are about equal (all k_c = 1) that is lag-sticky's rule, both spreads <= 1; where
   some pipelines read twice as fast or more, they take about that many times the
   partitions, which a count spread of one would forbid (half the pipelines 2x faster: the
   fast ones need twice the lag *and* keep up with twice the producers).
2. The makespan, as close to the fluid lower bound as the counts allow (see
   ``spark_lag_assign.core.rates.lower_bound``). Where every consumer counts as the same number
   of readers (the counts are lag-sticky's), never slower than lag-sticky on the same input.
3. Stickiness: a previous plan is kept unless a new one drains more than ``margin``
   (default 5%) sooner.

How (lag-sticky's machinery, with weights and speeds, on the readers of step 1: a consumer
worth ``k_c`` readers is split into ``k_c`` of speed ``r_c / k_c``, planned, and merged
back; the times and the bound are always those of the real consumers). Draining by time ``T`` means
``L_c + T·P_c <= T·r_c`` for every consumer: the messages a consumer must read by ``T``
(its backlog and what is appended meanwhile) fit in what it reads by then. So for a target
``T`` each partition weighs ``w_i = L_i + T·p_i`` and each consumer has speed ``r_c``, and
balancing ``load / speed`` is lag-sticky's problem with unequal consumers:

1. ``T`` = the fluid lower bound; lag-sticky's steps on the weights: from scratch, from the
   previous plan (its counts restored), or, where every ``k_c`` is equal, from lag-sticky's
   own plan of the input. That plan is taken as it is when it drains within ``margin / 4``
   of the bound (no plan can be more than that faster), and it stays the answer unless the
   search finds one that drains sooner: so drain is never slower than lag-sticky there.
   Where the ``k_c`` differ, lag-sticky's equal counts break rule 1 and its plan is no
   candidate (nor worth its cost: it gives a pipeline half as fast the same lag). There
   lag-sticky's plan can drain sooner, on small groups: five partitions, two pipelines at
   2.4:1 (found by hypothesis).
2. ``T`` = the makespan the plan reached; reweigh and run lag-sticky's local search again
   (a plan whose every ``load / speed`` is below ``T`` drains before ``T``): a few rounds,
   each taken only if it shortens the makespan, the next only if it shortened it by more
   than ``margin / 2`` (a round re-sorts every row), all of them within ``max_swaps`` steps.
3. Where consumers were split and the plan is not within ``margin`` of the bound, the same
   steps on the whole consumers are a candidate too (a split reader of speed ``r_c / k_c``
   cannot keep up with a partition hotter than that, its consumer can): the plan that
   drains soonest wins. With a previous plan, the previous owners (counts restored) are kept unless the
   winner drains more than ``margin`` sooner.

With no rates, or equal read rates and no producers, time is lag over a constant and the
strategy is lag-sticky itself (``margin`` as its ``tolerance``).

When producers append faster than a consumer can read, whatever it is given, there is no
time to give: the plan is still made (the least overloaded found) and
``cannot_keep_up(...)`` names the consumers that never drain; the planner prints it and
``plan.json`` lists them.

Options: ``margin`` (0.05), ``max_swaps`` (1000, as lag-sticky), ``read_rates``
(``{consumer: records/s}``, every consumer), ``produce_rates`` (DataFrame[topic,
partition, produce_rate]; partitions missing from it count as 0).

Worked example. C0 reads 200/s, C1 100/s; t0 has lags 600, 300, 300, 0 and nothing is
produced. lag-sticky evens lag: C0 [t0p0, t0p3] 600, C1 [t0p1, t0p2] 600, so C1 needs 6 s.
``drain`` counts C0 as two readers (C0a, C0b) and C1 as one, all at 100/s: LB = 1200 / 300
= 4 s. Four partitions for three readers: one each and an extra, which goes to C0a (ties by
id); heaviest first to the least loaded: 600 to C0a, 300 to C0b, 300 to C1, then 0 to C0a::

    C0: [t0p0, t0p1, t0p3]  900 -> 4.5 s
    C1: [t0p2]              300 -> 3.0 s

C0 holds 3 partitions for 2 units of speed, C1 1 for 1 (1.5 and 1 per unit: within one);
no plan does better than 4.5 s, since whoever holds the 600 holds another 300 or waits 6 s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from spark_lag_assign.assignors import engine, lagsticky
from spark_lag_assign.assignors.base import GroupProblem, Strategy
from spark_lag_assign.core import rates as rates_mod
from spark_lag_assign.errors import InputError, StrategyError

DEFAULTS: dict[str, float | int] = {"margin": 0.05, "max_swaps": 1_000}
RATE_OPTIONS = ("read_rates", "produce_rates")
ROUNDS = 4  # reweighing rounds of step 2; each must shorten the makespan, most stop after one or two
SCALE = 2.0**40  # weights are integers: the total weight is scaled to about this many units
MAX_SHARE = 8  # a consumer counts as at most this many readers (see ``shares``)


@dataclass(frozen=True)
class Options:
    margin: float
    max_swaps: int
    read: dict[str, float] | None
    produce: pd.DataFrame | None


def options(raw: Mapping[str, Any]) -> Options:
    unknown = sorted(set(raw) - set(DEFAULTS) - set(RATE_OPTIONS))
    if unknown:
        raise StrategyError(f"drain takes no option {', '.join(unknown)}; it takes: {', '.join((*DEFAULTS, *RATE_OPTIONS))}")
    margin = raw.get("margin", DEFAULTS["margin"])
    max_swaps = raw.get("max_swaps", DEFAULTS["max_swaps"])
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not margin >= 0 or not math.isfinite(margin):
        raise StrategyError(f"drain: margin must be a number >= 0, not {margin!r}")
    if isinstance(max_swaps, bool) or not isinstance(max_swaps, int) or max_swaps < 0:
        raise StrategyError(f"drain: max_swaps must be an integer >= 0, not {max_swaps!r}")
    read = raw.get("read_rates")
    if read is not None:
        if not isinstance(read, Mapping):
            raise StrategyError("drain: read_rates must map consumer ids to records per second")
        read = {str(c): rates_mod.check_rate(v, f"the read rate of consumer {c!r}") for c, v in read.items()}
    produce = raw.get("produce_rates")
    if produce is not None:
        if not isinstance(produce, pd.DataFrame) or not {"topic", "partition", "produce_rate"} <= set(produce.columns):
            raise StrategyError("drain: produce_rates must be a DataFrame[topic, partition, produce_rate]")
        values = pd.to_numeric(produce["produce_rate"], errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            r = produce.iloc[int(np.argmax(bad))]
            raise InputError(f"drain: invalid produce rate {r['produce_rate']!r} for {r['topic']}-{r['partition']}")
    return Options(float(margin), int(max_swaps), read, produce)


def consumer_rates(read: Mapping[str, float], consumers: list[str]) -> np.ndarray:
    """The read rate of each consumer, in order; InputError for a missing or unknown one."""
    unknown = sorted(set(read) - set(consumers))
    if unknown:
        raise InputError(f"read rates given for consumer(s) not in the group: {', '.join(unknown[:5])}")
    missing = [c for c in consumers if c not in read]
    if missing:
        raise InputError(f"no read rate for consumer(s) {', '.join(missing[:5])}")
    return np.asarray([read[c] for c in consumers], dtype=np.float64)


def assign_codes(problem: GroupProblem) -> np.ndarray:
    """The owner of each row as a consumer code (``problem.consumers`` is sorted: code order)."""
    opts = options(problem.options)
    consumers = list(problem.consumers)
    if len(problem.partitions) == 0:
        return np.zeros(0, dtype=np.int64)
    plain = problem.replace(options={"tolerance": opts.margin, "max_swaps": opts.max_swaps})
    if opts.read is None:
        return lagsticky.assign_codes(plain)
    speed = consumer_rates(opts.read, consumers)
    produce = np.zeros(len(problem.partitions))
    if opts.produce is not None and len(opts.produce):
        codes = problem.codes()
        topic = codes.index.topic_codes(opts.produce["topic"])
        produce = rates_mod.produce_by_code(opts.produce, topic, codes.row_topic, problem.partitions)
    if not produce.any() and np.all(speed == speed[0]):
        return lagsticky.assign_codes(plain)  # time is lag over a constant
    return _plan(problem, consumers, speed, produce, opts)


def makespan(owner: np.ndarray, lags: np.ndarray, produce: np.ndarray, speed: np.ndarray) -> tuple[float, float]:
    """(time to drain, overload): the slowest consumer's time, and how far producers outrun the
    most overloaded consumer (max of P_c / r_c; at most 1 where every consumer keeps up)."""
    n = len(speed)
    lag_c = np.bincount(owner, weights=lags.astype(np.float64), minlength=n)
    prod_c = np.bincount(owner, weights=produce, minlength=n)
    times = rates_mod.drain_seconds(lag_c, prod_c, speed)
    return float(times.max()), float((prod_c / speed).max())


def cannot_keep_up(owner: np.ndarray, lags: np.ndarray, produce: np.ndarray, speed: np.ndarray) -> np.ndarray:
    """Indices of consumers that never drain under ``owner``."""
    n = len(speed)
    lag_c = np.bincount(owner, weights=lags.astype(np.float64), minlength=n)
    prod_c = np.bincount(owner, weights=produce, minlength=n)
    return np.flatnonzero(np.isinf(rates_mod.drain_seconds(lag_c, prod_c, speed)))


def _weights(lags: np.ndarray, produce: np.ndarray, horizon: float) -> np.ndarray:
    """``L_i + T·p_i`` as int64, scaled so that their total is about ``SCALE`` units."""
    w = lags.astype(np.float64) + horizon * produce
    total = float(w.sum())
    if total <= 0:
        return np.zeros(len(w), dtype=np.int64)
    return np.rint(w * (SCALE / total)).astype(np.int64)


def _better(a: tuple[float, float], b: tuple[float, float], margin: float = 0.0) -> bool:
    """Does a plan with (makespan, overload) ``a`` drain more than ``margin`` sooner than ``b``?
    Between plans that never drain, the less overloaded is better."""
    if math.isinf(a[0]) or math.isinf(b[0]):
        if math.isinf(a[0]) != math.isinf(b[0]):
            return not math.isinf(a[0])
        return a[1] * (1 + margin) < b[1]
    return a[0] * (1 + margin) < b[0]


def shares(speed: np.ndarray) -> np.ndarray:
    """How many readers' worth of partitions each consumer takes: its read rate over the
    slowest's, rounded, between 1 and ``MAX_SHARE`` (all 1 where the rates are about equal)."""
    return np.clip(np.rint(speed / speed.min()), 1, MAX_SHARE).astype(np.int64)


def _plan(problem: GroupProblem, consumers: list[str], speed: np.ndarray, produce: np.ndarray, opts: Options) -> np.ndarray:
    lags = np.asarray(problem.lags, dtype=np.int64)
    k = shares(speed)

    def score(owner: np.ndarray) -> tuple[float, float]:
        return makespan(owner, lags, produce, speed)

    bound = rates_mod.lower_bound(lags, produce, speed)
    if np.all(k == k[0]):
        # lag-sticky's plan keeps the same count rules: it is the first candidate, kept if no
        # plan can drain more than a quarter of the margin sooner, else where the search starts
        plain = lagsticky.assign_codes(problem.replace(options={"tolerance": opts.margin, "max_swaps": opts.max_swaps}))
        plain_score = score(plain)
        if plain_score[0] <= bound * (1 + opts.margin / 4):
            best, kept = plain, _kept(problem, consumers, speed, produce, bound)
        else:
            best, kept = _search(problem, consumers, speed, produce, opts, score, bound, start=plain)
            if not _better(score(best), plain_score):
                best = plain
    else:
        # counts per unit of speed: consumer c plays k_c readers of speed r_c / k_c (lag-sticky's
        # plan, with equal counts, breaks that rule and is no candidate)
        split, real = _split(problem, consumers, k)
        best, kept = _search(split, list(split.consumers), speed[real] / k[real], produce, opts, lambda o: score(real[o]), bound)
        best = real[best]
        kept = None if kept is None else real[kept]
        if not score(best)[0] <= (1 + opts.margin) * bound:
            # a split reader may be too slow for a hot partition its consumer could keep up
            # with: the plan with whole consumers is a candidate too, the faster one wins
            whole, whole_kept = _search(problem, consumers, speed, produce, opts, score, bound)
            if _better(score(whole), score(best)):
                best, kept = whole, whole_kept
    # the previous owners, counts restored, unless the plan found drains more than margin sooner
    if kept is not None and not _better(score(best), score(kept), opts.margin):
        best = kept
    return best


def _split(problem: GroupProblem, consumers: list[str], k: np.ndarray) -> tuple[GroupProblem, np.ndarray]:
    """The problem with consumer ``c`` split into ``k_c`` readers (named ``c`` + a suffix that
    sorts below any printable character, so their order follows the consumers'), and the
    consumer each one stands for. A previous owner's partitions are dealt over its readers
    (``_deal``)."""
    real = np.repeat(np.arange(len(consumers), dtype=np.int64), k)
    within = np.arange(len(real)) - np.repeat(np.cumsum(k) - k, k)
    names = [f"{consumers[c]}\x1f{i:03d}" for c, i in zip(real.tolist(), within.tolist())]
    subs = {name: problem.subscriptions[consumers[c]] for name, c in zip(names, real.tolist())}
    previous: list[str | None] = [None] * len(problem.partitions)
    if len(problem.previous):
        owner = pd.Index(consumers).get_indexer(pd.Index(np.asarray(problem.previous, dtype=object)))
        readers = _deal(owner.astype(np.int64), problem, k)
        named = np.concatenate([np.asarray(names, dtype=object), np.array([None], dtype=object)])
        previous = named[readers].tolist()  # -1: the None at the end
    return problem.replace(subscriptions=subs, consumers=names, previous=previous), real


def _deal(owner: np.ndarray, problem: GroupProblem, k: np.ndarray) -> np.ndarray:
    """Consumer codes (-1: none) as reader codes of ``_split``: a consumer's partitions of a
    topic are dealt over its ``k_c`` readers in turn, so that each of them keeps within the
    count rules."""
    out = np.full(len(owner), -1, dtype=np.int64)
    held = np.flatnonzero(owner >= 0)
    if len(held):
        topic = np.asarray(problem.topics, dtype=object)[held]
        turn = pd.DataFrame({"t": topic, "c": owner[held]}).groupby(["t", "c"], sort=False).cumcount().to_numpy()
        first = np.cumsum(k) - k
        out[held] = first[owner[held]] + turn % k[owner[held]]
    return out


def _placed(group: engine.Group, owner: np.ndarray) -> engine.State:
    """The search's state of a plan that keeps lag-sticky's count rules (every reader of a
    topic holds floor or ceil of its share): loads, counts, and who holds a topic's extra."""
    n = group.consumers
    state = engine.State.begin(group, owner)
    state.count[:] = np.bincount(owner, minlength=n)
    base = (group.stop - group.start) // group.reads.sum(axis=1)
    few = base[group.topic] == 0  # a topic with fewer partitions than readers: holding one is the extra
    state.extra[group.topic[few], owner[few]] = True
    many = np.flatnonzero(base >= 1)
    if len(many):
        compact = np.full(len(base), -1, dtype=np.int64)
        compact[many] = np.arange(len(many))
        rows = ~few
        held = np.bincount(compact[group.topic[rows]] * n + owner[rows], minlength=len(many) * n).reshape(len(many), n)
        state.extra[many] = held > base[many][:, None]
    return state


def _kept(problem: GroupProblem, consumers: list[str], speed: np.ndarray, produce: np.ndarray, bound: float) -> np.ndarray | None:
    """The previous plan with the count rules restored (placing what it lacks by weight at the
    bound), None without one."""
    lags = np.asarray(problem.lags, dtype=np.int64)
    relative = None if np.all(speed == speed[0]) else speed / speed.max()
    horizon = 1e9 if math.isinf(bound) else max(bound, 1.0)
    group = engine.build_group(problem, consumers, weights=_weights(lags, produce, horizon), speed=relative)
    previous = engine.previous_owners(group, problem, consumers)
    return _restored(group, previous) if (previous >= 0).any() else None


def _restored(group: engine.Group, previous: np.ndarray) -> np.ndarray:
    """The previous owners with lag-sticky's count rules restored (step 1-3, sticky)."""
    state = engine.State.begin(group, previous)
    engine.distribute(group, state, sticky=True)
    return state.owner


def _search(
    problem: GroupProblem,
    consumers: list[str],
    speed: np.ndarray,
    produce: np.ndarray,
    opts: Options,
    score: Callable[[np.ndarray], tuple[float, float]],
    bound: float,
    start: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Steps 1 and 2 on ``problem``'s consumers (each its own reader, of speed ``speed``):
    the best plan found, and with a previous plan its owners with the counts restored.
    ``score`` gives the (makespan, overload) of an owner array, ``bound`` the group's fluid
    lower bound (of the real consumers: a split one can take a partition none of its parts could).

    Long because steps 1 and 2 share the state, the horizon, the weights and one budget
    of steps, which two functions would have to hand back and forth."""
    lags = np.asarray(problem.lags, dtype=np.int64)
    if math.isinf(bound):
        # producers outrun the whole group: no plan drains; spread the produce rates instead
        horizon = 1e9
    else:
        # a horizon of at least one second so that caught-up partitions still weigh what they produce
        horizon = max(bound, 1.0)
    # readers of one speed (equal rates, or whole multiples of the slowest split into readers)
    # plan as lag-sticky's equal consumers: the same steps, on integer loads (a float time
    # per consumer costs a cast of every row at each step of the search)
    relative = None if np.all(speed == speed[0]) else speed / speed.max()

    def group_for(t: float) -> engine.Group:
        return engine.build_group(problem, consumers, weights=_weights(lags, produce, t), speed=relative)

    group = group_for(horizon)
    previous = engine.previous_owners(group, problem, consumers)
    sticky = bool((previous >= 0).any())
    # step 1
    if start is not None:  # from a plan of the same consumers that keeps the count rules (lag-sticky's)
        state = _placed(group, start)
        engine.improve(group, state, (1 + opts.margin / 4) * group.lower_bound, opts.max_swaps)
    elif sticky:
        state = engine.from_previous(group, previous, opts.margin, opts.max_swaps)
    else:
        state = engine.from_scratch(group, opts.margin, opts.max_swaps)
    best = state.owner.copy()
    found = score(best)
    # step 2: reweigh at the makespan reached and search again, within one budget of max_swaps steps
    budget = opts.max_swaps
    for _ in range(ROUNDS):
        target = found[0] if math.isfinite(found[0]) else 2 * horizon
        if budget <= 0 or (math.isfinite(found[0]) and found[0] <= bound * (1 + opts.margin / 4)):
            break
        horizon = max(target, 1.0)
        group = group_for(horizon)
        state.load[:] = engine.sum_by(state.owner, group.lag, group.consumers)
        budget -= engine.improve(group, state, (1 + opts.margin / 4) * group.lower_bound, budget)
        now = score(state.owner)
        if not _better(now, found):
            break
        # each round re-sorts every row (a fifth of a second at a million): another only after
        # one that gained half the margin
        again = _better(now, found, opts.margin / 2)
        best, found = state.owner.copy(), now
        if not again:
            break
    kept = _restored(group_for(horizon), previous) if sticky else None
    return best, kept


STRATEGY = Strategy(
    "drain",
    "group",
    "minimises the largest time to drain from read and produce rates; count-balanced, sticky",
    assign_codes=assign_codes,
    options=(*DEFAULTS, *RATE_OPTIONS),
    uses_previous=True,
)
