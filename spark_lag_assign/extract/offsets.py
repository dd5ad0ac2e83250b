"""Extract: a consumer group's offsets, live from Kafka (kafka-python) or from a snapshot file.

Both give the offsets table (``core.lag.OFFSET_COLUMNS``), one row per partition:
``topic, partition, beginning_offset, end_offset, committed_offset`` (null where the group
has committed nothing). Snapshots are CSV, JSON lines or Parquet with those columns.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd

from spark_lag_assign.core.lag import OFFSET_COLUMNS, validate_offsets
from spark_lag_assign.errors import InputError, KafkaReadError, ReadNotAuthorizedError, one_line as _one_line
from spark_lag_assign.extract.acls import Acl, not_authorized, refusal
from spark_lag_assign.extract.atomic import write_atomically

log = logging.getLogger(__name__)

T = TypeVar("T")

SNAPSHOT_FORMATS = {".csv": "csv", ".jsonl": "json", ".json": "json", ".ndjson": "json", ".parquet": "parquet"}


@contextmanager
def admin_client(
    bootstrap_servers: str, client_options: Mapping[str, Any] | None = None, timeout_ms: int = 15000
) -> Iterator[Any]:
    """A kafka-python admin client; an unreachable or refusing cluster is a KafkaReadError."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaConfigurationError, KafkaError

    options = {
        "request_timeout_ms": timeout_ms,
        "bootstrap_timeout_ms": timeout_ms,
        "client_id": "spark-lag-assign",
        **(client_options or {}),
    }
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, **options)
    except (KafkaConfigurationError, TypeError, ValueError, AssertionError) as exc:  # its check of its options
        raise KafkaReadError(f"invalid Kafka client option: {_one_line(exc)}") from None
    except KafkaError as exc:
        raise KafkaReadError(diagnose(bootstrap_servers, options, exc, timeout_ms)) from None
    try:
        yield admin
    finally:
        admin.close()


def _tcp_reachable(bootstrap_servers: str) -> bool:
    for server in bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=3):
                return True
        except (OSError, ValueError):
            continue
    return False


def diagnose(bootstrap_servers: str, options: Mapping[str, Any], exc: BaseException, timeout_ms: int) -> str:
    """Name why kafka-python could not bootstrap; it reports most causes as a timeout.

    kafka-python 3.0.12 sees a rejected SASL login only as the broker closing the socket,
    so a cluster that accepts TCP connections but drops an authenticating client is
    reported as an authentication failure.
    """
    if not _tcp_reachable(bootstrap_servers):
        return f"cannot reach Kafka at {bootstrap_servers}: {_one_line(exc)}"
    if options.get("sasl_mechanism"):
        return (
            f"authentication failed at {bootstrap_servers}: the broker closed the connection during SASL "
            f"{options['sasl_mechanism']} login (check the user, password and mechanism)"
        )
    return (
        f"Kafka at {bootstrap_servers} accepted the connection but did not answer within {timeout_ms} ms "
        f"({_one_line(exc)}); is it a Kafka listener of the right security protocol?"
    )


def with_retries(what: str, call: Callable[[], T], deadline: float, needed: Iterable[Acl] = (), admin: Any = None) -> T:
    """Retry kafka-python's retriable errors (coordinator loading, leader moving) until the
    deadline; any Kafka error left is one KafkaReadError line naming the step, and a refusal
    (never retried: kafka-python does not call it retriable) names the ACL of ``needed``."""
    from kafka.errors import KafkaError

    from spark_lag_assign.extract.retry import kafka_retriable, until

    try:
        return until(deadline, kafka_retriable, what=what, logger=log)(call)
    except KafkaError as exc:
        raise _read_error(what, exc, needed, admin) from None


