"""Scale: every planner on 10,000 to 1,000,000 partitions and 10 to 1,000 consumers, and the Spark
job from a million-partition snapshot (``tests.bench.bench_job``: phases, peak memory).

The grid's group is ``workloads.skewed`` with 100 partitions per topic (the shape the job
benchmark plans too). Each cell runs once: at these sizes one run is long enough to measure,
and the machine is shared. kafka-python's assignors run under a time limit; a peer stopped at
one size is skipped at every larger one (a pure Python loop only gets slower), and the table
says so rather than leaving a hole.

Growth (``run_growth``): ``spark_lag_assign.assign`` alone for ``sticky``,
``lag-sticky``, ``range`` and ``roundrobin`` at 10k, 100k, 1M and 5M partitions x 1,000
consumers, each cell in a fresh process: wall time, and the peak resident memory the call
adds over its inputs (Linux's high-water mark, reset just before the call). A fitted growth
exponent (slope of log time over log P) and time per ``P log2 P`` say whether the cost grows
faster than ``O(P log P)``; ``growth_section`` renders table and plot for the report.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from spark_lag_assign.core import quality
from spark_lag_assign.testing import workloads
from tests.bench import bench_job
from tests.bench.compare import Planner

SIZES = (10_000, 100_000, 1_000_000)
CONSUMERS = (10, 100, 1_000)
PER_TOPIC = 100


class Stopped(BaseException):
    """Raised in the planner by the timer; a BaseException so that no ``except Exception`` swallows it."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def stop(signum: int, frame: object) -> None:
        raise Stopped()

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def group(partitions: int, consumers: int) -> workloads.Workload:
    return workloads.skewed(
        topics=partitions // PER_TOPIC, consumers=consumers, min_partitions=PER_TOPIC, max_partitions=PER_TOPIC, seed=0
    )


def _label(partitions: int, consumers: int) -> str:
    return f"{partitions:,} x {consumers:,}"


def run_scale(
    planners: Sequence[Planner],
    sizes: Sequence[int] = SIZES,
    consumers: Sequence[int] = CONSUMERS,
    peer_limit: float = 60.0,
    skip: dict[tuple[str, int, int], str] | None = None,
    log: bool = True,
) -> pd.DataFrame:
    """One row per (partitions, consumers, planner): seconds (None where not run), status, quality."""
    rows = []
    stopped_at: dict[str, tuple[int, int]] = {}
    for n in sizes:
        for c in consumers:
            lags, subs = group(n, c)
            for p in planners:
                base = {"partitions": n, "consumers": c, "planner": p.name, "family": p.family}
                reason = (skip or {}).get((p.name, n, c))
                if p.name in stopped_at:
                    sn, sc = stopped_at[p.name]
                    if n > sn or (n == sn and c > sc):
                        reason = f"skipped: stopped after {peer_limit:.0f} s at {_label(sn, sc)}"
                if reason:
                    rows.append({**base, "status": reason})
                    continue
                start = time.perf_counter()
                try:
                    if p.family == "ours":
                        plan = p.run(lags, subs, None, 0, 1)
                    else:
                        with time_limit(peer_limit):
                            plan = p.run(lags, subs, None, 0, 1)
                except Stopped:
                    stopped_at[p.name] = (n, c)
                    rows.append({**base, "status": f"stopped after {peer_limit:.0f} s"})
                    continue
                seconds = time.perf_counter() - start
                q = quality.quality(plan, subs)
                rows.append(
                    {
                        **base,
                        "status": "ok",
                        "seconds": seconds,
                        "optimality": q.optimality,
                        "count_spread": q.count_spread,
                        "topic_spread": q.topic_spread,
                    }
                )
                if log:
                    print(f"  scale {_label(n, c)} {p.name}: {seconds:.2f} s", flush=True)
            del lags, subs
    return pd.DataFrame(rows)


def run_job(topics: int, partitions: int, consumers: int, strategies: Sequence[str], repeat: int = 1) -> list[dict[str, object]]:
    """The Spark job from a CSV snapshot against its floor (``bench_job.compare``): one row per
    strategy (fastest of ``repeat`` runs, ``floor_ratio`` = job / floor), then the floor's row."""
    with tempfile.TemporaryDirectory(prefix="sla-bench-") as tmp:
        snap, subs = bench_job.snapshot(topics, partitions, consumers, Path(tmp))
        rows = bench_job.compare(snap, subs, strategies, Path(tmp), repeat=repeat)
    return [{**r, "partitions": topics * partitions, "consumers": consumers} for r in rows]


GROWTH_SIZES = (10_000, 100_000, 1_000_000, 5_000_000)
GROWTH_STRATEGIES = ("sticky", "lag-sticky", "range", "roundrobin")
GROWTH_CONSUMERS = 1_000

