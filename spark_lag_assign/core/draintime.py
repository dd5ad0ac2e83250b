"""Time to drain: how long a plan takes to clear the group's backlog, not only how much it holds.

Lag in messages is a proxy; what a team waits for is the moment every consumer has caught
up. This module plays a plan forward in time under a simple fluid model:

- Consumer ``c`` reads at most ``rate[c]`` messages per second, whatever it is assigned.
- Partition ``p`` starts with ``lag[p]`` messages of backlog, and its producers keep
  appending ``produce_rate[p]`` messages per second (0 when no rates are given).
- A consumer shares its rate fairly over its partitions (max-min fair, like a fetch that
  returns up to the same number of bytes from each partition): a caught-up partition takes
  only what is appended to it, up to an equal share; the backlogged partitions split the rest
  equally. A consumer that has any backlog is therefore always reading at its full rate.
- Consumers are independent: a partition is read by its owner only, and the plan does not
  change while the backlog drains.

Consequences used below. While consumer ``c`` has any backlog its total lag falls at exactly
``rate[c] - sum(produce_rate)`` of its partitions, so it drains at
``lag[c] / (rate[c] - produce[c])``, or never when producers append at least as fast as it
reads. The plan drains when its slowest consumer does. Per partition the order of draining
depends on the sharing, and a hot partition can grow behind a large backlog on the same
consumer before it drains: ``simulate`` replays those events exactly (one event per
partition that empties) to report each partition's drain time and the largest lag any
partition reaches.

Nothing here imports Spark: it works on the lag DataFrame and an assignment, as returned by
``spark_lag_assign.assign``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from spark_lag_assign.core.lag import validate_offsets
from spark_lag_assign.core.limits import INT64_LIMIT, PARTITION_LIMIT, outside
from spark_lag_assign.core.quality import exact_sum, exact_sums
from spark_lag_assign.core.rates import check_rate
from spark_lag_assign.errors import InputError

KEY = ["topic", "partition"]


@dataclass(frozen=True)
class Drain:
    """The outcome of playing one plan forward; times in seconds, ``inf`` where it never drains."""

    #: per consumer (index, sorted): partitions, lag, rate, produce_rate, time_to_drain, peak_partition_lag;
    #: ``lag`` is exact (int64, or Python ints where a total exceeds int64) for integer lags
    consumers: pd.DataFrame
    #: per assigned partition: topic, partition, consumer, lag, produce_rate, time_to_drain, peak_lag
    partitions: pd.DataFrame
    #: when the last consumer has caught up: the maximum over consumers
    time_to_drain: float
    #: no plan drains faster: total backlog over the group's spare rate, or one partition read alone
    lower_bound: float
    #: the group's total lag at its highest (``inf`` where some consumer falls further behind forever)
    peak_total_lag: float
    #: the largest lag any one partition reaches while the plan drains
    peak_partition_lag: float
    #: the group's total lag now: exact for integer lags
    backlog: int | float = 0

    @property
    def never_drains(self) -> list[str]:
        """Consumers whose producers append at least as fast as they read, with a backlog to clear."""
        t = self.consumers["time_to_drain"]
        return [str(c) for c in t.index[np.isinf(t.to_numpy())]]

    def consumer_lag(self, times: Sequence[float] | np.ndarray) -> np.ndarray:
        """Each consumer's total lag at each time: an array of shape (len(times), consumers)."""
        t = np.asarray(times, dtype=float)[:, None]
        c = self.consumers
        lag = c["lag"].to_numpy(dtype=float)[None, :]
        slope = (c["produce_rate"] - c["rate"]).to_numpy(dtype=float)[None, :]
        # a consumer with backlog changes at its slope; once at zero it stays there if it can keep up
        return np.where(slope < 0, np.maximum(lag + slope * t, 0.0), lag + np.maximum(slope, 0.0) * t)

    def total_lag(self, times: Sequence[float] | np.ndarray) -> np.ndarray:
        """The group's total lag at each time."""
        return self.consumer_lag(times).sum(axis=1)