def _read_error(what: str, exc: BaseException, needed: Iterable[Acl], admin: Any = None) -> KafkaReadError:
    needed = list(needed)
    found = refusal(exc, needed)
    if found is not None and len(found[0]) > 1 and found[0][0].resource == "Topic" and admin is not None:
        needed = [a for a in needed if a.resource != "Topic"] + _lacking(admin, list(found[0]))
    return not_authorized(exc, needed, ReadNotAuthorizedError, what) or KafkaReadError(f"{what}: {_one_line(exc)}")


def _lacking(admin: Any, topic_acls: list[Acl]) -> list[Acl]:
    """Of the topic ACLs a refusal may be about, those the principal lacks: a refusal per
    partition does not say which topic, the broker's metadata does (the operations this
    principal has on each topic). Asked only after a refusal."""
    try:
        described = {str(e.get("name")): e for e in admin.describe_topics(sorted({a.name for a in topic_acls}))}
    except Exception:  # noqa: BLE001 - only a narrowing: the whole list stays a true answer
        return topic_acls
    lacking = [
        a for a in topic_acls
        if (e := described.get(a.name)) is None or e.get("error_code") == 29
        or a.operation not in (e.get("authorized_operations") or [a.operation])
    ]  # fmt: skip
    return lacking or topic_acls


def _described(admin: Any, topics: Sequence[str], deadline: float) -> list[dict[str, Any]]:
    """``describe_topics``, with a topic the principal may not describe reported as such: the
    broker answers for it with an error code, not an exception, and lists no partitions."""
    from kafka.errors import for_code

    described: list[dict[str, Any]] = with_retries(
        "describing topics",
        lambda: admin.describe_topics(list(topics)),
        deadline,
        [Acl("DESCRIBE", "Topic", t) for t in topics],
        admin,
    )
    for entry in described:
        name = entry.get("name") or entry.get("topic")
        code = entry.get("error_code", 0)
        if code == 29:  # a topic one may not describe, whether or not it exists
            raise _read_error(f"describing topic {name}", for_code(code)(), [Acl("DESCRIBE", "Topic", str(name))])
    return described


def resolve_topics(all_topics: Sequence[str], topics: Sequence[str] | None, pattern: str | None) -> list[str]:
    """The topics to plan: the named ones (all must exist) or those matching the pattern."""
    existing = set(all_topics)
    if topics:
        missing = sorted(set(topics) - existing)
        if missing:
            raise KafkaReadError(f"topic(s) not found in the cluster: {', '.join(missing)}")
        return sorted(set(topics))
    if pattern:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise InputError(f"invalid topic pattern {pattern!r}: {exc}") from None
        found = sorted(t for t in existing if regex.fullmatch(t) and not t.startswith("__"))
        if not found:
            raise KafkaReadError(f"no topic matches the pattern {pattern!r}")
        return found
    raise InputError("name the topics to plan (topics) or a topic pattern (topic_pattern)")


def offsets_table(admin: Any, group: str, tps: Sequence[Any], committed: Mapping[Any, Any], deadline: float) -> pd.DataFrame:
    """The offsets table of ``tps``: beginning and end read now, ``committed`` as given."""
    from kafka.admin import OffsetSpec

    if not tps:
        return pd.DataFrame(columns=list(OFFSET_COLUMNS))
    needed = [Acl("DESCRIBE", "Topic", t) for t in sorted({tp.topic for tp in tps})]
    earliest = with_retries(
        "reading beginning offsets", lambda: admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST)),
        deadline, needed, admin,
    )  # fmt: skip
    latest = with_retries(
        "reading end offsets", lambda: admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST)),
        deadline, needed, admin,
    )  # fmt: skip
    rows = []
    for tp in tps:
        meta = committed.get(tp)
        offset = getattr(meta, "offset", -1) if meta is not None else -1
        rows.append((tp.topic, tp.partition, earliest[tp].offset, latest[tp].offset, offset if offset >= 0 else None))
    frame = pd.DataFrame(rows, columns=list(OFFSET_COLUMNS))
    frame["committed_offset"] = frame["committed_offset"].astype("Int64")
    frame = validate_offsets(frame, f"offsets of group {group}")
    # who committed: the commits' metadata strings (the pipelines name themselves and their generation)
    frame.attrs["commit_metadata"] = {
        (tp.topic, tp.partition): str(getattr(meta, "metadata", "") or "") for tp, meta in committed.items() if meta is not None
    }
    return frame


