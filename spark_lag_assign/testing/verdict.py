"""The checks the handover proofs assert, over what the pipelines wrote and did: pure.

Inputs: the sinks' records and batch markers (``spark_lag_assign.testing.pipeline_app``
writes them), the pipelines' ``EVENT`` lines, and the broker's log of every commit
(``spark_lag_assign.testing.offsets_log``). Outputs: losses; each query's live interval and
their overlaps (I1); batches completed after a lapse (I2); commits that went backwards (I3),
came from a replaced query (I6) or after a fence; duplicates and the bound the protocol
gives (D). Unit-tested in tests/unit/test_handover_analysis.py.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_lag_assign.testing.offsets_log import OffsetCommit

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class SinkRecord:
    """One record a pipeline's sink wrote (a committed one, read with ``read_committed``)."""

    consumer: str
    incarnation: str
    generation: int
    batch_id: int
    started: float
    written: float
    topic: str
    partition: int
    offset: int
    sink: str = "kafka"  # kafka (transactional) | plain

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def stint(self) -> tuple[str, str, int]:
        """One query: a consumer's incarnation reading under one generation."""
        return (self.consumer, self.incarnation, self.generation)

    @property
    def batch(self) -> tuple[str, str, int, int]:
        return (self.consumer, self.incarnation, self.generation, self.batch_id)


def parse_record(value: bytes | str) -> SinkRecord:
    d = json.loads(value)
    return SinkRecord(
        str(d["consumer"]), str(d["incarnation"]), int(d["generation"]), int(d["batch_id"]),
        float(d["started"]), float(d["written"]), str(d["topic"]), int(d["partition"]), int(d["offset"]),
        str(d.get("sink", "kafka")),
    )  # fmt: skip


def parse_marker(value: bytes | str) -> tuple[tuple[str, str, int, int], float]:
    """(batch key, ended) of a batch marker."""
    d = json.loads(value)
    return (str(d["consumer"]), str(d["incarnation"]), int(d["generation"]), int(d["batch_id"])), float(d["ended"])


@dataclass
class Batch:
    """One committed micro-batch: who read what, and when ([started, ended])."""

    key: tuple[str, str, int, int]
    started: float
    written: float
    ended: float
    ended_known: bool  # False: no marker (killed right after its commit), ``ended`` is a bound
    offsets: dict[TopicPartition, list[int]] = field(default_factory=dict)

    @property
    def consumer(self) -> str:
        return self.key[0]

    @property
    def incarnation(self) -> str:
        return self.key[1]

    @property
    def stint(self) -> tuple[str, str, int]:
        return self.key[:3]

    def describe(self) -> str:
        c, i, g, b = self.key
        return f"{c}/{i}/gen{g}/batch{b} [{self.started:.3f}, {self.ended:.3f}]"


def batches_of(
    records: Iterable[SinkRecord], ended: Mapping[tuple[str, str, int, int], float], slack: float | None = None
) -> list[Batch]:
    """The batches the records came from, each ending when its marker says.

    A batch without a marker ends at ``written + slack``; ``slack`` defaults to the longest
    write (``ended - written``) among the batches that have one (a process killed between
    its commit and its marker wrote at most that long)."""
    found: dict[tuple[str, str, int, int], Batch] = {}
    for r in records:
        b = found.get(r.batch)
        if b is None:
            b = found[r.batch] = Batch(r.batch, r.started, r.written, r.written, False)
        b.started = min(b.started, r.started)
        b.written = max(b.written, r.written)
        b.offsets.setdefault(r.tp, []).append(r.offset)
    known = [ended[k] - b.written for k, b in found.items() if k in ended]
    bound = slack if slack is not None else max(known, default=0.0)
    for k, b in found.items():
        if k in ended:
            b.ended, b.ended_known = max(ended[k], b.written), True
        else:
            b.ended = b.written + bound
    return sorted(found.values(), key=lambda b: (b.started, b.key))


@dataclass(frozen=True)
class Overlap:
    tp: TopicPartition
    first: Batch
    second: Batch

    def describe(self) -> str:
        return f"{self.tp[0]}-{self.tp[1]}: {self.first.describe()} overlaps {self.second.describe()}"


