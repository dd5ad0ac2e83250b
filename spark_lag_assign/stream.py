"""The consuming side: pipelines that read as the plan says, commit their progress to the
group, and hand partitions over when a new plan generation moves them.

Spark's Kafka source keeps its position in the query's checkpoint and commits nothing to
Kafka, so without help the planner would see no lag for a Spark pipeline; and a query
restarted from its checkpoint with a different ``assign`` fails on the partitions it lost
and starts the ones it gained from the beginning. This module closes the loop
plan -> pipelines -> lag -> plan:

- ``read_assigned`` gives the streaming DataFrame of one consumer's part of the plan;
- ``ProgressCommitter`` (fed by a ``StreamingQueryListener``) commits every completed
  micro-batch's end offsets to the plan's consumer group, with kafka-python;
- ``PlanFollower`` keeps one consumer's query in step with the plan, by the protocol below.

Kafka options
-------------
``read_assigned`` and ``PlanFollower`` take the Kafka source's own option names, verbatim:
``kafka.``-prefixed ones configure Spark's consumers (``kafka.bootstrap.servers``,
``kafka.security.protocol``, ``kafka.sasl.jaas.config``, ...), the others are options of the
source (``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``minPartitions``, ...). Since a dotted
name is no Python keyword, ``bootstrap_servers=`` is accepted for ``kafka.bootstrap.servers``.
The options that the plan decides (``assign``, ``subscribe``, ``subscribePattern``,
``startingOffsets``, ...) are refused. The committer is a kafka-python client, which names its
settings differently (``security_protocol``, ``sasl_plain_password``): it takes them as
``client_options``, like ``[kafka.client]`` in the planner's config file.

Handover protocol
-----------------
Every consumer keeps one *claim* file, ``<plan dir>/handover/<consumer>.json``, replaced
atomically: the generation it follows and the partitions it may be reading. A claim of
generation N that lacks a partition is that consumer's release of it under generation N.
A consumer with no claim file has never read anything.

1. The follower reads the current plan. A missing or unreadable plan, or a consumer id the
   plan does not name, is an error at start; later, an unreadable plan is logged and the
   follower keeps reading by the last good one, and a plan without this consumer means it
   has left the group: it releases everything (steps 2-4) and returns.
2. When this consumer's partitions change, it stops its query between micro-batches: it
   waits (up to ``stop_timeout``) until the query is not processing a batch (it sleeps until
   the next trigger, or is still asking Kafka for the next batch's offsets), then stops it.
   A batch stopped mid-way after all is not committed anywhere: the next owner reads it again.
3. It commits the end offsets of the last completed batch to the group, retrying until
   ``commit_timeout``; if that never succeeds it raises ``KafkaCommitError`` and does not
   release (step 4), so that nobody starts from offsets older than what it has read.
4. It writes its claim for the new generation N: its partitions in N and nothing else.
   Written only after step 3, this releases every partition it gave up.
5. It waits until no other consumer's claim of a generation older than N names one of its
   partitions in N. Older claims win: a newer owner waits for the older one and never the
   other way round, so two consumers never read a partition at once and waits cannot form
   a cycle. A claim that cannot be read counts as holding everything. The wait is bounded
   by ``handover_timeout``: then ``HandoverTimeoutError`` names who holds what, and is
   logged and raised. A newer plan appearing meanwhile restarts at step 1.
6. It reads the group's committed offsets live for its partitions (retrying until
   ``commit_timeout``); where there is none, or it lies outside the log, the plan's reset
   policy gives earliest or latest (the lag rules of ``spark_lag_assign.lag``).
7. It starts the query from those offsets with a checkpoint of its own generation,
   ``<checkpoints>/<consumer>/gen-<NNNNNN>`` (a follower restarted in the same generation
   resumes from it). The committer commits each completed batch's end offsets to the group;
   a failed commit is logged and retried with the next batch, and never fails the query.
8. It polls the plan every ``poll_interval`` seconds. A newer generation with the same
   partitions only rewrites the claim; different partitions go to step 2.
9. ``stop()``, or a query that ends by itself (``availableNow``), ends the run with steps
   2-3 and a claim of nothing. If the query fails, the follower commits what it completed,
   releases, and raises Spark's error.

Delivery is at least once: a partition's new owner starts where the old one committed, so
nothing is skipped, and records are read twice only when a stop lands between a batch's
sink commit and its progress report, which is at most one micro-batch per moved partition.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from spark_lag_assign import plan as plan_io
from spark_lag_assign.errors import (
    ConsumerNotInPlanError,
    HandoverTimeoutError,
    InputError,
    KafkaCommitError,
    KafkaReadError,
    NothingAssignedError,
    PlanError,
    one_line as _one_line,
)
from spark_lag_assign.lag import check_reset, lag_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery, StreamingQueryListener

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]

#: options the plan decides; Spark's option names are case-insensitive
PLANNED_OPTIONS = frozenset(
    {
        "assign",
        "subscribe",
        "subscribepattern",
        "startingoffsets",
        "startingoffsetsbytimestamp",
        "startingtimestamp",
        "startingoffsetsbytimestampstrategy",
        "endingoffsets",
        "endingoffsetsbytimestamp",
        "endingtimestamp",
    }
)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _tp_names(partitions: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(partitions))


# -- options and offsets ---------------------------------------------------------------


def source_options(options: Mapping[str, Any]) -> dict[str, str]:
    """The Kafka source options to pass through, as strings; the plan's own options are refused."""
    out: dict[str, str] = {}
    for key, value in options.items():
        name = "kafka.bootstrap.servers" if key == "bootstrap_servers" else str(key)
        if name.lower() in PLANNED_OPTIONS:
            raise InputError(f"Kafka source option {key!r} is taken from the plan; do not pass it")
        if value is None:
            continue
        out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    if not out.get("kafka.bootstrap.servers"):
        raise InputError("no Kafka bootstrap servers: pass kafka.bootstrap.servers (or bootstrap_servers=)")
    return out


