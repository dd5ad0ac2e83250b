"""One pipeline's commits, as its follower holds them: the fenced producer, the committer of
each micro-batch, a final commit that waits for a reopened producer, and what the listener's
thread or a sink's saw (a refused commit, a commit the cluster's ACLs denied).

The decisions are elsewhere: ``committer.ProgressCommitter`` decides what to commit and when
a failure is pending, ``kafka_commit.FencedGroupCommit`` when a commit is refused or held,
and the handover (``protocol.Handover``) when the producer may be opened again. This class
keeps their state together, because several threads share it: the follower's loop (final
commits), Spark's listener thread, which commits each completed batch, and a sink's thread
(``write_batch``); the last two may learn first that the pipeline was replaced
(``refused``) or is not allowed to commit (``denied``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from spark_lag_assign.consume.committer import CommitFunction, ProgressCommitter
from spark_lag_assign.consume.kafka_commit import FencedGroupCommit
from spark_lag_assign.consume.options import Offsets, TopicPartition
from spark_lag_assign.errors import (
    CommitFencedError,
    CommitHeldError,
    InputError,
    KafkaCommitError,
    NotAuthorizedError,
    one_line,
)

log = logging.getLogger(__name__)


def kafka_wait_ms(lease: float, given: int | None = None) -> int:
    """How long one Kafka call of a follower's loop may wait, in ms: ``given``, or a quarter of
    the lease capped at 15 s; more than a quarter of the lease is a ``ValueError``.

    The loop renews the claim between its steps, every third of the lease. A step that waits
    on a broker that is away (opening the committer after a failed commit, fencing, reading
    start offsets) must return before the lease lapses, or a pipeline whose store stays
    reachable (a directory, HDFS) stops reading through every broker outage and reads again
    all it read since its last commit: a third of the lease between renewals, a quarter for
    the step (a reopen splits it between the producer's bootstrap and ``init_transactions``),
    a twelfth for the pause after a failed reopen, and the margin (below a quarter) leave a
    claim write room to land in time. The same bound holds each step of a commit.
    """
    if not lease > 0:
        raise ValueError(f"lease must be positive, not {lease!r}")
    bound = int(lease * 1000 / 4)
    if given is None:
        return min(15000, bound)
    if not 0 < given <= bound:
        raise ValueError(
            f"kafka_timeout_ms {given} must be above 0 and at most a quarter of the lease ({bound} ms for "
            f"{lease:g}s): a longer Kafka wait lets the lease lapse while the broker is away"
        )
    return given


def check_batch_offsets(offsets: Mapping[TopicPartition, int]) -> None:
    """``InputError`` for an offset that is no next offset to read (an int, 0 or more)."""
    for (t, p), offset in offsets.items():
        if isinstance(offset, bool) or not hasattr(offset, "__index__") or offset.__index__() < 0:
            raise InputError(
                f"write_batch: the offset of {t}-{p} must be the next offset to read (an integer, 0 or more), not {offset!r}"
            )


class PipelineCommits:
    """The commit side of one pipeline (see the module docstring).

    ``given``: a commit function to use instead of a ``FencedGroupCommit`` (tests, other
    sinks); ``generation()``: the generation a commit names now; ``on_refused()``: called
    once per refused commit, from whichever thread saw it.
    """

    def __init__(
        self,
        consumer: str,
        given: CommitFunction | None,
        generation: Callable[[], int],
        on_refused: Callable[[], None],
    ) -> None:
        self.consumer = consumer
        self.given = given
        self.producer: FencedGroupCommit | None = None
        self.committer = ProgressCommitter(self._call, generation, self._refused_by)
        self.on_refused = on_refused
        self.pending_query: str | None = None  # a stopped query whose final commit waits for a producer
        self.committed: Offsets = {}  # what this pipeline's final commits left in the group
        self.refusals = 0
        self.refused = threading.Event()  # set by a refusal; the loop clears it when it acts on it
        self.denied: NotAuthorizedError | None = None  # a refused commit for want of an ACL: ends the run

    def use_producer(
        self, bootstrap_servers: str, group: str, transactional_id: str, *, client_options: Mapping[str, Any], timeout_ms: int
    ) -> None:
        """Commit through a fenced producer of ``transactional_id`` (unless a function was given)."""
        if self.given is None:
            self.producer = FencedGroupCommit(
                bootstrap_servers,
                group,
                transactional_id,
                self.consumer,
                client_options=client_options,
                timeout_ms=timeout_ms,
            )

    @property
    def lost(self) -> bool:
        """A failure closed the producer: only the handover may open another."""
        return self.producer is not None and self.producer.lost

    def open(self) -> None:
        """A new producer (a new epoch); commits stay held until ``allow``."""
        if self.producer is not None:
            self.producer.open()

    def allow(self, *, new_query: bool) -> None:
        if self.producer is not None:
            self.producer.allow(new_query=new_query)

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close()

    def write_batch(self, offsets: Mapping[TopicPartition, int], generation: int, topic: str | None, records: Any) -> None:
        """A sink's records and ``offsets`` in one transaction (``PlanFollower.write_batch``)."""
        if self.producer is None:
            raise KafkaCommitError("write_batch needs the follower's own Kafka committer (commit=None)")
        try:
            self.producer.write(offsets, generation, topic, records)
        except CommitFencedError:
            self._refused_by("write_batch")
            raise
        except NotAuthorizedError as exc:
            self.denied = exc
            raise
        # the listener's progress reports lag behind the batches: never let one commit less
        self.committer.committed_elsewhere(offsets)

    def final(self, query_id: str, ends: Sequence[str | None], timeout: float) -> tuple[str, Offsets]:
        """The final commit of a stopped query: ok | refused | held (waits for a producer) | failed."""
        try:
            committed = self.committer.finish(query_id, ends, timeout=timeout)
        except CommitFencedError:
            return "refused", {}
        except CommitHeldError:
            self.pending_query = query_id
            return "held", {}
        except NotAuthorizedError:  # waiting does not grant an ACL: end the run with the line
            raise
        except KafkaCommitError as exc:
            log.error("%s keeps its claim: %s", self.consumer, one_line(exc))
            return "failed", {}
        self.pending_query = None
        self.committed.update(committed)
        return "ok", committed

    def retry_pending(self, timeout: float) -> tuple[str, Offsets]:
        """The final commit that waited, through the producer the handover reopened."""
        if self.pending_query is None:
            return "skipped", {}
        return self.final(self.pending_query, [], timeout)

    def drop_pending(self) -> None:
        """Give up a final commit that waited (its lease ran out), if one did."""
        if self.pending_query is not None:
            self.committer.untrack(self.pending_query)
            self.pending_query = None

    def committed_json(self) -> dict[str, dict[str, int]]:
        """``committed`` as a claim carries it: topic -> partition -> offset."""
        out: dict[str, dict[str, int]] = {}
        for (t, p), o in sorted(self.committed.items()):
            out.setdefault(t, {})[str(p)] = o
        return out

    # -- the committer's callbacks (the listener's thread, the loop's during a final commit, a sink's)

    def _call(self, offsets: Mapping[TopicPartition, int], generation: int) -> None:
        try:
            if self.given is not None:
                self.given(offsets, generation)
                return
            assert self.producer is not None
            self.producer(offsets, generation)
        except NotAuthorizedError as exc:
            self.denied = exc  # the loop ends the run with it
            raise

    def _refused_by(self, query_id: str) -> None:
        self.on_refused()
        self.refusals += 1
        self.refused.set()


__all__ = ["PipelineCommits", "check_batch_offsets", "kafka_wait_ms"]
