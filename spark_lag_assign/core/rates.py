"""Rates, measured, never guessed: how fast producers append and how fast each pipeline reads.

Two observations of a group's offsets, ``interval`` seconds apart, give

- a *produce rate* per partition: end offsets appended per second;
- a *read rate* per consumer (pipeline): offsets its partitions' commits advanced per
  second, summed over the partitions it owned in between. A pipeline that caught up read
  only what was appended, so its measured rate is a floor, not its speed: it counts as
  measured only where the pipeline still had a backlog at the second observation.

A configured rate (``--rate N`` for every pipeline, ``--rates FILE`` per pipeline) fills in
what was not measured; measured beats configured where both exist, and ``Rates.source``
says which was used. With one observation only, produce rates are unknown (taken as 0) and
every time derived from them is an *estimate*.

The time model is ``spark_lag_assign.core.draintime``'s fluid model: a consumer with lag ``L``,
read rate ``r`` and produce rate ``p`` on its partitions drains in ``L / (r - p)``; never
when ``p >= r`` and it has a backlog (or when ``p > r`` even without one).

Pure: pandas and numpy, no Spark, no Kafka.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spark_lag_assign.core.limits import PARTITION_LIMIT
from spark_lag_assign.core.subscriptions import partition_keys
from spark_lag_assign.errors import InputError

KEY = ["topic", "partition"]
PARTITIONS = PARTITION_LIMIT  # Kafka's partition ids are int32

#: where the rates of a plan came from (``plan.json``'s ``rates_source``)
SOURCES = ("measured", "configured", "measured+configured", "none")


def check_rate(value: object, what: str) -> float:
    """``value`` as a positive, finite number of records per second; InputError naming ``what`` otherwise."""
    if isinstance(value, bool):
        raise InputError(f"{what} must be a number of records per second, not {value!r}")
    try:
        rate = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a number of records per second, not {value!r}") from None
    if not math.isfinite(rate) or rate <= 0:
        raise InputError(f"{what} must be a positive number of records per second, not {value!r}")
    return rate


def check_interval(value: object) -> float:
    """The seconds between two observations: positive and finite."""
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"the interval must be a number of seconds, not {value!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise InputError(f"the interval between two observations must be > 0 seconds, not {value!r}")
    return seconds


# -- the fluid model -------------------------------------------------------------------------


def drain_seconds(lag: np.ndarray | float, produce: np.ndarray | float, rate: np.ndarray | float) -> np.ndarray:
    """Per consumer, ``lag / (rate - produce)``: 0 with nothing to read and producers it keeps up
    with, ``inf`` where it never catches up."""
    lag, produce, rate = (np.asarray(x, dtype=np.float64) for x in (lag, produce, rate))
    spare = rate - produce
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(lag <= 0, np.where(spare >= 0, 0.0, np.inf), np.where(spare > 0, lag / spare, np.inf))


def lower_bound(lags: np.ndarray, produce: np.ndarray, rates: np.ndarray) -> float:
    """No plan drains faster: total lag over the group's spare rate, and each partition read
    alone by the fastest consumer (``inf`` where producers outrun the whole group)."""
    lags, produce, rates = (np.asarray(x, dtype=np.float64) for x in (lags, produce, rates))
    total_lag, spare = float(lags.sum()), float(rates.sum() - produce.sum())
    if total_lag == 0 and spare >= 0 and (len(produce) == 0 or produce.max() <= rates.max()):
        return 0.0
    if spare <= 0:
        return math.inf
    fastest = float(rates.max())
    alone = drain_seconds(lags, produce, fastest)
    return max(total_lag / spare, float(alone.max()) if len(alone) else 0.0)


# -- configured rates ------------------------------------------------------------------------


def read_rates_file(path: str | Path) -> dict[str, float]:
    """``consumer -> records per second`` from CSV (columns consumer, records_per_second) or
    JSON (``{"consumer": rate}`` or a list of ``{"consumer": .., "records_per_second": ..}``)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(f"rates file {path} does not exist") from None
    except OSError as exc:
        raise InputError(f"cannot read rates file {path}: {exc.strerror or exc}") from None
    pairs: list[tuple[object, object]] = []
    if path.suffix.lower() == ".json":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        if isinstance(doc, dict):
            pairs = list(doc.items())
        elif isinstance(doc, list) and all(isinstance(r, dict) for r in doc):
            pairs = [(r.get("consumer"), r.get("records_per_second")) for r in doc]
        else:
            raise InputError(f'{path}: expected {{"consumer": records_per_second}} or a list of rows')
    else:
        rows = list(csv.DictReader(text.splitlines()))
        if rows and not {"consumer", "records_per_second"} <= set(rows[0]):
            raise InputError(f"{path}: a rates CSV needs the columns consumer,records_per_second")
        pairs = [(r["consumer"], r["records_per_second"]) for r in rows]
    if not pairs:
        raise InputError(f"{path}: no rates")
    out: dict[str, float] = {}
    for consumer, value in pairs:
        if not isinstance(consumer, str) or not consumer.strip():
            raise InputError(f"{path}: a row without a consumer id")
        consumer = consumer.strip()
        if consumer in out:
            raise InputError(f"{path}: consumer {consumer!r} is given twice")
        out[consumer] = check_rate(value, f"{path}: the rate of consumer {consumer!r}")
    return out