def _consumer_rates(rate: float | Mapping[str, float], assigned: Sequence[str], consumers: Sequence[str] | None) -> pd.Series:
    names = set(assigned) | set(consumers or ())
    if isinstance(rate, Mapping):
        names |= set(rate)
        missing = sorted(names - set(rate))
        if missing:
            raise InputError(f"no consumption rate for consumer {missing[0]!r}")
        values = {c: check_rate(rate[c], f"the rate of consumer {c!r}") for c in names}
    else:
        one = check_rate(rate, "the consumption rate")
        values = dict.fromkeys(names, one)
    if not values:
        raise InputError("no consumers to simulate")
    return pd.Series(values, dtype=float).sort_index()


def _check_numbers(lags: pd.DataFrame) -> None:
    """Lags are differences of int64 offsets and partitions are int32: anything else (a lag of
    1.5, ``inf`` or 2**63) is named in one line, by the rule ``assign`` applies (``limits.outside``)."""
    bad = outside(lags["lag"], 0, INT64_LIMIT)
    if bad.any():
        r = lags[bad].iloc[0]
        raise InputError(f"lags: {r.topic}-{r.partition} has lag {r.lag}; a lag is a whole number of messages in [0, 2^63)")
    wrong = outside(lags["partition"], 0, PARTITION_LIMIT)
    if wrong.any():
        r = lags[wrong].iloc[0]
        raise InputError(f"lags: partition {r.partition} of {r.topic} is not a partition number in [0, 2^31)")


def _join_inputs(lags: pd.DataFrame, assignment: pd.DataFrame, produce_rates: pd.DataFrame | None) -> pd.DataFrame:
    """One row per assigned partition: consumer, topic, partition, lag, produce_rate."""
    for name, frame, cols in (("lags", lags, ["topic", "partition", "lag"]), ("assignment", assignment, ["consumer", *KEY])):
        if not isinstance(frame, pd.DataFrame):
            raise InputError(f"{name} must be a pandas DataFrame, not {type(frame).__name__}")
        missing = [c for c in cols if c not in frame.columns]
        if missing:
            raise InputError(f"{name}: missing column(s) {', '.join(missing)}")
    _check_numbers(lags)
    if lags.duplicated(KEY).any():
        r = lags[lags.duplicated(KEY)].iloc[0]
        raise InputError(f"lags: partition {r.topic}-{r.partition} appears more than once")
    plan = assignment.loc[:, ["consumer", *KEY]]
    if plan.duplicated(KEY).any():
        r = plan[plan.duplicated(KEY)].iloc[0]
        raise InputError(f"assignment: partition {r.topic}-{r.partition} is assigned more than once")
    rows = plan.merge(lags.loc[:, [*KEY, "lag"]], on=KEY, how="left", validate="one_to_one")
    if rows["lag"].isna().any():
        r = rows[rows["lag"].isna()].iloc[0]
        raise InputError(f"assignment: partition {r.topic}-{r.partition} is not in the lags")
    if rows["lag"].dtype.kind not in "iu":  # integer lags stay exact: their totals must not wrap or round
        rows["lag"] = rows["lag"].astype(float)
    if produce_rates is None:
        rows["produce_rate"] = 0.0
    else:
        if not isinstance(produce_rates, pd.DataFrame) or "produce_rate" not in produce_rates.columns:
            raise InputError("produce_rates must be a DataFrame[topic, partition, produce_rate]")
        rates = produce_rates.loc[:, [*KEY, "produce_rate"]].drop_duplicates(KEY)
        rows = rows.merge(rates, on=KEY, how="left")
        if rows["produce_rate"].isna().any():
            r = rows[rows["produce_rate"].isna()].iloc[0]
            raise InputError(f"produce_rates: no rate for the assigned partition {r.topic}-{r.partition}")
        rows["produce_rate"] = rows["produce_rate"].astype(float)
        if not np.isfinite(rows["produce_rate"]).all() or (rows["produce_rate"] < 0).any():
            r = rows[~(rows["produce_rate"] >= 0) | ~np.isfinite(rows["produce_rate"])].iloc[0]
            raise InputError(f"produce_rates: {r.topic}-{r.partition} has an invalid rate {r.produce_rate!r}")
    return rows.sort_values(["consumer", *KEY], kind="stable").reset_index(drop=True)


