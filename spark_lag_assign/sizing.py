"""Sizing for a deadline: the fewest pipelines whose ``drain`` plan empties the backlog in time.

The question a team asks of a lag planner, "how many pipelines do we need to be caught up
within an hour?", answered with the ``drain`` strategy's own plans and time model
(``spark_lag_assign.assignors.drain``: consumer ``c`` reading ``r_c``/s drains its lag ``L_c``,
appended to at ``P_c``/s, in ``L_c / (r_c - P_c)``).

Steps:

1. Order the configured pipelines: the pinned ones first (the user keeps them whatever the
   deadline), then the rest fastest first (ties by id).
2. The ``n`` pipelines of each size (``choose``): the first ``n``. Where those leave a
   subscribed topic without a reader (subscriptions differ), the fastest reader of that topic
   comes in, one topic at a time (sorted), and the slowest of them that is not pinned and
   whose topics all stay read makes room; a size where none can is skipped.
   Where the first ``n`` read every topic (always, when every pipeline reads the same topics)
   they are the ones.
3. Skip the sizes no plan can meet: the fluid lower bound of those ``n`` pipelines
   (``core.rates.lower_bound``: total lag over their spare rate, or a partition read alone by
   the fastest) is a time no plan of them beats.
4. From there, plan those ``n`` with ``drain``, with the previous plan and the options the run
   publishes with (drain keeps previous owners unless it finds a plan more than ``margin``
   sooner: sized without them, the published plan could miss the deadline sizing promised),
   and take the first ``n`` whose plan drains by the deadline. With equal subscriptions that
   is the answer a brute force over every size gives (tested).
5. None does: say so, and whether the producers outrun even the whole group (by how much).

The limit: the answer is the fewest of these choices, one per size, not of every subset of
the pipelines. Where subscriptions differ a smaller set may exist that step 2 does not pick,
e.g. A reads t0, B t1, C both: step 2 tries A alone, cannot make room for t1 and skips size 1,
while C alone may drain in time. Finding the fewest of every subset is a search over
subsets; ``tests/unit/test_sizing.py`` compares the answer with one on small groups.

Worked example: lags 600, 300, 300 on t0, no producers; A reads 100/s, B 200/s, C 100/s;
deadline 5 s. Order B, A, C. n=1: bound 1200 / 200 = 6 s > 5 s, skipped. n=2 (B, A): bound
4 s; drain gives B [t0p0, t0p1] 900 -> 4.5 s, A [t0p2] 300 -> 3 s: 4.5 s <= 5 s, so 2
pipelines, B and A. The capacity bound (1200 / 5 s = 240/s: B and A read 300/s) is 2 too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from spark_lag_assign.assignors import assign
from spark_lag_assign.core import rates as rates_io
from spark_lag_assign.core.draintime import duration


@dataclass(frozen=True)
class Sizing:
    """The answer for one deadline (seconds; ``inf`` where a plan never drains)."""

    deadline: float
    configured: int  # pipelines configured now
    needed: int | None  # the fewest that drain in time; None: no number of them does
    pipelines: tuple[str, ...]  # which ones (empty when none)
    drain_configured: float  # drain's predicted time with every configured pipeline
    drain_needed: float | None  # with the ones needed
    bound: int | None  # fewest by capacity alone: total work over the deadline (None: not even all)
    outrun: float  # records/s producers append beyond what every pipeline reads (<= 0: they do not)

    def metrics(self) -> dict[str, Any]:
        """The keyword arguments of ``PlannerMetrics.record_sizing``."""
        return {
            "deadline": self.deadline,
            "needed": self.needed,
            "configured": self.configured,
            "drain_configured": self.drain_configured,
            "drain_needed": self.drain_needed,
            "outrun": self.outrun,
        }

    def as_json(self) -> dict[str, Any]:
        """plan.json's ``sizing`` (times null where never)."""
        return {
            "deadline_seconds": round(self.deadline, 3),
            "pipelines_configured": self.configured,
            "pipelines_needed": self.needed,
            "pipelines": list(self.pipelines),
            "drain_seconds_configured": _json_seconds(self.drain_configured),
            "drain_seconds_needed": None if self.drain_needed is None else _json_seconds(self.drain_needed),
            "produce_excess": round(max(0.0, self.outrun), 3),
        }

    def describe(self) -> str:
        """One line for the console."""
        head = f"drain within {duration(self.deadline)}"
        now = f"{self.configured} configured pipeline(s) drain in {duration(self.drain_configured)}"
        if self.needed is not None:
            assert self.drain_needed is not None
            who = ", ".join(self.pipelines[:10]) + (" ..." if len(self.pipelines) > 10 else "")
            return f"{head}: {self.needed} pipeline(s) needed ({who}), draining in {duration(self.drain_needed)}; {now}"
        if self.outrun > 0:
            return (
                f"{head}: no number of the {self.configured} configured pipelines does: producers append "
                f"{self.outrun:,.1f} records/s more than all of them read; {now}"
            )
        return f"{head}: no number of the {self.configured} configured pipelines does; {now}"


def _json_seconds(value: float) -> float | None:
    return round(value, 3) if math.isfinite(value) else None


def order(read: Mapping[str, float], pinned: Sequence[str] = ()) -> list[str]:
    """Step 1: the pinned pipelines (sorted), then the others fastest first, ties by id."""
    kept = sorted(set(pinned))
    rest = sorted((c for c in read if c not in set(kept)), key=lambda c: (-read[c], c))
    return [*kept, *rest]