def partitions_of(assign: Mapping[str, Iterable[int]]) -> list[TopicPartition]:
    """An ``assign`` object as sorted (topic, partition) pairs."""
    return sorted((str(t), int(p)) for t, ps in assign.items() for p in ps)


def parse_source_offsets(text: str | None) -> Offsets:
    """The Kafka source's offset JSON (``{"topic": {"partition": offset}}``) as {(topic, partition): offset}.

    A progress report carries it as each source's ``endOffset``: the next offset to read,
    which is exactly what a Kafka consumer group commits.
    """
    if text is None or text == "":
        return {}
    try:
        doc = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise InputError(f"not a Kafka source offset JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise InputError(f"not a Kafka source offset JSON (expected an object): {text[:80]!r}")
    out: Offsets = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise InputError(f"not a Kafka source offset JSON (topic {topic!r} maps to {type(parts).__name__})")
        for partition, offset in parts.items():
            try:
                key = (str(topic), int(partition))
            except ValueError:
                raise InputError(f"not a Kafka source offset JSON (partition {partition!r} of {topic!r})") from None
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise InputError(f"not a Kafka source offset JSON (offset {offset!r} of {topic}-{partition})")
            out[key] = offset
    return out


def offsets_json(offsets: Mapping[str, Mapping[str, int]]) -> str:
    """A ``startingOffsets`` object as the exact string the Kafka source takes."""
    return json.dumps({t: dict(ps) for t, ps in offsets.items()}, separators=(",", ":"), sort_keys=True)


def starting_offsets(
    assign: Mapping[str, Iterable[int]],
    committed: Mapping[TopicPartition, int | None],
    beginning: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    reset: str,
) -> dict[str, dict[str, int]]:
    """Where to start each assigned partition: the group's commit, else the reset rule (-2/-1).

    The same lag rules as the planner's, so a pipeline starts where the plan's lag was
    counted from.
    """
    tps = partitions_of(assign)
    if not tps:
        return {}
    missing = [tp for tp in tps if tp not in beginning or tp not in end]
    if missing:
        raise KafkaReadError(f"no beginning/end offsets for {_tp_names(missing)}")
    rules = lag_columns(
        pd.Series([beginning[tp] for tp in tps], dtype="int64"),
        pd.Series([end[tp] for tp in tps], dtype="int64"),
        pd.Series([committed.get(tp) for tp in tps], dtype="Int64"),
        check_reset(reset),
    )
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), start in zip(tps, rules["starting_offset"]):
        out.setdefault(topic, {})[str(partition)] = int(start)
    return out


def read_group_starting_offsets(
    bootstrap_servers: str,
    group: str,
    assign: Mapping[str, Iterable[int]],
    reset: str,
    *,
    client_options: Mapping[str, Any] | None = None,
    timeout_ms: int = 15000,
) -> dict[str, dict[str, int]]:
    """``starting_offsets`` from the group's committed offsets, read live with kafka-python."""
    from spark_lag_assign.offsets import read_partition_offsets

    tps = partitions_of(assign)
    if not tps:
        return {}
    table = read_partition_offsets(
        bootstrap_servers, group, tps, client_options=client_options, timeout_ms=timeout_ms
    )
    keys = list(zip(table["topic"], table["partition"].astype(int)))
    committed = dict(zip(keys, (None if pd.isna(c) else int(c) for c in table["committed_offset"])))
    return starting_offsets(
        assign,
        committed,
        dict(zip(keys, table["beginning_offset"].astype(int))),
        dict(zip(keys, table["end_offset"].astype(int))),
        reset,
    )


# -- claims: the handover protocol's files ------------------------------------------------


@dataclass(frozen=True)
class Claim:
    """One consumer's claim file: the generation it follows and the partitions it may read."""

    consumer: str
    generation: int
    assign: dict[str, list[int]]
    state: str  # waiting | reading | idle | released | left: for people; the protocol reads only assign
    committed: dict[str, dict[str, int]] = field(default_factory=dict)  # what it committed on release
    updated: str = ""
    host: str = ""
    pid: int = 0

    @property
    def partitions(self) -> set[TopicPartition]:
        return set(partitions_of(self.assign))

    def as_json(self) -> str:
        return json.dumps(
            {
                "consumer": self.consumer,
                "generation": self.generation,
                "assign": self.assign,
                "state": self.state,
                "committed": self.committed,
                "updated": self.updated or _now(),
                "host": self.host or socket.gethostname(),
                "pid": self.pid or os.getpid(),
            },
            indent=1,
            sort_keys=True,
        )


