"""Scale: every planner on 10,000 to 1,000,000 partitions and 10 to 1,000 consumers, and the Spark
job from a million-partition snapshot (``tests.bench.bench_job``: phases, peak memory).

The grid's group is ``workloads.skewed`` with 100 partitions per topic (the shape the job
benchmark plans too). Each cell runs once: at these sizes one run is long enough to measure,
and the machine is shared. kafka-python's assignors run under a time limit; a peer stopped at
one size is skipped at every larger one (a pure Python loop only gets slower), and the table
says so rather than leaving a hole.
"""

from __future__ import annotations

import signal
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from spark_lag_assign import metrics
from spark_lag_assign.testing import workloads
from tests.bench import bench_job
from tests.bench.compare import Planner

SIZES = (10_000, 100_000, 1_000_000)
CONSUMERS = (10, 100, 1_000)
PER_TOPIC = 100


class Stopped(BaseException):
    """Raised in the planner by the timer; a BaseException so that no ``except Exception`` swallows it."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def stop(signum: int, frame: object) -> None:
        raise Stopped()

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def group(partitions: int, consumers: int) -> workloads.Workload:
    return workloads.skewed(
        topics=partitions // PER_TOPIC, consumers=consumers, min_partitions=PER_TOPIC, max_partitions=PER_TOPIC, seed=0
    )


def _label(partitions: int, consumers: int) -> str:
    return f"{partitions:,} x {consumers:,}"


def run_scale(
    planners: Sequence[Planner],
    sizes: Sequence[int] = SIZES,
    consumers: Sequence[int] = CONSUMERS,
    peer_limit: float = 60.0,
    skip: dict[tuple[str, int, int], str] | None = None,
    log: bool = True,
) -> pd.DataFrame:
    """One row per (partitions, consumers, planner): seconds (None where not run), status, quality."""
    rows = []
    stopped_at: dict[str, tuple[int, int]] = {}
    for n in sizes:
        for c in consumers:
            lags, subs = group(n, c)
            for p in planners:
                base = {"partitions": n, "consumers": c, "planner": p.name, "family": p.family}
                reason = (skip or {}).get((p.name, n, c))
                if p.name in stopped_at:
                    sn, sc = stopped_at[p.name]
                    if n > sn or (n == sn and c > sc):
                        reason = f"skipped: stopped after {peer_limit:.0f} s at {_label(sn, sc)}"
                if reason:
                    rows.append({**base, "status": reason})
                    continue
                start = time.perf_counter()
                try:
                    if p.family == "ours":
                        plan = p.run(lags, subs, None, 0, 1)
                    else:
                        with time_limit(peer_limit):
                            plan = p.run(lags, subs, None, 0, 1)
                except Stopped:
                    stopped_at[p.name] = (n, c)
                    rows.append({**base, "status": f"stopped after {peer_limit:.0f} s"})
                    continue
                seconds = time.perf_counter() - start
                q = metrics.quality(plan, subs)
                rows.append({**base, "status": "ok", "seconds": seconds, "optimality": q.optimality,
                             "count_spread": q.count_spread, "topic_spread": q.topic_spread})
                if log:
                    print(f"  scale {_label(n, c)} {p.name}: {seconds:.2f} s", flush=True)
            del lags, subs
    return pd.DataFrame(rows)


def run_job(
    topics: int, partitions: int, consumers: int, strategies: Sequence[str], repeat: int = 1
) -> list[dict[str, object]]:
    """The Spark job from a CSV snapshot against its floor (``bench_job.compare``): one row per
    strategy (fastest of ``repeat`` runs, ``floor_ratio`` = job / floor), then the floor's row."""
    with tempfile.TemporaryDirectory(prefix="sla-bench-") as tmp:
        snap, subs = bench_job.snapshot(topics, partitions, consumers, Path(tmp))
        rows = bench_job.compare(snap, subs, strategies, Path(tmp), repeat=repeat)
    return [{**r, "partitions": topics * partitions, "consumers": consumers} for r in rows]


__all__ = ["CONSUMERS", "SIZES", "Stopped", "group", "run_job", "run_scale", "time_limit"]
