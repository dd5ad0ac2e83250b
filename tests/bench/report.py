"""Markdown tables of the benchmark results and the report that holds them; the same text goes
to stdout. Numbers are printed, never asserted: the targets section says which hold."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from tests.bench import bench_job


def table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _num(value: float, digits: int) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if math.isinf(value):
        return "never"
    return f"{value:,.{digits}f}"


def _pair(values: pd.Series, digits: int = 0) -> str:
    """``median / worst`` (worst = max) of a metric over seeds."""
    if values.empty or values.isna().all():
        return "-"
    return f"{_num(float(values.median()), digits)} / {_num(float(values.max()), digits)}"


# -- quality from scratch ---------------------------------------------------------------------


def static_table(static: pd.DataFrame, shape: str, names: Sequence[str]) -> str:
    here = static[static["shape"] == shape]
    rows = []
    for name in names:
        g = here[here["planner"] == name]
        if "skipped" in g and g["skipped"].notna().all():
            rows.append([name, f"not run: {g['skipped'].iloc[0]}", "", "", "", ""])
            continue
        rows.append([
            name, _pair(g["count_spread"]), _pair(g["topic_spread"]), _pair(g["optimality"], 3),
            _pair(g["lag_imbalance"], 3), _pair(g["seconds"] * 1000, 1),
        ])
    head = ["planner", "count spread", "worst topic spread", "optimality (max/LB)", "lag imbalance (max/mean)", "ms per plan"]
    return table(head, rows)


# -- churn ---------------------------------------------------------------------------------------


def churn_table(churn: pd.DataFrame, shape: str, names: Sequence[str], steps: Sequence[str]) -> str:
    here = churn[churn["shape"] == shape]
    later = list(steps[1:])
    rows = []
    for name in names:
        g = here[here["planner"] == name]
        if g.empty:
            rows.append([name, *(["not run"] * len(later)), "", "", "", ""])
            continue
        cells = []
        for step in later:
            m = g.loc[g["step"] == step, "moved"]
            cells.append(f"{m.median():,.0f} ({m.max():,.0f})")
        totals = g[g["step"] != steps[0]].groupby("seed")["moved"].sum()
        after = g[g["step"] != steps[0]]
        rows.append([name, *cells, f"{totals.median():,.0f} ({totals.max():,.0f})", _pair(after["optimality"], 3),
                     _num(float(after["count_spread"].max()), 0), _num(float(after["seconds"].median() * 1000), 1)])
    fewest = here.groupby("step")["fewest"].median()
    if fewest.notna().any():
        rows.append(["*fewest for count balance*", *(_num(float(fewest.get(s, np.nan)), 0) for s in later),
                     _num(float(fewest.reindex(later).sum()), 0), "", "", ""])
    head = ["planner", *later, "total", "optimality after (med / worst)", "worst count spread", "ms per plan (median)"]
    return table(head, rows)


# -- drain ---------------------------------------------------------------------------------------


def drain_table(drain: pd.DataFrame, shape: str, names: Sequence[str]) -> str:
    here = drain[drain["shape"] == shape]
    rows = []
    for name in names:
        g = here[here["planner"] == name]
        if "skipped" in g and g["skipped"].notna().all():
            rows.append([name, f"not run: {g['skipped'].iloc[0]}", "", "", "", ""])
            continue
        cells = [name]
        for scenario in ("backlog", "producing"):
            s = g[g["scenario"] == scenario]
            cells.append(_pair(s["ratio"], 2))
            cells.append(_num(float(s["time_to_drain"].median()) / 60, 0))
        s = g[g["scenario"] == "producing"]
        cells.append(f"{int((s['never'] > 0).sum())} of {len(s)}")
        rows.append(cells)
    head = ["planner", "stopped: drain / bound (med / worst)", "stopped: median minutes",
            "producing: drain / bound (med / worst)", "producing: median minutes", "producing: seeds never drained"]
    return table(head, rows)


# -- scale ---------------------------------------------------------------------------------------


def scale_table(scale: pd.DataFrame, names: Sequence[str]) -> str:
    rows = []
    for (n, c), g in scale.groupby(["partitions", "consumers"], sort=True):
        cells = [f"{n:,} x {c:,}"]
        for name in names:
            r = g[g["planner"] == name]
            if r.empty:
                cells.append("-")
            elif r["status"].iloc[0] == "ok":
                cells.append(f"{r['seconds'].iloc[0]:.2f}")
            else:
                cells.append(str(r["status"].iloc[0]))
        lag_sticky = g[(g["planner"] == "lag-sticky") & (g["status"] == "ok")]
        cells.append(_num(float(lag_sticky["optimality"].iloc[0]), 4) if len(lag_sticky) else "-")
        rows.append(cells)
    return table(["partitions x consumers", *names, "lag-sticky optimality"], rows)


def job_table(rows: list[dict[str, object]]) -> str:
    ok = [r for r in rows if "error" not in r]
    text = bench_job.table(rows)
    if ok:
        sizes = {(int(r["partitions"]), int(r["consumers"])) for r in ok}  # type: ignore[call-overload]
        text = "\n".join(f"snapshot: {p:,} partitions, {c:,} consumers" for p, c in sorted(sizes)) + "\n\n" + text
    return text


# -- targets -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    what: str
    measured: str
    holds: bool | None  # None: not measured in this run


def targets(
    static: pd.DataFrame,
    churn: pd.DataFrame,
    scale: pd.DataFrame | None,
    job: list[dict[str, object]] | None,
    identical: Sequence[str],
) -> list[Target]:
    out = []
    ls = static[static["planner"] == "lag-sticky"]
    lc = churn[churn["planner"] == "lag-sticky"]
    same = pd.concat([ls[ls["shape"].isin(identical)], lc[lc["shape"].isin(identical)]])
    worst_count = int(same["count_spread"].max())
    worst_topic = int(pd.concat([ls["topic_spread"], lc["topic_spread"]]).max())
    out.append(Target(
        "lag-sticky count spread <= 1 (identical subscriptions, from scratch and after every churn step)",
        f"worst {worst_count} over {len(same)} plans", worst_count <= 1,
    ))
    out.append(Target("lag-sticky per-topic spread <= 1 (every shape, every step)",
                      f"worst {worst_topic} over {len(ls) + len(lc)} plans", worst_topic <= 1))
    for shape, limit in (("skewed", 1.05), ("seed002", 1.15)):
        values = ls.loc[ls["shape"] == shape, "optimality"]
        if len(values):
            out.append(Target(
                f"lag-sticky optimality median <= {limit} on {shape}",
                f"median {values.median():.4f}, worst {values.max():.4f} over {len(values)} seeds",
                bool(values.median() <= limit),
            ))
    st = churn[churn["planner"] == "sticky"].set_index(["shape", "seed", "step"])
    kp = churn[churn["planner"] == "kp-sticky"].set_index(["shape", "seed", "step"])
    both = st[["moved", "seconds"]].join(kp[["moved", "seconds"]], rsuffix="_kp", how="inner")
    both = both[both.index.get_level_values("step") != "start"]
    if len(both):
        more = int((both["moved"] > both["moved_kp"]).sum())
        fewer = int((both["moved"] < both["moved_kp"]).sum())
        out.append(Target(
            "sticky moves no more than kafka-python's sticky (same churn inputs)",
            f"{int(both['moved'].sum()):,} vs {int(both['moved_kp'].sum()):,} moves in all; sticky moved more in "
            f"{more} of {len(both)} steps, fewer in {fewer}",
            more == 0,
        ))
    timing = churn[churn["planner"].isin(["sticky", "kp-sticky"])].set_index(["shape", "seed", "step", "planner"])["seconds"]
    ratio = timing.unstack("planner").dropna()
    if len(ratio):
        speedup = ratio["kp-sticky"] / ratio["sticky"]
        measured = f"churn steps (~1-3k partitions): median {speedup.median():.1f}x, worst {speedup.min():.1f}x"
        holds = bool(speedup.median() >= 20)
        if scale is not None:
            s = scale[scale["status"] == "ok"].set_index(["partitions", "consumers", "planner"])["seconds"].unstack("planner")
            if {"sticky", "kp-sticky"} <= set(s.columns):
                big = (s["kp-sticky"] / s["sticky"]).dropna()
                parts = ", ".join(f"{n:,}x{c:,}: {v:.0f}x" for (n, c), v in big.items())
                measured += f"; from scratch at scale: {parts}"
                stopped = scale[(scale["planner"] == "kp-sticky") & (scale["status"] != "ok")]
                if len(stopped):
                    measured += f"; kp-sticky did not finish at {len(stopped)} larger cell(s)"
                holds = holds and bool((big >= 20).all())
        out.append(Target("sticky at least 20x faster than kafka-python's sticky", measured, holds))
    big_job = [r for r in (job or []) if "error" not in r and int(r["partitions"]) >= 1_000_000  # type: ignore[call-overload]
               and int(r["consumers"]) >= 1_000]  # type: ignore[call-overload]
    if big_job:
        r = big_job[0]
        out.append(Target("Spark job, 1M partitions x 1,000 consumers, under 60 s",
                          f"{r['total']:.1f} s ({r['strategy']}, Spark start included)", float(r["total"]) < 60))  # type: ignore[arg-type]
        out.append(Target("... and under 4 GiB peak memory (driver, JVM and Python workers)",
                          f"{r['peak_gib']:.2f} GiB", float(r["peak_gib"]) < 4))  # type: ignore[arg-type]
    else:
        errors = [str(r.get("error")) for r in (job or []) if "error" in r]
        out.append(Target("Spark job, 1M partitions x 1,000 consumers, under 60 s and 4 GiB",
                          "not run at that size in this mode" + (f" (error: {errors[0][:200]})" if errors else ""), None))
    return out


def targets_table(items: Sequence[Target]) -> str:
    mark = {True: "holds", False: "**does not hold**", None: "not measured"}
    return table(["target", "measured", ""], [[t.what, t.measured, mark[t.holds]] for t in items])


__all__ = ["Target", "churn_table", "drain_table", "job_table", "scale_table", "static_table", "table", "targets",
           "targets_table"]
