"""Benchmarks: our six strategies beside kafka-python's Range, RoundRobin and Sticky, with pictures.

    python -m tests.bench [--quick] --output DIR

On the same seeded inputs: quality from scratch (count spread, per-topic spread, optimality,
lag imbalance, time), movement across churn, time to drain a backlog, and scale up to a
million partitions, plus the Spark job from a million-partition snapshot, and our speed beside
Apache Kafka's own Java assignors at a million partitions (``java_compare``; ``--no-java`` skips it). Writes
DIR/report.md with its PNGs and the raw results (CSV, JSON), and prints the report's tables.
``--quick`` runs fewer seeds and smaller sizes (a couple of minutes) for development.
Timings are one machine's, under whatever else runs on it: the report records the load.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from spark_lag_assign.errors import JvmError
from tests.bench import (
    bench_sticky,
    compare,
    drain,
    java_compare,
    plots,
    rates_bench,
    report,
    scale,
    sizing_bench,
)


@dataclass(frozen=True)
class Mode:
    name: str
    static_seeds: int
    churn_seeds: int
    large_churn_seeds: int  # churn on compare.LARGE (~10,000 partitions)
    sticky_size: tuple[int, int, int] | None  # bench_sticky's group: topics, partitions per topic, consumers
    drain_seeds: int
    sizes: tuple[int, ...]
    consumers: tuple[int, ...]
    peer_limit: float
    job: tuple[int, int, int]  # topics, partitions per topic, consumers
    job_strategies: tuple[str, ...]
    rate_seeds: int = 10  # plan for time (rates_bench): seeds per load and speeds
    rate_speed: tuple[int, int] = (1_000_000, 1_000)  # drain's speed against lag-sticky: partitions, consumers
    java_shapes: tuple[java_compare.Shape, ...] = java_compare.FULL  # beside Kafka's own Java assignors


FULL = Mode("full", 20, 6, 2, (100, 100, 100), 6, scale.SIZES, scale.CONSUMERS, 30.0, (10_000, 100, 1_000), ("lag-sticky", "lag"))
QUICK = Mode(
    "quick",
    3,
    1,
    0,
    None,
    2,
    (10_000, 100_000),
    (10, 100),
    10.0,
    (100, 100, 10),
    ("lag-sticky", "lag"),
    rate_seeds=3,
    rate_speed=(100_000, 100),
    java_shapes=java_compare.QUICK,
)

CHURN_SHAPES = ("skewed", "seed002", "mixed")
DRAIN_SHAPES = ("skewed", "seed002", "mixed")
OPTIMALITY_TARGETS = {"skewed": 1.05, "seed002": 1.15}


class Clock:
    """Wall time and load average per section, for the report's header."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.sections: list[tuple[str, float, float]] = []
        self.loads = [os.getloadavg()[0]]
        self._t = self.start

    def done(self, name: str) -> None:
        now = time.perf_counter()
        load = os.getloadavg()[0]
        self.sections.append((name, now - self._t, load))
        self.loads.append(load)
        self._t = now
        print(f"[bench] {name}: {self.sections[-1][1]:.0f} s (load {load:.1f})", file=sys.stderr, flush=True)

    @property
    def total(self) -> float:
        return time.perf_counter() - self.start


