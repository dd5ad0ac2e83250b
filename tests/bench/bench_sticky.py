"""Our ``sticky`` against kafka-python's StickyPartitionAssignor: time and moves.

    python -m tests.bench.bench_sticky [--with-slow-peer] [--million] [--repeat 3]

For each size (topics x partitions x consumers, every consumer on every topic): the first
assignment, then one rebalance where a consumer joins. Ours is timed end to end through
``spark_lag_assign.assign`` (validation and the invariant check included) and its core alone
(``frontend.run``); kafka-python through ``tests.peers.KafkaPythonSticky``. kafka-python takes
about a minute at 500x100x500, so it runs there only with ``--with-slow-peer``; ``--million``
adds 1000x1000x1000 for ours. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import pandas as pd

import spark_lag_assign as sla
from spark_lag_assign.assignors import sticky
from spark_lag_assign.assignors.base import GroupProblem
from spark_lag_assign.assignors.frontend import run as owners_of
from spark_lag_assign.core.quality import moved
from tests.peers import KafkaPythonSticky

T = TypeVar("T")
Subscriptions = dict[str, list[str]]


def group(topics: int, partitions: int, consumers: int) -> tuple[pd.DataFrame, Subscriptions, Subscriptions]:
    """lags, the subscriptions, and the same with one more consumer (sorting last)."""
    names = [f"t{t:04d}" for t in range(topics)]
    lags = pd.DataFrame({"topic": np.repeat(names, partitions), "partition": np.tile(np.arange(partitions), topics), "lag": 1})
    subs = {f"c{i:04d}": names for i in range(consumers)}
    return lags, subs, {**subs, f"c{consumers:04d}": names}


def timed(fn: Callable[[], T], repeat: int) -> tuple[float, T]:
    """The best of ``repeat`` wall times, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out  # type: ignore[return-value]


def core_problem(lags: pd.DataFrame, subs: Subscriptions, previous: pd.DataFrame | None) -> GroupProblem:
    """The GroupProblem ``assign`` would build (rows here are already sorted and subscribed)."""
    owner: Sequence[str | None] = [None] * len(lags)
    if previous is not None:
        prev = previous.set_index(["topic", "partition"])["consumer"]
        owner = prev.reindex(pd.MultiIndex.from_frame(lags[["topic", "partition"]])).to_numpy(dtype=object)
    return GroupProblem(
        topics=lags["topic"].to_numpy(dtype=object),
        partitions=lags["partition"].to_numpy(dtype=np.int64),
        lags=lags["lag"].to_numpy(dtype=np.int64),
        subscriptions=subs,
        consumers=sorted(subs),
        previous=owner,
    )


def fewest_moves(previous: pd.DataFrame, consumers: int) -> int:
    """The least any plan with counts within one can move (identical subscriptions, nobody
    left): each consumer keeps at most its quota, the extra quota going to the largest holders."""
    held = Counter(previous["consumer"])
    q, r = divmod(len(previous), consumers)
    over = [n - q for n in held.values() if n > q]
    return sum(over) - min(r, len(over))


def spread(assignment: pd.DataFrame, subs: Subscriptions) -> int:
    counts = assignment.groupby("consumer").size().reindex(sorted(subs), fill_value=0)
    return int(counts.max() - counts.min())


def run(size: tuple[int, int, int], repeat: int, peer: bool) -> list[dict[str, object]]:
    topics, partitions, consumers = size
    lags, subs, joined = group(topics, partitions, consumers)
    label = f"{topics}x{partitions}x{consumers}"
    rows: list[dict[str, object]] = []

    first_s, first = timed(lambda: sla.assign(lags, subs, "sticky"), repeat)
    join_s, join = timed(lambda: sla.assign(lags, joined, "sticky", previous=first), repeat)
    fresh, rebalance = core_problem(lags, subs, None), core_problem(lags, joined, first)
    first_core, _ = timed(lambda: owners_of(sticky.STRATEGY, fresh), repeat)
    join_core, _ = timed(lambda: owners_of(sticky.STRATEGY, rebalance), repeat)
    minimum = fewest_moves(first, consumers + 1)
    rows.append(
        {
            "size": label,
            "assignor": "ours (assign)",
            "first s": first_s,
            "join s": join_s,
            "join moves": moved(join, first, joined),
            "fewest": minimum,
            "spread": f"{spread(first, subs)}/{spread(join, joined)}",
        }
    )
    rows.append({"size": label, "assignor": "ours (core)", "first s": first_core, "join s": join_core})
    if peer:
        kp = KafkaPythonSticky()
        kp_first_s, kp_first = timed(lambda: kp.assign(lags, subs), 1)
        kp_join_s, kp_join = timed(lambda: kp.assign(lags, joined, kp_first, generation=2), 1)
        rows.append(
            {
                "size": label,
                "assignor": "kafka-python",
                "first s": kp_first_s,
                "join s": kp_join_s,
                "join moves": moved(kp_join, kp_first, joined),
                "fewest": fewest_moves(kp_first, consumers + 1),
                "spread": f"{spread(kp_first, subs)}/{spread(kp_join, joined)}",
            }
        )
        rows.append(
            {"size": label, "assignor": "kafka-python / ours", "first s": kp_first_s / first_s, "join s": kp_join_s / join_s}
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--with-slow-peer", action="store_true", help="run kafka-python at 500x100x500 too (~1 min)")
    parser.add_argument("--million", action="store_true", help="add 1000x1000x1000 for ours")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs for ours")
    args = parser.parse_args(argv)
    rows = run((100, 100, 100), args.repeat, peer=True)
    rows += run((500, 100, 500), args.repeat, peer=args.with_slow_peer)
    if args.million:
        rows += run((1000, 1000, 1000), 1, peer=False)
    table = pd.DataFrame(rows, dtype=object).fillna("")
    for col in ("first s", "join s"):
        table[col] = [f"{v:.3f}" if isinstance(v, float) else v for v in table[col]]
    table = table.rename(columns={"first s": "first (s)", "join s": "join (s)"})
    print(table.to_string(index=False))
    print("\nspread: max - min partitions per consumer after the first assignment / after the join;")
    print("fewest: the least any balanced plan could move on that join, from that assignor's first plan")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
