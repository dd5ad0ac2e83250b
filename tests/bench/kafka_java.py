"""Apache Kafka's own Java assignors, run on our inputs: the Python side of ``java/AssignorBench.java``.

The harness is compiled on first use with ``javac`` into ``.jvm/assignors-bench/<source hash>/``
against the jars ``make jvm`` fetched into ``.jvm/assignors/`` (conf/pom.xml, profile
``assignors``). ``run`` writes the group (lags, subscriptions, optionally the previous plan) to
a compact input file, runs the named assignors in one JVM, and returns each one's timings (the
assign call alone, warm, after a GC) and, on request, its owners as a plan DataFrame.

Assignors (``ASSIGNORS``): kafka-clients' RangeAssignor, RoundRobinAssignor, StickyAssignor and
CooperativeStickyAssignor through ``ConsumerPartitionAssignor.assign(Cluster, GroupSubscription)``;
kafka-group-coordinator's UniformAssignor and RangeAssignor (KIP-848, server side) through
``assign(GroupSpec, SubscribedTopicDescriber)``. The previous plan reaches each the way a real
group hands it over: StickyAssignor's user data (written by the member's own assignor after its
last assignment), ``ownedPartitions`` and a generation for the others, the member assignments
and their inverse in the server's ``GroupSpec``. CooperativeStickyAssignor's owners are its
first round's: partitions changing hands are left unassigned until their owner revokes them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from spark_lag_assign.assignors import validate_lags, validate_subscriptions
from spark_lag_assign.errors import JvmError
from spark_lag_assign.jvm import JVM_DIR, java, jdk_tool

SOURCE = Path(__file__).resolve().parent / "java" / "AssignorBench.java"
JARS = JVM_DIR / "assignors"
CACHE = JVM_DIR / "assignors-bench"
KAFKA_VERSION = "4.4.0"  # conf/pom.xml, kafka.assignors.version

#: our name for each Java assignor -> (the harness's name, what it is)
ASSIGNORS: dict[str, tuple[str, str]] = {
    "java-range": ("client-range", "kafka-clients RangeAssignor"),
    "java-roundrobin": ("client-roundrobin", "kafka-clients RoundRobinAssignor"),
    "java-sticky": ("client-sticky", "kafka-clients StickyAssignor"),
    "java-coop-sticky": ("client-cooperative-sticky", "kafka-clients CooperativeStickyAssignor"),
    "java-uniform": ("server-uniform", "kafka-group-coordinator UniformAssignor"),
    "java-server-range": ("server-range", "kafka-group-coordinator RangeAssignor"),
}

_NAME = re.compile(r'^[^\s"\\]+$')  # one token in the input file, a plain JSON string in the output


@dataclass(frozen=True)
class JavaResult:
    name: str  # a key of ASSIGNORS
    seconds: list[float]  # each timed run of the assign call
    median: float
    warmup: int
    plan: pd.DataFrame | None  # [consumer, topic, partition, lag] like sla.assign's, when owners were asked for


def jars() -> list[Path]:
    """The assignors' jars, or a JvmError that says how to fetch them."""
    found = sorted(JARS.glob("*.jar"))
    if not any(p.name.startswith("kafka-clients-") for p in found) or not any(
        p.name.startswith("kafka-group-coordinator-") for p in found
    ):
        raise JvmError(f"Kafka's assignor jars are missing from {JARS}: run `make jvm` (fetches them with Maven)")
    return found


def javac() -> str:
    return jdk_tool("javac", "the Java assignor harness needs a JDK 17 (not only a JRE)")


def classpath() -> str:
    return os.pathsep.join([str(compiled()), *(str(p) for p in jars())])


