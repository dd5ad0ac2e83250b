"""The plan document (README, "Stores"): its fields, its JSON, and reading a plan file.

Where plans are published and how a generation becomes visible whole is the store's
business (``spark_lag_assign.store``: a Kafka store, or a plan directory whose layout
``spark_lag_assign.store.directory`` describes); this module only builds, encodes and
checks the document, so the planner, the stores and the pipelines agree on one format.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pydantic_core import PydanticSerializationError, to_json

from spark_lag_assign.core.ids import check_consumer_ids  # re-exported: the publishing side's name for it
from spark_lag_assign.core.limits import INT64_LIMIT, PARTITION_LIMIT, outside
from spark_lag_assign.core.quality import exact_run_sums, exact_sum
from spark_lag_assign.core.subscriptions import distinct, partition_keys
from spark_lag_assign.errors import InputError, PlanError
from spark_lag_assign.plan.document import (
    FORMAT_VERSION,
    ConsumerPlan,
    Plan,
    PlanFormatError,
    check_plan,
    parse_plan,
)

if TYPE_CHECKING:
    from spark_lag_assign.core.rates import Observation, Rates

PLAN_COLUMNS = ("consumer", "topic", "partition", "lag", "starting_offset")


#: what a Kafka partition can hold: (column, lowest, one past the highest)
_RANGES = (("partition", 0, PARTITION_LIMIT), ("lag", 0, INT64_LIMIT), ("starting_offset", -2, INT64_LIMIT))


def _check_rows(rows: pd.DataFrame) -> None:
    """Every number fits Kafka's types (int32 partitions, int64 offsets), or one line names the first that does not."""
    for column, low, high in _RANGES:
        bad = outside(rows[column], low, high)
        if bad.any():
            r = rows[bad].iloc[0]
            raise InputError(
                f"plan row {r['topic']}-{r['partition']}: {column} {r[column]} is not a whole number in [{low}, 2^{high.bit_length() - 1})"
            )


def _codes(names: pd.Series, sorted_names: Sequence[str]) -> np.ndarray:
    """Each row's position in ``sorted_names`` (int64); a name not there is an error of the caller."""
    codes = pd.Index(list(sorted_names)).get_indexer(pd.Index(names.to_numpy(dtype=object), dtype=object)).astype(np.int64)
    if (codes < 0).any():
        raise KeyError(names.to_numpy(dtype=object)[codes < 0][0])
    return codes


def _order(owner: np.ndarray, topic: np.ndarray, part: np.ndarray, topics: int) -> np.ndarray:
    """``np.lexsort((part, topic, owner))`` (codes >= 0, partitions below 2^31), as one stable
    sort of a single int64 key where it fits: a third of the time at a million rows."""
    owners = int(owner.max()) + 1 if len(owner) else 0
    if owners * max(topics, 1) >= 2**32:  # the key would pass 2^63
        return np.lexsort((part, topic, owner))
    return np.argsort(partition_keys(owner * topics + topic, part, PARTITION_LIMIT), kind="stable")


def _run_starts(*sorted_keys: np.ndarray) -> np.ndarray:
    """Where each run of equal keys starts (rows sorted by the keys; several keys: any of them changes)."""
    n = len(sorted_keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in sorted_keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)


