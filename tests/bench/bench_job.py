"""The planning job from a snapshot at scale, against its floor: wall time, job / floor, peak memory.

    python -m tests.bench.bench_job [--topics 10000] [--partitions 100] [--consumers 1000]
        [--strategies lag-sticky,lag] [--format csv] [--repeat 1]

The *floor* is the least a PySpark planner must do, as a bare script (``FLOOR`` below): start a
local session with the planner's JVM settings (``local_session(..., c1_only=True)``), read the snapshot with Spark, add the lag column (a column expression), collect
it and write a round-robin plan as JSON. The *job* is the planner itself, ``spark-lag-assign
plan --offsets SNAPSHOT --consumers ... --strategy S`` in a fresh process (``JOB``), so that
Spark's start, the report and the store's write are in it as a user meets them. Floor and
jobs run back to back, ``--repeat`` times in turn; the table gives the fastest of each and
job / floor, the number the job is held to (<= 1.5x). Each job prints its phases
(``plan --timings``, which times the run as it is), to see where time goes.
This script samples the resident memory of each run's whole process tree (Python driver,
JVM, pandas-UDF workers). Prints tables; asserts nothing.
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
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from spark_lag_assign.testing import workloads

#: the floor: a bare PySpark script that plans round-robin from the same snapshot
FLOOR = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from pyspark.sql import functions as F
from spark_lag_assign.spark.session import local_session
spark = local_session("bench-floor", with_kafka=False, c1_only=True)  # the planner's JVM settings
started = time.perf_counter() - t0
snapshot, consumers, output = sys.argv[1:4]
schema = "topic string, partition int, beginning_offset long, end_offset long, committed_offset long"
if snapshot.endswith(".csv"):
    offsets = spark.read.csv(snapshot, header=True, schema=schema)
else:
    offsets = spark.read.parquet(snapshot)
b, e, c = F.col("beginning_offset"), F.col("end_offset"), F.col("committed_offset")
lag = F.when(c.isNotNull() & (c >= b) & (c <= e), e - c).otherwise(F.lit(0))  # reset=latest
t1 = time.perf_counter()
rows = offsets.select("topic", "partition", lag.alias("lag")).toPandas()
collected = time.perf_counter() - t1
rows = rows.sort_values(["topic", "partition"], kind="stable")
names = sorted(consumers.split(","))
plan = {name: {} for name in names}
for i, (topic, partition) in enumerate(zip(rows["topic"].tolist(), rows["partition"].tolist())):
    plan[names[i % len(names)]].setdefault(topic, []).append(partition)
with open(output, "w") as f:
    json.dump(plan, f)
print("RESULT " + json.dumps({"phases": {"spark start": started, "read+lag+collect": collected},
                              "total": time.perf_counter() - t0}))
spark.stop()
"""

#: the job: the console script's plan command, in this process
JOB = r"""
import json, sys, time
t0 = time.perf_counter()
from spark_lag_assign import cli
snapshot, consumers, output, strategy = sys.argv[1:5]
argv = ["plan", "--offsets", snapshot, "--consumers", consumers, "--strategy", strategy, "--output", output]
code = cli.main(argv + ["--timings"])
total = time.perf_counter() - t0
plan = json.load(open(output + "/plan.json")) if code == 0 else {}
print("RESULT " + json.dumps({"code": code, "total": total, "optimality": plan.get("quality", {}).get("optimality"),
                              "count_spread": plan.get("quality", {}).get("count_spread")}))
"""


def snapshot(topics: int, partitions: int, consumers: int, directory: Path, seed: int = 0, fmt: str = "csv") -> tuple[Path, str]:
    """A skewed backlog as an offsets snapshot (CSV or Parquet), and its consumers (each reads every topic)."""
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
    snap = directory / f"offsets-{topics}x{partitions}.{fmt}"
    if fmt == "csv":
        frame.to_csv(snap, index=False)
    else:
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


