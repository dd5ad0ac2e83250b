"""The planning job from a snapshot at scale: wall time per phase and peak memory.

    python -m tests.bench.bench_job [--topics 10000] [--partitions 100] [--consumers 1000]

Each run is a fresh process (so Spark's start is measured and memory is not shared between
runs): it builds a local session, plans from a Parquet snapshot with ``--timings`` phases,
and reports them as JSON; this script samples the resident memory of the whole process tree
(Python driver, JVM, pandas-UDF workers) meanwhile. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

from spark_lag_assign.testing import workloads

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from spark_lag_assign import config, job
from spark_lag_assign.session import local_session
spark = local_session("bench-job", with_kafka=False)
started = time.perf_counter() - t0
snapshot, consumers, output, strategy, split = sys.argv[1:6]
settings = config.settings(offsets=snapshot, consumers=consumers, output=output, strategy=strategy)
result = job.run(settings, spark, materialize=split == "split")
phases = {"spark start": started, **result.timings.phases}
print("RESULT " + json.dumps({"phases": phases, "total": time.perf_counter() - t0,
                              "optimality": result.quality.optimality, "count_spread": result.quality.count_spread}))
spark.stop()
"""


def snapshot(topics: int, partitions: int, consumers: int, directory: Path, seed: int = 0) -> tuple[Path, str]:
    """A skewed backlog as an offsets snapshot (Parquet), and its consumers (each reads every topic)."""
    lags, subs = workloads.skewed(
        topics=topics, consumers=consumers, min_partitions=partitions, max_partitions=partitions, seed=seed
    )
    rng = np.random.default_rng(seed)
    committed = rng.integers(0, 1_000_000, len(lags))
    frame = pd.DataFrame(
        {
            "topic": lags["topic"],
            "partition": lags["partition"].astype("int32"),
            "beginning_offset": np.zeros(len(lags), dtype=np.int64),
            "end_offset": committed + lags["lag"].to_numpy(),
            "committed_offset": committed,
        }
    )
    snap = directory / f"offsets-{topics}x{partitions}.parquet"
    frame.to_parquet(snap, index=False)
    return snap, ",".join(sorted(subs))  # everyone reads every topic: --consumers, as users would


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        stack.extend(children.get(p, []))
    return total


def run_once(snap: Path, subs: str, strategy: str, workdir: Path, split: bool = True) -> dict[str, object]:
    """One job in a fresh process; ``split`` materializes the lag stage so that phases are timed
    apart (as ``--timings`` does), otherwise Spark runs lag and assignment as one job, as in production."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    out_dir = workdir / f"plan-{strategy}-{'split' if split else 'fused'}"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(snap), subs, str(out_dir), strategy, "split" if split else "fused"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = proc.communicate()
    done.set()
    sampler.join()
    line = next((x for x in out.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        return {"strategy": strategy, "error": f"exit {proc.returncode}: {out[-300:]}"}
    result = json.loads(line[len("RESULT ") :])
    return {"strategy": strategy if split else f"{strategy} (one Spark job)", "peak_gib": peak / 2**30, **result}


def table(rows: list[dict[str, object]]) -> str:
    phases = ["spark start", "extract", "read", "lag", "assign", "check", "write"]
    head = ["strategy", *phases, "total s", "peak GiB", "optimality"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['strategy']} | error: {r['error']} |")
            continue
        p = r["phases"]  # type: ignore[index]
        cells = [str(r["strategy"]), *(f"{p[k]:.1f}" if k in p else "-" for k in phases)]  # type: ignore[operator]
        cells += [f"{r['total']:.1f}", f"{r['peak_gib']:.2f}", f"{r['optimality']:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--consumers", type=int, default=1_000)
    parser.add_argument("--strategies", default="lag-sticky,lag,range")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sla-bench-job-") as tmp:
        snap, subs = snapshot(args.topics, args.partitions, args.consumers, Path(tmp))
        strategies = args.strategies.split(",")
        rows = [run_once(snap, subs, strategies[0], Path(tmp), split=False)]
        rows += [run_once(snap, subs, s, Path(tmp)) for s in strategies]
    print(f"job from a snapshot: {args.topics * args.partitions:,} partitions, {args.consumers:,} consumers, "
          f"{os.cpu_count()} cores")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
