"""Sizing for a deadline: pipelines needed against the capacity bound, predicted against simulated time.

Workloads: ``tests.bench.rates_bench``'s (``workloads.skewed``, 12 consumers, equal or
heterogeneous read rates, producers at 20-80% of the group's read capacity), one group per seed.
Deadlines are multiples of the time no plan of the whole group beats (``core.rates.lower_bound``:
total lag over the group's spare rate, or one partition read alone by the fastest pipeline), from
just above it (x1.02) to four times it.

For each, ``spark_lag_assign.sizing.size`` answers how many pipelines (fastest first) drain by
the deadline. ``bound`` is the fewest by capacity alone: the fastest pipelines whose rates add up
to the total lag over the deadline plus what producers append (computed apart from ``sizing``, and
checked equal to its ``Sizing.bound``); no plan of fewer drains in time. ``predicted`` is sizing's time for the pipelines it chose (``drain``'s plan, closed
form per consumer); ``simulated`` plays that same plan forward with
``spark_lag_assign.core.draintime.simulate``, partition by partition (the event replay, not the
per-consumer closed form sizing uses), and takes when its last partition has caught up. Where no number of the 12 configured pipelines
drains by the deadline the answer is *none*, and the gap is not known from this pool: it is
consistent with "within one" only if the bound asks for all 12 (the answer is then 13 or more).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from spark_lag_assign.core import draintime, rates as rates_io
from spark_lag_assign.sizing import drain_plan, size
from tests.bench import rates_bench

FACTORS = (1.02, 1.25, 2.0, 4.0)  # deadline / the whole group's lower bound
LOADS = rates_bench.LOADS
SPEEDS = rates_bench.SPEEDS


def bound_time(lags: pd.DataFrame, rates: dict[str, float], produced: pd.DataFrame) -> float:
    """No plan of every pipeline drains sooner: total lag over the group's spare rate, or the
    slowest partition read alone by the fastest pipeline."""
    p = rates_io.align_produce(produced, lags["topic"].to_numpy(), lags["partition"].to_numpy())
    return rates_io.lower_bound(lags["lag"].to_numpy(), p, np.asarray(list(rates.values()), dtype=np.float64))


def capacity_bound(lags: pd.DataFrame, rates: dict[str, float], produced: pd.DataFrame, deadline: float) -> int | None:
    """The fewest pipelines by capacity alone, computed apart from ``sizing``: the fastest ones
    whose rates add up to the total lag over the deadline plus what producers append (None: not
    even all of them)."""
    work = float(lags["lag"].sum()) / deadline + float(produced["produce_rate"].sum())
    reach = np.cumsum(sorted(rates.values(), reverse=True))
    enough = np.flatnonzero(reach >= work * (1 - 1e-9))
    return int(enough[0]) + 1 if len(enough) else None


def case(
    lags: pd.DataFrame, subs: dict[str, list[str]], rates: dict[str, float], produced: pd.DataFrame, deadline: float
) -> dict[str, object]:
    """One sizing: needed, bound, their gap, and sizing's predicted time beside the simulated one."""
    answer = size(lags, subs, rates, deadline, produced)
    bound = capacity_bound(lags, rates, produced, deadline)
    row: dict[str, object] = {
        "deadline": deadline,
        "configured": answer.configured,
        "needed": answer.needed,
        "bound": bound,
        "sizing_bound": answer.bound,
        "gap": None if answer.needed is None or bound is None else answer.needed - bound,
        "predicted": math.nan if answer.drain_needed is None else answer.drain_needed,
        "simulated": math.nan,
    }
    if answer.needed is not None:
        plan, _ = drain_plan(lags, subs, answer.pipelines, rates, produced)
        chosen = {c: rates[c] for c in answer.pipelines}
        replay = draintime.simulate(lags, plan, chosen, produced, consumers=list(chosen))
        row["simulated"] = float(replay.partitions["time_to_drain"].max())  # the event replay, not the closed form
    return row


