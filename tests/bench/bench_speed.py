"""Range, roundrobin and sticky at a million partitions, core and end to end.

    python -m tests.bench.bench_speed [--repeat 3] [--shapes 500x2000x1000,10000x100x1000]
        [--strategies range,roundrobin,sticky] [--profile STRATEGY:STEP]

For each shape (topics x partitions per topic x consumers, every consumer on every topic,
uniform lags: ``bench_sticky.group``) and strategy: the first plan, then the join of one
consumer with the first plan as the previous one. *assign* is ``sla.assign`` end to end
(validation, the invariant check and the output frame included); *core* is the strategy
alone (``run_codes``) on the ``GroupProblem`` the front end builds (``assignors.problem``):
validated, sorted and encoded, as a Java assignor's ``assign`` call gets its input parsed;
that is the number to hold against the Java assignors. Prints the best of ``--repeat`` wall times; asserts nothing.
``--profile range:join`` prints cProfile's top functions for one end-to-end call instead.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections.abc import Callable, Sequence

import pandas as pd

import spark_lag_assign as sla
from spark_lag_assign.assignors import get_strategy, problem, run_codes
from spark_lag_assign.core.quality import moved
from tests.bench.bench_sticky import group

SHAPES = ((500, 2000, 1000), (10000, 100, 1000))
STRATEGIES = ("range", "roundrobin", "sticky")


CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
clock = CLOCKS["cpu"]


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def measure(shape: tuple[int, int, int], strategies: Sequence[str], repeat: int) -> list[dict[str, object]]:
    lags, subs, joined = group(*shape)
    label = "x".join(map(str, shape))
    rows: list[dict[str, object]] = []
    for name in strategies:
        spec = get_strategy(name)
        first = sla.assign(lags, subs, name)
        join = sla.assign(lags, joined, name, previous=first)
        fresh, rebalance = problem(lags, subs, name), problem(lags, joined, name, previous=first)
        rows.append(
            {
                "shape": label,
                "strategy": name,
                "core first": best(lambda s=spec, p=fresh: run_codes(s, p), repeat),  # type: ignore[misc]
                "core join": best(lambda s=spec, p=rebalance: run_codes(s, p), repeat),  # type: ignore[misc]
                "assign first": best(lambda n=name: sla.assign(lags, subs, n), repeat),  # type: ignore[misc]
                "assign join": best(lambda n=name, f=first: sla.assign(lags, joined, n, previous=f), repeat),  # type: ignore[misc]
                "join moves": moved(join, first, joined),
            }
        )
    return rows


def profile(shape: tuple[int, int, int], name: str, step: str, top: int = 25) -> None:
    lags, subs, joined = group(*shape)
    first = sla.assign(lags, subs, name)
    call = (lambda: sla.assign(lags, subs, name)) if step == "first" else (lambda: sla.assign(lags, joined, name, previous=first))
    prof = cProfile.Profile(timer=time.process_time)
    prof.enable()
    call()
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(top)


def parse_shape(text: str) -> tuple[int, int, int]:
    t, p, c = (int(v) for v in text.split("x"))
    return t, p, c


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shapes", default=",".join("x".join(map(str, s)) for s in SHAPES))
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument(
        "--clock",
        choices=CLOCKS,
        default="cpu",
        help="cpu: this process's CPU time, steadier when others load the machine (numpy runs these"
        " steps on one thread, so on an idle machine it equals wall time)",
    )
    parser.add_argument("--profile", metavar="STRATEGY:STEP", help="cProfile one sla.assign call (STEP: first, join)")
    args = parser.parse_args(argv)
    global clock
    clock = CLOCKS[args.clock]
    shapes = [parse_shape(s) for s in args.shapes.split(",")]
    if args.profile:
        name, step = args.profile.split(":")
        for shape in shapes:
            print(f"== {name} {step} at {'x'.join(map(str, shape))}")
            profile(shape, name, step)
        return 0
    rows = [row for shape in shapes for row in measure(shape, args.strategies.split(","), args.repeat)]
    table = pd.DataFrame(rows)
    for col in ("core first", "core join", "assign first", "assign join"):
        table[col] = table[col].map(lambda v: f"{v:.3f}")
    print(table.to_string(index=False))
    print(f"\nseconds ({args.clock}), best of {args.repeat} runs; core: the strategy on the front end's GroupProblem")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