def configured_rates(
    consumers: Sequence[str], rate: object | None = None, rates: Mapping[str, object] | None = None
) -> dict[str, float]:
    """The configured read rate of each consumer that has one: ``rates`` per consumer, else ``rate``.

    A rate for a consumer that is not in the group is an error (usually a typo)."""
    known = set(consumers)
    out: dict[str, float] = {}
    if rate is not None:
        one = check_rate(rate, "--rate")
        out = dict.fromkeys(consumers, one)
    if rates is not None:
        unknown = sorted(set(rates) - known)
        if unknown:
            raise InputError(f"rates given for consumer(s) not in the group: {', '.join(unknown[:5])}")
        for c, value in rates.items():
            out[c] = check_rate(value, f"the rate of consumer {c!r}")
    return out


# -- measured rates --------------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """Offsets seen at one moment: ``offsets[topic, partition, end_offset, committed_offset]``
    (committed null where unknown), their time in seconds since the epoch, and who owned
    each partition from then on (``owners[consumer, topic, partition]``; may be empty)."""

    time: float
    offsets: pd.DataFrame
    owners: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["consumer", *KEY]))


def produce_between(earlier: pd.DataFrame, later: pd.DataFrame, interval: float) -> tuple[pd.DataFrame, list[str]]:
    """(DataFrame[topic, partition, produce_rate], notes) from the end offsets of two observations.

    A partition of ``later`` that ``earlier`` lacks (created since) or whose end offset went
    back (the topic was recreated) gets an unknown rate (NaN), and a note says so."""
    seconds = check_interval(interval)
    for name, frame in (("earlier", earlier), ("later", later)):
        missing = [c for c in (*KEY, "end_offset") if c not in frame.columns]
        if missing:
            raise InputError(f"{name} observation: missing column(s) {', '.join(missing)}")
    a = earlier.loc[:, [*KEY, "end_offset"]].drop_duplicates(KEY)
    both = later.loc[:, [*KEY, "end_offset"]].merge(a, on=KEY, how="left", suffixes=("", "_earlier"))
    appended = both["end_offset"].astype(np.float64) - both["end_offset_earlier"].astype(np.float64)
    notes: list[str] = []
    back = (appended < 0).to_numpy()
    if back.any():
        r = both[back].iloc[0]
        more = f" and {int(back.sum()) - 1} more" if back.sum() > 1 else ""
        notes.append(
            f"end offsets went back on {r.topic}-{r.partition}{more} (from {int(r.end_offset_earlier)} to "
            f"{int(r.end_offset)}: topic recreated?): produce rate unknown there"
        )
    new = both["end_offset_earlier"].isna().to_numpy()
    if new.any():
        notes.append(f"{int(new.sum())} partition(s) not in the earlier observation: produce rate unknown there")
    rate = np.where(back | new, np.nan, appended.to_numpy() / seconds)
    out = pd.DataFrame({"topic": both["topic"], "partition": both["partition"].astype(np.int64), "produce_rate": rate})
    return out, notes


def read_between(
    earlier: Observation, later_offsets: pd.DataFrame, interval: float
) -> tuple[dict[str, float], dict[str, bool], list[str]]:
    """(rate, behind, notes): per consumer of ``earlier.owners``, committed offsets advanced per
    second on the partitions it owned, and whether it still had a backlog at the later
    observation (only then is the rate its speed rather than a floor)."""
    seconds = check_interval(interval)
    owners = earlier.owners
    if owners is None or len(owners) == 0:
        return {}, {}, []
    a = earlier.offsets.loc[:, [*KEY, "committed_offset"]]
    b = later_offsets.loc[:, [*KEY, "end_offset", "committed_offset"]]
    rows = (
        owners.loc[:, ["consumer", *KEY]].merge(a, on=KEY, how="inner").merge(b, on=KEY, how="inner", suffixes=("_earlier", ""))
    )
    before = pd.to_numeric(rows["committed_offset_earlier"], errors="coerce").astype(np.float64)
    after = pd.to_numeric(rows["committed_offset"], errors="coerce").astype(np.float64)
    usable = before.notna() & after.notna() & (after >= before)
    notes: list[str] = []
    back = (before.notna() & after.notna() & (after < before)).to_numpy()
    if back.any():
        r = rows[back].iloc[0]
        notes.append(f"committed offsets went back on {r.topic}-{r.partition}: not counted in read rates")
    rows = rows.assign(
        read=np.where(usable, after - before, 0.0),
        behind=np.where(after.notna(), rows["end_offset"].astype(np.float64) - after > 0, False),
        usable=usable,
    )
    grouped = rows.groupby("consumer", sort=True).agg(read=("read", "sum"), behind=("behind", "any"), usable=("usable", "any"))
    rate = {str(c): float(r) / seconds for c, r, u in zip(grouped.index, grouped["read"], grouped["usable"]) if u and r > 0}
    behind = {str(c): bool(b) for c, b in zip(grouped.index, grouped["behind"]) if str(c) in rate}
    return rate, behind, notes


# -- what a plan uses ------------------------------------------------------------------------


@dataclass(frozen=True)
class Rates:
    """The rates one plan uses, and where each came from."""

    read: dict[str, float]  # consumer -> records per second (only consumers with a rate)
    read_source: dict[str, str]  # consumer -> "measured" | "configured" | "floor" (caught up: a lower bound)
    produce: pd.DataFrame | None  # topic, partition, produce_rate (NaN: unknown); None: not measured
    observations: int  # 2 where produce rates rest on two observations, 1 otherwise
    notes: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        kinds = set(self.read_source.values())
        measured = bool(kinds & {"measured", "floor"}) or self.observations >= 2
        configured = "configured" in kinds
        if measured and configured:
            return "measured+configured"
        if measured:
            return "measured"
        return "configured" if configured else "none"

    @property
    def estimated(self) -> bool:
        """Times rest on fewer than two observations (produce rates unknown, taken as 0)."""
        return self.observations < 2

    def options(self) -> dict[str, Any]:
        """The ``drain`` strategy's rate options (empty where nothing is known)."""
        out: dict[str, Any] = {}
        if self.read:
            out["read_rates"] = dict(self.read)
        if self.produce is not None:
            known = self.produce[self.produce["produce_rate"].notna()]
            out["produce_rates"] = known.reset_index(drop=True)
        return out

    def produce_per_partition(self, topics: Sequence[str], partitions: Sequence[int]) -> np.ndarray:
        """Produce rates aligned with (topics, partitions); 0 where unknown."""
        return align_produce(self.produce, topics, partitions)


