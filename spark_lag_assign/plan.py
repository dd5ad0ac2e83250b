"""Load: the plan format and its atomic, versioned writer (DESIGN.md, "Plan files").

An output directory holds every generation and a pointer to the current one::

    DIR/generations/000007/plan.json                 the whole plan
    DIR/generations/000007/assign/<consumer>.json    that consumer's Kafka source ``assign`` JSON
    DIR/generations/000007/starting-offsets/<consumer>.json   ... and its ``startingOffsets`` JSON
    DIR/current -> generations/000007                the one thing a new plan changes
    DIR/plan.json, DIR/assign, DIR/starting-offsets -> through current/

A generation is written completely under a temporary name, renamed into place, and only
then does ``current`` flip, by renaming a new symlink over the old one. A reader therefore
sees the old plan or the new one, never a torn file or a mix of generations, and a run that
fails or is killed at any moment leaves the previous plan as it was. A lock file keeps two
runs from writing the same directory at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from spark_lag_assign.errors import InputError, PlanError, PlanLockedError
from spark_lag_assign.subscriptions import distinct

FORMAT_VERSION = 1
CONSUMER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@=+-]{0,248}$")

PLAN_COLUMNS = ("consumer", "topic", "partition", "lag", "starting_offset")


class ConsumerPlan(TypedDict):
    assign: dict[str, list[int]]  # the Kafka source's ``assign``: topic -> partitions ascending
    startingOffsets: dict[str, dict[str, int]]  # topic -> {"partition": offset}; -2 earliest, -1 latest
    partitions: int
    lag: int
    subscriptions: list[str] | str  # "*": every topic of the plan


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


def check_consumer_ids(consumers: Sequence[str]) -> None:
    """Consumer ids name files, so they must be plain; the same id twice is a mistake."""
    seen: set[str] = set()
    for c in consumers:
        if not isinstance(c, str) or not CONSUMER_ID.match(c):
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
    return {
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


def read_current(directory: str | Path) -> Plan | None:
    """The current plan, or None where the directory holds none yet."""
    path = Path(directory) / "plan.json"
    if not path.exists() and not path.is_symlink():
        return None
    return read_plan_file(path)


def generation_dir(directory: str | Path, generation: int) -> Path:
    return Path(directory) / "generations" / f"{generation:06d}"


def read_generation(directory: str | Path, generation: int) -> Plan | None:
    path = generation_dir(directory, generation) / "plan.json"
    return read_plan_file(path) if path.exists() else None


# -- writing ---------------------------------------------------------------------------


@contextmanager
def locked(directory: str | Path) -> Iterator[Path]:
    """Hold the output directory's lock for one run; a second run at once is refused."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise PlanError(f"output directory {directory} is not writable: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PlanLockedError(f"another run is writing {directory} (its .lock is held)") from None
        yield directory
    finally:
        os.close(fd)


def check_writable(directory: str | Path) -> None:
    """Fail before any work if the plan could not be written."""
    directory = Path(directory)
    probe = directory
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK | os.X_OK) or (directory.exists() and not directory.is_dir()):
        raise PlanError(f"output directory {directory} is not writable")


def _write_file(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _link(target: str, link: Path) -> None:
    """Point ``link`` at ``target`` atomically (a new symlink renamed over the old one)."""
    tmp = link.with_name(f".{link.name}.tmp-{os.getpid()}")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(target, tmp)
    os.replace(tmp, link)


def write_plan(directory: str | Path, plan: Plan) -> Path:
    """Write a plan as the directory's new current generation; call it holding ``locked(directory)``."""
    directory = Path(directory)
    generations = directory / "generations"
    final = generation_dir(directory, plan["generation"])
    staging = generations / f".{plan['generation']:06d}.tmp-{os.getpid()}"
    try:
        generations.mkdir(parents=True, exist_ok=True)
        for leftover in generations.glob(".*.tmp-*"):  # from a run that was killed mid-write
            shutil.rmtree(leftover, ignore_errors=True)
        (staging / "assign").mkdir(parents=True)
        (staging / "starting-offsets").mkdir()
        parts = {c: (assign_json(e), starting_offsets_json(e)) for c, e in plan["consumers"].items()}
        for consumer, (assign, starting) in parts.items():
            _write_file(staging / "assign" / f"{consumer}.json", assign + "\n")
            _write_file(staging / "starting-offsets" / f"{consumer}.json", starting + "\n")
        _write_file(staging / "plan.json", plan_json(plan, parts))
        os.sync()  # one flush for every file of the generation, before it can become current
        if final.exists():  # written by a run that died before flipping ``current``: never current
            current = directory / "current"
            if current.is_symlink() and (directory / os.readlink(current)).resolve() == final.resolve():
                raise PlanError(f"generation {plan['generation']} already exists in {directory}")
            shutil.rmtree(final)
        os.rename(staging, final)
        _fsync_dir(generations)
        _link(os.path.join("generations", final.name), directory / "current")
        for name in ("plan.json", "assign", "starting-offsets"):
            link = directory / name
            if not link.is_symlink():
                if link.exists():
                    raise PlanError(f"{link} exists and is not the link this tool keeps; move it away")
                _link(os.path.join("current", name), link)
        _fsync_dir(directory)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise PlanError(f"cannot write the plan to {directory}: {exc.strerror or exc}") from None
    return final / "plan.json"