def read_offsets(
    bootstrap_servers: str,
    group: str,
    *,
    topics: Sequence[str] | None = None,
    topic_pattern: str | None = None,
    client_options: Mapping[str, Any] | None = None,
    timeout_ms: int = 15000,
) -> pd.DataFrame:
    """The group's offsets for every partition of the chosen topics, read live with kafka-python."""
    from kafka.structs import TopicPartition

    deadline = time.monotonic() + timeout_ms / 1000
    with admin_client(bootstrap_servers, client_options, timeout_ms) as admin:
        listed = with_retries("listing topics", admin.list_topics, deadline)
        if topics and set(topics) - set(listed):
            # the listing leaves out the topics this principal may not describe: "not found"
            # only if the broker says so too
            _described(admin, sorted(set(topics) - set(listed)), deadline)
        chosen = resolve_topics(listed, topics, topic_pattern)
        described = _described(admin, chosen, deadline)
        tps = sorted(
            (
                TopicPartition(
                    t["topic"] if "topic" in t else t["name"], p["partition"] if "partition" in p else p["partition_index"]
                )
            )
            for t in described
            for p in t["partitions"]
        )
        group_acl = Acl("DESCRIBE", "Group", group)
        committed = with_retries(
            "reading the group's committed offsets", lambda: admin.list_group_offsets(group), deadline, [group_acl]
        ).get(group, {})
        if not committed:
            state = with_retries("describing the group", lambda: admin.describe_groups([group]), deadline, [group_acl])
            if state.get(group, {}).get("group_state", "Dead") == "Dead":
                raise KafkaReadError(f"unknown consumer group {group!r}: it has no members and no committed offsets")
        return offsets_table(admin, group, tps, committed, deadline)


def read_partition_offsets(
    bootstrap_servers: str,
    group: str,
    partitions: Sequence[tuple[str, int]],
    *,
    client_options: Mapping[str, Any] | None = None,
    timeout_ms: int = 15000,
) -> pd.DataFrame:
    """The offsets table of the given partitions; a group that never committed is fine here."""
    from kafka.structs import TopicPartition

    deadline = time.monotonic() + timeout_ms / 1000
    tps = [TopicPartition(t, p) for t, p in sorted(partitions)]
    with admin_client(bootstrap_servers, client_options, timeout_ms) as admin:
        # the group's offsets of a topic one may not describe are refused per partition
        needed = [Acl("DESCRIBE", "Group", group), *(Acl("DESCRIBE", "Topic", t) for t in sorted({t for t, _ in partitions}))]
        committed = with_retries(
            f"reading the offsets of group {group}", lambda: admin.list_group_offsets({group: tps}), deadline, needed, admin
        ).get(group, {})
        return offsets_table(admin, group, tps, committed, deadline)


def snapshot_format(path: Path) -> str:
    fmt = SNAPSHOT_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(f"{path}: unknown snapshot format; use .csv, .jsonl or .parquet")
    return fmt


def _csv_numbers(cells: pd.Series) -> pd.Series:
    """A CSV column read as text: integers exactly (nullable where cells are empty), else the text.

    Text is left for the offsets check, which reads it as numbers and names a bad cell as
    the file writes it.
    """
    present = cells.notna()
    numbers = pd.to_numeric(cells[present], errors="coerce")
    if numbers.dtype.kind in "iu":
        return numbers.astype("Int64" if numbers.dtype.kind == "i" else "UInt64").reindex(cells.index)
    return cells