def _fair_level(caught_up_demand: np.ndarray, backlogged: int, rate: float) -> float:
    """Max-min fair share: the level every partition reading more than it needs is held to.

    ``caught_up_demand`` are the produce rates of empty partitions, sorted ascending; the
    ``backlogged`` partitions want everything. ``inf`` when every demand fits with room to spare.
    """
    m = len(caught_up_demand)
    if m == 0:
        return rate / backlogged if backlogged else math.inf
    before = np.concatenate(([0.0], np.cumsum(caught_up_demand)[:-1]))
    level = (rate - before) / (m - np.arange(m) + backlogged)
    over = np.flatnonzero(caught_up_demand > level)
    if len(over):
        return float(level[over[0]])
    if backlogged:
        return (rate - float(caught_up_demand.sum())) / backlogged
    return math.inf


def drain_partitions(lag: np.ndarray, produce: np.ndarray, rate: float) -> tuple[np.ndarray, np.ndarray]:
    """Per partition of one consumer: the time it catches up for good (``inf``: never) and its peak lag."""
    n = len(lag)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    if not produce.any():
        # nothing appended: the smallest backlogs empty first, each gap shared by those still behind
        order = np.argsort(lag, kind="stable")
        sorted_lag = lag[order]
        gaps = np.diff(np.concatenate(([0.0], sorted_lag)))
        done = np.empty(n)
        done[order] = np.cumsum(gaps * (n - np.arange(n))) / rate
        return done, lag.copy()
    # the water-filling level only depends on the caught-up partitions' rates: keep them sorted once
    by_rate = np.argsort(produce, kind="stable")
    current = lag.astype(float).copy()
    peak = current.copy()
    done = np.full(n, np.nan)
    t = 0.0
    scale = max(1.0, float(lag.max()))
    while True:
        behind = current > 0
        empty_sorted = ~behind[by_rate]
        level = _fair_level(produce[by_rate][empty_sorted], int(behind.sum()), rate)
        # a caught-up partition whose producers outrun its share falls behind at once
        served = behind | (produce > level)
        net = np.where(served, produce - level, 0.0)
        done[~served & np.isnan(done)] = t
        if not served.any():
            break
        shrinking = served & (net < 0) & behind
        if not shrinking.any():
            # what is behind only grows: producers outrun this consumer forever
            grows = served & (net > 0)
            done[grows | (served & np.isnan(done))] = math.inf
            peak[grows] = math.inf
            break
        until = np.full(n, math.inf)
        until[shrinking] = current[shrinking] / -net[shrinking]
        step = float(until.min())
        current = np.where(served, current + net * step, current)
        # those that reach zero in this step (ties included) are exactly empty, not a rounding error away
        hit = until <= step * (1 + 1e-12)
        current[hit | (np.abs(current) <= 1e-12 * scale)] = 0.0
        t += step
        done[hit] = t
        peak = np.maximum(peak, current)
    done[np.isnan(done)] = t
    return done, peak


