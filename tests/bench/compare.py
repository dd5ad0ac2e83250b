"""Side by side on the same inputs: our six strategies and kafka-python's Range, RoundRobin and
Sticky assignors, on seeded workloads, from scratch and across churn.

Shapes (``spark_lag_assign.testing.workloads``, one group per seed; sizes chosen so that many seeds
run in a minute, the scale benchmark goes to a million partitions):

- ``uniform``: 40 topics x 20 partitions, lags uniform in [0, 10,000], 12 consumers.
- ``skewed``: 60 topics of 4-48 partitions, topic volumes log-normal, Zipf 1.5 inside a
  topic (the top partition holds 40-60% of it), 12 consumers.
- ``seed002``: seed 002's group: 80 topics of 1-128 partitions whose volumes differ by
  orders of magnitude (log-normal, sigma 2), 16 consumers named ``application0N-<uuid>``
  on 8 hosts.
- ``mixed``: 30 topics of 1-24 partitions, 10 consumers each reading about half the topics
  (kafka-python's RoundRobin crashes on such groups: it is left out there).
- ``skewed-10k`` (churn only): the skewed shape at ~10,000 partitions and 100 consumers, where
  kafka-python's sticky takes seconds per rebalance.

Churn sequence (each state derived from the one before, so that sticky planners carry their
previous plan): start, drift (every lag x log-normal 5%), join (a consumer
``joiner-<uuid>`` reading everything), leave (a member drawn by the seed), grow topic
(+8 partitions to a topic drawn by the seed), new topic (16 partitions read by everyone),
restart (a member leaves and a new id joins in the same rebalance, as a deployed
``host-uuid`` consumer does).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd

import spark_lag_assign as sla
from spark_lag_assign.core import quality
from spark_lag_assign.testing import workloads
from spark_lag_assign.testing.workloads import Subscriptions, Workload
from tests.peers import KafkaPythonSticky, kafka_python_range, kafka_python_roundrobin

#: (lags, subscriptions, previous plan or None, seed, generation) -> assignment
PlanFn = Callable[[pd.DataFrame, Subscriptions, "pd.DataFrame | None", int, int], pd.DataFrame]


@dataclass(frozen=True)
class Planner:
    name: str
    family: str  # "ours" or "kafka-python"
    run: PlanFn
    identical_only: bool = False  # kafka-python's RoundRobin crashes where subscriptions differ


def _ours(
    strategy: str, lags: pd.DataFrame, subs: Subscriptions, previous: pd.DataFrame | None, seed: int, generation: int
) -> pd.DataFrame:
    return sla.assign(lags, subs, strategy, previous=previous, seed=seed)


def _kp_range(lags: pd.DataFrame, subs: Subscriptions, previous: pd.DataFrame | None, seed: int, generation: int) -> pd.DataFrame:
    return kafka_python_range(lags, subs)


def _kp_roundrobin(
    lags: pd.DataFrame, subs: Subscriptions, previous: pd.DataFrame | None, seed: int, generation: int
) -> pd.DataFrame:
    return kafka_python_roundrobin(lags, subs)


def _kp_sticky(
    lags: pd.DataFrame, subs: Subscriptions, previous: pd.DataFrame | None, seed: int, generation: int
) -> pd.DataFrame:
    return KafkaPythonSticky().assign(lags, subs, previous, generation)


KP_RANGE, KP_ROUNDROBIN, KP_STICKY = "kp-range", "kp-roundrobin", "kp-sticky"

PLANNERS: list[Planner] = [
    *(Planner(name, "ours", partial(_ours, name)) for name in sla.STRATEGIES),
    Planner(KP_RANGE, "kafka-python", _kp_range),
    Planner(KP_ROUNDROBIN, "kafka-python", _kp_roundrobin, identical_only=True),
    Planner(KP_STICKY, "kafka-python", _kp_sticky),
]
NAMES = [p.name for p in PLANNERS]
NOT_RUN = "kafka-python crashes on differing subscriptions"


@dataclass(frozen=True)
class Shape:
    name: str
    about: str
    make: Callable[[int], Workload]
    identical: bool  # every consumer reads every topic


SHAPES: list[Shape] = [
    Shape(
        "uniform",
        "40 topics x 20 partitions, lags uniform 0-10,000, 12 consumers",
        lambda s: workloads.uniform(topics=40, partitions=20, consumers=12, seed=s),
        True,
    ),
    Shape(
        "skewed",
        "60 topics of 4-48 partitions, volume log-normal, Zipf 1.5 inside a topic, 12 consumers",
        lambda s: workloads.skewed(seed=s),
        True,
    ),
    Shape(
        "seed002",
        "80 topics of 1-128 partitions, volume log-normal sigma 2, 16 consumers application0N-<uuid> on 8 hosts",
        lambda s: workloads.seed002(seed=s),
        True,
    ),
    Shape(
        "mixed",
        "30 topics of 1-24 partitions, 10 consumers each reading about half of them",
        lambda s: workloads.mixed_subscriptions(topics=30, consumers=10, seed=s),
        False,
    ),
]
#: churn at a size where kafka-python's sticky takes seconds per rebalance (full runs only)
LARGE = Shape(
    "skewed-10k",
    "250 topics of 20-60 partitions (~10,000), Zipf 1.5 inside a topic, 100 consumers",
    lambda s: workloads.skewed(topics=250, consumers=100, min_partitions=20, max_partitions=60, seed=s),
    True,
)
SHAPE = {s.name: s for s in [*SHAPES, LARGE]}


def timed(fn: Callable[[], pd.DataFrame]) -> tuple[pd.DataFrame, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def run_static(shapes: Sequence[Shape], planners: Sequence[Planner], seeds: Sequence[int]) -> pd.DataFrame:
    """One row per (shape, seed, planner): the quality metrics of a plan from scratch and its time."""
    rows = []
    for shape in shapes:
        for seed in seeds:
            lags, subs = shape.make(seed)
            for p in planners:
                base = {"shape": shape.name, "seed": seed, "planner": p.name, "family": p.family}
                if p.identical_only and not shape.identical:
                    rows.append({**base, "skipped": NOT_RUN})
                    continue
                plan, seconds = timed(lambda: p.run(lags, subs, None, seed, 1))
                rows.append({**base, **quality.quality(plan, subs).as_dict(), "seconds": seconds})
    return pd.DataFrame(rows)


STEPS = ["start", "drift", "join", "leave", "grow topic", "new topic", "restart"]


def churn_states(lags: pd.DataFrame, subs: Subscriptions, seed: int) -> list[tuple[str, pd.DataFrame, Subscriptions]]:
    """The churn sequence of the module docstring, one (step, lags, subscriptions) per state."""
    rng = np.random.default_rng(seed)
    states = [("start", lags, subs)]
    lags = workloads.drift(lags, sigma=0.05, seed=seed)
    states.append(("drift", lags, subs))
    subs = workloads.join(subs, seed=seed)
    states.append(("join", lags, subs))
    subs = workloads.leave(subs, seed=seed + 1)
    states.append(("leave", lags, subs))
    topics = sorted(set(lags["topic"]))
    lags = workloads.add_partitions(lags, topics[int(rng.integers(len(topics)))], 8, seed=seed)
    states.append(("grow topic", lags, subs))
    lags, subs = workloads.add_topic(lags, subs, "zz-new-topic", 16, mean_lag=float(lags["lag"].mean()), seed=seed)
    states.append(("new topic", lags, subs))
    subs = workloads.join(workloads.leave(subs, seed=seed + 2), seed=seed + 3, host="restarted")
    states.append(("restart", lags, subs))
    return states


def fewest_moves(states: Sequence[tuple[str, pd.DataFrame, Subscriptions]]) -> dict[str, int]:
    """Moves any plan within one partition per consumer must make, with identical subscriptions.

    A joiner needs floor(P / C) partitions; a leaver held at least floor(P / C); a restart is
    both, which one handover covers; drift, new partitions and a new topic force none.
    """
    out = {}
    for i, (step, lags, subs) in enumerate(states[1:], start=1):
        before = states[i - 1]
        if step == "join":
            out[step] = len(lags) // len(subs)
        elif step in ("leave", "restart"):
            out[step] = len(before[1]) // len(before[2])
        else:
            out[step] = 0
    return out


def run_churn(shapes: Sequence[Shape], planners: Sequence[Planner], seeds: Sequence[int]) -> pd.DataFrame:
    """One row per (shape, seed, planner, step): moves against that planner's previous plan, quality, time."""
    rows = []
    for shape in shapes:
        for seed in seeds:
            states = churn_states(*shape.make(seed), seed)
            least = fewest_moves(states) if shape.identical else {}
            for p in planners:
                if p.identical_only and not shape.identical:
                    continue
                previous = None
                for generation, (step, lags, subs) in enumerate(states, start=1):
                    plan, seconds = timed(lambda: p.run(lags, subs, previous, seed, generation))
                    q = quality.quality(plan, subs, previous)
                    rows.append(
                        {
                            "shape": shape.name,
                            "seed": seed,
                            "planner": p.name,
                            "family": p.family,
                            "step": step,
                            "generation": generation,
                            **q.as_dict(),
                            "seconds": seconds,
                            "fewest": least.get(step),
                        }
                    )
                    previous = plan.loc[:, ["consumer", "topic", "partition"]]
    return pd.DataFrame(rows)


__all__ = [
    "LARGE",
    "NAMES",
    "PLANNERS",
    "SHAPE",
    "SHAPES",
    "STEPS",
    "Planner",
    "Shape",
    "churn_states",
    "run_churn",
    "run_static",
]