def overlaps(batches: Sequence[Batch], *, across: str = "stint") -> list[Overlap]:
    """Pairs of batches of different readers (``across``: "stint" = consumer, incarnation and
    generation; "incarnation") that read one partition in intersecting [started, ended]."""
    by_tp: dict[TopicPartition, list[Batch]] = defaultdict(list)
    for b in batches:
        for tp in b.offsets:
            by_tp[tp].append(b)
    reader = (lambda b: b.stint) if across == "stint" else (lambda b: b.key[:2])
    found = []
    for tp, group in sorted(by_tp.items()):
        group = sorted(group, key=lambda b: (b.started, b.key))
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                if b.started > a.ended:
                    break  # sorted by start: no later batch begins before ``a`` ends either
                if reader(a) != reader(b) and b.started <= a.ended and a.started <= b.ended:
                    found.append(Overlap(tp, a, b))
    return found


def handover_gaps(batches: Sequence[Batch]) -> list[tuple[TopicPartition, float, Batch, Batch]]:
    """Per partition, each change of reader (stint) between consecutive batches: (tp, gap, the
    earlier reader's last batch, the next reader's first); the gap is next.started - last.ended
    (negative when they overlap)."""
    by_tp: dict[TopicPartition, list[Batch]] = defaultdict(list)
    for b in batches:
        for tp in b.offsets:
            by_tp[tp].append(b)
    found = []
    for tp, group in sorted(by_tp.items()):
        group = sorted(group, key=lambda b: (b.started, b.key))
        for a, b in itertools.pairwise(group):
            if a.stint != b.stint:
                found.append((tp, b.started - a.ended, a, b))
    return found


def losses(records: Iterable[SinkRecord], ends: Mapping[TopicPartition, int]) -> dict[TopicPartition, list[tuple[int, int]]]:
    """Per partition, the ranges [a, b) of offsets below its end that no record covers, and
    (as (offset, -1)) offsets the sinks have beyond the end (which nobody produced)."""
    seen: dict[TopicPartition, set[int]] = defaultdict(set)
    for r in records:
        seen[r.tp].add(r.offset)
    out: dict[TopicPartition, list[tuple[int, int]]] = {}
    for tp in sorted(set(ends) | set(seen)):
        end = ends.get(tp, 0)
        missing: list[tuple[int, int]] = []
        start = None
        for o in range(end):
            if o not in seen[tp]:
                start = o if start is None else start
            elif start is not None:
                missing.append((start, o))
                start = None
        if start is not None:
            missing.append((start, end))
        missing += [(o, -1) for o in sorted(seen[tp]) if o >= end]
        if missing:
            out[tp] = missing
    return out


# -- queries: when each one read, from its pipeline's events ----------------------------------


def follower_margin(lease: float) -> float:
    """How long before its lease lapses a follower stops reading (``Handover``'s own rule)."""
    from spark_lag_assign.consume.protocol import Handover

    margin = Handover("-", "-", lease=lease).margin
    assert margin is not None
    return margin


@dataclass(frozen=True)
class Query:
    """One streaming query of one pipeline process, from that process's events: when it
    started, when it stopped, and until when its lease let it read (``live_end``)."""

    process: str  # the pipeline process, i.e. one incarnation of the consumer
    consumer: str
    stint: str  # the query's label in its records: the incarnation, ``+N`` after a restart
    generation: int
    tps: frozenset[TopicPartition]
    start: float
    stop: float | None  # None: its process died with it running
    live_end: float

    @property
    def key(self) -> tuple[str, str, int]:
        """As ``SinkRecord.stint``: the records this query wrote carry it."""
        return (self.consumer, self.stint, self.generation)

    @property
    def ended(self) -> str:
        """orderly (stopped within its lease) | lapse (its lease ran out first) | killed."""
        if self.stop is None:
            return "killed"
        return "lapse" if self.live_end < self.stop else "orderly"

    def describe(self) -> str:
        stop = "died" if self.stop is None else f"{self.stop:.3f}"
        return f"{self.process}/{self.stint}/gen{self.generation} live [{self.start:.3f}, {self.live_end:.3f}] stop {stop} ({self.ended})"


