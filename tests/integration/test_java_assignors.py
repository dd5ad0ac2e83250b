"""Our ``range``, ``roundrobin`` and ``sticky`` against Apache Kafka's own Java assignors.

The independent implementation here is the real one: kafka-clients 4.4.0's RangeAssignor,
RoundRobinAssignor and StickyAssignor, called through ``ConsumerPartitionAssignor.assign`` by
``tests/bench/java/AssignorBench.java`` (jars from ``make jvm``, compiled with ``javac``; no
broker, no Spark). Seeded groups, small and medium, with equal and unequal subscriptions, from
scratch and across churn (a consumer joins, one leaves, a topic is added) with the previous
plan handed to both sides.

- ``range`` and ``roundrobin`` claim to be exactly Kafka's: owners must be equal, every case.
- ``sticky`` claims KIP-54's priorities, not Kafka's tie-breaks. From scratch with identical
  subscriptions both deal round-robin, so owners must be equal. Elsewhere the two may pick
  different (equally good) partitions or members, so the test holds ours to the claim instead:
  at least as balanced as Kafka's (sum of squared counts, which a plan with an improving
  chain of moves cannot minimise), and, when as balanced, no more partitions moved.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd
import pytest

import spark_lag_assign as sla
from spark_lag_assign.errors import JvmError
from tests.bench import kafka_java

pytestmark = pytest.mark.jvm

Subscriptions = dict[str, list[str]]
PAIRS = {"range": "java-range", "roundrobin": "java-roundrobin", "sticky": "java-sticky"}
SIZES = {"small": (6, 12, 4), "medium": (40, 64, 25)}  # topics, most partitions of a topic, consumers
STEPS = ("scratch", "join", "leave", "topic-added")


@dataclass(frozen=True)
class Case:
    size: str
    equal: bool  # every consumer reads every topic
    step: str
    seed: int

    @property
    def id(self) -> str:
        return f"{self.size}-{'equal' if self.equal else 'unequal'}-{self.step}-{self.seed}"


CASES = [Case(size, equal, step, seed) for size in SIZES for equal in (True, False) for step in STEPS for seed in (0, 1)]


def start(case: Case) -> tuple[pd.DataFrame, Subscriptions]:
    """The group before the step: lags uniform in [0, 1,000), topics of 1..max partitions."""
    topics, most, consumers = SIZES[case.size]
    rng = np.random.default_rng([case.seed, topics, int(case.equal)])
    sizes = rng.integers(1, most + 1, topics)
    names = [f"t{i:02d}" for i in range(topics)]
    lags = pd.DataFrame({"topic": np.repeat(names, sizes), "partition": np.concatenate([np.arange(n) for n in sizes])})
    lags["lag"] = rng.integers(0, 1_000, len(lags))
    if case.equal:
        subs = {f"c{i:02d}": names for i in range(consumers)}
    else:
        subs = {f"c{i:02d}": sorted(rng.choice(names, int(rng.integers(1, topics + 1)), replace=False).tolist())
                for i in range(consumers)}
    return lags, subs


def after(case: Case, lags: pd.DataFrame, subs: Subscriptions) -> tuple[pd.DataFrame, Subscriptions]:
    """The group after the step; ``scratch`` is the group itself."""
    rng = np.random.default_rng([case.seed, 99])
    if case.step == "join":
        return lags, {**subs, "c99-joiner": sorted(subs[min(subs)])}
    if case.step == "leave":
        gone = sorted(subs)[int(rng.integers(len(subs)))]
        return lags, {c: t for c, t in subs.items() if c != gone}
    if case.step == "topic-added":
        added = pd.DataFrame({"topic": "u-added", "partition": np.arange(16), "lag": rng.integers(0, 1_000, 16)})
        return pd.concat([lags, added], ignore_index=True), {c: [*t, "u-added"] for c, t in subs.items()}
    return lags, subs


@dataclass(frozen=True)
class Outcome:
    lags: pd.DataFrame
    subs: Subscriptions
    previous: pd.DataFrame | None
    ours: dict[str, pd.DataFrame]
    java: dict[str, pd.DataFrame]


@pytest.fixture(scope="module", autouse=True)
def harness() -> None:
    """Fail, not skip, without the jars or javac: the comparison is the point of this module."""
    try:
        kafka_java.classpath()  # the jars, and the harness compiled against them
    except JvmError as e:
        pytest.fail(f"{e}\n(the Java assignor tests need .jvm/assignors/ from `make jvm` and a JDK's javac)", pytrace=False)


@cache
def outcome(case: Case) -> Outcome:
    lags, subs = start(case)
    previous = None
    if case.step != "scratch":
        previous = sla.assign(lags, subs, "sticky")  # both sides are handed the same previous plan
        lags, subs = after(case, lags, subs)
    ours = {name: sla.assign(lags, subs, name, previous=previous) for name in PAIRS}
    runs = kafka_java.run(lags, subs, list(PAIRS.values()), previous=previous, warmup=1, runs=1, owners=True)
    java = {r.name: r.plan for r in runs if r.plan is not None}
    return Outcome(lags, subs, previous, ours, java)


def owners(plan: pd.DataFrame) -> pd.DataFrame:
    return plan[["topic", "partition", "consumer"]].sort_values(["topic", "partition"]).reset_index(drop=True)


def differences(ours: pd.DataFrame, java: pd.DataFrame, limit: int = 5) -> str:
    both = owners(ours).merge(owners(java), on=["topic", "partition"], how="outer", suffixes=("_ours", "_java"))
    diff = both[both["consumer_ours"] != both["consumer_java"]]
    return f"{len(diff)} partition(s) differ, e.g.\n{diff.head(limit).to_string(index=False)}"


def counts(plan: pd.DataFrame, subs: Subscriptions) -> np.ndarray:
    return plan.groupby("consumer").size().reindex(sorted(subs), fill_value=0).to_numpy(dtype=np.int64)


def moved(plan: pd.DataFrame, previous: pd.DataFrame) -> int:
    both = plan.merge(previous, on=["topic", "partition"], suffixes=("", "_before"))
    return int((both["consumer"] != both["consumer_before"]).sum())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_exactly_kafkas(strategy: str, case: Case) -> None:
    out = outcome(case)
    ours, java = out.ours[strategy], out.java[PAIRS[strategy]]
    assert owners(ours).equals(owners(java)), f"{strategy} vs Kafka's {PAIRS[strategy]}: " + differences(ours, java)


@pytest.mark.parametrize("case", [c for c in CASES if c.equal and c.step == "scratch"], ids=lambda c: c.id)
def test_sticky_from_scratch_is_kafkas(case: Case) -> None:
    out = outcome(case)
    ours, java = out.ours["sticky"], out.java["java-sticky"]
    assert owners(ours).equals(owners(java)), "sticky vs Kafka's StickyAssignor: " + differences(ours, java)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_sticky_as_balanced_and_as_sticky_as_kafkas(case: Case) -> None:
    out = outcome(case)
    ours, java = out.ours["sticky"], out.java["java-sticky"]
    mine, theirs = counts(ours, out.subs), counts(java, out.subs)
    assert len(java) == len(ours), "Kafka's StickyAssignor left partitions unassigned"
    assert (mine**2).sum() <= (theirs**2).sum(), f"less balanced than Kafka's: counts {mine.tolist()} vs {theirs.tolist()}"
    if case.equal:
        assert mine.max() - mine.min() <= 1
    if out.previous is not None and (mine**2).sum() == (theirs**2).sum():
        assert moved(ours, out.previous) <= moved(java, out.previous), (
            f"as balanced as Kafka's but moves more: {moved(ours, out.previous)} vs {moved(java, out.previous)}"
        )