def _measured(args: Sequence[str]) -> tuple[int, str, str, int]:
    """Run a child Python with ``args``: (exit code, stdout, stderr tail, peak tree RSS in bytes)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    done.set()
    sampler.join()
    return proc.returncode, out, err[-600:], peak


def _result(out: str) -> dict[str, object] | None:
    line = next((x for x in out.splitlines() if x.startswith("RESULT ")), None)
    return json.loads(line[len("RESULT ") :]) if line else None


def run_floor(snap: Path, subs: str, workdir: Path) -> dict[str, object]:
    """The floor script once, in a fresh process."""
    code, out, err, peak = _measured(["-c", FLOOR, str(snap), subs, str(workdir / "floor-plan.json")])
    result = _result(out)
    if code != 0 or result is None:
        return {"strategy": "floor", "kind": "floor", "error": f"exit {code}: {err[-300:]}"}
    return {"strategy": "floor", "kind": "floor", "peak_gib": peak / 2**30, **result}


def run_once(snap: Path, subs: str, strategy: str, workdir: Path) -> dict[str, object]:
    """The planner once, in a fresh process, with its phases (``plan --timings``)."""
    out_dir = workdir / f"plan-{strategy}-{time.monotonic_ns()}"
    code, out, err, peak = _measured(["-c", JOB, str(snap), subs, str(out_dir), strategy])
    result = _result(out)
    if code != 0 or result is None or result.get("code") != 0:
        return {"strategy": strategy, "kind": "job", "error": f"exit {code}: {err[-300:]}"}
    phases = {}
    for line in out.splitlines():
        if line.startswith("timings: "):
            for part in line[len("timings: ") :].split(", "):
                name, _, seconds = part.rpartition(" ")
                phases[name] = float(seconds.rstrip("s"))
    return {"strategy": strategy, "kind": "job", "peak_gib": peak / 2**30, "phases": phases, **result}


def compare(
    snap: Path, subs: str, strategies: Sequence[str], workdir: Path, repeat: int = 1, log: bool = True
) -> list[dict[str, object]]:
    """Floor and each strategy's job back to back, ``repeat`` times in turn; per kind the fastest
    run (its peak memory is the largest seen), jobs with ``floor_ratio`` = job / floor."""
    runs: dict[str, list[dict[str, object]]] = {}
    for _ in range(max(1, repeat)):
        for name in ("floor", *strategies):
            r = run_floor(snap, subs, workdir) if name == "floor" else run_once(snap, subs, name, workdir)
            runs.setdefault(name, []).append(r)
            if log:
                shown = f"{r['total']:.1f} s, {r['peak_gib']:.2f} GiB" if "error" not in r else str(r["error"])
                print(f"  job bench {name}: {shown}", file=sys.stderr, flush=True)
    best: dict[str, dict[str, object]] = {}
    for name, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        if not ok:
            best[name] = rs[0]
            continue
        fastest = dict(min(ok, key=lambda r: float(r["total"])))  # type: ignore[arg-type]
        fastest["peak_gib"] = max(float(r["peak_gib"]) for r in ok)  # type: ignore[arg-type]
        fastest["runs"] = len(ok)
        best[name] = fastest
    floor = best["floor"]
    rows = []
    for s in strategies:
        r = best[s]
        if "error" not in r and "error" not in floor:
            r["floor_ratio"] = float(r["total"]) / float(floor["total"])  # type: ignore[arg-type]
        rows.append(r)
    rows.append(floor)
    return rows


PHASES = ["spark start", "read+lag+collect", "extract", "read", "plan", "check", "write"]


def table(rows: list[dict[str, object]]) -> str:
    """Fastest total per kind, job / floor, peak memory, the phases of that run."""
    head = ["run", "total s", "job / floor", "peak GiB", "optimality", "phases (s)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['strategy']} | error: {r['error']} |")
            continue
        p: dict[str, float] = r.get("phases") or {}  # type: ignore[assignment]
        shown = ", ".join(f"{k} {p[k]:.1f}" for k in PHASES if k in p)
        ratio = r.get("floor_ratio")
        opt = r.get("optimality")
        cells = [
            str(r["strategy"]),
            f"{float(r['total']):.1f}",
            f"{ratio:.2f}x" if isinstance(ratio, float) else "-",  # type: ignore[arg-type]
            f"{float(r['peak_gib']):.2f}",
            f"{opt:.3f}" if isinstance(opt, float) else "-",
            shown or "-",
        ]  # type: ignore[arg-type]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_job", description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    parser.add_argument("--consumers", type=int, default=1_000)
    parser.add_argument("--strategies", default="lag-sticky,lag", help="comma-separated (default lag-sticky,lag)")
    parser.add_argument("--format", choices=("csv", "parquet"), default="csv", help="the snapshot's format (default csv)")
    parser.add_argument("--repeat", type=int, default=1, help="floor and jobs in turn this many times; the fastest counts")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sla-bench-job-") as tmp:
        snap, subs = snapshot(args.topics, args.partitions, args.consumers, Path(tmp), fmt=args.format)
        rows = compare(snap, subs, args.strategies.split(","), Path(tmp), args.repeat)
    print(
        f"job from a {args.format} snapshot: {args.topics * args.partitions:,} partitions ({args.topics:,} topics), "
        f"{args.consumers:,} consumers, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