def simulate(
    lags: pd.DataFrame,
    assignment: pd.DataFrame,
    rate: float | Mapping[str, float],
    produce_rates: pd.DataFrame | None = None,
    consumers: Sequence[str] | None = None,
) -> Drain:
    """Play ``assignment`` forward until every consumer has caught up (see the module's model).

    lags: DataFrame[topic, partition, lag]; assignment: DataFrame[consumer, topic, partition]
    (its lag column, if any, is ignored: lags are taken from ``lags``); rate: messages per
    second per consumer, one number for all or ``{consumer: rate}``; produce_rates: None or
    DataFrame[topic, partition, produce_rate] covering every assigned partition; consumers:
    members to include even with nothing assigned (they drain at time 0). Long because it
    builds the three views of one drain (per partition, per consumer, the group's bound) from
    the same joined rows, in that order.
    """
    rows = _join_inputs(lags, assignment, produce_rates)
    rates = _consumer_rates(rate, rows["consumer"].unique().tolist(), consumers)

    done = np.zeros(len(rows))
    peak = np.zeros(len(rows))
    owners = rows["consumer"].to_numpy()
    bounds = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]]) if len(rows) else np.zeros(0, dtype=int)
    ends = np.r_[bounds[1:], len(rows)].astype(int)
    lag_values = rows["lag"].to_numpy(dtype=float)  # the fluid model runs in floats; totals below stay exact
    produce_values = rows["produce_rate"].to_numpy()
    for start, end in zip(bounds.astype(int), ends):
        d, p = drain_partitions(lag_values[start:end], produce_values[start:end], float(rates[owners[start]]))
        done[start:end], peak[start:end] = d, p
    partitions = rows.assign(time_to_drain=done, peak_lag=peak)

    grouped = partitions.groupby("consumer", sort=True).agg(
        partitions=("partition", "size"),
        produce_rate=("produce_rate", "sum"),
        peak_partition_lag=("peak_lag", "max"),
    )
    table = grouped.reindex(rates.index, fill_value=0)
    table["partitions"] = table["partitions"].astype(np.int64)
    table.insert(1, "lag", _consumer_lags(rows, rates.index))
    table["rate"] = rates
    spare = table["rate"] - table["produce_rate"]
    lag = np.array([float(v) for v in table["lag"].tolist()])  # int -> float correctly rounded, never wrapped
    # closed form of the consumer's total (see the module docstring); it agrees with the per-partition replay
    table["time_to_drain"] = np.where(
        lag <= 0, np.where(spare >= 0, 0.0, math.inf), np.where(spare > 0, lag / spare.clip(lower=1e-300).to_numpy(), math.inf)
    )
    table = table[["partitions", "lag", "rate", "produce_rate", "time_to_drain", "peak_partition_lag"]]
    table.index.name = "consumer"

    total_rate = float(rates.sum())
    total_produce = float(rows["produce_rate"].sum())
    exact_total = exact_sum(rows["lag"]) if rows["lag"].dtype.kind in "iu" else float(rows["lag"].sum())
    total_lag = float(exact_total)
    spare_group = total_rate - total_produce
    if total_lag == 0 and spare_group >= 0:
        lower = 0.0
    elif spare_group <= 0:
        lower = math.inf
    else:
        # one partition can only be read by one consumer, at the fastest consumer's rate at best
        fastest = float(rates.max())
        headroom = (fastest - rows["produce_rate"]).to_numpy()
        alone = np.divide(lag_values, headroom, out=np.full(len(rows), math.inf), where=headroom > 0)
        alone = np.where((lag_values == 0) & (headroom >= 0), 0.0, alone)
        lower = max(total_lag / spare_group, float(alone.max()) if len(alone) else 0.0)
    growing = bool((table["produce_rate"] > table["rate"]).any())
    return Drain(
        consumers=table,
        partitions=partitions,
        time_to_drain=float(table["time_to_drain"].max()),
        lower_bound=lower,
        peak_total_lag=math.inf if growing else total_lag,
        peak_partition_lag=float(peak.max()) if len(peak) else 0.0,
        backlog=exact_total,
    )


def _consumer_lags(rows: pd.DataFrame, consumers: pd.Index) -> np.ndarray:
    """Each consumer's total lag: exact for integer lags (int64 while it fits, Python ints beyond)."""
    if rows["lag"].dtype.kind not in "iu":
        sums = rows.groupby("consumer", sort=False)["lag"].sum()
        return sums.reindex(consumers, fill_value=0.0).to_numpy(dtype=float)
    totals = exact_sums(rows["consumer"], rows["lag"]) if len(rows) else {}
    values = [totals.get(c, 0) for c in consumers.tolist()]
    return np.array(values, dtype=np.int64 if all(v < INT64_LIMIT for v in values) else object)