def _log(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer seeds, sizes up to 100,000 (a couple of minutes)")
    parser.add_argument("--output", required=True, metavar="DIR", help="where report.md, the PNGs and raw results go")
    parser.add_argument("--no-scale", action="store_true", help="skip the scale grid and the Spark job")
    parser.add_argument("--no-job", action="store_true", help="skip the Spark job")
    parser.add_argument("--no-java", action="store_true", help="skip the comparison with Kafka's own Java assignors")
    parser.add_argument("--no-growth", action="store_true", help="skip time and memory growth from 10k to 5M partitions")
    args = parser.parse_args(argv)
    mode = QUICK if args.quick else FULL
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    clock = Clock()
    names = compare.NAMES
    _log(f"{mode.name} run into {out}; {os.cpu_count()} cores, load {clock.loads[0]:.1f}")

    static = compare.run_static(compare.SHAPES, compare.PLANNERS, range(mode.static_seeds))
    clock.done(f"quality from scratch ({mode.static_seeds} seeds x {len(compare.SHAPES)} shapes)")
    churn_shapes = [compare.SHAPE[s] for s in CHURN_SHAPES]
    churn = compare.run_churn(churn_shapes, compare.PLANNERS, range(mode.churn_seeds))
    if mode.large_churn_seeds:
        churn = pd.concat(
            [churn, compare.run_churn([compare.LARGE], compare.PLANNERS, range(mode.large_churn_seeds))], ignore_index=True
        )
    clock.done(
        f"churn ({mode.churn_seeds} seeds x {len(churn_shapes)} shapes"
        + (f", {mode.large_churn_seeds} x {compare.LARGE.name}" if mode.large_churn_seeds else "")
        + f"; {len(compare.STEPS)} states each)"
    )
    sticky_rows = bench_sticky.run(mode.sticky_size, repeat=3, peer=True) if mode.sticky_size else None
    if sticky_rows is not None:
        clock.done("sticky against kafka-python's sticky (bench_sticky)")
    drain_shapes = [compare.SHAPE[s] for s in DRAIN_SHAPES]
    drained = drain.run_drain(drain_shapes, compare.PLANNERS, range(mode.drain_seeds))
    curves = drain.curves(compare.SHAPE["skewed"], compare.PLANNERS, seed=0)
    clock.done(f"drain ({mode.drain_seeds} seeds x {len(drain_shapes)} shapes)")
    timed_rates = rates_bench.run(range(mode.rate_seeds))
    rate_speed = rates_bench.speed(*mode.rate_speed)
    clock.done(
        f"plan for time ({mode.rate_seeds} seeds x {len(rates_bench.LOADS)} loads x {len(rates_bench.SPEEDS)} speeds; "
        f"speed at {mode.rate_speed[0]:,} partitions)"
    )

    sized = sizing_bench.run(range(mode.rate_seeds))
    clock.done(
        f"sizing for a deadline ({mode.rate_seeds} seeds x {len(sizing_bench.LOADS)} loads x "
        f"{len(sizing_bench.SPEEDS)} speeds x {len(sizing_bench.FACTORS)} deadlines)"
    )

    grid = None
    job: list[dict[str, object]] | None = None
    if not args.no_scale:
        grid = scale.run_scale(compare.PLANNERS, mode.sizes, mode.consumers, peer_limit=mode.peer_limit, log=False)
        clock.done(f"scale ({len(mode.sizes)} sizes x {len(mode.consumers)} group sizes)")
        if not args.no_job:
            topics, per_topic, consumers = mode.job
            job = scale.run_job(topics, per_topic, consumers, mode.job_strategies)
            clock.done(f"Spark job ({topics * per_topic:,} partitions x {consumers:,} consumers)")

    java: pd.DataFrame | None = None
    java_error = "skipped (--no-java)" if args.no_java else ""
    if not args.no_java:
        try:
            java = java_compare.run(mode.java_shapes, log=_log)
        except JvmError as e:  # the jars or javac are missing: say so in the report, keep the rest
            java_error = str(e).splitlines()[0]
            _log(f"Kafka's Java assignors not run: {java_error}")
        clock.done(f"beside Kafka's Java assignors ({', '.join(s.name for s in mode.java_shapes)})")

    growth = ""
    if not args.no_growth:
        growth = scale.growth_section(out, quick=args.quick)
        clock.done("growth of time and memory with partitions (10k to " + ("1M)" if args.quick else "5M)"))

    # pictures
    lags, subs = compare.SHAPE["skewed"].make(0)
    bar_plans = {p.name: p.run(lags, subs, None, 0, 1) for p in compare.PLANNERS}
    pngs = {
        "lag_bars": plots.lag_bars(bar_plans, subs, "skewed, seed 0", out / "lag_bars.png"),
        "optimality": plots.optimality(static, names, out / "optimality.png", OPTIMALITY_TARGETS),
        "moves": plots.moves(churn, names, compare.STEPS, out / "moves.png"),
        "rates": rates_bench.plot(timed_rates, out / "time_to_drain_rates.png"),
        "drain": plots.drain_curves(
            curves,
            f"Draining skewed seed 0: {len(subs)} consumers at {drain.consumer_rate(lags, len(subs)):,.0f} msg/s each",
            out / "drain.png",
        ),
    }
    if grid is not None:
        pngs["scale"] = plots.scale_times(grid, names, out / "scale.png", limit=mode.peer_limit)
    if java is not None:
        pngs["java"] = java_compare.plot(java, out / "java_ratios.png")
    clock.done("plots")

    static.to_csv(out / "static.csv", index=False)
    churn.to_csv(out / "churn.csv", index=False)
    drained.to_csv(out / "drain.csv", index=False)
    timed_rates.to_csv(out / "rates.csv", index=False)
    sized.to_csv(out / "sizing.csv", index=False)
    if grid is not None:
        grid.to_csv(out / "scale.csv", index=False)
    if job is not None:
        (out / "job.json").write_text(json.dumps(job, indent=1, default=str) + "\n")
    if java is not None:
        java.to_csv(out / "java.csv", index=False)

    goals = report.targets(static, churn, grid, job, identical=[s.name for s in [*compare.SHAPES, compare.LARGE] if s.identical])
    goals += report.java_targets(java, java_error)
    text = render(mode, clock, static, churn, drained, grid, job, goals, pngs, sticky_rows)
    text += rates_section(mode, timed_rates, rate_speed, pngs["rates"])
    text += sizing_section(mode, sized)
    text += "\n" + (
        java_compare.section(java, pngs["java"], mode.name == "quick")
        if java is not None
        else f"## Beside Apache Kafka's own Java assignors\n\nNot run: {java_error}\n"
    )
    text += ("\n" + growth) if growth else ""
    (out / "report.md").write_text(text)
    print(text)
    _log(f"wrote {out / 'report.md'} and {len(pngs)} PNGs in {clock.total:.0f} s")
    return 0


def render(
    mode: Mode,
    clock: Clock,
    static: pd.DataFrame,
    churn: pd.DataFrame,
    drained: pd.DataFrame,
    grid: pd.DataFrame | None,
    job: list[dict[str, object]] | None,
    goals: list[report.Target],
    pngs: dict[str, Path],
    sticky_rows: list[dict[str, object]] | None = None,
) -> str:
    names = compare.NAMES
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    sections = ", ".join(f"{name} {seconds:.0f} s" for name, seconds, _ in clock.sections)
    loads = ", ".join(f"{x:.1f}" for x in clock.loads)
    parts = [
        "# Benchmarks: spark-lag-assign's strategies beside kafka-python's assignors",
        f"`python -m tests.bench{' --quick' if mode.name == 'quick' else ''}` ({mode.name} run), {when}; "
        f"{os.cpu_count()} cores shared with other work: 1-minute load average {loads} (at the start and after each "
        f"section). Wall time {clock.total:.0f} s: {sections}. Timings are single runs on that machine; read them "
        "as orders of magnitude. Raw results: `static.csv`, `churn.csv`, `drain.csv`, `sizing.csv`, `scale.csv`, `job.json`, `java.csv`.",
        "Planners: ours (`range`, `roundrobin`, `lag`, `shuffle`, `sticky`, `lag-sticky`) and kafka-python 3.0.12's "
        "`RangePartitionAssignor` (`kp-range`), `RoundRobinPartitionAssignor` (`kp-roundrobin`) and "
        "`StickyPartitionAssignor` (`kp-sticky`), called directly on the same inputs (`tests/peers.py`). "
        "Tables show `median / worst` over seeds unless said otherwise.",
        "## Targets",
        report.targets_table(goals),
        "## Workloads",
        "\n".join(f"- `{s.name}`: {s.about}{'' if s.identical else ' (subscriptions differ)'}." for s in compare.SHAPES)
        + f"\n- `{compare.LARGE.name}` (churn only, full runs): {compare.LARGE.about}.",
        "Churn sequence, each state derived from the one before; every planner is given its own previous plan "
        "(only the sticky ones use it): start; drift (every lag times a log-normal factor, sigma 5%); join (a consumer "
        "`joiner-<uuid>` reading every topic); leave (a member drawn by the seed); grow topic (8 partitions added to a "
        "topic drawn by the seed); new topic (16 partitions, read by everyone); restart (a member leaves and a new id "
        "joins in the same rebalance, as a redeployed `host-uuid` consumer does).",
        "Metrics: count spread = max - min partitions per consumer (with differing subscriptions it is "
        "not a fault: a consumer reading few topics holds fewer); worst topic spread = the worst max - min of one "
        "topic among its subscribers; optimality = max consumer lag / LB, LB = max(total lag / consumers, largest "
        "partition); lag imbalance = max / mean consumer lag; moved = partitions whose owner changed.",
        f"## Quality from scratch ({mode.static_seeds} seeds per shape)",
    ]
    for shape in compare.SHAPES:
        parts += [f"### {shape.name}", report.static_table(static, shape.name, names)]
    parts += [
        f"![per-consumer lag]({pngs['lag_bars'].name})",
        "Per-consumer lag on one skewed group: bars in consumer id order; the dashed line is LB.",
        f"![optimality]({pngs['optimality'].name})",
        "## Movement across churn",
        "Cells: partitions moved at that step, median (worst) over seeds; `total` sums the steps per seed. "
        "`optimality after` covers every state after the first.",
    ]
    for shape in dict.fromkeys(churn["shape"]):
        seeds = churn.loc[churn["shape"] == shape, "seed"].nunique()
        parts += [f"### {shape} ({seeds} seeds)", report.churn_table(churn, shape, names, compare.STEPS)]
    if sticky_rows:
        parts += [
            "### sticky against kafka-python's sticky, end to end and core alone",
            "`tests/bench/bench_sticky.py`: every consumer on every topic, lag 1 everywhere; the first assignment, "
            "then one consumer joins. `ours (assign)` is `spark_lag_assign.assign` with validation and the invariant "
            "check, `ours (core)` the algorithm alone; ours best of 3, kafka-python one run.",
            report.sticky_table(sticky_rows),
        ]
    parts += [
        f"![moves per churn step]({pngs['moves'].name})",
        f"## Time to drain ({mode.drain_seeds} seeds per shape)",
        "Model (`spark_lag_assign/core/draintime.py`): each consumer reads at most its rate, shared fairly over its "
        "partitions (a caught-up partition takes what is appended to it, the backlogged ones split the rest), while "
        "producers keep appending; the plan does not change while the backlog drains. The rate is set per group so "
        f"that a perfectly even plan clears the backlog in {drain.TARGET / 60:.0f} minutes with producers stopped: "
        "rate = total lag / (consumers x 600 s). Two scenarios on the same plans: *stopped* (no producers) and "
        f"*producing* (producers append {drain.PRODUCE_SHARE:.0%} of the group's capacity, spread over topics "
        "log-normally and over a topic's partitions with gamma(4) noise; no partition gets more than half a consumer's "
        "rate). Every planner sees only the snapshot's lag, never these produce rates. `drain / bound` = time until "
        "the last consumer has caught up, over the time no plan can beat (the total backlog over the group's spare "
        "rate, or the largest partition read alone); `never` where a consumer's producers outrun it.",
    ]
    for shape in DRAIN_SHAPES:
        parts += [f"### {shape}", report.drain_table(drained, shape, names)]
    parts += [f"![drain curves]({pngs['drain'].name})"]
    if grid is not None:
        parts += [
            "## Scale",
            f"Seconds to plan from scratch, one run per cell, `workloads.skewed` with {scale.PER_TOPIC} partitions per "
            f"topic (quality metrics not timed). kafka-python's assignors run under a {mode.peer_limit:.0f} s limit; "
            "one stopped at a size is skipped at every larger size.",
            report.scale_table(grid, names),
            f"![scale]({pngs['scale'].name})",
        ]
    if job is not None:
        parts += [
            "### The Spark job from a snapshot",
            "`tests/bench/bench_job.py`: the planner's console script (a fresh local[2] Spark process) plans a CSV "
            "snapshot, back to back with its floor: a bare PySpark script that starts a session, reads the same "
            "snapshot, adds the lag column, collects it and writes a round-robin plan as JSON. `job / floor` is "
            "the ratio of the two in this run; peak resident memory of the whole process tree (driver, JVM, "
            "Python workers).",
            report.job_table(job),
        ]
    return "\n\n".join(parts) + "\n"


def rates_section(mode: Mode, results: pd.DataFrame, speed: dict[str, float], png: Path) -> str:
    """The evidence: max time to drain over the bound with producers and unequal pipelines."""
    goals = rates_bench.targets(results)
    fast = 1.5
    for key, label in (("", "heterogeneous"), (" equal", "equal")):
        goals.append(
            (
                f"drain within {fast}x of lag-sticky's planning time at {int(speed['partitions']):,} partitions, {label} rates",
                speed[f"ratio{key}"] <= fast,
                f"{speed[f'drain{key}']:.2f} s vs {speed['lag-sticky']:.2f} s = {speed[f'ratio{key}']:.2f}x",
            )
        )
    parts = [
        "",
        f"## Plan for time: producers and unequal pipelines ({mode.rate_seeds} seeds per cell)",
        (rates_bench.__doc__ or "").split("\n\n", 1)[1].replace("\n", " ").strip(),
        "Cells: max time to drain / lower bound, `median (worst)` over seeds; `never` where a consumer's producers "
        "outrun it. Only `drain` is given the rates.",
        rates_bench.table(results),
        rates_bench.targets_table(goals),
        f"![time to drain with rates]({png.name})",
        f"Speed: {int(speed['partitions']):,} partitions x {int(speed['consumers']):,} consumers, producers at 60%: "
        f"lag-sticky {speed['lag-sticky']:.2f} s (drains in {speed['lag-sticky heterogeneous ratio']:.2f}x the bound "
        f"with heterogeneous rates, {speed['lag-sticky equal ratio']:.2f}x with equal ones); drain "
        f"{speed['drain']:.2f} s with heterogeneous rates ({speed['drain ratio']:.2f}x the bound), "
        f"{speed['drain equal']:.2f} s with equal ones ({speed['drain equal ratio']:.2f}x).",
    ]
    return "\n\n".join(parts) + "\n"


def sizing_section(mode: Mode, results: pd.DataFrame) -> str:
    """The evidence of sizing: pipelines needed against the bound, predicted against simulated time."""
    parts = [
        "",
        f"## Sizing for a deadline ({mode.rate_seeds} seeds per row)",
        (sizing_bench.__doc__ or "").split("\n\n", 1)[1].replace("\n", " ").strip(),
        "Cells: `needed` and `bound` as min-max over the seeds that have an answer (`bound` over all seeds); `none`: "
        "seeds where no number of the configured pipelines drains in time; times are medians. Raw: `sizing.csv`.",
        sizing_bench.table(results),
        rates_bench.targets_table(sizing_bench.targets(results)),
        sizing_bench.unanswered(results),
    ]
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