def _tps(assign: Mapping[str, Sequence[int]]) -> frozenset[TopicPartition]:
    return frozenset((str(t), int(p)) for t, ps in assign.items() for p in ps)


def queries_of(
    events: Sequence[Mapping[str, Any]], lease: float, *, process: str = "", died: float | None = None, margin: float | None = None
) -> list[Query]:
    """The queries of one pipeline process, from its ``EVENT`` payloads in the order it had them.

    A query is live from its ``start`` until its ``stop``, or until its lease lapsed if that
    came first, judged as the follower judges it (``Handover.wrote`` and ``deadline``): the
    lease runs ``lease - margin`` from when the last claim write was *sent* (``began``), and a
    claim sent once it had run out revives nothing until the query stopped. A query without a
    stop (its process was SIGKILLed at ``died``) is counted live until then. A start while a
    query has not stopped is a lost event, not a guess: ``ValueError`` names it."""
    m = follower_margin(lease) if margin is None else margin
    found: list[Query] = []
    deadline = float("-inf")
    current: Mapping[str, Any] | None = None
    lapsed = False
    for e in events:
        kind, wall = e["kind"], float(e["wall"])
        if kind == "claim":
            sent = float(e.get("began", wall))
            if current is not None and sent >= deadline:
                lapsed = True  # the deadline stays where it ran out
            if not lapsed:
                deadline = sent + lease - m
        elif kind == "start":
            if current is not None:  # the follower stops a query before it starts the next
                raise ValueError(
                    f"{process or 'a pipeline'}: the query started at {wall} follows the one started at "
                    f"{current['wall']} with no stop between: a stop event was lost"
                )
            current, lapsed = e, False
        elif kind == "stop" and current is not None:
            found.append(_query(current, process, wall, min(wall, deadline)))
            current, lapsed = None, False
    if current is not None:
        end = died if died is not None else deadline
        found.append(_query(current, process, None, end))
    return found


def _query(start: Mapping[str, Any], process: str, stop: float | None, live_end: float) -> Query:
    return Query(
        process, str(start["consumer"]), str(start.get("stint", "?")), int(start["generation"]),
        _tps(start.get("assign", {})), float(start["wall"]), stop, live_end,
    )  # fmt: skip


def live_overlaps(queries: Sequence[Query]) -> list[str]:
    """Pairs of queries of different processes (pipelines or incarnations) whose live
    intervals on one partition intersect: I1, over each query's whole reading time."""
    by_tp: dict[TopicPartition, list[Query]] = defaultdict(list)
    for q in queries:
        if q.live_end > q.start:
            for tp in q.tps:
                by_tp[tp].append(q)
    found = []
    for tp, group in sorted(by_tp.items()):
        group = sorted(group, key=lambda q: (q.start, q.process))
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                if b.start >= a.live_end:
                    continue
                if a.process != b.process:
                    found.append(f"{tp[0]}-{tp[1]}: {a.describe()} overlaps {b.describe()} by {a.live_end - b.start:.3f}s")
    return found


def late_batches(batches: Sequence[Batch], queries: Sequence[Query]) -> tuple[dict[tuple[str, str, int], list[Batch]], list[str]]:
    """The batches each query completed after its live interval ended, and what breaks I2.

    A batch completed after its query's lease lapsed (its pipeline was paused, or the
    broker away) is late: at most one per query, and only of a query whose lease lapsed (a
    query that stopped in time, or whose process died, completed nothing after). A batch
    without a marker counts as completed when its records were written. A batch of a query
    the events do not know is a violation too."""
    by_key = {q.key: q for q in queries}
    late: dict[tuple[str, str, int], list[Batch]] = defaultdict(list)
    problems = []
    for b in batches:
        q = by_key.get(b.stint)
        if q is None:
            problems.append(f"{b.describe()} belongs to no query the pipelines' events name")
            continue
        if (b.ended if b.ended_known else b.written) > q.live_end:
            late[q.key].append(b)
    for key, found in sorted(late.items()):
        q = by_key[key]
        if q.ended != "lapse":
            problems.append(f"{q.describe()} completed {len(found)} batch(es) after it stopped reading: {found[0].describe()}")
        elif len(found) > 1:
            problems.append(f"{q.describe()} completed {len(found)} batches after its lease lapsed (at most one): "
                            + ", ".join(b.describe() for b in found))  # fmt: skip
    return dict(late), problems


