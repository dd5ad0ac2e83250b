"""Markdown tables of the benchmark results and the report that holds them; the same text goes
to stdout. Numbers are printed, never asserted: the targets section says which hold."""

from __future__ import annotations

import math
from collections.abc import Sequence
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


def _skipped(runs: pd.DataFrame) -> bool:
    """Every run of this planner was skipped (kafka-python's round robin on differing subscriptions)."""
    return "skipped" in runs and bool(runs["skipped"].notna().all())


# -- quality from scratch ---------------------------------------------------------------------


def static_table(static: pd.DataFrame, shape: str, names: Sequence[str]) -> str:
    here = static[static["shape"] == shape]
    rows = []
    for name in names:
        g = here[here["planner"] == name]
        if _skipped(g):
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
        if _skipped(g):
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


def sticky_table(rows: list[dict[str, object]]) -> str:
    """``tests.bench.bench_sticky.run`` rows: first assignment and one join, ours end to end and core alone."""
    head = ["size (topics x partitions x consumers)", "assignor", "first (s)", "join (s)", "join moves", "fewest",
            "count spread first/join"]
    keys = ["size", "assignor", "first s", "join s", "join moves", "fewest", "spread"]

    def cell(r: dict[str, object], key: str) -> str:
        value = r.get(key)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return ""
        if isinstance(value, float):
            # the "kafka-python / ours" row holds ratios, the others seconds
            return f"{value:.0f}x" if "/" in str(r["assignor"]) else f"{value:.3f}"
        return str(value)

    out = [[cell(r, k) for k in keys] for r in rows]
    return table(head, out)


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
        worse = both[both["moved"] > both["moved_kp"]]
        fewer = int((both["moved"] < both["moved_kp"]).sum())
        measured = (f"{int(both['moved'].sum()):,} vs {int(both['moved_kp'].sum()):,} moves in all; fewer in {fewer} of "
                    f"{len(both)} steps, more in {len(worse)}")
        if len(worse):
            measured += ": " + ", ".join(
                f"{shape} seed {seed} {step} {int(r.moved)} vs {int(r.moved_kp)}" for (shape, seed, step), r in worse.iterrows()
            )
        out.append(Target("sticky moves no more than kafka-python's sticky (same churn inputs, every step)", measured,
                          len(worse) == 0))
        # the wording: over each rebalance sequence (one shape and seed), each assignor fed its own plans
        per_sequence = both.groupby(level=["shape", "seed"])[["moved", "moved_kp"]].sum()
        over = per_sequence[per_sequence["moved"] > per_sequence["moved_kp"]]
        measured = (f"fewer in {int((per_sequence['moved'] < per_sequence['moved_kp']).sum())} of {len(per_sequence)} "
                    f"sequences, as many in {int((per_sequence['moved'] == per_sequence['moved_kp']).sum())}, more in {len(over)}")
        if len(over):
            measured += ": " + ", ".join(f"{shape} seed {seed} {int(r.moved)} vs {int(r.moved_kp)}" for (shape, seed), r in over.iterrows())
        out.append(Target("sticky moves no more than kafka-python's sticky (same churn inputs, each whole sequence)", measured,
                          len(over) == 0))
        speed = both["seconds_kp"] / both["seconds"]
        by_shape = speed.groupby(level="shape").median()
        sizes = churn[churn["planner"] == "sticky"].groupby("shape")["partitions"].median()
        small = [sh for sh in by_shape.index if sizes[sh] < 10_000]
        large = [sh for sh in by_shape.index if sizes[sh] >= 10_000]
        if small:
            ratio = float(speed[speed.index.get_level_values("shape").isin(small)].median())
            out.append(Target(
                "sticky at least 20x faster than kafka-python's sticky: rebalances of small groups (< 10,000 partitions)",
                f"median {ratio:.1f}x per step; per shape " + ", ".join(
                    f"{sh} (~{sizes[sh]:,.0f} partitions) {by_shape[sh]:.1f}x" for sh in small),
                ratio >= 20,
            ))
        parts = [f"{sh} rebalances (~{sizes[sh]:,.0f} partitions): median {by_shape[sh]:.0f}x, worst "
                 f"{speed[speed.index.get_level_values('shape') == sh].min():.0f}x" for sh in large]
        ok = all(speed[speed.index.get_level_values("shape") == sh].median() >= 20 for sh in large)
        if scale is not None:
            cells = scale[scale["planner"].isin(["sticky", "kp-sticky"])]
            for (n, c), g in cells.groupby(["partitions", "consumers"], sort=True):
                mine, theirs = g[g["planner"] == "sticky"], g[g["planner"] == "kp-sticky"]
                if mine.empty or theirs.empty or mine["status"].iloc[0] != "ok":
                    continue
                status = str(theirs["status"].iloc[0])
                if status == "ok":
                    x = float(theirs["seconds"].iloc[0] / mine["seconds"].iloc[0])
                    parts.append(f"from scratch {n:,} x {c:,}: {x:.0f}x")
                    ok = ok and x >= 20
                elif status.startswith("stopped"):
                    parts.append(f"from scratch {n:,} x {c:,}: kafka-python {status}, sticky {mine['seconds'].iloc[0]:.2f} s")
        if parts:
            out.append(Target("sticky at least 20x faster than kafka-python's sticky: 10,000 partitions and more",
                              "; ".join(parts), ok))
    big_job = [r for r in (job or []) if "error" not in r and r.get("kind") == "job"
               and int(r["partitions"]) >= 1_000_000 and int(r["consumers"]) >= 1_000]  # type: ignore[call-overload]
    for r in big_job:  # each job within 1.5x of the bare PySpark floor, and 2 GiB
        ratio = r.get("floor_ratio")
        out.append(Target(f"Spark job ({r['strategy']}), 1M partitions x 1,000 consumers, <= 1.5x its floor",
                          f"{r['total']:.1f} s = {ratio:.2f}x the floor" if ratio is not None else f"{r['total']:.1f} s (no floor)",
                          None if ratio is None else float(ratio) <= 1.5))  # type: ignore[arg-type]
        out.append(Target(f"... ({r['strategy']}) peak memory <= 2 GiB (driver, JVM and Python workers)",
                          f"{r['peak_gib']:.2f} GiB", float(r["peak_gib"]) <= 2))  # type: ignore[arg-type]
    if not big_job:
        errors = [str(r.get("error")) for r in (job or []) if "error" in r]
        out.append(Target("Spark job, 1M partitions x 1,000 consumers, <= 1.5x its floor and 2 GiB",
                          "not run at that size in this mode" + (f" (error: {errors[0][:200]})" if errors else ""), None))
    return out


def java_targets(java: pd.DataFrame | None, error: str = "") -> list[Target]:
    """The targets from ``tests.bench.java_compare.run``; not measured when it did not run."""
    from tests.bench import java_compare  # it imports this module for Target and table

    if java is not None:
        return java_compare.targets(java)
    return [Target("ours beside Apache Kafka's own Java assignors (sticky, lag-sticky, range, roundrobin)",
                   f"not run: {error}", None)]


def targets_table(items: Sequence[Target]) -> str:
    mark = {True: "holds", False: "**does not hold**", None: "not measured"}
    return table(["target", "measured", ""], [[t.what, t.measured, mark[t.holds]] for t in items])


__all__ = ["Target", "churn_table", "drain_table", "java_targets", "job_table", "scale_table", "static_table",
           "sticky_table", "table", "targets", "targets_table"]
