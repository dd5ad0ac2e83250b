"""Committing a pipeline's progress to its consumer group, one completed micro-batch at a time.

Spark's Kafka source keeps its position in the query's checkpoint and commits nothing to
Kafka, so without this the planner would see no lag for a Spark pipeline. A
``StreamingQueryListener`` (``commit_listener``) hands every progress report to a
``ProgressCommitter``, which commits the batch's end offsets through a ``CommitFunction``:
in production a transactional commit that a newer owner of the partitions can fence
(``spark_lag_assign.consume.kafka_commit``), carrying the plan generation in its metadata.

A failed commit is logged and stays pending: the next batch (or idle event, or the final
commit of a handover) commits the furthest offsets seen, so the group catches up and never
moves backwards. A *refused* commit (``CommitFencedError``: someone took the partitions
over) is never retried: the committer tells the follower, which stops reading at once. A
*held* commit (``CommitHeldError``: a failure closed the producer, and only the handover
may open another) stays pending like a failed one; a final commit that is held returns at
once, so that the follower can go through the handover and retry it.
Nothing here raises into Spark.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_lag_assign.consume.options import Offsets, TopicPartition, parse_source_offsets
from spark_lag_assign.errors import (
    CommitFencedError,
    CommitHeldError,
    InputError,
    KafkaCommitError,
    NotAuthorizedError,
    one_line,
)

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQueryListener

log = logging.getLogger(__name__)

CommitFunction = Callable[[Mapping[TopicPartition, int], int], None]
"""``commit(offsets, generation)``: commits ``{(topic, partition): next offset}`` for the
plan generation the pipeline acts on; raises ``CommitFencedError`` when refused, any
other ``KafkaCommitError`` when it failed (and may be retried)."""


class _Pending(Exception):
    """A final commit that failed this time (``_flush`` logged why); retried until the timeout."""


@dataclass
class _Tracked:
    partitions: frozenset[TopicPartition]
    latest: Offsets = field(default_factory=dict)  # the furthest completed batch end seen
    committed: Offsets = field(default_factory=dict)  # what the group holds from this query
    refused: bool = False


class ProgressCommitter:
    """Commits each tracked query's completed micro-batch end offsets (see the module docstring).

    ``generation()`` gives the plan generation to commit under (the follower's current
    claim); ``on_refused()`` is called once per query whose commit was refused.
    """

    def __init__(
        self,
        commit: CommitFunction,
        generation: Callable[[], int],
        on_refused: Callable[[str], None] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._clock = clock  # the final commit's timeout; tests pass a fake clock and sleep
        self._sleep = sleep
        self._commit = commit
        self._generation = generation
        self._on_refused = on_refused
        self._queries: dict[str, _Tracked] = {}
        self._lock = threading.RLock()
        self.failures = 0
        self.commits = 0

    def track(self, query_id: str, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            self._queries[str(query_id)] = _Tracked(frozenset(partitions))

    def untrack(self, query_id: str) -> None:
        with self._lock:
            self._queries.pop(str(query_id), None)

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

    def _flush(self, query_id: str, entry: _Tracked, *, final: bool = False) -> bool:
        """Commit what is new; True when nothing is left pending. Raises CommitFencedError, and
        for a ``final`` commit CommitHeldError."""
        if entry.refused:
            raise CommitFencedError(f"commits of query {query_id} were refused: its partitions have a newer owner")
        todo = {tp: o for tp, o in entry.latest.items() if entry.committed.get(tp) != o}
        if not todo:
            return True
        try:
            self._commit(todo, self._generation())
        except CommitFencedError as exc:
            entry.refused = True
            log.warning("commit of query %s refused, the pipeline stops reading: %s", query_id, one_line(exc))
            if self._on_refused is not None:
                self._on_refused(query_id)
            raise
        except CommitHeldError as exc:
            self.failures += 1
            log.warning("commit of %d offset(s) waits (query %s): %s", len(todo), query_id, one_line(exc))
            if final:
                raise
            return False
        except NotAuthorizedError as exc:  # no retry grants an ACL: the caller decides, at once
            self.failures += 1
            log.error("commit of query %s refused: %s", query_id, one_line(exc))
            raise
        except Exception as exc:  # noqa: BLE001 - a commit must never fail the query: log it and retry later
            self.failures += 1
            log.warning(
                "commit of %d offset(s) failed (query %s), retrying with the next batch: %s",
                len(todo), query_id, one_line(exc),
            )  # fmt: skip
            return False
        entry.committed.update(todo)
        self.commits += 1
        log.debug("committed %s", todo)
        return True

    def committed_elsewhere(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Offsets committed by another path (a sink's transaction): progress reports that
        arrive later with older offsets must not commit them again, or the group goes back."""
        with self._lock:
            for entry in self._queries.values():
                for tp, offset in offsets.items():
                    if tp in entry.partitions:
                        entry.latest[tp] = max(offset, entry.latest.get(tp, -1))
                        entry.committed[tp] = max(offset, entry.committed.get(tp, -1))

    def record(self, query_id: str, end_offsets: Iterable[str | None]) -> bool:
        """A completed batch's sources' ``endOffset`` JSONs: merge them and commit what is new."""
        with self._lock:
            entry = self._queries.get(str(query_id))
            if entry is None or entry.refused:
                return False
            self._merge(entry, end_offsets)
            try:
                return self._flush(str(query_id), entry)
            except (CommitFencedError, NotAuthorizedError):  # reported by _flush and the commit function
                return False

    def retry(self, query_id: str) -> bool:
        """Commit whatever is pending for a query (its idle events call this)."""
        return self.record(query_id, ())

    def finish(self, query_id: str, end_offsets: Iterable[str | None], *, timeout: float, pause: float = 0.5) -> Offsets:
        """The final commit of a stopped query: retried until ``timeout``; then it stops being tracked.

        Returns the offsets the group holds from it. Raises ``CommitFencedError`` at once if
        the commit is refused, ``CommitHeldError`` at once if it waits for the handover to open
        a producer, and ``KafkaCommitError`` if the last offsets could not be committed in time
        (in both cases the query stays tracked, still pending).
        """
        from spark_lag_assign.extract.retry import within

        with self._lock:
            entry = self._queries.get(str(query_id))
            if entry is None:
                return {}
            self._merge(entry, end_offsets)

        def attempt() -> Offsets:
            with self._lock:
                if not self._flush(str(query_id), entry, final=True):
                    raise _Pending()
                self._queries.pop(str(query_id), None)
                return dict(entry.committed)

        policy = within(
            timeout, lambda exc: isinstance(exc, _Pending), what=f"the final commit of query {query_id}",
            first=pause, most=pause, clock=self._clock, sleep=self._sleep,
        )  # fmt: skip
        try:
            return policy(attempt)
        except _Pending:
            raise KafkaCommitError(f"the final commit of query {query_id} did not succeed within {timeout:g}s") from None


def commit_listener(
    committer: ProgressCommitter, on_progress: Callable[[Any], None] | None = None
) -> StreamingQueryListener:  # pragma: no mutate block
    """A ``StreamingQueryListener`` that feeds every progress report to ``committer``, then
    to ``on_progress`` (the follower's metrics; whatever it raises is logged, never Spark's)."""
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
            if on_progress is not None:
                try:
                    on_progress(event.progress)
                except Exception:  # metrics never stop a pipeline
                    log.warning("metrics: a progress report was not counted", exc_info=True)

        def onQueryIdle(self, event: Any) -> None:
            try:
                committer.retry(str(event.id))
            except Exception:
                log.exception("could not retry a pending commit")

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return _CommitListener()


__all__ = ["CommitFunction", "ProgressCommitter", "commit_listener"]