#: one cell of the growth table, in a fresh interpreter: build the group, reset the high-water
#: mark of resident memory, time ``assign``, and report the peak it reached over the inputs
_GROWTH_CHILD = r"""
import json, sys, time
partitions, consumers, strategy = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
import spark_lag_assign as sla
from tests.bench.scale import group
lags, subs = group(partitions, consumers)
def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
    reset = True
except OSError:
    reset = False
base = status("VmRSS")
start = time.perf_counter()
plan = sla.assign(lags, subs, strategy)
seconds = time.perf_counter() - start
peak = status("VmHWM")
print("RESULT " + json.dumps({"seconds": seconds, "peak_bytes": peak - base if reset else None,
                              "inputs_bytes": base, "rows": len(plan)}))
"""


def _growth_cell(partitions: int, consumers: int, strategy: str, timeout: float) -> dict[str, object]:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _GROWTH_CHILD, str(partitions), str(consumers), strategy],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=Path(__file__).resolve().parents[2],
        )
    except subprocess.TimeoutExpired:
        return {"status": f"stopped after {timeout:.0f} s"}
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    if done.returncode != 0 or line is None:
        return {"status": f"error (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:] or ''}"}
    return {"status": "ok", **json.loads(line[len("RESULT ") :])}


def run_growth(
    sizes: Sequence[int] = GROWTH_SIZES,
    strategies: Sequence[str] = GROWTH_STRATEGIES,
    consumers: int = GROWTH_CONSUMERS,
    quick: bool = False,
    timeout: float = 900.0,
    log: bool = True,
) -> pd.DataFrame:
    """One row per (strategy, partitions): seconds, peak MiB over the inputs, ns per P log2 P.

    ``quick`` leaves out 5,000,000 partitions. A strategy stopped or failed at one size is
    skipped at the larger ones."""
    if quick:
        sizes = [n for n in sizes if n < 5_000_000]
    rows = []
    for strategy in strategies:
        failed: str | None = None
        for n in sizes:
            base = {"strategy": strategy, "partitions": n, "consumers": consumers}
            if failed:
                rows.append({**base, "status": f"skipped: {failed} at a smaller size"})
                continue
            cell = _growth_cell(n, consumers, strategy, timeout)
            if cell["status"] != "ok":
                failed = str(cell["status"])
                rows.append({**base, "status": failed})
                continue
            seconds = float(cell["seconds"])  # type: ignore[arg-type]
            peak = cell.get("peak_bytes")
            rows.append(
                {
                    **base,
                    "status": "ok",
                    "seconds": seconds,
                    "peak_mib": None if peak is None else float(peak) / 2**20,  # type: ignore[arg-type]
                    "ns_per_plogp": seconds / (n * math.log2(n)) * 1e9,
                }
            )
            if log:
                print(
                    f"  growth {strategy} {n:,}: {seconds:.2f} s, {'-' if peak is None else f'{float(peak) / 2**20:.0f}'} MiB",
                    file=sys.stderr,
                    flush=True,
                )  # type: ignore[arg-type]
    return pd.DataFrame(rows)


#: below this size fixed costs (validation, index building) dominate and flatter the slope
FIT_FROM = 100_000


def growth_exponents(results: pd.DataFrame, fit_from: int = FIT_FROM) -> dict[str, float]:
    """Per strategy, the least-squares slope of log(seconds) over log(partitions) for sizes from
    ``fit_from`` up: 1 is linear; P log P over 100k..5M reads as about 1.06."""
    out = {}
    ok = results[(results["status"] == "ok") & (results["partitions"] >= fit_from)]
    for strategy, g in ok.groupby("strategy", sort=False):
        if len(g) >= 2:
            slope = np.polyfit(np.log(g["partitions"].astype(float)), np.log(g["seconds"].astype(float)), 1)[0]
            out[str(strategy)] = float(slope)
    return out


def step_exponents(results: pd.DataFrame) -> dict[str, list[float]]:
    """Per strategy, the slope between each pair of neighbouring sizes (where the growth bends)."""
    out: dict[str, list[float]] = {}
    ok = results[results["status"] == "ok"].sort_values("partitions")
    for strategy, g in ok.groupby("strategy", sort=False):
        n, t = g["partitions"].to_numpy(float), g["seconds"].to_numpy(float)
        out[str(strategy)] = [float(np.log(t[i + 1] / t[i]) / np.log(n[i + 1] / n[i])) for i in range(len(g) - 1)]
    return out


def _plogp_slope(sizes: Sequence[int]) -> float:
    """The slope a pure P log P cost would show over ``sizes`` (the reference for the exponents)."""
    x = np.log(np.asarray(sizes, dtype=float))
    return float(np.polyfit(x, np.log(np.exp(x) * x), 1)[0])