def run(seeds: Sequence[int], loads: Sequence[float] = LOADS, factors: Sequence[float] = FACTORS) -> pd.DataFrame:
    """One row per (speeds, load, seed, deadline factor)."""
    rows = []
    for speeds in SPEEDS:
        for load in loads:
            for seed in seeds:
                lags, subs, rates, produced = rates_bench.workload(seed, load, speeds)
                bound = bound_time(lags, rates, produced)
                for factor in factors:
                    base = {"speeds": speeds, "load": load, "seed": seed, "factor": factor}
                    rows.append({**base, **case(lags, subs, rates, produced, factor * bound)})
    return pd.DataFrame(rows)


def _range(values: pd.Series) -> str:
    lo, hi = int(values.min()), int(values.max())
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def table(results: pd.DataFrame) -> str:
    """Markdown: per load, speeds and deadline, over seeds: needed and bound (min-max), the worst
    gap, the median predicted and simulated times and their largest relative difference."""
    lines = [
        "| load | speeds | deadline / lower bound | needed | bound | needed - bound (worst) | none | "
        "predicted s (median) | simulated s (median) | max \\|predicted - simulated\\| / simulated |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for load in sorted(results["load"].unique()):
        for speeds in SPEEDS:
            for factor in sorted(results["factor"].unique()):
                sub = results[(results["load"] == load) & (results["speeds"] == speeds) & (results["factor"] == factor)]
                if sub.empty:
                    continue
                found = sub[sub["needed"].notna()]
                none = len(sub) - len(found)
                bounds = sub["bound"].dropna()
                if found.empty:
                    needed = gap = predicted = simulated = diff = "-"
                else:
                    needed, gap = _range(found["needed"]), f"{int(found['gap'].max()):+d}"
                    predicted = f"{found['predicted'].median():,.0f}"
                    simulated = f"{found['simulated'].median():,.0f}"
                    rel = (found["predicted"] - found["simulated"]).abs() / found["simulated"]
                    diff = f"{float(rel.max()):.1e}"
                bound = _range(bounds) if len(bounds) else "none"
                lines.append(
                    f"| {load:.0%} | {speeds} | {factor:g} | {needed} | {bound} | {gap} | {none}/{len(sub)} | "
                    f"{predicted} | {simulated} | {diff} |"
                )
    return "\n".join(lines)


def targets(results: pd.DataFrame) -> list[tuple[str, bool, str]]:
    """(goal, met, measured): the "within one pipeline of the lower bound" where some
    number of the configured pipelines drains in time, and predicted = simulated."""
    found = results[results["needed"].notna()]
    worst = int(found["gap"].max()) if len(found) else 0
    over = int((found["gap"] > 1).sum())
    below = int((found["gap"] < 0).sum())
    rel = ((found["predicted"] - found["simulated"]).abs() / found["simulated"]).to_numpy(dtype=np.float64)
    none = results[results["needed"].isna()]
    short = int((none["bound"].isna() | (none["bound"] < none["configured"])).sum())
    same = results["bound"].fillna(-1) == results["sizing_bound"].fillna(-1)
    return [
        (
            "pipelines needed within one of the capacity bound",
            over == 0,
            f"worst gap {worst:+d}; {over} of {len(found)} case(s) more than one over",
        ),
        ("never fewer than the bound", below == 0, f"{below} case(s) below"),
        (
            "predicted time = simulated time (relative 1e-6)",
            bool((rel <= 1e-6).all()),
            f"largest difference {float(rel.max()) if len(rel) else 0.0:.1e}",
        ),
        ("sizing's bound = the capacity bound", bool(same.all()), f"{int((~same).sum())} case(s) differ"),
        (
            "no answer only where the bound asks for every configured pipeline",
            short == 0,
            f"{len(none)} case(s) without an answer, {short} with a bound below the group",
        ),
    ]


def unanswered(results: pd.DataFrame) -> str:
    """The cases no number of the configured pipelines drains in time, which the gap leaves out."""
    none = results[results["needed"].isna()]
    if none.empty:
        return f"Every one of the {len(results)} cases has an answer among the configured pipelines."
    return (
        f"{len(none)} of {len(results)} cases have no answer among the configured pipelines (not in the gap above): "
        f"deadlines of at most {none['factor'].max():g}x the whole group's lower bound, where capacity alone asks for "
        f"{_range(none['bound'].dropna()) if none['bound'].notna().any() else 'more than all'} of them."
    )


if __name__ == "__main__":
    import sys

    out = run(range(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
    print(table(out))
    print(rates_bench.targets_table(targets(out)))
    print(unanswered(out))