def reread_allowance(queries: Sequence[Query], records: Iterable[SinkRecord]) -> dict[tuple[str, str, int], int]:
    """How many of a query's batches later queries may read again: the bound the protocol gives.

    One: the batch a stop interrupted, or the one whose commit a lapse or a kill caught. After
    a lapse, with a sink that is not transactional, one more: the batch the pipeline completes
    when it resumes, whose records are visible although its commit is refused (a transactional
    sink's are fenced with it)."""
    sinks = {r.stint: r.sink for r in records}
    return {q.key: 2 if q.ended == "lapse" and sinks.get(q.key) == "plain" else 1 for q in queries}


# -- duplicates and their bound -----------------------------------------------------------------


@dataclass
class Duplicates:
    """What was read more than once, and whether it stays within the bound."""

    records: int  # records in the sinks beyond the first copy of each offset
    offsets: int  # offsets with more than one copy
    boundaries: int  # changes of reader (stint) of a partition: handovers and restarts
    handovers: int  # the boundaries where the consumer or its incarnation changed
    violations: list[str]
    per_boundary: dict[tuple[TopicPartition, tuple[str, str, int]], int] = field(default_factory=dict)  # (tp, later stint): records
    batches_again: dict[tuple[TopicPartition, tuple[str, str, int]], int] = field(default_factory=dict)  # (tp, earlier stint): batches
    bound: int = 0  # the most records the allowances let later readers read again
    reruns: int = 0  # records read again because a restart on the same checkpoint re-ran their batch (``rerun``)


def rerun(earlier: SinkRecord, later: SinkRecord) -> bool:
    """``later`` comes from a query restarted on ``earlier``'s checkpoint (same consumer,
    incarnation and generation, ``+N``) re-running ``earlier``'s batch under its batch id.

    After a lapse the follower restarts a query of the same generation on its checkpoint,
    and Spark resumes from what its checkpoint recorded, not from the group's commit: a
    batch that was written (and, through ``write_batch``, committed) before the stop
    interrupted Spark's own bookkeeping is run again. Such a copy is counted in the bound
    (one batch) but not judged by D, which speaks of where a new query starts."""
    return (
        later.consumer == earlier.consumer
        and later.generation == earlier.generation
        and later.incarnation.split("+")[0] == earlier.incarnation.split("+")[0]
        and later.incarnation != earlier.incarnation
        and later.batch_id == earlier.batch_id
    )


