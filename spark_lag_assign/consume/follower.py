"""``PlanFollower``: one pipeline's streaming query kept in step with the plan, by the handover protocol.

The decisions are ``spark_lag_assign.consume.protocol.Handover``'s; this class only performs
them against the real world (the store, Kafka, Spark) and reports what happened. Its loop::

    action = handover.next(now)      # Write | ReadClaims | ReadPlan | Fence | OpenCommits | AllowCommits
                                     # | FinishCommit | Start | Stop | Wait | Exit
    perform(action)                  # one store call, one Kafka call or one Spark call
    handover.<outcome>(...)          # wrote / saw_claims / saw_plan / fenced_commits / commits_opened /
                                     # started / stopped

``now`` is always this process's monotonic clock, so a pause of the whole process (a GC
pause, SIGSTOP, a slow node) shows up as time that passed: on resuming, the first thing
the loop does is notice that its lease has lapsed and stop the query without committing.
A call the loop waits in (a claim write waits out a broker outage) delays that first
step, so a lease guard thread stops the query at the lapse itself (``RunningQuery.guard``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from spark_lag_assign.consume.commits import PipelineCommits, check_batch_offsets, kafka_wait_ms
from spark_lag_assign.consume.committer import CommitFunction, commit_listener
from spark_lag_assign.consume.events import FollowerEvent, RunSummary, assign_of
from spark_lag_assign.consume.fencer import fence_done
from spark_lag_assign.consume.kafka_commit import commit_id, fence
from spark_lag_assign.consume.options import Offsets, TopicPartition, offsets_json, source_options, tp_names
from spark_lag_assign.consume.protocol import (
    AllowCommits,
    Exit,
    Fence,
    FinishCommit,
    Handover,
    Holds,
    OpenCommits,
    ReadClaims,
    ReadPlan,
    Start,
    Stop,
    Wait,
    Write,
    names,
)
from spark_lag_assign.consume.reading import (
    RunningQuery,
    StartQuery,
    as_store,
    consumer_entry,
    holds_of,
    load_plan,
    stream_for,
)
from spark_lag_assign.consume.report import FollowerReport
from spark_lag_assign.consume.starting import StartOffsets
from spark_lag_assign.core.ids import check_consumer_id
from spark_lag_assign.errors import (
    CommitFencedError,
    HandoverTimeoutError,
    KafkaCommitError,
    NotAuthorizedError,
    PlanError,
    one_line,
)
from spark_lag_assign.metrics import FollowerMetrics, serve
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.plan.document import PlanFormatError
from spark_lag_assign.store import FENCER, ClaimFencedError, Store, StoreError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)


class PlanFollower:
    """Keeps one consumer's streaming query in step with the plan (see ``spark_lag_assign.consume``).

        follower = PlanFollower(spark, "kafka://broker:9092/orders", "pipeline-a", start,
                                checkpoint_root="hdfs://nn:8020/chk/orders",
                                kafka_options={"kafka.bootstrap.servers": "broker:9092"})
        follower.run()          # blocks; follower.stop() from another thread ends it

    ``store``: a store URI or an open ``Store`` (a plan directory's path is a store URI).
    ``start(stream, checkpoint)`` builds and starts the query from ``stream.df`` with that
    checkpoint location (a URI: ``hdfs://``, ``s3a://``, a local path). ``lease``: seconds
    within which this pipeline stops reading after its last claim write if it cannot write
    another; others wait that long before they take its partitions over.
    ``kafka_timeout_ms``: how long one Kafka call of the loop (fencing, opening the committer,
    reading start offsets) and each step of a commit may wait; by default a quarter of the
    lease, at most 15 s, and never more than that quarter (``kafka_wait_ms``).
    """

    def __init__(
        self,
        spark: SparkSession,
        store: Store | str,
        consumer: str,
        start: StartQuery,
        *,
        checkpoint_root: str,
        kafka_options: Mapping[str, Any],
        client_options: Mapping[str, Any] | None = None,
        group: str | None = None,
        lease: float = 30.0,
        poll_interval: float = 5.0,
        handover_timeout: float = 300.0,
        commit_timeout: float = 60.0,
        stop_timeout: float = 60.0,
        kafka_timeout_ms: int | None = None,
        commit: CommitFunction | None = None,
        clock: Callable[[], float] = time.monotonic,
        metrics_port: int | None = None,
        metrics_addr: str = "0.0.0.0",
    ) -> None:
        """The arguments as the class's docstring gives them. Long because every field of the
        follower's own state and its collaborators (the query, the commit side, the start
        offsets, the report) are set up here, each with its comment, not scattered over the steps."""
        check_consumer_id(consumer)  # it names a claims topic, a transactional id and a directory
        self.spark = spark
        self.consumer = consumer
        self.running = RunningQuery(consumer, start, str(checkpoint_root), stop_timeout)
        self.options = source_options(kafka_options)
        self.bootstrap_servers = self.options["kafka.bootstrap.servers"]
        self.client_options = dict(client_options or {})
        self.group = group
        self.lease = lease
        self.poll_interval = poll_interval
        self.handover_timeout = handover_timeout
        self.commit_timeout = commit_timeout
        self.kafka_timeout_ms = kafka_wait_ms(lease, kafka_timeout_ms)
        self.clock = clock
        # opened once every setting above passed its check: a bad one leaves no client open
        self.store, self._own_store = as_store(store, client_options, commits=True)
        self.metrics = FollowerMetrics(consumer, clock)
        self.report = FollowerReport(self.metrics, clock)
        self.commits = PipelineCommits(consumer, commit, self._reading_generation, self.metrics.refused)
        self.committer = self.commits.committer  # every micro-batch's commit (the listener's thread)
        self.starting = StartOffsets(
            self.store,
            consumer,
            self.bootstrap_servers,
            self.client_options,
            timeout_ms=self.kafka_timeout_ms,
            commit_timeout=commit_timeout,
            on_foreign=lambda t, p, why: self.report.foreign_commit(self._core, f"{t}-{p}: {why}"),
            pause=self._pause,
        )
        self._stopping = threading.Event()
        self._core: Handover | None = None
        self._failure: BaseException | None = None  # the query's own error, raised when the run ends
        self._plan_trouble: str | None = None  # the last unreadable-plan problem logged (logged once)
        self._serve_on = (metrics_addr, metrics_port)
        #: the port the metrics are served on while ``run`` runs (None: not served)
        self.metrics_port: int | None = None

    # -- public

    @property
    def generation(self) -> int:
        """The plan generation this follower reads under now (0 when it reads nothing)."""
        core = self._core
        return core.reading.generation if core is not None and core.reading is not None else 0

    @property
    def query(self) -> StreamingQuery | None:
        return self.running.query

    @property
    def events(self) -> list[FollowerEvent]:
        """What this follower did, in order (``FollowerEvent``)."""
        return self.report.events

    @property
    def foreign_commits(self) -> int:
        """Commits found in the group that no pipeline of the plan made (``consume.starting``)."""
        return self.starting.foreign_commits

    def stop(self) -> None:
        """Ask ``run`` to end: it stops the query between batches, commits and releases."""
        self._stopping.set()

    def lease_valid(self) -> bool:
        """True while this pipeline may write what it reads: it reads, and its lease has not
        lapsed by its own clock. A sink checks it before it writes a batch."""
        core = self._core
        return core is not None and core.lease_valid(self.clock())

    def write_batch(self, offsets: Mapping[TopicPartition, int], topic: str | None = None, records: Any = ()) -> None:
        """For a sink that writes to Kafka: ``records`` to ``topic`` and ``offsets`` committed in
        one transaction under this consumer's fenced id; ``CommitFencedError`` (nothing of it
        visible to ``read_committed`` readers) when a newer owner took over; ``InputError`` for an
        offset that is no next offset to read (an int, 0 or more), before anything is sent."""
        check_batch_offsets(offsets)
        core = self._core
        if core is None or core.reading is None or not core.lease_valid(self.clock()):
            # a batch that completes after the lease lapsed (a paused process resuming) goes
            # nowhere, whether or not a successor has fenced this consumer yet
            raise CommitFencedError(f"{self.consumer} reads nothing under a valid lease now: the batch is not written")
        self.commits.write_batch(offsets, core.reading.generation, topic, records)

    def run(self, *, until_drained: bool = False) -> RunSummary:
        """Follow the plan until ``stop()``, the consumer leaves the plan, or the query ends by itself.

        With ``until_drained`` a consumer that the plan leaves idle returns at once instead of
        waiting for partitions (for ``availableNow`` pipelines). Raises ``HandoverTimeoutError``
        naming who holds what when earlier owners never let go within ``handover_timeout``,
        ``ClaimFencedError`` when a newer incarnation of this consumer took over, a
        ``NotAuthorizedError`` naming the ACL at the first refusal (never waited out), and
        Spark's error when the query failed.
        """
        addr, port = self._serve_on
        server = None
        if port is not None:  # first: a port in use is one line before anything is claimed
            server, self.metrics_port = serve(self.metrics.registry, port, addr)
            log.info("%s: serving its metrics on %s:%d", self.consumer, addr, self.metrics_port)
        try:
            return self._run(until_drained)
        finally:
            if server is not None:
                server.shutdown()
                server.server_close()
                self.metrics_port = None

    def _run(self, until_drained: bool) -> RunSummary:
        try:
            core, writer = self._begin(until_drained)
        except BaseException:
            if self._own_store:
                self.store.close()
            raise
        listener = commit_listener(self.committer, lambda progress: self.report.progress(progress, self.committer))
        self.spark.streams.addListener(listener)
        done = threading.Event()
        guard = threading.Thread(
            target=self.running.guard, args=(core, self.clock, done), name=f"lease-guard-{self.consumer}", daemon=True
        )
        guard.start()
        try:
            outcome = self._loop(core, writer)
        finally:
            done.set()
            self.spark.streams.removeListener(listener)
            if self.running.query is not None:  # an error left it running: never read without a lease
                self.running.stop_now()
            writer.close()
            self.commits.close()
            if self._own_store:
                self.store.close()
        return self._summary(core, outcome)

    def _begin(self, until_drained: bool) -> tuple[Handover, Any]:
        """The plan, the group, our claim writer (it fences our zombie's claims), the state
        machine and the committer: everything the loop needs before its first step."""
        plan = load_plan(self.store)
        consumer_entry(plan, self.consumer, self.store.uri)
        group = self.group or plan.get("group")
        if not group:
            raise PlanError(
                f"the plan in {self.store.uri} names no consumer group (planned from a snapshot?): "
                "give the follower a group to commit to"
            )
        self.group = group
        writer = self.store.claim_writer(self.consumer)  # fences our zombie's claims
        try:
            return self._prepare(writer, plan, group, until_drained), writer
        except BaseException:
            writer.close()
            raise

    def _prepare(self, writer: Any, plan: plan_io.Plan, group: str, until_drained: bool) -> Handover:
        """The state machine, standing on what our claim writer found, and the committer."""
        core = Handover(
            self.consumer,
            writer.incarnation,
            lease=self.lease,
            handover_timeout=self.handover_timeout,
            until_drained=until_drained,
        )
        self._core = core
        core.took_over(writer.predecessor, self.clock())
        if (old := writer.predecessor) is not None:
            self._event("took-over", f"from incarnation {old.incarnation}, holding {names(old.holds)}")
        self.commits.use_producer(
            self.bootstrap_servers,
            group,
            commit_id(self.store.name, self.consumer),
            client_options=self.client_options,
            timeout_ms=self.kafka_timeout_ms,
        )
        self._saw_plan(plan)
        return core

    def _summary(self, core: Handover, outcome: Exit) -> RunSummary:
        """The run's end: its summary, or the error it ends with."""
        if outcome.reason == "handover-timeout":
            detail = "; ".join(b.describe() for b in outcome.blockers) or "nobody released"
            error = HandoverTimeoutError(
                f"{self.consumer} waited {self.handover_timeout:g}s for earlier owners of its partitions: {detail}"
            )
            log.error("%s", error)
            raise error
        if outcome.reason == "fenced":
            raise ClaimFencedError(f"a newer incarnation of {self.consumer} took its id over: this one stopped")
        if outcome.reason == "commit-failed":
            raise KafkaCommitError(
                f"{self.consumer}'s final commit did not succeed within {self.commit_timeout:g}s; "
                "its claim stays until its lease runs out"
            )
        if outcome.reason == "failed" and self._failure is not None:
            raise self._failure
        return self.report.summary(
            self.consumer,
            outcome.reason,
            core.incarnation,
            self.commits.committed,
            self.committer.failures,
            self.commits.refusals,
        )

    # -- the loop

    def _loop(self, core: Handover, writer: Any) -> Exit:
        while True:
            self._observe(core)
            action = core.next(self.clock())
            self.report.state(core, action)
            if isinstance(action, Exit):
                self._event(action.reason)
                return action
            if isinstance(action, Write):
                self._write(core, writer, action)
            elif isinstance(action, ReadClaims):
                self._read_claims(core)
            elif isinstance(action, ReadPlan):
                self._read_plan(core, action)
            elif isinstance(action, Fence):
                self._fence(core, action)
            elif isinstance(action, OpenCommits):
                self._open_commits(core, action)
            elif isinstance(action, AllowCommits):
                self._allow_commits(core)
            elif isinstance(action, FinishCommit):
                self._finish_commit(core, action)
            elif isinstance(action, Start):
                self._start(core, action)
            elif isinstance(action, Stop):
                self._stop(core, action)
            elif isinstance(action, Wait):
                self._wait(core, action)

    def _observe(self, core: Handover) -> None:
        """Carry what other threads saw into the state machine (it is only touched here)."""
        if self.commits.denied is not None:  # a commit refused for want of an ACL: retrying would not help
            raise self.commits.denied
        if self._stopping.is_set():
            core.request_stop()
        if self.commits.refused.is_set():
            self.commits.refused.clear()
            if core.reading is not None:
                core.refused_commit()
        if core.commits is not None and self.commits.lost:
            core.commits_lost()  # a failure closed the producer: the handover reopens it, never the committer
        query = self.running.query
        if query is not None and core.reading is not None and self.running.lapse_stopped():
            core.lease_lapsed = True  # the guard stopped it: a lapse (a renewal that returned since revives nothing)
            return
        if query is not None and core.reading is not None and not core.commit_refused and not query.isActive:
            error = query.exception()  # a refused write_batch ends the query too: that is no failure
            if not core.query_ended(error is not None, self.clock()):
                # our lease lapsed before we saw it end: a pause of this whole process (its
                # Kafka calls time out on resuming). The lapse stops it; we claim again.
                log.warning(
                    "%s: the query ended while its lease had lapsed: %s", self.consumer, one_line(error) if error else "no error"
                )
                return
            if error is not None:
                log.error("%s: the query of generation %d failed: %s", self.consumer, core.reading.generation, error)
                self._failure = self.running.refused_read(error, core.reading.generation, core.reading.holds) or error

    def _event(
        self, kind: str, detail: str = "", generation: int | None = None, holds: Holds | None = None, began: float | None = None
    ) -> None:
        self.report.event(self._core, kind, detail, generation, holds, began)

    def _saw_plan(self, plan: plan_io.Plan) -> None:
        assert self._core is not None
        generation = int(plan["generation"])
        self._plan_trouble = None
        if generation > self._core.plan_generation:
            self.starting.remember(plan)
            new = holds_of(plan, self.consumer)
            reads = self._core.reading.holds if self._core.reading is not None else frozenset()
            first = self._core.plan_generation == 0
            self._core.saw_plan(generation, new)
            # "service": only the fencer fences, and only its notes stop a pipeline
            self._core.fence_authority = FENCER if plan.get("fencing") == "service" else None
            self.report.saw_plan(self._core, generation, new or frozenset(), reads, first=first)

    def _write(self, core: Handover, writer: Any, action: Write) -> None:
        sent, began = self.clock(), time.monotonic()
        try:
            record = writer.write(
                action.generation, action.holds, self.lease, action.state, self.commits.committed_json(), dict(action.fences)
            )
        except ClaimFencedError:
            log.warning("%s: a newer incarnation took the consumer id over: stopping", self.consumer)
            core.write_failed(fenced=True, now=self.clock())
            return
        except NotAuthorizedError:  # waiting does not grant an ACL: end the run with the line
            raise
        except StoreError as exc:
            log.warning("%s: writing its claim failed, retrying: %s", self.consumer, exc)
            core.write_failed(fenced=False, now=self.clock())
            return
        core.wrote(record, sent, self.clock())
        if core.reading is not None:
            self.metrics.renewal()
        self._event("claim", action.state, action.generation, action.holds, began)

    def _read_claims(self, core: Handover) -> None:
        began = self.clock()
        try:
            view = self.store.claims()
        except NotAuthorizedError:
            raise
        except StoreError as exc:
            log.warning("%s: reading the claims failed, retrying: %s", self.consumer, exc)
            self._pause(min(1.0, self.poll_interval))
            return
        core.saw_claims(view, began, self.clock())

    def _read_plan(self, core: Handover, action: ReadPlan) -> None:
        timeout = max(0.0, min(action.until - self.clock(), self.poll_interval))
        try:
            plan = self.store.wait_for_plan(action.newer_than, timeout)
        except NotAuthorizedError:
            raise
        except (StoreError, PlanFormatError) as exc:
            self._unreadable_plan(exc)
            self._pause(min(1.0, timeout))
            return
        if plan is not None:
            self._saw_plan(plan)
        else:
            self._read_claims(core)  # the newer claim may be gone (its plan replaced): look again

    def _fence(self, core: Handover, action: Fence) -> None:
        if core.fence_authority is not None:  # the fencer fences, once it saw the lease run out itself
            if fence_done(core.view.get(core.fence_authority), action.consumer, action.version):
                core.fenced_commits(action.consumer, action.version)
                log.info("%s: the fencer fenced %s's commits (its lease ran out)", self.consumer, action.consumer)
                self._event("fence", f"{action.consumer} (by the fencer)")
                return
            self._pause(min(1.0, self.poll_interval))  # our claim notes the request: look again for its answer
            self._read_claims(core)
            return
        try:
            fence(self.bootstrap_servers, commit_id(self.store.name, action.consumer), self.client_options, self.kafka_timeout_ms)
        except NotAuthorizedError:
            raise
        except KafkaCommitError as exc:
            log.warning("%s: fencing %s's commits failed, retrying: %s", self.consumer, action.consumer, exc)
            self._pause(1.0)
            return
        core.fenced_commits(action.consumer, action.version)
        log.info("%s: %s's lease ran out; its commits are fenced", self.consumer, action.consumer)
        self._event("fence", action.consumer)

    def _open_commits(self, core: Handover, action: OpenCommits) -> None:
        """A new producer of our commit id (a new epoch); the handover checks it before commits go."""
        try:
            self.commits.open()
        except NotAuthorizedError:
            raise
        except KafkaCommitError as exc:
            log.warning("%s: opening its committer failed, retrying: %s", self.consumer, exc)
            self._pause(min(1.0, self.lease / 12))  # within the lease's budget (``kafka_wait_ms``)
            return
        core.commits_opened(action.version, self.clock())
        self._event("open-commits", f"{action.version[0][:8]}/{action.version[1]}")

    def _allow_commits(self, core: Handover) -> None:
        self.commits.allow(new_query=False)
        core.commits_allowed_now()
        log.info("%s: its committer was reopened and checked; commits go again", self.consumer)
        self._event("allow-commits")

    def _finish_commit(self, core: Handover, action: FinishCommit) -> None:
        """Retry the final commit of a stopped query, through the producer the handover reopened."""
        result, committed = self.commits.retry_pending(self.commit_timeout)
        self._finish_stop(core, result, committed, f"the final commit of generation {action.generation}", "final-commit")

    def _start(self, core: Handover, action: Start) -> None:
        try:
            plan = self.starting.plan(action.generation)
        except NotAuthorizedError:
            raise
        except (StoreError, PlanFormatError) as exc:
            self._unreadable_plan(exc)
            self._pause(1.0)
            return  # the state machine asks to start again
        if plan is None:
            raise PlanError(f"generation {action.generation} is gone from {self.store.uri} before {self.consumer} started it")
        assign = assign_of(action.holds)
        assert self.group is not None
        starting = self.starting.read(plan, assign, self.group, core.plan_generation, core.view)
        if not core.may_start(self.clock()):
            # opening the committer or reading offsets was slow (a broker clearing a killed
            # predecessor's transaction): start only with most of a lease ahead, as decided
            log.info("%s renews its claim before it starts: the lease ran low while preparing", self.consumer)
            return
        stream = stream_for(self.spark, plan, self.consumer, self.store.uri, starting, self.options)
        self.commits.allow(new_query=True)  # opened under our claim and checked after the open
        query = self.running.start(stream, core.incarnation)
        self.committer.track(str(query.id), action.holds)
        core.started(action.generation, action.holds)
        self.report.started()
        self._event("start", offsets_json(starting), action.generation, action.holds)
        log.info(
            "%s reads %s under generation %d from %s",
            self.consumer, tp_names(sorted(action.holds)), action.generation, offsets_json(starting),
        )  # fmt: skip

    def _stop(self, core: Handover, action: Stop) -> None:
        running = self.running.query is not None
        result = "skipped"
        committed: Offsets = {}
        if running and action.commit:
            query_id, ends = self.running.stop_between_batches()
            result, committed = self.commits.final(query_id, ends, self.commit_timeout)
            self.running.forget()  # only now: ``query`` shows the stopped query until its commit is done
        elif running:
            if "lease lapsed" in action.reason:
                self.metrics.lapse()
            self.committer.untrack(self.running.stop_now())  # at once: what it read after a lapse is not committed
        else:
            self.commits.drop_pending()  # a final commit that waited is dropped (the lease ran out)
        self._finish_stop(core, result, committed, action.reason, "stop" if running else "drop")

    def _finish_stop(self, core: Handover, result: str, committed: Offsets, reason: str, kind: str) -> None:
        stint = core.reading or core.final_pending
        self.commits.close()  # every start opens a new producer, through the handover's check
        log.info("%s stops reading: %s (commit: %s)", self.consumer, reason, result)
        # the detail is what the final commit left in the group: where a successor starts
        detail = json.dumps({f"{t}-{p}": o for (t, p), o in sorted(committed.items())})
        self._event(kind, detail, stint.generation if stint else None, stint.holds if stint else None)
        core.stopped(result)

    def _wait(self, core: Handover, action: Wait) -> None:
        """One step of waiting: a long poll for a newer plan, then a fresh look at the claims
        (a release, a newer generation's claim); the loop asks the state machine again."""
        now = self.clock()
        if now >= action.until or self._stopping.is_set() or self.commits.refused.is_set():
            return
        step = min(action.until - now, 1.0 if core.reading is not None or action.blockers else self.poll_interval)
        try:
            plan = self.store.wait_for_plan(core.plan_generation, max(0.05, step))
        except NotAuthorizedError:
            raise
        except (StoreError, PlanFormatError) as exc:
            self._unreadable_plan(exc)
            self._pause(min(1.0, max(0.05, step)))
            return
        if plan is not None:
            self._saw_plan(plan)
            return
        self._read_claims(core)

    def _unreadable_plan(self, exc: BaseException) -> None:
        """A plan that cannot be read or is not a plan: keep the current generation, say so
        once per distinct problem (the loop retries at its poll interval), never stop."""
        why = " ".join(str(exc).split())
        if why != self._plan_trouble:
            self._plan_trouble = why
            log.warning(
                "%s keeps generation %d: reading the plan failed, retrying: %s",
                self.consumer, self._core.plan_generation if self._core is not None else 0, why,
            )  # fmt: skip

    def _pause(self, seconds: float) -> None:
        self._stopping.wait(max(0.0, seconds))

    # -- the committer's view (the listener's thread, and the loop's during a final commit)

    def _reading_generation(self) -> int:
        """The generation a commit names: the running query's, or the stopped one's whose final commit waits."""
        core = self._core
        stint = (core.reading or core.final_pending) if core is not None else None
        return stint.generation if stint is not None else 0


__all__ = ["PlanFollower"]