def align_produce(
    produce: pd.DataFrame | None, topics: Sequence[str] | np.ndarray, partitions: Sequence[int] | np.ndarray
) -> np.ndarray:
    """Produce rates aligned with the rows (topics, partitions); 0 where unknown or not given."""
    n = len(topics)
    if produce is None or len(produce) == 0 or n == 0:
        return np.zeros(n)
    row_topic, names = pd.factorize(np.asarray(topics, dtype=object))
    codes = pd.Index(names).get_indexer(pd.Index(produce["topic"].to_numpy(dtype=object), dtype=object))
    return produce_by_code(produce, codes, row_topic, partitions)


def produce_by_code(
    produce: pd.DataFrame, topic_codes: np.ndarray, row_topic: np.ndarray, partitions: Sequence[int] | np.ndarray
) -> np.ndarray:
    """The produce rate of each row (``row_topic``, ``partitions``): the first ``produce`` gives
    for that partition, 0 where it gives none, or none finite and positive. ``topic_codes``:
    each ``produce`` row's topic as a code of ``row_topic``'s, -1 for a topic no row has.
    (Matched as int64 keys: a merge on a million topic names took 0.17 s.)"""
    n = len(row_topic)
    part = produce["partition"].astype(np.int64).to_numpy()
    rate = produce["produce_rate"].to_numpy(dtype=np.float64)
    known = (topic_codes >= 0) & (part >= 0) & (part < PARTITIONS)
    key = partition_keys(np.asarray(topic_codes)[known], part[known], PARTITIONS)
    if n == 0 or len(key) == 0:
        return np.zeros(n)
    order = np.argsort(key, kind="stable")
    key, rate = key[order], rate[known][order]
    first = np.r_[True, key[1:] != key[:-1]]
    key, rate = key[first], rate[first]
    rows = partition_keys(np.asarray(row_topic), np.asarray(partitions), PARTITIONS)
    at = np.minimum(np.searchsorted(key, rows), len(key) - 1)
    got = np.where(key[at] == rows, rate[at], 0.0)
    return np.where(np.isfinite(got) & (got > 0), got, 0.0)