def duplicates(
    records: Iterable[SinkRecord],
    max_per_batch: int,
    *,
    commits: Sequence[OffsetCommit] = (),
    allowance: Mapping[tuple[str, str, int], int] | None = None,
) -> Duplicates:
    """Duplicates and their bound: a record is read again only after a reader's last accepted
    commit, and only from as many batches of it as the protocol lets through.

    Per partition, the stints (one query of one incarnation) that read it are ordered by when
    they began to. Every copy of an offset after the first must come from a later stint than
    the copy before it (never twice within one query), and:

    - D: the earlier stint read that offset at or past its last accepted commit: no commit of
      the earlier reader's consumer and generation that had taken effect (``commits``, the
      ``__consumer_offsets`` log; ``OffsetCommit.effective_at``: a transactional commit at its
      COMMIT marker) before the later stint began reading the partition lies beyond the
      offset; unless the later stint is a restart on the earlier's checkpoint
      that re-ran the same batch (``rerun``, counted in ``reruns``);
    - the offsets that later stints read again of one earlier stint come from at most
      ``allowance[stint]`` of its batches (default one, ``reread_allowance``), hence number at
      most that many times ``max_per_batch`` (the source's ``maxOffsetsPerTrigger``).

    Long because it is one walk over each partition's copies that keeps the counts the
    bound and D both need; split, each part would sort and walk the copies again.
    """
    records = list(records)
    allow = dict(allowance or {})
    accepted: dict[tuple[str, int, TopicPartition], list[tuple[float, int]]] = defaultdict(list)
    for c in commits:
        who = c.by
        if who is not None and c.offset is not None:
            accepted[(who[0], who[1], c.tp)].append((c.effective_at, c.offset))
    by_tp: dict[TopicPartition, list[SinkRecord]] = defaultdict(list)
    for r in records:
        by_tp[r.tp].append(r)
    violations: list[str] = []
    total = dup_offsets = boundaries = handovers = bound = reruns = 0
    per_boundary: dict[tuple[TopicPartition, tuple[str, str, int]], int] = {}
    batches_again: dict[tuple[TopicPartition, tuple[str, str, int]], int] = {}
    for tp, rs in sorted(by_tp.items()):
        name = f"{tp[0]}-{tp[1]}"
        first_start: dict[tuple[str, str, int], float] = {}
        for r in rs:
            first_start[r.stint] = min(first_start.get(r.stint, r.started), r.started)
        order = sorted(first_start, key=lambda s: (first_start[s], s))
        rank = {s: i for i, s in enumerate(order)}
        boundaries += len(order) - 1
        handovers += sum(1 for a, b in itertools.pairwise(order) if a[:2] != b[:2])
        bound += sum(allow.get(s, 1) for s in order[:-1]) * max_per_batch
        copies: dict[int, list[SinkRecord]] = defaultdict(list)
        for r in rs:
            copies[r.offset].append(r)
        again: dict[tuple[str, str, int], int] = defaultdict(int)  # later stint -> records it read again
        reread: dict[tuple[str, str, int], int] = defaultdict(int)  # earlier stint -> its records read again
        sources: dict[tuple[str, str, int], set[int]] = defaultdict(set)  # earlier stint -> its batches read again
        for offset, cs in sorted(copies.items()):
            if len(cs) == 1:
                continue
            dup_offsets += 1
            total += len(cs) - 1
            cs = sorted(cs, key=lambda r: (rank[r.stint], r.started))
            stints = [r.stint for r in cs]
            if len(set(stints)) != len(stints):
                violations.append(f"{name}@{offset} read twice by one query {cs[0].stint}")
            for earlier, later in itertools.pairwise(cs):
                again[later.stint] += 1
                reread[earlier.stint] += 1
                sources[earlier.stint].add(earlier.batch_id)
                if rerun(earlier, later):
                    reruns += 1
                    continue  # Spark re-ran the batch its checkpoint had not recorded: not D's to judge
                began = first_start[later.stint]
                behind = [o for at, o in accepted.get((earlier.consumer, earlier.generation, tp), []) if at < began and o > offset]
                if behind:
                    violations.append(
                        f"D: {name}@{offset} read again by {later.stint}, although {earlier.consumer}'s commit of "
                        f"{max(behind)} under generation {earlier.generation} was accepted before it began"
                    )
        for stint, n in again.items():
            per_boundary[(tp, stint)] = n
        for stint, ids in sorted(sources.items(), key=lambda kv: rank[kv[0]]):
            batches_again[(tp, stint)] = len(ids)
            most = allow.get(stint, 1)
            if len(ids) > most:
                violations.append(
                    f"{name}: {len(ids)} batches of {stint} {sorted(ids)} were read again (at most {most})"
                )
            if reread[stint] > most * max_per_batch:
                violations.append(
                    f"{name}: {reread[stint]} offsets of {stint} read again, more than {most} batch(es) ({most * max_per_batch})"
                )
    return Duplicates(total, dup_offsets, boundaries, handovers, violations, per_boundary, batches_again, bound, reruns)


# -- the broker's record of every commit (``spark_lag_assign.testing.offsets_log``) --------------


