"""Golden plans: every strategy's plan on the bench's seeded workloads, recorded as sha256s.

A refactoring of the assignors, the front end or the plan document must leave every plan
byte-identical; ``tests/unit/test_golden_plans.py`` compares against ``plans.json``.
Regenerate (only when a plan is meant to change, and say why in the commit):

    python -m tests.unit.golden --record

Each case is a workload of a few thousand to twenty thousand partitions (seconds for all of
them), planned three ways: from scratch; after churn (lags drift, a consumer leaves, one
joins, a topic grows, a topic nobody reads appears) with the first plan as the previous one;
and from rows in shuffled order with a messy previous plan (rows shuffled, some partitions
listed twice under different consumers, consumers that left). For lag-sticky the plan
document's JSON is recorded too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

import spark_lag_assign as sla
from spark_lag_assign.assignors import STRATEGIES
from spark_lag_assign.plan.build import build_plan, plan_json
from spark_lag_assign.testing import workloads

GOLDEN = Path(__file__).with_name("plans.json")

WORKLOADS: dict[str, Callable[[], workloads.Workload]] = {
    "uniform-20k": lambda: workloads.uniform(topics=200, partitions=100, consumers=300, seed=1),
    "skewed-14k": lambda: workloads.skewed(topics=400, consumers=80, min_partitions=10, max_partitions=60, seed=2),
    "seed002-7k": lambda: workloads.seed002(topics=300, hosts=10, consumers_per_host=3, seed=3),
    "mixed-10k": lambda: workloads.mixed_subscriptions(topics=300, consumers=60, max_partitions=60, seed=4),
}


def digest(frame: pd.DataFrame) -> str:
    """sha256 of a frame's columns, dtypes and values, row by row."""
    h = hashlib.sha256()
    h.update(repr([(c, str(t)) for c, t in frame.dtypes.items()]).encode())
    for row in frame.itertuples(index=False):
        h.update(("\t".join(map(str, row)) + "\n").encode())
    return h.hexdigest()


def _churned(lags: pd.DataFrame, subs: workloads.Subscriptions) -> workloads.Workload:
    lags = workloads.drift(lags, sigma=0.1, seed=5)
    subs = workloads.join(workloads.leave(subs, seed=6), seed=7)
    lags = workloads.add_partitions(lags, str(lags["topic"].iloc[0]), 5, seed=8)
    return workloads.add_topic(lags, subs, "zz-unread", 7, readers=[], seed=9)


def _messy(previous: pd.DataFrame, subs: workloads.Subscriptions, seed: int) -> pd.DataFrame:
    """The previous plan shuffled, a tenth of its partitions listed again under another
    consumer (present or gone), in random order."""
    rng = np.random.default_rng(seed)
    rows = previous[["consumer", "topic", "partition"]]
    extra = rows.sample(frac=0.1, random_state=seed).copy()
    others = np.asarray([*sorted(subs), "gone-consumer", "aaa-gone"], dtype=object)
    extra["consumer"] = others[rng.integers(len(others), size=len(extra))]
    both = pd.concat([rows, extra], ignore_index=True)
    return both.iloc[rng.permutation(len(both))].reset_index(drop=True)


def _plan_document(lags: pd.DataFrame, subs: workloads.Subscriptions, plan: pd.DataFrame, strategy: str) -> str:
    rows = lags.merge(plan[["consumer", "topic", "partition"]], on=["topic", "partition"], how="left")
    rows["starting_offset"] = np.arange(len(rows), dtype=np.int64) * 7
    doc = build_plan(
        rows[["consumer", "topic", "partition", "lag", "starting_offset"]],
        subs,
        generation=3,
        strategy=strategy,
        reset="latest",
        created=datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
    )
    return hashlib.sha256(plan_json(doc).encode()).hexdigest()


def cases() -> Iterator[tuple[str, str]]:
    """(case name, sha256) for every workload, strategy and way of planning."""
    for label, make in WORKLOADS.items():
        lags, subs = make()
        next_lags, next_subs = _churned(lags, subs)
        shuffled = next_lags.iloc[np.random.default_rng(10).permutation(len(next_lags))].reset_index(drop=True)
        for name in STRATEGIES:
            first = sla.assign(lags, subs, name, seed=42)
            yield f"{label}/{name}/scratch", digest(first)
            yield f"{label}/{name}/churn", digest(sla.assign(next_lags, next_subs, name, previous=first, seed=42))
            messy = _messy(first, next_subs, seed=11)
            yield f"{label}/{name}/messy", digest(sla.assign(shuffled, next_subs, name, previous=messy, seed=42))
            if name == "lag-sticky":
                yield f"{label}/{name}/document", _plan_document(lags, subs, first, name)


def record() -> None:
    GOLDEN.write_text(json.dumps(dict(cases()), indent=1, sort_keys=True) + "\n")


def recorded() -> dict[str, str]:
    loaded: dict[str, str] = json.loads(GOLDEN.read_text())
    return loaded