def combine(
    consumers: Sequence[str],
    *,
    configured: Mapping[str, float] | None = None,
    measured: Mapping[str, float] | None = None,
    behind: Mapping[str, bool] | None = None,
    produce: pd.DataFrame | None = None,
    notes: Sequence[str] = (),
) -> Rates:
    """Measured beats configured: a consumer's measured rate is used where it was still behind
    (its speed); where it had caught up, the larger of its measured floor and its configured
    rate. Consumers with neither have no rate."""
    configured, measured, behind = dict(configured or {}), dict(measured or {}), dict(behind or {})
    read: dict[str, float] = {}
    source: dict[str, str] = {}
    for c in sorted(consumers):
        m, k = measured.get(c), configured.get(c)
        if m is not None and behind.get(c, False):
            read[c], source[c] = m, "measured"
        elif m is not None and k is not None:
            read[c], source[c] = (m, "floor") if m > k else (k, "configured")
        elif m is not None:
            read[c], source[c] = m, "floor"
        elif k is not None:
            read[c], source[c] = k, "configured"
    observations = 2 if produce is not None else 1
    return Rates(read, source, produce, observations, tuple(notes))


__all__ = [
    "SOURCES",
    "Observation",
    "Rates",
    "align_produce",
    "check_interval",
    "check_rate",
    "combine",
    "configured_rates",
    "drain_seconds",
    "lower_bound",
    "measure",
    "observation_from_plan",
    "observation_json",
    "produce_between",
    "read_between",
    "read_rates_file",
]


# -- what a plan records -------------------------------------------------------------------


