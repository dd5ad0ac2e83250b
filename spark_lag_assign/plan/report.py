"""Plain-text tables of a plan: per consumer, the quality metrics, and what moved."""

from __future__ import annotations

import math

from spark_lag_assign.plan.build import Plan


def _fmt_partitions(assign: dict[str, list[int]], limit: int = 6) -> str:
    names = [f"{t}p{p}" for t in sorted(assign) for p in assign[t]]
    shown = ", ".join(names[:limit])
    return f"[{shown}{', ...' if len(names) > limit else ''}]"


def duration(seconds: float | None, estimated: bool = False) -> str:
    """``42.0 s``, ``12m 05s``, ``3h 12m``; ``never`` for None/inf; ``~`` marks an estimate."""
    if seconds is None or math.isinf(seconds):
        return "never"
    mark = "~" if estimated else ""
    if seconds < 100:
        return f"{mark}{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{mark}{whole // 60}m {whole % 60:02d}s"
    return f"{mark}{whole // 3600}h {whole % 3600 // 60:02d}m"


def _has_times(plan: Plan) -> bool:
    return any("drain_seconds" in e for e in plan["consumers"].values())


def _drains_in(plan: Plan, entry: dict[str, object]) -> str:
    if entry.get("read_rate") is None:
        return "-"
    if entry.get("keeps_up") is False:
        return "never"
    return duration(entry.get("drain_seconds"), bool(plan.get("rates_estimated")))  # type: ignore[arg-type]


def consumer_table(plan: Plan, limit: int = 40) -> str:
    """consumer | partitions | lag | share [| read/s | produced/s | drains in], one line each
    (the first ``limit`` consumers)."""
    total = max(plan["totals"]["lag"], 1)
    timed = _has_times(plan)
    head = ("consumer", "partitions", "lag", "share") + (("read/s", "produced/s", "drains in") if timed else ()) + ("assigned",)
    rows = [head]
    for consumer, entry in list(plan["consumers"].items())[:limit]:
        times: tuple[str, ...] = ()
        if timed:
            rate = entry.get("read_rate")
            times = (
                "-" if rate is None else f"{rate:,.1f}",
                f"{entry.get('produce_rate', 0.0):,.1f}",
                _drains_in(plan, entry),  # type: ignore[arg-type]
            )
        rows.append(
            (
                consumer,
                str(entry["partitions"]),
                f"{entry['lag']:,}",
                f"{100 * entry['lag'] / total:.1f}%",
                *times,
                _fmt_partitions(entry["assign"]),
            )
        )
    n = len(head)
    widths = [max(len(r[i]) for r in rows) for i in range(n)]
    lines = ["  ".join(r[i].ljust(widths[i]) if i in (0, n - 1) else r[i].rjust(widths[i]) for i in range(n)) for r in rows]
    more = len(plan["consumers"]) - limit
    if more > 0:
        lines.append(f"... and {more} more consumers")
    return "\n".join(lines)


def quality_line(plan: Plan) -> str:
    q = plan["quality"]
    if not q:
        return ""
    parts = [
        f"count spread {q['count_spread']} (worst topic {q['topic_spread']})",
        f"lag imbalance {q['lag_imbalance']:.3f}",
        f"optimality {q['optimality']:.3f}",
    ]
    if q.get("moved") is not None:
        parts.append(f"moved {q['moved']}")
    if q.get("out_of_range"):
        parts.append(f"{q['out_of_range']} partition(s) with a committed offset outside the log (reset applied)")
    return "; ".join(parts)


def drain_lines(plan: Plan, limit: int = 10) -> list[str]:
    """The group's time to drain, who cannot keep up, and the slowest partitions (empty without rates)."""
    if "rates_source" not in plan:
        return []
    estimated = bool(plan.get("rates_estimated"))
    out = []
    stuck = plan.get("cannot_keep_up") or []
    if plan.get("rates_source") == "none":
        out.append("time to drain: unknown (no read rates: measure them from two generations or give --rate/--rates)")
    elif stuck:
        out.append(
            f"WARNING: {len(stuck)} consumer(s) cannot keep up, producers append at least as fast as they read: "
            f"{', '.join(stuck[:10])}{' ...' if len(stuck) > 10 else ''}; the group never drains"
        )
    elif plan.get("drain_seconds") is None:
        out.append("time to drain: unknown for consumers without a read rate")
    else:
        out.append(f"time to drain: {duration(plan['drain_seconds'], estimated)} (rates {plan['rates_source']})")
    if estimated and plan.get("rates_source") != "none":
        out.append("~ estimate: produce rates rest on fewer than two observations (taken as 0)")
    slow = [
        (d, t, p, c)
        for c, e in plan["consumers"].items()
        for t, parts in (e.get("partition_drain_seconds") or {}).items()
        for p, d in parts.items()
    ]
    if slow:
        slow.sort(key=lambda x: (-(math.inf if x[0] is None else x[0]), x[1], int(x[2])))
        out.append("slowest partitions: " + ", ".join(f"{t}-{p} ({c}) {duration(d, estimated)}" for d, t, p, c in slow[:limit]))
    out += [f"note: {n}" for n in plan.get("rates_notes") or []]
    return out


def moves(previous: Plan, current: Plan, limit: int = 20) -> str:
    """Partitions whose owner changed between two generations, as "t-p: old -> new" lines."""
    before = {(t, p): c for c, e in previous["consumers"].items() for t, ps in e["assign"].items() for p in ps}
    after = {(t, p): c for c, e in current["consumers"].items() for t, ps in e["assign"].items() for p in ps}
    changed = sorted((tp, before[tp], after[tp]) for tp in before.keys() & after.keys() if before[tp] != after[tp])
    lines = [f"{len(changed)} partition(s) moved since generation {previous['generation']}"]
    lines += [f"  {t}-{p}: {old} -> {new}" for (t, p), old, new in changed[:limit]]
    if len(changed) > limit:
        lines.append(f"  ... and {len(changed) - limit} more")
    return "\n".join(lines)


def summary(plan: Plan, limit: int = 40) -> str:
    t = plan["totals"]
    head = (
        f"plan generation {plan['generation']} ({plan['strategy']}, reset={plan['reset']}) from {plan['source']}: "
        f"{t['assigned']} partitions, lag {t['lag']:,}, {len(plan['consumers'])} consumers"
    )
    out = [head, consumer_table(plan, limit)]
    line = quality_line(plan)
    if line:
        out.append(line)
    out += drain_lines(plan)
    idle = [c for c, e in plan["consumers"].items() if e["partitions"] == 0]
    if idle:
        out.append(f"consumers with nothing assigned: {', '.join(idle[:20])}{' ...' if len(idle) > 20 else ''}")
    if plan["unassigned"]:
        n = sum(len(v) for v in plan["unassigned"].values())
        out.append(f"unassigned (no subscriber): {n} partition(s) of {', '.join(sorted(plan['unassigned']))}")
    return "\n".join(out)