def makespan(plan: pd.DataFrame, read: Mapping[str, float], produce: pd.DataFrame | None) -> float:
    """When ``plan``'s slowest consumer has caught up (``inf``: never)."""
    if len(plan) == 0:
        return 0.0
    p = rates_io.align_produce(produce, plan["topic"].to_numpy(), plan["partition"].to_numpy())
    frame = pd.DataFrame({"consumer": plan["consumer"].to_numpy(), "lag": plan["lag"].to_numpy(dtype=np.float64), "p": p})
    per = frame.groupby("consumer", sort=True).sum()
    rate = np.asarray([read[c] for c in per.index], dtype=np.float64)
    times = rates_io.drain_seconds(per["lag"].to_numpy(), per["p"].to_numpy(), rate)
    return float(times.max()) if len(times) else 0.0


def choose(ranked: Sequence[str], subscriptions: Mapping[str, Sequence[str]], n: int, kept: int = 0) -> list[str] | None:
    """Step 2: the ``n`` pipelines sized together, in ``ranked``'s order; None where no choice
    of this rule reads every subscribed topic. ``kept``: the first ``kept`` of ``ranked`` are
    pinned (never make room)."""
    rank = {c: i for i, c in enumerate(ranked)}
    chosen = list(ranked[:n])
    wanted = sorted({t for ts in subscriptions.values() for t in ts})
    while True:
        readers: dict[str, int] = {}
        for c in chosen:
            for t in set(subscriptions[c]):
                readers[t] = readers.get(t, 0) + 1
        missing = [t for t in wanted if t not in readers]
        if not missing:
            return chosen
        # someone reads it (it is wanted) and it is none of the chosen
        incoming = next(c for c in ranked if c not in chosen and missing[0] in subscriptions[c])
        brings = set(subscriptions[incoming])
        room = [c for c in chosen[kept:] if all(readers[t] > 1 or t in brings for t in set(subscriptions[c]))]
        if not room:
            return None
        # every topic read stays read and one more is: at most one round per topic
        chosen.remove(room[-1])
        chosen = sorted([*chosen, incoming], key=rank.__getitem__)


def drain_plan(
    lags: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    pipelines: Sequence[str],
    read: Mapping[str, float],
    produce: pd.DataFrame | None,
    previous: pd.DataFrame | None = None,
    **options: Any,
) -> tuple[pd.DataFrame, float]:
    """``drain``'s plan for ``pipelines`` (from the ``previous`` plan, if any) and its time;
    ``inf`` when a topic the group reads has no reader among them (its backlog is never read)."""
    subs = {c: list(subscriptions[c]) for c in pipelines}
    wanted = {t for ts in subscriptions.values() for t in ts}
    if wanted - {t for ts in subs.values() for t in ts}:
        return pd.DataFrame(columns=["consumer", "topic", "partition", "lag"]), math.inf
    rate_options: dict[str, Any] = {"read_rates": {c: read[c] for c in pipelines}}
    if produce is not None:
        rate_options["produce_rates"] = produce
    plan = assign(lags, subs, "drain", previous=previous, **rate_options, **options)
    return plan, makespan(plan, read, produce)


def size(
    lags: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    read: Mapping[str, float],
    deadline: float,
    produce: pd.DataFrame | None = None,
    pinned: Sequence[str] = (),
    previous: pd.DataFrame | None = None,
    **options: Any,
) -> Sizing:
    """The fewest pipelines of ``subscriptions`` (every one with a rate in ``read``) whose drain
    plan empties ``lags``' backlog by ``deadline`` seconds (module docstring's steps).
    ``lags``: DataFrame[topic, partition, lag] (topics nobody subscribes to are ignored);
    ``produce``: DataFrame[topic, partition, produce_rate] or None; ``previous``: the plan the
    run's drain plan starts from, DataFrame[consumer, topic, partition] or None; ``options``:
    drain's (``margin``, ``max_swaps``). Pass the previous plan and the options the published
    plan is made with: the times said are then that plan's."""
    ranked = order({c: float(read[c]) for c in subscriptions}, pinned)
    wanted = {t for ts in subscriptions.values() for t in ts}
    read_lags = lags[lags["topic"].isin(wanted)].reset_index(drop=True)
    lag_values = read_lags["lag"].to_numpy(dtype=np.float64)
    p = rates_io.align_produce(produce, read_lags["topic"].to_numpy(), read_lags["partition"].to_numpy())
    rates = np.asarray([read[c] for c in ranked], dtype=np.float64)
    _, drain_all = drain_plan(read_lags, subscriptions, ranked, read, produce, previous, **options)
    outrun = float(p.sum() - rates.sum())
    work = float(lag_values.sum()) / deadline + float(p.sum())  # records/s the deadline asks for
    reach = np.cumsum(rates)
    bound = int(np.searchsorted(reach, work - 1e-9 * max(1.0, work))) + 1 if reach[-1] >= work else None
    kept = len(set(pinned))
    for n in range(max(1, kept), len(ranked) + 1):
        # step 3 (first for the fastest n: whoever step 2 swaps in is slower than whom it replaces,
        # so its bound is no lower): nothing below the fluid bound drains in time
        if rates_io.lower_bound(lag_values, p, rates[:n]) > deadline:
            continue
        chosen = choose(ranked, subscriptions, n, kept)  # step 2
        if chosen is None:
            continue
        speeds = np.asarray([read[c] for c in chosen], dtype=np.float64)
        if chosen != ranked[:n] and rates_io.lower_bound(lag_values, p, speeds) > deadline:
            continue
        if n == len(ranked):
            t = drain_all
        else:
            t = drain_plan(read_lags, subscriptions, chosen, read, produce, previous, **options)[1]
        if t <= deadline:
            return Sizing(deadline, len(ranked), n, tuple(chosen), drain_all, t, bound, outrun)
    return Sizing(deadline, len(ranked), None, (), drain_all, None, bound, outrun)


__all__ = ["Sizing", "choose", "drain_plan", "makespan", "order", "size"]