def _read_csv(path: Path) -> pd.DataFrame:
    """A CSV snapshot with its number columns exact (``_csv_numbers``), topics as text.

    pandas' C reader parses every column first; a number column that it read as integers
    holds exactly what the file writes. Only a column that came out otherwise (an empty cell
    makes it float, which rounds beyond 2**53; a word makes it text) is read again as text and
    converted cell by cell. At a million rows with every offset committed this reads in about
    0.6 s where text for every column took 2.3 s, the most of the job's lead over its floor
    (``make bench``, "the Spark job"); ``tests/unit/test_lag_rules.py`` holds the text-only
    reader as its oracle.
    """
    with warnings.catch_warnings():
        # a row with more fields than the header: by default pandas would take the first
        # column for an index and shift every other one, silently (index_col=False)
        warnings.simplefilter("error", pd.errors.ParserWarning)
        # the whole file at once: read in chunks, a column whose chunks differ in type comes
        # out mixed, with a DtypeWarning instead of the cell's one-line error
        frame = pd.read_csv(path, dtype={OFFSET_COLUMNS[0]: str}, index_col=False, low_memory=False)
        # integer columns stay as read: ``validate_offsets`` gives every column its dtype
        again = [col for col in OFFSET_COLUMNS[1:] if col in frame.columns and frame[col].dtype.kind not in "iu"]
        if again:
            text = pd.read_csv(path, dtype=str, index_col=False, usecols=again)
            for col in again:
                frame[col] = _csv_numbers(text[col])
    return frame


def _read_json(path: Path) -> pd.DataFrame:
    """A JSON-lines snapshot with its number columns exact: pyarrow reads a column holding a
    number beyond int64 as floats, which would round it (and an error would name a value the
    file does not hold), so such a column is read again with Python's json, whose ints are
    exact; ``validate_offsets`` then names the cell as written."""
    frame = pd.read_json(path, lines=True, engine="pyarrow", dtype_backend="numpy_nullable")
    again = [col for col in OFFSET_COLUMNS[1:] if col in frame.columns and frame[col].dtype.kind == "f"]
    if again:
        with path.open(encoding="utf-8-sig") as lines:  # pyarrow takes a byte-order mark too
            rows = [json.loads(line) for line in lines if line.strip()]
        if len(rows) == len(frame) and all(isinstance(row, dict) for row in rows):
            for col in again:
                frame[col] = pd.Series([row.get(col) for row in rows], index=frame.index, dtype=object)
    return frame


def read_snapshot(path: str | Path) -> pd.DataFrame:
    """An offsets snapshot file (CSV, JSON lines, Parquet), validated."""
    path = Path(path)
    fmt = snapshot_format(path)
    if not path.is_file():
        raise InputError(f"offsets snapshot {path} does not exist")
    try:
        # every reader keeps integers exact beside empty cells, which would otherwise make
        # the column float and round offsets beyond 2**53
        if fmt == "csv":
            frame = _read_csv(path)
        elif fmt == "json":
            frame = _read_json(path)
        else:
            frame = pd.read_parquet(path, dtype_backend="numpy_nullable")
    except pd.errors.ParserWarning:
        raise InputError(f"{path}: not a readable {fmt} snapshot: a row has more fields than the header") from None
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise InputError(f"{path}: not a readable {fmt} snapshot: {_one_line(exc)}") from None
    return validate_offsets(frame, str(path))


def write_snapshot(offsets: pd.DataFrame, path: str | Path) -> Path:
    """Save an offsets table (validated) so that runs can be replayed offline."""
    path = Path(path)
    fmt = snapshot_format(path)
    frame = validate_offsets(offsets, "offsets")
    # a snapshot holds the offsets only: the commits' metadata (keyed by partition) is not
    # part of its format, and Parquet would warn that it cannot store such keys
    frame = frame.copy(deep=False)
    frame.attrs = {}
    path.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: str) -> None:
        if fmt == "csv":
            frame.to_csv(tmp, index=False)
        elif fmt == "json":
            frame.to_json(tmp, orient="records", lines=True)
        else:
            frame.to_parquet(tmp, index=False)

    write_atomically(path, write)
    return path