def compiled() -> Path:
    """The directory holding AssignorBench.class, compiled once per version of the source."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    target = CACHE / digest
    if (target / "AssignorBench.class").exists():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="compile-", dir=CACHE))
    cp = os.pathsep.join(str(p) for p in jars())
    command = [javac(), "-nowarn", "-d", str(staging), "-cp", cp, str(SOURCE)]
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise JvmError(f"javac failed on {SOURCE}:\n{done.stderr}")
    try:
        staging.rename(target)
    except OSError:  # compiled concurrently by another process: theirs is the same source
        shutil.rmtree(staging, ignore_errors=True)
    return target


def write_input(
    path: Path,
    lags: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    previous: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Write the group for the harness; returns the validated lags (sorted by topic, partition)
    whose row order the owners come back in. Partitions of a topic must be 0..n-1."""
    rows = validate_lags(lags)
    subs = validate_subscriptions(subscriptions)
    topics, start = np.unique(rows["topic"].to_numpy(dtype=object), return_index=True)
    sizes = np.diff(np.r_[start, len(rows)])
    expected = np.concatenate([np.arange(n) for n in sizes]) if len(sizes) else np.zeros(0, dtype=np.int64)
    if not np.array_equal(rows["partition"].to_numpy(), expected):
        raise ValueError("Kafka's assignors need each topic's partitions numbered 0..n-1")
    for name in [*topics, *subs]:
        if not _NAME.match(str(name)):
            raise ValueError(f"name {name!r}: the Java harness takes names without spaces, quotes or backslashes")
    topic_index = {t: i for i, t in enumerate(topics)}
    members = sorted(subs)
    member_index = {m: i for i, m in enumerate(members)}
    lists: dict[tuple[int, ...], int] = {}
    member_list = []
    for m in members:
        key = tuple(topic_index[t] for t in subs[m] if t in topic_index)
        member_list.append(lists.setdefault(key, len(lists)))
    lines = [f"topics {len(topics)}"]
    lines += [f"{t} {n}" for t, n in zip(topics, sizes)]
    lines.append(f"lists {len(lists)}")
    lines += [" ".join(map(str, [len(key), *key])) for key in lists]
    lines.append(f"members {len(members)}")
    lines += [f"{m} {member_list[i]}" for i, m in enumerate(members)]
    if previous is not None:
        owner = np.full(len(rows), -1, dtype=np.int64)
        known = previous[previous["consumer"].isin(member_index) & previous["topic"].isin(topic_index)]
        at = start[known["topic"].map(topic_index).to_numpy(dtype=np.int64)] + known["partition"].to_numpy(dtype=np.int64)
        inside = known["partition"].to_numpy() < sizes[known["topic"].map(topic_index).to_numpy(dtype=np.int64)]
        owner[at[inside]] = known["consumer"].map(member_index).to_numpy(dtype=np.int64)[inside]
        lines.append(f"previous {len(topics)}")
        for t in range(len(topics)):
            lines.append(f"{t} " + " ".join(map(str, owner[start[t]:start[t] + sizes[t]].tolist())))
    path.write_text("\n".join(lines) + "\n")
    return rows


def run(
    lags: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    names: Sequence[str],
    previous: pd.DataFrame | None = None,
    warmup: int = 2,
    runs: int = 5,
    budget: float = 30.0,
    owners: bool = False,
    heap: str = "6g",
    timeout: float = 1800.0,
) -> list[JavaResult]:
    """Run Kafka's assignors ``names`` (keys of ASSIGNORS) on one group in one JVM.

    Each: up to ``warmup`` untimed calls (at least one; fewer once they took ``budget`` / 4
    seconds), then up to ``runs`` timed ones (at least three unless ``runs`` is smaller; fewer
    once they took ``budget`` seconds). Only the assign call is timed, after a GC.
    """
    unknown = [n for n in names if n not in ASSIGNORS]
    if unknown:
        raise ValueError(f"unknown Java assignor(s) {', '.join(unknown)}; known: {', '.join(ASSIGNORS)}")
    if runs < 1 or warmup < 1:
        raise ValueError("runs and warmup must be at least 1")
    cp = classpath()
    with tempfile.TemporaryDirectory(prefix="assignor-bench-") as tmp:
        source, target = Path(tmp) / "group.txt", Path(tmp) / "result.json"
        rows = write_input(source, lags, subscriptions, previous)
        command = [java(), f"-Xmx{heap}", "-cp", cp, "AssignorBench", str(source), str(target), str(warmup), str(runs),
                   str(budget), "1" if owners else "0", *(ASSIGNORS[n][0] for n in names)]
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise JvmError(f"AssignorBench failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
        result = json.loads(target.read_text())
    members = np.asarray(result["members"], dtype=object)
    out = []
    for name, r in zip(names, result["results"]):
        plan = None
        if owners:
            owner = np.concatenate([np.asarray(o, dtype=np.int64) for o in r["owners"]]) if r["owners"] else np.zeros(0, np.int64)
            plan = _plan(rows, members, owner)
        out.append(JavaResult(name, [float(s) for s in r["seconds"]], float(r["median"]), int(r["warmup"]), plan))
    return out


def _plan(rows: pd.DataFrame, members: np.ndarray, owner: np.ndarray) -> pd.DataFrame:
    """Owners (member index per row of ``rows``, -1 unassigned) as a plan sorted like sla.assign's."""
    keep = owner >= 0
    plan = pd.DataFrame({
        "consumer": members[owner[keep]] if keep.any() else np.zeros(0, dtype=object),
        "topic": rows["topic"].to_numpy(dtype=object)[keep],
        "partition": rows["partition"].to_numpy()[keep],
        "lag": rows["lag"].to_numpy()[keep],
    })
    return plan.sort_values(["consumer", "topic", "partition"], kind="stable").reset_index(drop=True)


__all__ = ["ASSIGNORS", "JARS", "KAFKA_VERSION", "JavaResult", "classpath", "compiled", "jars", "run", "write_input"]