def produce_rates(earlier: pd.DataFrame, later: pd.DataFrame, interval: float) -> pd.DataFrame:
    """DataFrame[topic, partition, produce_rate]: messages appended per second between two
    offsets snapshots taken ``interval`` seconds apart (end offsets of ``later`` minus ``earlier``).

    Every partition of ``later`` must be in ``earlier``; a partition whose end offset went
    back (a recreated topic) is an error, since its rate cannot be told.
    """
    seconds = check_rate(interval, "the interval between the snapshots")
    a = validate_offsets(earlier, "earlier snapshot")
    b = validate_offsets(later, "later snapshot")
    both = b.loc[:, [*KEY, "end_offset"]].merge(a.loc[:, [*KEY, "end_offset"]], on=KEY, how="left", suffixes=("", "_earlier"))
    if both["end_offset_earlier"].isna().any():
        r = both[both["end_offset_earlier"].isna()].iloc[0]
        raise InputError(f"partition {r.topic}-{r.partition} is in the later snapshot only; take both of the same topics")
    appended = both["end_offset"] - both["end_offset_earlier"].astype(np.int64)
    if (appended < 0).any():
        r = both[appended < 0].iloc[0]
        raise InputError(
            f"{r.topic}-{r.partition}: the end offset went back from {int(r.end_offset_earlier)} to {int(r.end_offset)}"
            " (was the topic recreated, or are the snapshots swapped?)"
        )
    return pd.DataFrame({"topic": both["topic"], "partition": both["partition"], "produce_rate": appended / seconds})


# -- text tables (the CLI's ``simulate`` and the benchmarks print them) ---------------------


def duration(seconds: float) -> str:
    """``42.0 s``, ``12m 05s``, ``3h 12m``; ``never`` for ``inf``."""
    if math.isinf(seconds):
        return "never"
    if seconds < 100:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def _count(value: object) -> str:
    """A lag with thousands separators: exact for integers, rounded for float lags."""
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    return f"{float(value):,.0f}"  # type: ignore[arg-type]


def _grid(rows: list[list[str]], left: int = 1) -> str:
    """Columns padded to their widest cell; the first ``left`` columns flush left, numbers flush right."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) if i < left else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths))).rstrip()
        for r in rows
    )


def consumer_table(drain: Drain, limit: int = 10) -> str:
    """The slowest ``limit`` consumers: partitions, lag, produce rate, time to drain."""
    table = drain.consumers.sort_values(["time_to_drain", "lag"], ascending=False, kind="stable")
    rows = [["consumer", "partitions", "lag", "produced/s", "rate/s", "drains in"]]
    top = table.head(limit)
    # column by column: a row of mixed dtypes would turn an exact int64 lag into a float
    for consumer, parts, lag, produce, rate, t in zip(
        top.index.tolist(),
        top["partitions"].tolist(),
        top["lag"].tolist(),
        top["produce_rate"].tolist(),
        top["rate"].tolist(),
        top["time_to_drain"].tolist(),
    ):
        rows.append([str(consumer), str(int(parts)), _count(lag), f"{produce:,.1f}", f"{rate:,.1f}", duration(t)])
    text = _grid(rows)
    if len(table) > limit:
        text += f"\n... and {len(table) - limit} more consumers, none slower"
    return text


def summary_table(drains: Mapping[str, Drain], moved: Mapping[str, int] | None = None) -> str:
    """One line per plan: time to drain, against the bound, the median consumer, peak partition lag."""
    head = ["plan", "drains in", "seconds", "x bound", "median consumer", "peak partition lag", "never drain"]
    if moved is not None:
        head.insert(-1, "moved")
    rows = [head]
    for name, d in drains.items():
        ratio = d.time_to_drain / d.lower_bound if d.lower_bound > 0 and not math.isinf(d.lower_bound) else math.nan
        row = [
            name,
            duration(d.time_to_drain),
            "never" if math.isinf(d.time_to_drain) else f"{d.time_to_drain:,.1f}",
            "-" if math.isnan(ratio) else ("never" if math.isinf(ratio) else f"{ratio:.3f}"),
            duration(float(d.consumers["time_to_drain"].median())),
            "unbounded" if math.isinf(d.peak_partition_lag) else f"{d.peak_partition_lag:,.0f}",
            str(len(d.never_drains)),
        ]
        if moved is not None:
            row.insert(-1, str(moved[name]) if name in moved else "-")
        rows.append(row)
    return _grid(rows)


__all__ = ["Drain", "check_rate", "consumer_table", "duration", "produce_rates", "simulate", "summary_table"]