def observation_json(observation: Observation) -> dict[str, Any]:
    """The offsets of one observation as plan.json keeps them, for the next run to measure rates:
    ``{"time": epoch seconds, "end_offsets": {topic: {partition: offset}}, "committed_offsets": ...}``."""
    frame = observation.offsets.sort_values(KEY, kind="stable")
    ends: dict[str, dict[str, int]] = {}
    commits: dict[str, dict[str, int]] = {}
    committed = pd.to_numeric(frame["committed_offset"], errors="coerce") if "committed_offset" in frame else None
    for i, (t, p, e) in enumerate(
        zip(frame["topic"].tolist(), frame["partition"].astype(np.int64).tolist(), frame["end_offset"].astype(np.int64).tolist())
    ):
        ends.setdefault(str(t), {})[str(p)] = int(e)
        if committed is not None:
            c = committed.iloc[i]
            if pd.notna(c):
                commits.setdefault(str(t), {})[str(p)] = int(c)
    return {"time": float(observation.time), "end_offsets": ends, "committed_offsets": commits}


def observation_from_plan(plan: Mapping[str, Any]) -> Observation | None:
    """The observation a plan recorded (None for a plan without one: written before rates existed),
    with the plan's owners as who read each partition from then on."""
    doc = plan.get("observed")
    if not isinstance(doc, Mapping) or "time" not in doc or not isinstance(doc.get("end_offsets"), Mapping):
        return None
    commits = doc.get("committed_offsets") or {}
    rows = [(t, int(p), int(e), commits.get(t, {}).get(p)) for t, parts in doc["end_offsets"].items() for p, e in parts.items()]
    offsets = pd.DataFrame(rows, columns=[*KEY, "end_offset", "committed_offset"])
    offsets["committed_offset"] = pd.to_numeric(offsets["committed_offset"], errors="coerce").astype("Int64")
    owners = pd.DataFrame(
        [(c, t, int(p)) for c, e in plan.get("consumers", {}).items() for t, ps in e.get("assign", {}).items() for p in ps],
        columns=["consumer", *KEY],
    )
    return Observation(float(doc["time"]), offsets, owners)


def measure(
    consumers: Sequence[str],
    now: Observation,
    before: Observation | None = None,
    configured: Mapping[str, float] | None = None,
) -> Rates:
    """The rates of a run: produce and read rates from ``before`` to ``now`` where there is a
    ``before`` (the previous generation, or an earlier snapshot), the configured read rates
    for the rest."""
    if before is None:
        return combine(consumers, configured=configured)
    interval = now.time - before.time
    if not interval > 0:
        raise InputError(
            f"the interval between the two observations must be > 0 seconds, not {interval:g} "
            "(is the earlier observation newer than this one?)"
        )
    produce, notes = produce_between(before.offsets, now.offsets, interval)
    read: dict[str, float] = {}
    behind: dict[str, bool] = {}
    if "committed_offset" in now.offsets and len(before.owners):
        read, behind, more = read_between(before, now.offsets, interval)
        read = {c: r for c, r in read.items() if c in set(consumers)}
        notes += more
    return combine(consumers, configured=configured, measured=read, behind=behind, produce=produce, notes=notes)


def filled(rates: Rates, consumers: Sequence[str]) -> Rates:
    """``rates`` with a read rate for every consumer, for a planner that needs one each: a
    consumer with neither a measured nor a configured rate gets the median of the others
    (a note says so; the plan still reports its rate and time as unknown)."""
    missing = [c for c in consumers if c not in rates.read]
    if not missing or not rates.read:
        return rates
    median = float(np.median(list(rates.read.values())))
    note = f"no read rate for {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}: planned at the median, {median:g}/s"
    read = {**rates.read, **dict.fromkeys(missing, median)}
    return Rates(
        read, {**rates.read_source, **dict.fromkeys(missing, "median")}, rates.produce, rates.observations, (*rates.notes, note)
    )