def commits_backwards(commits: Sequence[OffsetCommit]) -> list[str]:
    """I3 on every commit: each one that set a partition's committed offset below the one
    before it, in the order the broker's log has them (one group's, a deletion skipped)."""
    high: dict[TopicPartition, OffsetCommit] = {}
    found = []
    for c in sorted(commits, key=lambda c: c.position):
        if c.offset is None:
            continue
        before = high.get(c.tp)
        if before is not None and before.offset is not None and c.offset < before.offset:
            found.append(f"{c.topic}-{c.partition} went back: {before.describe()} then {c.describe()}")
        if before is None or before.offset is None or c.offset >= before.offset:
            high[c.tp] = c
    return found


def unknown_commits(commits: Sequence[OffsetCommit], consumers: Iterable[str], generations: Iterable[int]) -> list[str]:
    """Commits whose metadata does not name one of ``consumers`` and a published generation
    (``spark-lag-assign consumer=C generation=N``)."""
    known, published = set(consumers), set(generations)
    found = []
    for c in commits:
        who = c.by
        if who is None or who[0] not in known or who[1] not in published:
            found.append(f"a commit nobody known made: {c.describe()}")
    return found


def _maker(c: OffsetCommit, queries: Sequence[Query]) -> Query | None:
    """The query a commit came from: its consumer's, of its generation, reading its
    partition, the newest that started before the broker accepted it."""
    who = c.by
    if who is None:
        return None
    made = [q for q in queries if q.key[0] == who[0] and q.generation == who[1] and c.tp in q.tps and q.start <= c.committed_at]
    return max(made, key=lambda q: q.start, default=None)


def stale_commits(commits: Sequence[OffsetCommit], queries: Sequence[Query]) -> list[str]:
    """I6 on every commit: each one comes from the query that began reading its partition
    last (of all pipelines' queries on it, the newest that started before the broker
    accepted the commit), never from one that a later query replaced. Judged at append time
    (``committed_at``), when the broker took or refused the request: a commit that took effect
    later (a late marker) was still made by the query it names, and the coordinator lets it
    take effect only if no commit later in the log is there (offsets never go back: checked
    in log order by ``commits_backwards`` and by the samples)."""
    found = []
    for c in commits:
        if c.offset is None:
            continue
        maker = _maker(c, queries)
        if maker is None:
            found.append(f"{c.describe()} comes from no query reading {c.topic}-{c.partition}")
            continue
        on_tp = [q for q in queries if c.tp in q.tps and q.start <= c.committed_at]
        newest = max(on_tp, key=lambda q: q.start)
        if newest.process != maker.process or newest.key != maker.key:
            found.append(f"{c.describe()} by {maker.describe()} was accepted after {newest.describe()} began")
    return found


def commits_after_fences(
    commits: Sequence[OffsetCommit], fences: Sequence[tuple[float, str, str]], queries: Sequence[Query]
) -> list[str]:
    """Once a successor fenced a consumer (``fences``: (when, the fenced consumer, by whom)),
    no commit of that consumer's earlier queries is accepted: every commit of it the broker
    accepted after the fence comes from a query that started after the fence."""
    found = []
    for at, fenced, by in fences:
        for c in commits:
            who = c.by
            if who is None or who[0] != fenced or c.committed_at < at:
                continue
            maker = _maker(c, queries)
            if maker is None or maker.start < at:
                what = maker.describe() if maker is not None else "no known query"
                found.append(f"{c.describe()} by {what} was accepted after {by} fenced {fenced} at {at:.3f}")
    return found


def backwards(samples: Sequence[tuple[float, Mapping[TopicPartition, int]]]) -> list[str]:
    """Every time a partition's committed offset was seen lower than in an earlier sample
    (samples in the order they were taken; a partition missing from a sample is skipped)."""
    high: dict[TopicPartition, tuple[float, int]] = {}
    found = []
    for at, offsets in samples:
        for tp, o in sorted(offsets.items()):
            if tp in high and o < high[tp][1]:
                found.append(f"{tp[0]}-{tp[1]}: {high[tp][1]} at {high[tp][0]:.3f} then {o} at {at:.3f}")
            if tp not in high or o >= high[tp][1]:
                high[tp] = (at, o)
    return found