def growth_table(results: pd.DataFrame) -> str:
    """Markdown: seconds, peak MiB and ns per P log2 P per size, and the fitted exponent."""
    sizes = sorted(results["partitions"].unique())
    exps = growth_exponents(results)
    steps = step_exponents(results)
    head = [
        "strategy",
        *(f"{n:,}" for n in sizes),
        f"exponent (>= {FIT_FROM:,})",
        "slope per step",
        "ns / (P log2 P), smallest -> largest",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for strategy, g in results.groupby("strategy", sort=False):
        cells = [str(strategy)]
        for n in sizes:
            r = g[g["partitions"] == n]
            if r.empty:
                cells.append("-")
            elif r["status"].iloc[0] != "ok":
                cells.append(str(r["status"].iloc[0]))
            else:
                mib = r["peak_mib"].iloc[0]
                cells.append(f"{r['seconds'].iloc[0]:.2f} s, {'-' if pd.isna(mib) else f'{mib:,.0f}'} MiB")
        ok = g[g["status"] == "ok"]
        cells.append(f"{exps[str(strategy)]:.2f}" if str(strategy) in exps else "-")
        cells.append(" / ".join(f"{x:.2f}" for x in steps.get(str(strategy), [])) or "-")
        cells.append(" -> ".join(f"{x:.0f}" for x in ok["ns_per_plogp"]) if len(ok) else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_growth(results: pd.DataFrame, path: Path) -> Path:
    """Log-log time and peak memory against partitions, with a P log P reference line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = results[results["status"] == "ok"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for strategy, g in ok.groupby("strategy", sort=False):
        left.plot(g["partitions"], g["seconds"], marker="o", label=str(strategy))
        if g["peak_mib"].notna().any():
            right.plot(g["partitions"], g["peak_mib"], marker="o", label=str(strategy))
    if len(ok):
        sizes = np.asarray(sorted(ok["partitions"].unique()), dtype=float)
        first = ok[ok["partitions"] == sizes[0]]["seconds"].min()
        left.plot(
            sizes,
            first * sizes * np.log2(sizes) / (sizes[0] * np.log2(sizes[0])),
            "k--",
            lw=1,
            label="P log P from the fastest at the smallest size",
        )
    for ax, what in ((left, "seconds"), (right, "peak MiB over the inputs")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"partitions ({GROWTH_CONSUMERS:,} consumers)")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    left.legend(fontsize=8)
    left.set_title("sla.assign: time")
    right.set_title("sla.assign: peak memory")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def growth_section(out: Path, quick: bool = False, results: pd.DataFrame | None = None) -> str:
    """Run the growth benchmark (unless ``results`` are given), write ``growth.csv`` and
    ``growth.png`` into ``out`` and return the report's markdown section."""
    if results is None:
        results = run_growth(quick=quick)
    results.to_csv(out / "growth.csv", index=False)
    png = plot_growth(results, out / "growth.png")
    sizes = [n for n in sorted(results["partitions"].unique()) if n >= FIT_FROM]
    reference = _plogp_slope(sizes) if len(sizes) >= 2 else float("nan")
    exps = growth_exponents(results)
    faster = [s for s, e in exps.items() if e > reference + 0.1]
    verdict = (
        f"no strategy grows faster than P log P (exponent <= {reference + 0.1:.2f})"
        if not faster
        else f"**{', '.join(faster)} grow(s) faster than P log P** (exponent above {reference + 0.1:.2f})"
    )
    parts = [
        "## Growth: time and memory of `assign` from 10k to 5M partitions",
        f"`tests/bench/scale.py` (`run_growth`): `spark_lag_assign.assign` alone, each cell in a fresh process, "
        f"`workloads.skewed` with {PER_TOPIC} partitions per topic and {GROWTH_CONSUMERS:,} consumers reading every "
        "topic; one run per cell. Memory is the peak resident memory the call adds over its inputs (VmHWM reset "
        "before the call). The exponent is the slope of log(seconds) over log(partitions) from "
        f"{FIT_FROM:,} partitions up (below, fixed costs dominate); a pure P log P cost gives {reference:.2f} there. "
        f"Verdict: {verdict}. Single runs on a shared machine: a step's slope moves with the load."
        + (" Quick mode: 5,000,000 partitions left out." if quick else ""),
        growth_table(results),
        f"![growth]({png.name})",
    ]
    return "\n\n".join(parts) + "\n"


__all__ = [
    "CONSUMERS",
    "GROWTH_SIZES",
    "GROWTH_STRATEGIES",
    "SIZES",
    "Stopped",
    "group",
    "growth_exponents",
    "growth_section",
    "growth_table",
    "plot_growth",
    "run_growth",
    "run_job",
    "run_scale",
    "step_exponents",
    "time_limit",
]
