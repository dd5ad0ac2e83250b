"""The plan document (DESIGN.md, "Plan files"): its fields, its JSON, and reading a plan file.

Where plans are published and how a generation becomes visible whole is the store's
business (``spark_lag_assign.store``: a Kafka store, or a plan directory whose layout
``spark_lag_assign.store.directory`` describes); this module only builds, encodes and
checks the document, so the planner, the stores and the pipelines agree on one format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

import numpy as np
import pandas as pd

from spark_lag_assign.errors import InputError, PlanError
from spark_lag_assign.subscriptions import distinct

if TYPE_CHECKING:
    from spark_lag_assign.rates import Observation, Rates

FORMAT_VERSION = 1
CONSUMER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@=+-]{0,248}")  # always fullmatch: "$" would let a trailing newline in

PLAN_COLUMNS = ("consumer", "topic", "partition", "lag", "starting_offset")


class ConsumerPlan(TypedDict):
    assign: dict[str, list[int]]  # the Kafka source's ``assign``: topic -> partitions ascending
    startingOffsets: dict[str, dict[str, int]]  # topic -> {"partition": offset}; -2 earliest, -1 latest
    partitions: int
    lag: int
    subscriptions: list[str] | str  # "*": every topic of the plan
    # with rates (build_plan(..., rates=...)): records per second, seconds; null where unknown or never
    read_rate: NotRequired[float | None]
    read_rate_source: NotRequired[str | None]  # measured, configured, floor (caught up: a lower bound)
    produce_rate: NotRequired[float]
    drain_seconds: NotRequired[float | None]
    keeps_up: NotRequired[bool | None]  # false: producers append at least as fast as it reads
    partition_drain_seconds: NotRequired[dict[str, dict[str, float | None]]]  # topic -> {"partition": seconds}


class Plan(TypedDict):
    format: int
    generation: int
    strategy: str
    created: str  # ISO 8601, UTC
    group: str | None
    source: str
    reset: str
    seed: int
    options: dict[str, Any]
    topics: list[str]  # every planned topic
    consumers: dict[str, ConsumerPlan]
    unassigned: dict[str, list[int]]  # partitions of topics nobody subscribes to
    totals: dict[str, int]
    quality: dict[str, Any]
    # time to drain (issue 12): the slowest consumer's seconds, null where unknown or never
    drain_seconds: NotRequired[float | None]
    rates_source: NotRequired[str]  # measured, configured, measured+configured, none
    rates_estimated: NotRequired[bool]  # true: fewer than two observations (produce rates taken as 0)
    cannot_keep_up: NotRequired[list[str]]  # consumers whose producers outrun them: they never drain
    rates_notes: NotRequired[list[str]]
    observed: NotRequired[dict[str, Any]]  # end and committed offsets and their time: the next run's rates


def check_consumer_ids(consumers: Sequence[str]) -> None:
    """Consumer ids name files, so they must be plain; the same id twice is a mistake."""
    seen: set[str] = set()
    for c in consumers:
        if not isinstance(c, str) or not CONSUMER_ID.fullmatch(c):
            raise InputError(
                f"invalid consumer id {c!r}: use letters, digits and . _ : @ = + - (not starting with a symbol)"
            )
        if c in seen:
            raise InputError(f"consumer id {c!r} is given twice")
        seen.add(c)


def build_plan(
    rows: pd.DataFrame,
    subscriptions: Mapping[str, Sequence[str]],
    *,
    generation: int,
    strategy: str,
    reset: str,
    seed: int = 0,
    group: str | None = None,
    source: str = "",
    options: Mapping[str, Any] | None = None,
    quality: Mapping[str, Any] | None = None,
    created: datetime | None = None,
    rates: Rates | None = None,
    observed: Observation | None = None,
) -> Plan:
    """The plan document of a plan table: rows[consumer (null: unassigned), topic, partition, lag, starting_offset]."""
    planned = sorted(set(rows["topic"]))
    everything = set(planned)

    listed: dict[tuple[str, ...], list[str] | str] = {}  # once per distinct topic list
    for topic_list in distinct(subscriptions):
        topics = sorted(set(topic_list))
        listed[topic_list] = "*" if set(topics) == everything else topics  # "*": every planned topic

    consumers: dict[str, ConsumerPlan] = {
        c: {
            "assign": {},
            "startingOffsets": {},
            "partitions": 0,
            "lag": 0,
            "subscriptions": listed[tuple(subscriptions[c])],
        }
        for c in sorted(subscriptions)
    }
    has_owner = rows["consumer"].notna().to_numpy()
    assigned = rows[has_owner].sort_values(["consumer", "topic", "partition"], kind="stable")
    lag = assigned["lag"].to_numpy(dtype=np.int64)
    current_consumer: object = None
    current_topic: object = None
    for c, t, p, o in zip(
        assigned["consumer"].tolist(),
        assigned["topic"].tolist(),
        assigned["partition"].astype(np.int64).tolist(),
        assigned["starting_offset"].astype(np.int64).tolist(),
    ):
        if c != current_consumer:
            entry = consumers[c]
            current_consumer, current_topic = c, None
        if t != current_topic:
            parts = entry["assign"][t] = []
            starts = entry["startingOffsets"][t] = {}
            current_topic = t
        parts.append(p)
        starts[str(p)] = o
    if len(assigned):
        totals = assigned.groupby("consumer", sort=False)["lag"].agg(["size", "sum"])
        for consumer, (size, total) in zip(totals.index, totals.to_numpy().tolist()):
            consumers[consumer]["partitions"] = int(size)
            consumers[consumer]["lag"] = int(total)
    unassigned_rows = rows[~has_owner].sort_values(["topic", "partition"], kind="stable")
    unassigned = {
        str(t): sorted(int(p) for p in g["partition"]) for t, g in unassigned_rows.groupby("topic", sort=True)
    }
    doc: Plan = {
        "format": FORMAT_VERSION,
        "generation": int(generation),
        "strategy": strategy,
        "created": (created or datetime.now(timezone.utc)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "group": group,
        "source": source,
        "reset": reset,
        "seed": int(seed),
        "options": dict(options or {}),
        "topics": planned,
        "consumers": consumers,
        "unassigned": unassigned,
        "totals": {
            "partitions": len(rows),
            "assigned": len(assigned),
            "unassigned": len(unassigned_rows),
            "lag": int(lag.sum()),
        },
        "quality": dict(quality or {}),
    }
    if rates is not None:
        _add_times(doc, assigned, rates)
    if observed is not None:
        from spark_lag_assign.rates import observation_json

        doc["observed"] = observation_json(observed)
    return doc


#: consumers with more partitions (and producers) get their own drain time for each partition, an upper bound
REPLAY_LIMIT = 256


def _seconds(value: float) -> float | None:
    return None if not np.isfinite(value) else round(float(value), 3)


def _add_times(doc: Plan, assigned: pd.DataFrame, rates: Rates) -> None:
    """Per consumer and partition, and for the group: the time to drain under the fluid model
    of ``spark_lag_assign.simulate`` (null where a read rate is unknown, or it never drains)."""
    from spark_lag_assign.rates import align_produce, drain_seconds
    from spark_lag_assign.simulate import _drain_partitions

    rows = assigned.sort_values(["consumer", "topic", "partition"], kind="stable")
    produce = align_produce(rates.produce, rows["topic"].to_numpy(), rows["partition"].to_numpy())
    owners = rows["consumer"].to_numpy(dtype=object)
    starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]]) if len(rows) else np.zeros(0, dtype=np.int64)
    ends = np.r_[starts[1:], len(rows)].astype(np.int64)
    lag = rows["lag"].to_numpy(dtype=np.float64)
    topics = rows["topic"].tolist()
    partitions = rows["partition"].astype(np.int64).tolist()
    spans = {str(owners[s]): (int(s), int(e)) for s, e in zip(starts, ends)}
    slowest: float | None = 0.0
    stuck: list[str] = []
    for consumer, entry in doc["consumers"].items():
        s, e = spans.get(consumer, (0, 0))
        rate = rates.read.get(consumer)
        p = float(produce[s:e].sum())
        entry["read_rate"] = rate
        entry["read_rate_source"] = rates.read_source.get(consumer)
        entry["produce_rate"] = round(p, 6)
        if rate is None:
            entry["drain_seconds"], entry["keeps_up"] = None, None
            slowest = None
            continue
        t = float(drain_seconds(float(lag[s:e].sum()), p, rate))
        entry["drain_seconds"] = _seconds(t)
        entry["keeps_up"] = bool(np.isfinite(t))
        if not np.isfinite(t):
            stuck.append(consumer)
        elif slowest is not None:
            slowest = max(slowest, t)
        if e - s <= REPLAY_LIMIT or not produce[s:e].any():
            done, _ = _drain_partitions(lag[s:e], produce[s:e], rate)
        else:  # the exact replay costs O(n^2) here: every partition has caught up when its consumer has
            done = np.full(e - s, t)
        by_topic: dict[str, dict[str, float | None]] = {}
        for i, d in zip(range(s, e), done.tolist()):
            by_topic.setdefault(topics[i], {})[str(partitions[i])] = _seconds(d)
        entry["partition_drain_seconds"] = by_topic
    doc["drain_seconds"] = None if stuck or slowest is None else round(slowest, 3)
    doc["rates_source"] = rates.source
    doc["rates_estimated"] = rates.estimated
    doc["cannot_keep_up"] = stuck
    doc["rates_notes"] = list(rates.notes)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _consumer_json(entry: ConsumerPlan, assign: str, starting: str) -> str:
    rest = {k: v for k, v in entry.items() if k not in ("assign", "startingOffsets")}
    return f'{{"assign":{assign},"startingOffsets":{starting},{_dumps(rest)[1:]}'


def plan_json(plan: Plan, parts: Mapping[str, tuple[str, str]] | None = None) -> str:
    """The plan as JSON text: one line per top-level field and per consumer.

    Readable with ``less`` or ``jq`` and written by json's C encoder: an indented dump of a
    million-partition plan takes many times longer. ``parts`` holds each consumer's
    ``assign`` and ``startingOffsets`` already encoded (the writer needs them anyway).
    """
    parts = parts or {c: (assign_json(e), starting_offsets_json(e)) for c, e in plan["consumers"].items()}
    lines = [f"{_dumps(k)}:{_dumps(v)}" for k, v in plan.items() if k != "consumers"]
    consumers = ",\n".join(
        f" {_dumps(c)}:{_consumer_json(e, *parts[c])}" for c, e in plan["consumers"].items()
    )
    lines.append(f'"consumers":{{\n{consumers}\n}}' if consumers else '"consumers":{}')
    return "{\n" + ",\n".join(lines) + "\n}\n"


def assign_json(entry: ConsumerPlan) -> str:
    """The exact string to pass as ``.option("assign", ...)``."""
    return _dumps(entry["assign"])


def starting_offsets_json(entry: ConsumerPlan) -> str:
    """The exact string to pass as ``.option("startingOffsets", ...)``."""
    return _dumps(entry["startingOffsets"])


def assignment_frame(plan: Plan) -> pd.DataFrame:
    """The plan's assignment as DataFrame[consumer, topic, partition]: the ``previous`` of the next run."""
    rows = [
        (consumer, topic, p)
        for consumer, entry in plan["consumers"].items()
        for topic, partitions in entry["assign"].items()
        for p in partitions
    ]
    return pd.DataFrame(rows, columns=["consumer", "topic", "partition"]).astype({"partition": "int64"})


# -- reading ---------------------------------------------------------------------------


def _check_plan(doc: Any, where: str) -> Plan:
    if not isinstance(doc, dict):
        raise PlanError(f"{where}: not a plan (expected a JSON object)")
    missing = [k for k in ("format", "generation", "strategy", "consumers") if k not in doc]
    if missing:
        raise PlanError(f"{where}: not a plan (missing {', '.join(missing)})")
    if doc["format"] != FORMAT_VERSION:
        raise PlanError(f"{where}: plan format {doc['format']!r} is not supported (expected {FORMAT_VERSION})")
    for consumer, entry in doc["consumers"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("assign"), dict):
            raise PlanError(f"{where}: consumer {consumer!r} has no assign object")
    return doc  # type: ignore[return-value]


def read_plan_file(path: str | Path) -> Plan:
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise PlanError(f"no plan at {path}") from None
    except OSError as exc:
        raise PlanError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return _check_plan(doc, str(path))


def read_plan(directory: str | Path) -> Plan:
    """The current plan of an output directory."""
    return read_plan_file(Path(directory) / "plan.json")