@dataclass(frozen=True)
class Blocker:
    """A claim that keeps a consumer from starting: who, under which generation, which partitions."""

    holder: str
    generation: int | None  # None: the claim file could not be read
    partitions: tuple[TopicPartition, ...]
    detail: str = ""

    def describe(self) -> str:
        if self.generation is None:
            return f"{self.holder}'s claim is unreadable ({self.detail})"
        return f"{self.holder} holds {_tp_names(self.partitions)} under generation {self.generation} ({self.detail})"


def handover_dir(plan_dir: str | Path) -> Path:
    """Where the claims of a plan directory's consumers live."""
    return Path(plan_dir) / "handover"


def claim_path(directory: str | Path, consumer: str) -> Path:
    plan_io.check_consumer_ids([consumer])
    return Path(directory) / f"{consumer}.json"


def write_claim(directory: str | Path, claim: Claim) -> Path:
    """Replace a consumer's claim atomically: readers see the old claim or the new one."""
    path = claim_path(directory, claim.consumer)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(claim.as_json() + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise PlanError(f"cannot write the claim of {claim.consumer} to {path}: {exc.strerror or exc}") from None
    return path


def _parse_claim(text: str, consumer: str) -> Claim:
    doc = json.loads(text)
    if not isinstance(doc, dict) or not isinstance(doc.get("generation"), int) or not isinstance(doc.get("assign"), dict):
        raise ValueError("not a claim (generation or assign missing)")
    assign = {str(t): sorted(int(p) for p in ps) for t, ps in doc["assign"].items()}
    return Claim(
        consumer=consumer,
        generation=int(doc["generation"]),
        assign=assign,
        state=str(doc.get("state", "")),
        committed=doc.get("committed") or {},
        updated=str(doc.get("updated", "")),
        host=str(doc.get("host", "")),
        pid=int(doc.get("pid", 0) or 0),
    )


def read_claims(directory: str | Path) -> dict[str, Claim | str]:
    """Every consumer's claim; a claim that cannot be read is given as the reason (a string)."""
    directory = Path(directory)
    out: dict[str, Claim | str] = {}
    if not directory.is_dir():
        return out
    for path in sorted(directory.glob("*.json")):
        consumer = path.name[: -len(".json")]
        if consumer.startswith("."):
            continue
        try:
            out[consumer] = _parse_claim(path.read_text(encoding="utf-8"), consumer)
        except FileNotFoundError:  # replaced between listing and reading: read it again next time
            continue
        except (OSError, ValueError, TypeError) as exc:
            out[consumer] = f"{path}: {_one_line(exc)}"
    return out


def blocking_claims(
    claims: Mapping[str, Claim | str], consumer: str, generation: int, partitions: Iterable[TopicPartition]
) -> list[Blocker]:
    """The claims that keep ``consumer`` from reading ``partitions`` under ``generation`` (step 5).

    Only claims of older generations block: a newer one is waiting for us, and one of the
    same generation cannot overlap (a plan gives each partition one owner).
    """
    wanted = set(partitions)
    blockers: list[Blocker] = []
    if not wanted:
        return blockers
    for holder in sorted(claims):
        if holder == consumer:
            continue
        claim = claims[holder]
        if isinstance(claim, str):
            blockers.append(Blocker(holder, None, tuple(sorted(wanted)), claim))
            continue
        if claim.generation >= generation:
            continue
        overlap = wanted & claim.partitions
        if overlap:
            blockers.append(Blocker(holder, claim.generation, tuple(sorted(overlap)), f"{claim.state}, since {claim.updated}"))
    return blockers


def wait_for_release(
    directory: str | Path,
    consumer: str,
    generation: int,
    partitions: Iterable[TopicPartition],
    *,
    timeout: float,
    poll: float = 0.5,
    interrupted: Callable[[], bool] | None = None,
) -> bool:
    """Block until no older claim holds any of ``partitions`` (True), or ``interrupted()`` (False).

    Raises ``HandoverTimeoutError``, logged, naming every holder, after ``timeout`` seconds.
    """
    wanted = sorted(set(partitions))
    deadline = time.monotonic() + timeout
    reported: set[str] = set()
    while True:
        blockers = blocking_claims(read_claims(directory), consumer, generation, wanted)
        if not blockers:
            return True
        for b in blockers:
            if b.holder not in reported:
                reported.add(b.holder)
                log.info("%s waits for generation %d: %s", consumer, generation, b.describe())
        if interrupted is not None and interrupted():
            return False
        if time.monotonic() >= deadline:
            message = (
                f"{consumer} waited {timeout:g}s to read {_tp_names(wanted)} under generation {generation}, "
                f"but {'; '.join(b.describe() for b in blockers)}; that consumer has not released them "
                f"(stopped without releasing, or still on an older plan): restart it, or remove its claim in {directory}"
            )
            log.error("%s", message)
            raise HandoverTimeoutError(message)
        time.sleep(min(poll, max(deadline - time.monotonic(), 0.01)))


# -- committing progress to the group ---------------------------------------------------------

CommitFunction = Callable[[str, Mapping[TopicPartition, int], str], None]
"""``commit(group, {(topic, partition): offset}, metadata)``: raises on failure."""


class KafkaGroupCommit:
    """Commit offsets for a group with kafka-python's admin client, reconnecting after failures.

    Spark's consumers use ``assign`` and never join the group, so the group has no members
    and an admin offset commit (what ``kafka-consumer-groups --reset-offsets`` does) is
    accepted for any partition.
    """

    def __init__(
        self, bootstrap_servers: str, client_options: Mapping[str, Any] | None = None, timeout_ms: int = 10000
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.client_options = dict(client_options or {})
        self.timeout_ms = timeout_ms
        self._admin: Any = None
        self._lock = threading.Lock()

    def _client(self) -> Any:
        from kafka import KafkaAdminClient

        if self._admin is None:
            options = {
                "request_timeout_ms": self.timeout_ms,
                "bootstrap_timeout_ms": self.timeout_ms,
                "client_id": "spark-lag-assign-committer",
                **self.client_options,
            }
            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, **options)
        return self._admin

    def __call__(self, group: str, offsets: Mapping[TopicPartition, int], metadata: str = "") -> None:
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata
        from kafka.structs import TopicPartition as KafkaTP

        if not offsets:
            return
        with self._lock:
            try:
                result = self._client().alter_group_offsets(
                    group, {KafkaTP(t, p): OffsetAndMetadata(o, metadata, -1) for (t, p), o in sorted(offsets.items())}
                )
            except (KafkaError, OSError, TypeError, ValueError, AssertionError) as exc:
                self._close_locked()  # a broken connection is not reused: the next call reconnects
                raise KafkaCommitError(f"committing offsets for group {group} failed: {_one_line(exc)}") from None
        failed = {f"{tp.topic}-{tp.partition}": err.__name__ for tp, err in result.items() if err.__name__ != "NoError"}
        if failed:
            raise KafkaCommitError(f"committing offsets for group {group} failed: {failed}")

    def _close_locked(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:  # closing a broken client must not hide why it broke
                log.debug("closing the committer's admin client failed", exc_info=True)

    def close(self) -> None:
        with self._lock:
            self._close_locked()


@dataclass
class _Tracked:
    group: str
    partitions: frozenset[TopicPartition]
    metadata: str
    latest: Offsets = field(default_factory=dict)  # the furthest completed batch end seen
    committed: Offsets = field(default_factory=dict)  # what the group holds from us


class ProgressCommitter:
    """Commits each tracked query's completed micro-batch end offsets to its consumer group.

    A failed commit is logged and stays pending: the next batch (or idle event, or the
    final commit of a handover) commits the furthest offsets seen, so the group catches up
    and never moves backwards. Nothing here raises into Spark.
    """

    def __init__(self, commit: CommitFunction) -> None:
        self._commit = commit
        self._queries: dict[str, _Tracked] = {}
        self._lock = threading.RLock()
        self.failures = 0
        self.commits = 0

    def track(self, query_id: str, group: str, partitions: Iterable[TopicPartition], metadata: str = "") -> None:
        with self._lock:
            self._queries[str(query_id)] = _Tracked(group, frozenset(partitions), metadata)

    def tracked(self, query_id: str) -> bool:
        with self._lock:
            return str(query_id) in self._queries

    def committed(self, query_id: str) -> Offsets:
        with self._lock:
            entry = self._queries.get(str(query_id))
            return dict(entry.committed) if entry else {}

    def _merge(self, entry: _Tracked, end_offsets: Iterable[str | None]) -> None:
        for text in end_offsets:
            try:
                offsets = parse_source_offsets(text)
            except InputError:  # another kind of source in the same query: not ours to commit
                continue
            for tp, offset in offsets.items():
                if tp in entry.partitions and offset >= 0 and offset > entry.latest.get(tp, -1):
                    entry.latest[tp] = offset

    def _flush(self, query_id: str, entry: _Tracked) -> bool:
        todo = {tp: o for tp, o in entry.latest.items() if entry.committed.get(tp) != o}
        if not todo:
            return True
        try:
            self._commit(entry.group, todo, entry.metadata)
        except Exception as exc:  # a commit must never fail the query: log it and retry later
            self.failures += 1
            log.warning(
                "commit of %d offset(s) to group %s failed (query %s), retrying with the next batch: %s",
                len(todo), entry.group, query_id, _one_line(exc),
            )  # fmt: skip
            return False
        entry.committed.update(todo)
        self.commits += 1
        log.debug("committed %s to group %s", todo, entry.group)
        return True

    def record(self, query_id: str, end_offsets: Iterable[str | None]) -> bool:
        """A completed batch's sources' ``endOffset`` JSONs: merge them and commit what is new."""
        with self._lock:
            entry = self._queries.get(str(query_id))
            if entry is None:
                return False
            self._merge(entry, end_offsets)
            return self._flush(str(query_id), entry)

    def retry(self, query_id: str) -> bool:
        """Commit whatever is pending for a query (its idle events call this)."""
        with self._lock:
            entry = self._queries.get(str(query_id))
            return self._flush(str(query_id), entry) if entry is not None else False

    def finish(
        self, query_id: str, end_offsets: Iterable[str | None], *, timeout: float, pause: float = 0.5
    ) -> Offsets:
        """The final commit of a stopped query: retried until ``timeout``; then it stops being tracked.

        Returns the offsets the group holds from it; raises ``KafkaCommitError`` if the last
        ones could not be committed in time (the query then stays tracked, still pending).
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            entry = self._queries.get(str(query_id))
            if entry is None:
                return {}
            self._merge(entry, end_offsets)
        while True:
            with self._lock:
                if self._flush(str(query_id), entry):
                    self._queries.pop(str(query_id), None)
                    return dict(entry.committed)
            if time.monotonic() >= deadline:
                raise KafkaCommitError(
                    f"the final commit to group {entry.group} (query {query_id}) did not succeed within {timeout:g}s"
                )
            time.sleep(pause)


def commit_listener(committer: ProgressCommitter) -> StreamingQueryListener:
    """A ``StreamingQueryListener`` that feeds every progress report to ``committer``."""
    from pyspark.sql.streaming import StreamingQueryListener

    class _CommitListener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            try:
                progress = event.progress
                committer.record(str(progress.id), [s.endOffset for s in progress.sources])
            except Exception:  # an error here would only be printed by py4j: log it ourselves
                log.exception("could not record a progress report")

        def onQueryIdle(self, event: Any) -> None:
            try:
                committer.retry(str(event.id))
            except Exception:
                log.exception("could not retry a pending commit")

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return _CommitListener()


# -- reading with a plan ------------------------------------------------------------------


@dataclass(frozen=True)
class AssignedStream:
    """One consumer's streaming DataFrame and the plan generation it follows."""

    df: DataFrame
    consumer: str
    generation: int
    group: str | None
    reset: str
    assign: dict[str, list[int]]
    starting_offsets: dict[str, dict[str, int]] | str
    options: dict[str, str]

    @property
    def assign_json(self) -> str:
        return json.dumps(self.assign, separators=(",", ":"))

    @property
    def partitions(self) -> list[TopicPartition]:
        return partitions_of(self.assign)


def consumer_entry(plan: plan_io.Plan, consumer: str, where: str | Path) -> plan_io.ConsumerPlan:
    """The consumer's part of a plan; a consumer the plan does not name is an error."""
    entry = plan["consumers"].get(consumer)
    if entry is None:
        named = ", ".join(sorted(plan["consumers"])) or "none"
        raise ConsumerNotInPlanError(
            f"consumer {consumer!r} is not in generation {plan['generation']} of the plan at {where} (consumers: {named})"
        )
    return entry


def _load(plan_dir: str | Path, generation: int | None) -> plan_io.Plan:
    if generation is None:
        return plan_io.read_plan(plan_dir)
    found = plan_io.read_generation(plan_dir, generation)
    if found is None:
        raise PlanError(f"no generation {generation} in the plan directory {plan_dir}")
    return found


def _stream(
    spark: SparkSession,
    plan: plan_io.Plan,
    consumer: str,
    where: str | Path,
    starting: Mapping[str, Mapping[str, int]] | str | None,
    options: Mapping[str, Any],
) -> AssignedStream:
    entry = consumer_entry(plan, consumer, where)
    if not partitions_of(entry["assign"]):
        raise NothingAssignedError(
            f"consumer {consumer!r} has no partitions in generation {plan['generation']} of the plan at {where}"
        )
    passed = source_options(options)
    chosen: dict[str, dict[str, int]] | str
    if starting is None:
        chosen = {t: dict(ps) for t, ps in entry["startingOffsets"].items()}
    elif isinstance(starting, str):
        chosen = starting
    else:
        chosen = {t: dict(ps) for t, ps in starting.items()}
    if isinstance(chosen, dict):
        given = set(partitions_of({t: [int(p) for p in ps] for t, ps in chosen.items()}))
        if given != set(partitions_of(entry["assign"])):  # Spark insists on exactly the assigned partitions
            raise InputError(
                f"startingOffsets for {consumer} name {_tp_names(given) or 'nothing'}, "
                f"but it is assigned {_tp_names(partitions_of(entry['assign']))}"
            )
    reader = spark.readStream.format("kafka")
    for key, value in sorted(passed.items()):
        reader = reader.option(key, value)
    assign = {t: list(ps) for t, ps in entry["assign"].items()}
    df = (
        reader.option("assign", json.dumps(assign, separators=(",", ":")))
        .option("startingOffsets", chosen if isinstance(chosen, str) else offsets_json(chosen))
        .load()
    )
    return AssignedStream(
        df=df,
        consumer=consumer,
        generation=int(plan["generation"]),
        group=plan.get("group"),
        reset=str(plan.get("reset", "latest")),
        assign=assign,
        starting_offsets=chosen,
        options=passed,
    )


def read_assigned(
    spark: SparkSession,
    plan_dir: str | Path,
    consumer: str,
    *,
    generation: int | None = None,
    starting_offsets: Mapping[str, Mapping[str, int]] | str | None = None,
    **kafka_options: Any,
) -> AssignedStream:
    """The streaming DataFrame of Spark's Kafka source with ``consumer``'s ``assign`` from the plan.

    Reads the current plan (or ``generation``); starts where the plan says unless
    ``starting_offsets`` is given (a ``startingOffsets`` object, or "earliest"/"latest").
    ``kafka_options`` pass through to the source (see the module docstring).
    """
    return _stream(spark, _load(plan_dir, generation), consumer, plan_dir, starting_offsets, kafka_options)


# -- following the plan -------------------------------------------------------------------

StartQuery = Callable[[AssignedStream, str], "StreamingQuery"]
"""``start(stream, checkpoint_location) -> StreamingQuery``: the pipeline's own processing and sink."""


@dataclass(frozen=True)
class FollowerEvent:
    """What a follower did and when (``time.monotonic()``), for logs and tests."""

    at: float
    kind: str  # claim | start | stop | plan-unreadable | plan-readable | left | drained | stopped
    generation: int
    assign: dict[str, list[int]]
    detail: str = ""


@dataclass
class RunSummary:
    consumer: str
    reason: str  # stopped | left | drained | idle
    generations: list[int]
    events: list[FollowerEvent]
    committed: Offsets
    commit_failures: int


class PlanFollower:
    """Keeps one consumer's streaming query in step with the plan (the module's protocol).

        follower = PlanFollower(spark, "/data/plans/orders", "pipeline-a", start,
                                checkpoint_root="/chk/orders",
                                kafka_options={"kafka.bootstrap.servers": "broker:9092"})
        follower.run()          # blocks; follower.stop() from another thread ends it

    ``start(stream, checkpoint)`` builds and starts the query from ``stream.df`` with that
    checkpoint location. A sink that is idempotent per checkpoint (a file sink per
    generation, ``foreachBatch`` keyed by batch id) keeps the at-least-once bound tight.
    """

    def __init__(
        self,
        spark: SparkSession,
        plan_dir: str | Path,
        consumer: str,
        start: StartQuery,
        *,
        checkpoint_root: str | Path,
        kafka_options: Mapping[str, Any],
        client_options: Mapping[str, Any] | None = None,
        group: str | None = None,
        claims_dir: str | Path | None = None,
        poll_interval: float = 5.0,
        handover_timeout: float = 300.0,
        commit_timeout: float = 60.0,
        stop_timeout: float = 60.0,
        kafka_timeout_ms: int = 15000,
        commit: CommitFunction | None = None,
    ) -> None:
        plan_io.check_consumer_ids([consumer])
        self.spark = spark
        self.plan_dir = Path(plan_dir)
        self.consumer = consumer
        self.start_query = start
        self.checkpoint_root = Path(checkpoint_root)
        self.options = source_options(kafka_options)
        self.bootstrap_servers = self.options["kafka.bootstrap.servers"]
        self.client_options = dict(client_options or {})
        self.group = group
        self.claims_dir = Path(claims_dir) if claims_dir is not None else handover_dir(plan_dir)
        self.poll_interval = poll_interval
        self.handover_timeout = handover_timeout
        self.commit_timeout = commit_timeout
        self.stop_timeout = stop_timeout
        self.kafka_timeout_ms = kafka_timeout_ms
        self._own_commit = commit is None
        self._commit = commit or KafkaGroupCommit(self.bootstrap_servers, self.client_options, kafka_timeout_ms)
        self.committer = ProgressCommitter(self._commit)
        self.events: list[FollowerEvent] = []
        self._stopping = threading.Event()
        self._query: StreamingQuery | None = None
        self._generation = 0
        self._assign: dict[str, list[int]] = {}
        self._committed: Offsets = {}
        self._generations: list[int] = []
        self._plan_problem: str | None = None
        self._went_back: int | None = None

    # -- public

    @property
    def generation(self) -> int:
        """The plan generation this follower follows now (0 before it has read a plan)."""
        return self._generation

    @property
    def query(self) -> StreamingQuery | None:
        return self._query

    def stop(self) -> None:
        """Ask ``run`` to end: it stops the query between batches, commits and releases."""
        self._stopping.set()

    def run(self, *, until_drained: bool = False) -> RunSummary:
        """Follow the plan until ``stop()``, the consumer leaves the plan, or the query ends by itself.

        With ``until_drained`` a consumer that the plan leaves idle returns at once instead
        of waiting for partitions (for ``availableNow`` pipelines).
        """
        plan = plan_io.read_plan(self.plan_dir)
        consumer_entry(plan, self.consumer, self.plan_dir)
        group = self.group or plan.get("group")
        if not group:
            raise PlanError(
                f"the plan at {self.plan_dir} names no consumer group (planned from a snapshot?): "
                "give the follower a group to commit to"
            )
        self.group = group
        listener = commit_listener(self.committer)
        self.spark.streams.addListener(listener)
        try:
            reason = self._follow(plan, until_drained)
        except BaseException:
            self._abandon()
            raise
        finally:
            self.spark.streams.removeListener(listener)
            if self._own_commit and isinstance(self._commit, KafkaGroupCommit):
                self._commit.close()
        return RunSummary(
            self.consumer, reason, list(self._generations), list(self.events), dict(self._committed), self.committer.failures
        )

    # -- the protocol's steps

    def _event(self, kind: str, detail: str = "") -> None:
        self.events.append(FollowerEvent(time.monotonic(), kind, self._generation, dict(self._assign), detail))

    def _claim(self, state: str) -> None:
        committed: dict[str, dict[str, int]] = {}
        for (t, p), o in sorted(self._committed.items()):
            committed.setdefault(t, {})[str(p)] = o
        write_claim(
            self.claims_dir, Claim(self.consumer, self._generation, dict(self._assign), state, committed, _now())
        )
        self._event("claim", state)

    def _follow(self, plan: plan_io.Plan, until_drained: bool) -> str:
        while True:
            if self._stopping.is_set():
                return self._finish("stopped")
            generation = int(plan["generation"])
            entry = plan["consumers"].get(self.consumer)
            if entry is None:  # step 1: the plan no longer names us
                log.info("%s is not in generation %d: releasing its partitions and leaving", self.consumer, generation)
                self._end_query()
                self._generation, self._assign = generation, {}
                self._claim("left")
                self._event("left")
                return "left"
            assign = {t: list(ps) for t, ps in entry["assign"].items() if ps}
            if self._query is not None and assign == self._assign:
                self._generation = generation
                self._generations.append(generation)
                self._claim("reading")
            else:
                self._end_query()  # steps 2-3
                self._generation, self._assign = generation, assign
                self._generations.append(generation)
                self._claim("waiting" if assign else "idle")  # step 4
                if assign:
                    waited = self._await_release()  # step 5
                    if waited == "stop":
                        return self._finish("stopped")
                    if isinstance(waited, dict):
                        plan = waited  # type: ignore[assignment]
                        continue
                    self._start(plan)  # steps 6-7
                    self._claim("reading")
                elif until_drained:
                    self._event("drained")
                    return "idle"
            outcome = self._watch()  # step 8
            if outcome == "stop":
                return self._finish("stopped")
            if outcome == "drained":
                return self._finish("drained")
            assert isinstance(outcome, dict)
            plan = outcome  # type: ignore[assignment]

    def _finish(self, reason: str) -> str:
        """Step 9: stop and commit, then claim nothing."""
        self._end_query()
        self._assign = {}
        self._claim("released")
        self._event(reason)
        return reason

    def _abandon(self) -> None:
        """On an error: release only if what was read is committed, so nobody starts behind it."""
        try:
            self._end_query()
        except Exception as exc:
            log.error(
                "%s keeps its claim on %s: its final commit failed (%s)", self.consumer, _tp_names(partitions_of(self._assign)), _one_line(exc)
            )
            return
        try:
            self._assign = {}
            self._claim("released")
        except Exception as exc:
            log.error("%s could not release its claim: %s", self.consumer, _one_line(exc))

    def _await_release(self) -> plan_io.Plan | str:
        """Step 5, polling the plan meanwhile: "ready", "stop", or a newer plan that ends the wait."""
        newer: list[plan_io.Plan] = []
        next_poll = time.monotonic() + self.poll_interval

        def interrupted() -> bool:
            nonlocal next_poll
            if self._stopping.is_set():
                return True
            if time.monotonic() >= next_poll:
                next_poll = time.monotonic() + self.poll_interval
                found = self._poll_plan()
                if found is not None:
                    newer.append(found)
                    return True
            return False

        started = time.monotonic()
        done = wait_for_release(
            self.claims_dir,
            self.consumer,
            self._generation,
            partitions_of(self._assign),
            timeout=self.handover_timeout,
            poll=min(0.5, self.poll_interval),
            interrupted=interrupted,
        )
        if done:
            waited = time.monotonic() - started
            if waited > 1:
                log.info("%s: partitions released after %.1fs", self.consumer, waited)
            return "ready"
        return newer[0] if newer else "stop"

    def _start(self, plan: plan_io.Plan) -> None:
        assert self.group is not None
        deadline = time.monotonic() + self.commit_timeout
        while True:  # a broker away for a moment must not end a pipeline between two generations
            try:
                starting = read_group_starting_offsets(
                    self.bootstrap_servers,
                    self.group,
                    self._assign,
                    str(plan.get("reset", "latest")),
                    client_options=self.client_options,
                    timeout_ms=self.kafka_timeout_ms,
                )
                break
            except KafkaReadError as exc:
                if time.monotonic() >= deadline:
                    raise
                log.warning("%s cannot read its start offsets yet, retrying: %s", self.consumer, exc)
                time.sleep(1.0)
        stream = _stream(self.spark, plan, self.consumer, self.plan_dir, starting, self.options)
        checkpoint = self.checkpoint_root / self.consumer / f"gen-{self._generation:06d}"
        if checkpoint.exists():
            log.info("%s resumes generation %d from its checkpoint %s", self.consumer, self._generation, checkpoint)
        query = self.start_query(stream, str(checkpoint))
        self._query = query
        self.committer.track(
            str(query.id),
            self.group,
            partitions_of(self._assign),
            f"spark-lag-assign consumer={self.consumer} generation={self._generation}",
        )
        self._event("start", offsets_json(starting))
        log.info(
            "%s reads %s under generation %d from %s",
            self.consumer, _tp_names(partitions_of(self._assign)), self._generation, offsets_json(starting),
        )  # fmt: skip

    def _poll_plan(self) -> plan_io.Plan | None:
        """A plan newer than the one followed, or None; an unreadable plan is logged, not fatal."""
        try:
            plan = plan_io.read_plan(self.plan_dir)
        except PlanError as exc:
            if str(exc) != self._plan_problem:
                self._plan_problem = str(exc)
                log.warning("%s keeps following generation %d: %s", self.consumer, self._generation, exc)
                self._event("plan-unreadable", str(exc))
            return None
        if self._plan_problem is not None:
            self._plan_problem = None
            log.info("%s: the plan is readable again (generation %d)", self.consumer, plan["generation"])
            self._event("plan-readable")
        generation = int(plan["generation"])
        if generation > self._generation:
            return plan
        if generation < self._generation and generation != self._went_back:
            self._went_back = generation  # once per such plan: it stays until a planner writes a newer one
            log.warning(
                "%s: the plan went back to generation %d; still following %d", self.consumer, generation, self._generation
            )
        return None

    def _watch(self) -> plan_io.Plan | str:
        """Step 8: "stop", "drained", or a newer plan; a failed query raises Spark's error."""
        next_poll = time.monotonic() + self.poll_interval
        while True:
            query = self._query
            if query is not None and not query.isActive:
                error = query.exception()
                if error is not None:
                    log.error("%s: the query of generation %d failed: %s", self.consumer, self._generation, error)
                    raise error
                return "drained"
            if self._stopping.wait(min(0.2, self.poll_interval)):
                return "stop"
            if time.monotonic() >= next_poll:
                next_poll = time.monotonic() + self.poll_interval
                found = self._poll_plan()
                if found is not None:
                    return found

    def _end_query(self) -> None:
        """Steps 2-3: stop between batches, then commit the last completed batch's end offsets."""
        query = self._query
        if query is None:
            return
        forced = _stop_between_batches(query, self.stop_timeout)
        if forced:
            log.warning(
                "%s: no pause between batches within %gs; stopped mid-batch (that batch is read again)",
                self.consumer, self.stop_timeout,
            )  # fmt: skip
        progress = query.lastProgress
        ends = [s.endOffset for s in progress.sources] if progress is not None else []
        committed = self.committer.finish(str(query.id), ends, timeout=self.commit_timeout)
        self._committed.update(committed)
        self._query = None
        self._event("stop", json.dumps({f"{t}-{p}": o for (t, p), o in sorted(committed.items())}))


def _stop_between_batches(query: StreamingQuery, timeout: float) -> bool:
    """Stop a query while none of its batches is being processed; True if it had to stop one mid-way.

    ``stop()`` interrupts whatever the query does. Interrupting a trigger while it only asks
    Kafka for offsets, or sleeps until the next trigger, loses nothing; interrupting the
    processing of a batch makes the sink redo it, and a Python ``foreachBatch`` interrupted
    that way makes Spark 4.0 log a StackOverflowError. Under load batches run back to back,
    so waiting for an idle trigger alone might never end: the offset-fetching phase at the
    start of every batch is the boundary this waits for.
    """
    deadline = time.monotonic() + timeout
    while query.isActive:
        status = query.status
        processing = bool(status.get("isTriggerActive")) and str(status.get("message", "")).startswith("Processing")
        if not processing:
            query.stop()
            return False
        if time.monotonic() >= deadline:
            query.stop()
            return True
        time.sleep(0.02)
    return False  # it ended by itself (availableNow, or failed): nothing left to stop


__all__ = [
    "AssignedStream",
    "Blocker",
    "Claim",
    "FollowerEvent",
    "KafkaGroupCommit",
    "PlanFollower",
    "ProgressCommitter",
    "RunSummary",
    "blocking_claims",
    "commit_listener",
    "consumer_entry",
    "handover_dir",
    "offsets_json",
    "parse_source_offsets",
    "partitions_of",
    "read_assigned",
    "read_claims",
    "read_group_starting_offsets",
    "source_options",
    "starting_offsets",
    "wait_for_release",
    "write_claim",
]
