"""Plain-text tables of a plan: per consumer, the quality metrics, and what moved."""

from __future__ import annotations

from spark_lag_assign.plan import Plan


def _fmt_partitions(assign: dict[str, list[int]], limit: int = 6) -> str:
    names = [f"{t}p{p}" for t in sorted(assign) for p in assign[t]]
    shown = ", ".join(names[:limit])
    return f"[{shown}{', ...' if len(names) > limit else ''}]"


def consumer_table(plan: Plan, limit: int = 40) -> str:
    """consumer | partitions | lag | share, one line each (the first ``limit`` consumers)."""
    total = max(plan["totals"]["lag"], 1)
    rows = [("consumer", "partitions", "lag", "share", "assigned")]
    for consumer, entry in list(plan["consumers"].items())[:limit]:
        rows.append(
            (
                consumer,
                str(entry["partitions"]),
                f"{entry['lag']:,}",
                f"{100 * entry['lag'] / total:.1f}%",
                _fmt_partitions(entry["assign"]),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  ".join(r[i].ljust(widths[i]) if i in (0, 4) else r[i].rjust(widths[i]) for i in range(5)) for r in rows]
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
    idle = [c for c, e in plan["consumers"].items() if e["partitions"] == 0]
    if idle:
        out.append(f"consumers with nothing assigned: {', '.join(idle[:20])}{' ...' if len(idle) > 20 else ''}")
    if plan["unassigned"]:
        n = sum(len(v) for v in plan["unassigned"].values())
        out.append(f"unassigned (no subscriber): {n} partition(s) of {', '.join(sorted(plan['unassigned']))}")
    return "\n".join(out)
