"""Time to drain: each planner's plan played forward with ``spark_lag_assign.core.draintime``.

The consumption rate is set per workload so that a perfectly even group would clear the
backlog in ``TARGET`` seconds with no producers: ``rate = total lag / (consumers x TARGET)``.
Two scenarios on the same plans:

- ``backlog``: producers stopped; only the backlog is read.
- ``producing``: producers append 40% of the group's capacity (``0.4 x consumers x rate``),
  spread over topics log-normally (sigma 1) and within a topic with gamma(4) noise, as keyed
  producers do; no partition gets more than half a consumer's rate, or no plan could keep up.
  Lag-based planners see lag only, not these rates: this is what a snapshot tells them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from spark_lag_assign.core import draintime
from tests.bench.compare import NOT_RUN, Planner, Shape

TARGET = 600.0
PRODUCE_SHARE = 0.4
SCENARIOS = ("backlog", "producing")


def consumer_rate(lags: pd.DataFrame, consumers: int) -> float:
    return max(float(lags["lag"].sum()) / (consumers * TARGET), 1e-9)


def produce_rates(lags: pd.DataFrame, consumers: int, rate: float, seed: int) -> pd.DataFrame:
    """DataFrame[topic, partition, produce_rate] as the module docstring describes."""
    rng = np.random.default_rng(seed + 10_000)  # apart from the workload's own draws
    topics, first = np.unique(lags["topic"].to_numpy(dtype=str), return_index=True)
    counts = np.diff(np.r_[first, len(lags)])
    topic_share = rng.lognormal(0.0, 1.0, size=len(topics))
    noise = rng.gamma(4.0, 1.0, size=len(lags))
    noise /= np.repeat(np.add.reduceat(noise, first), counts)
    share = np.repeat(topic_share / topic_share.sum(), counts) * noise
    produced = np.minimum(PRODUCE_SHARE * consumers * rate * share, 0.5 * rate)
    return pd.DataFrame({"topic": lags["topic"], "partition": lags["partition"], "produce_rate": produced})


def run_drain(shapes: Sequence[Shape], planners: Sequence[Planner], seeds: Sequence[int]) -> pd.DataFrame:
    """One row per (shape, seed, planner, scenario): time to drain, its bound, peak partition lag."""
    rows = []
    for shape in shapes:
        for seed in seeds:
            lags, subs = shape.make(seed)
            rate = consumer_rate(lags, len(subs))
            produced = produce_rates(lags, len(subs), rate, seed)
            for p in planners:
                base = {"shape": shape.name, "seed": seed, "planner": p.name, "family": p.family, "rate": rate}
                if p.identical_only and not shape.identical:
                    rows.extend({**base, "scenario": s, "skipped": NOT_RUN} for s in SCENARIOS)
                    continue
                plan = p.run(lags, subs, None, seed, 1)
                for scenario in SCENARIOS:
                    d = draintime.simulate(lags, plan, rate, produced if scenario == "producing" else None, consumers=list(subs))
                    rows.append(
                        {
                            **base,
                            "scenario": scenario,
                            "time_to_drain": d.time_to_drain,
                            "lower_bound": d.lower_bound,
                            "ratio": d.time_to_drain / d.lower_bound,
                            "median_consumer": float(d.consumers["time_to_drain"].median()),
                            "peak_partition_lag": d.peak_partition_lag,
                            "never": len(d.never_drains),
                        }
                    )
    return pd.DataFrame(rows)


def curves(shape: Shape, planners: Sequence[Planner], seed: int = 0, points: int = 400) -> dict[str, dict[str, object]]:
    """scenario -> {"times": seconds, "bound": s, planner: total lag at each time}, for the drain plot."""
    lags, subs = shape.make(seed)
    rate = consumer_rate(lags, len(subs))
    produced = produce_rates(lags, len(subs), rate, seed)
    plans = {p.name: p.run(lags, subs, None, seed, 1) for p in planners if not (p.identical_only and not shape.identical)}
    out: dict[str, dict[str, object]] = {}
    for scenario in SCENARIOS:
        drains = {
            n: draintime.simulate(lags, a, rate, produced if scenario == "producing" else None, consumers=list(subs))
            for n, a in plans.items()
        }
        finite = [d.time_to_drain for d in drains.values() if np.isfinite(d.time_to_drain)]
        times = np.linspace(0.0, 1.05 * max(finite, default=TARGET), points)
        out[scenario] = {
            "times": times,
            "bound": next(iter(drains.values())).lower_bound,
            "drains": {n: d.time_to_drain for n, d in drains.items()},
            "lag": {n: d.total_lag(times) for n, d in drains.items()},
        }
    return out


__all__ = ["SCENARIOS", "TARGET", "consumer_rate", "curves", "produce_rates", "run_drain"]