def _fill(
    consumers: dict[str, ConsumerPlan],
    names: Sequence[str],
    planned: Sequence[str],
    assigned: pd.DataFrame,
    by_owner: np.ndarray,
    owner: np.ndarray,
    topic: np.ndarray,
    part: np.ndarray,
) -> None:
    """Each consumer's assign, startingOffsets, partitions and lag, from the assigned rows in
    (consumer, topic, partition) order (``by_owner``; ``owner``, ``topic`` and ``part`` sorted so)."""
    firsts = _run_starts(owner)
    runs = _run_starts(owner, topic)
    n_rows = len(part)
    starts_all = assigned["starting_offset"].astype(np.int64).to_numpy()[by_owner]
    # many topics over many consumers: most runs hold one partition, built without slicing
    heads = part[runs].tolist()
    part_lists: list[list[int]] = [[p] for p in heads]
    # partition numbers as JSON keys: made once per number where they are few, shared by every run
    top = int(part.max(initial=0))
    text: Sequence[str] | None = list(map(str, range(top + 1))) if top < 4 * len(runs) + 1024 else None
    keys_of = text.__getitem__ if text is not None else str
    start_dicts: list[dict[str, int]] = [{keys_of(p): o} for p, o in zip(heads, starts_all[runs].tolist())]
    ends = np.r_[runs[1:], n_rows]
    longer = np.flatnonzero(ends - runs > 1)
    if len(longer):
        numbers = part.tolist()
        keys = list(map(keys_of, numbers))
        starts = starts_all.tolist()
        for i, a, b in zip(longer.tolist(), runs[longer].tolist(), ends[longer].tolist()):
            part_lists[i] = numbers[a:b]
            start_dicts[i] = dict(zip(keys[a:b], starts[a:b]))
    run_topics = [planned[t] for t in topic[runs].tolist()]
    first_run = np.searchsorted(runs, firsts).tolist()
    sizes = np.diff(np.r_[firsts, n_rows]).tolist()
    # exact: a consumer's lags may add up past int64
    totals = exact_run_sums(assigned["lag"].to_numpy()[by_owner], firsts)
    for o, r0, r1, size, total in zip(owner[firsts].tolist(), first_run, [*first_run[1:], len(runs)], sizes, totals):
        entry = consumers[names[o]]
        entry["assign"] = dict(zip(run_topics[r0:r1], part_lists[r0:r1]))
        entry["startingOffsets"] = dict(zip(run_topics[r0:r1], start_dicts[r0:r1]))
        entry["partitions"] = size
        entry["lag"] = total


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
    fencing: str = "self",
) -> Plan:
    """The plan document of a plan table: rows[consumer (null: unassigned), topic, partition, lag, starting_offset].

    Long because the document's fields are filled in its own order, each from the same
    sorted arrays, and the order of the fields is the file's."""
    _check_rows(rows)
    planned = sorted(set(rows["topic"]))
    everything = set(planned)

    listed: dict[str, list[str] | str] = {}  # once per distinct topic list, not once per consumer
    for topic_list, members in distinct(subscriptions).items():
        topics = sorted(set(topic_list))
        listed.update(dict.fromkeys(members, "*" if set(topics) == everything else topics))  # "*": every planned topic

    names = sorted(subscriptions)
    consumers: dict[str, ConsumerPlan] = {
        c: {
            "assign": {},
            "startingOffsets": {},
            "partitions": 0,
            "lag": 0,
            "subscriptions": listed[c],  # type: ignore[typeddict-item]  # "*" or topics
        }
        for c in names
    }
    has_owner = rows["consumer"].notna().to_numpy()
    assigned = rows[has_owner]
    # rows sorted by (consumer, topic, partition) as codes: names and topics are sorted, so
    # code order is name order; each consumer's part is then a run of rows, each topic a run in it
    owner = _codes(assigned["consumer"], names)
    topic = _codes(assigned["topic"], planned)
    part = assigned["partition"].astype(np.int64).to_numpy()
    by_owner = _order(owner, topic, part, len(planned))
    owner, topic, part = owner[by_owner], topic[by_owner], part[by_owner]
    # one list per (consumer, topic) run, built from whole arrays: no Python object per row but the numbers
    _fill(consumers, names, planned, assigned, by_owner, owner, topic, part)
    unassigned_rows = rows[~has_owner]
    nobody = _codes(unassigned_rows["topic"], planned)
    spare = unassigned_rows["partition"].astype(np.int64).to_numpy()
    order = _order(np.zeros(len(nobody), dtype=np.int64), nobody, spare, len(planned))
    nobody, spare = nobody[order], spare[order]
    edges = _run_starts(nobody).tolist()
    spare_list = spare.tolist()
    unassigned = {
        planned[t]: spare_list[e0:e1] for t, e0, e1 in zip(nobody[edges].tolist(), edges, [*edges[1:], len(spare_list)])
    }
    doc: Plan = {
        "format": FORMAT_VERSION,
        "generation": int(generation),
        "strategy": strategy,
        "created": (created or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "group": group,
        "source": source,
        "reset": reset,  # type: ignore[typeddict-item]  # checked by the lag rules and by check_plan
        "seed": int(seed),
        "options": dict(options or {}),
        "topics": planned,
        "consumers": consumers,
        "unassigned": unassigned,
        "totals": {
            "partitions": len(rows),
            "assigned": len(assigned),
            "unassigned": len(unassigned_rows),
            "lag": exact_sum(assigned["lag"]),
        },
        "quality": dict(quality or {}),  # type: ignore[typeddict-item]  # metrics.Quality.as_dict()
    }
    if rates is not None:
        _add_times(doc, assigned.iloc[by_owner], rates)
    if observed is not None:
        from spark_lag_assign.core.rates import observation_json

        doc["observed"] = observation_json(observed)  # type: ignore[typeddict-item]
    if fencing != "self":  # absent means "self": plans of pipelines that fence themselves stay as they were
        doc["fencing"] = fencing  # type: ignore[typeddict-item]
    return doc


#: consumers with more partitions (and producers) get their own drain time for each partition, an upper bound
REPLAY_LIMIT = 256


def _seconds(value: float) -> float | None:
    return None if not np.isfinite(value) else round(float(value), 3)


def _add_times(doc: Plan, assigned: pd.DataFrame, rates: Rates) -> None:
    """(``assigned``: sorted by consumer, topic, partition.) Per consumer and partition, and for the group: the time to drain under the fluid model
    of ``spark_lag_assign.core.draintime`` (null where a read rate is unknown, or it never drains)."""
    from spark_lag_assign.core.draintime import drain_partitions
    from spark_lag_assign.core.rates import align_produce, drain_seconds

    rows = assigned  # sorted by consumer, topic, partition
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
        entry["read_rate_source"] = rates.read_source.get(consumer)  # type: ignore[typeddict-item]
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
            done, _ = drain_partitions(lag[s:e], produce[s:e], rate)
        else:  # the exact replay costs O(n^2) here: every partition has caught up when its consumer has
            done = np.full(e - s, t)
        by_topic: dict[str, dict[str, float | None]] = {}
        for i, d in zip(range(s, e), done.tolist()):
            by_topic.setdefault(topics[i], {})[str(partitions[i])] = _seconds(d)
        entry["partition_drain_seconds"] = by_topic
    doc["drain_seconds"] = None if stuck or slowest is None else round(slowest, 3)
    doc["rates_source"] = rates.source  # type: ignore[typeddict-item]
    doc["rates_estimated"] = rates.estimated
    doc["cannot_keep_up"] = stuck
    doc["rates_notes"] = list(rates.notes)


def compact_json(value: Any, *, sort_keys: bool = False) -> str:
    """The plan's one JSON encoding, without spaces: the plan's fields, the Kafka source's
    options and the records the stores write are all this text (``sort_keys`` where the
    text must not depend on the order a dict was filled in: claims, start offsets)."""
    return json.dumps(value, separators=(",", ":"), sort_keys=sort_keys)


def _dumps_parts(value: Any) -> str:
    """``compact_json`` of a per-partition part of a plan (``assign``, ``startingOffsets``,
    ``unassigned``, ``topics``, the observed offsets: strings, ints, lists and dicts of them),
    byte for byte, by pydantic-core's encoder: about 3x faster than json's on a million
    partitions. Where the text holds what json would escape and pydantic-core writes as it
    is (a character beyond ASCII, or DEL), json writes it. Not for floats, which the plan's
    parts never hold (the model refuses them): the two write some exponents differently."""
    try:
        raw = to_json(value)
    except PydanticSerializationError:  # not JSON's types: json says what is wrong
        return compact_json(value)
    if raw.isascii() and b"\x7f" not in raw:
        return raw.decode("ascii")
    return compact_json(value)


#: the plan's top-level fields that hold only strings and ints (what ``_dumps_parts`` takes)
_PARTS_FIELDS = frozenset({"topics", "unassigned"})


def _field_json(key: str, value: Any) -> str:
    if key in _PARTS_FIELDS:
        return _dumps_parts(value)
    if key == "observed" and isinstance(value, dict):  # a time, then offsets of every partition
        return (
            "{"
            + ",".join(f"{compact_json(k)}:{_dumps_parts(v) if k.endswith('_offsets') else compact_json(v)}" for k, v in value.items())
            + "}"
        )
    return compact_json(value)


def _consumer_json(entry: ConsumerPlan, assign: str, starting: str) -> str:
    rest = ",".join(
        f"{compact_json(k)}:{_dumps_parts(v) if k == 'subscriptions' else compact_json(v)}"  # floats: json's own text
        for k, v in entry.items()
        if k not in ("assign", "startingOffsets")
    )
    return f'{{"assign":{assign},"startingOffsets":{starting},{rest}}}'


def plan_json(plan: Plan, parts: Mapping[str, tuple[str, str]] | None = None) -> str:
    """The plan as JSON text: one line per top-level field and per consumer.

    Readable with ``less`` or ``jq`` and written by json's C encoder: an indented dump of a
    million-partition plan takes many times longer. ``parts`` holds each consumer's
    ``assign`` and ``startingOffsets`` already encoded (the writer needs them anyway).
    """
    parts = parts or {c: (assign_json(e), starting_offsets_json(e)) for c, e in plan["consumers"].items()}
    lines = [f"{compact_json(k)}:{_field_json(k, v)}" for k, v in plan.items() if k != "consumers"]
    consumers = ",\n".join(f" {compact_json(c)}:{_consumer_json(e, *parts[c])}" for c, e in plan["consumers"].items())
    lines.append(f'"consumers":{{\n{consumers}\n}}' if consumers else '"consumers":{}')
    return "{\n" + ",\n".join(lines) + "\n}\n"


def assign_json(entry: ConsumerPlan) -> str:
    """The exact string to pass as ``.option("assign", ...)``."""
    return _dumps_parts(entry["assign"])


def starting_offsets_json(entry: ConsumerPlan) -> str:
    """The exact string to pass as ``.option("startingOffsets", ...)``."""
    return _dumps_parts(entry["startingOffsets"])


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


def read_plan_file(path: str | Path) -> Plan:
    """The plan in a plan.json file, checked (``PlanFormatError``: one line, naming the file)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PlanError(f"no plan at {path}") from None
    except OSError as exc:
        raise PlanError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_plan(data, str(path))


def read_plan(directory: str | Path) -> Plan:
    """The current plan of an output directory."""
    return read_plan_file(Path(directory) / "plan.json")


__all__ = [
    "FORMAT_VERSION",
    "PLAN_COLUMNS",
    "ConsumerPlan",
    "Plan",
    "PlanFormatError",
    "assign_json",
    "assignment_frame",
    "build_plan",
    "check_consumer_ids",
    "check_plan",
    "compact_json",
    "parse_plan",
    "plan_json",
    "read_plan",
    "read_plan_file",
    "starting_offsets_json",
]
