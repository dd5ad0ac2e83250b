"""What a follower tells people while it runs: its events, the generations it saw, its metrics.

The events (``PlanFollower.events``, ``RunSummary.events``) are for logs and tests; the
metrics (``spark_lag_assign.metrics.FollowerMetrics``) are what a Prometheus server scrapes:
reading, waiting (for whom, since when) or stopped, the generation read and the newest seen,
how long a handover took, and each micro-batch's records, commits and lag per topic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from spark_lag_assign.consume.actions import AllowCommits, Exit, Fence, OpenCommits, ReadClaims, ReadPlan, Wait, Write
from spark_lag_assign.consume.committer import ProgressCommitter
from spark_lag_assign.consume.events import FollowerEvent, RunSummary, assign_of
from spark_lag_assign.consume.options import Offsets, parse_source_offsets
from spark_lag_assign.consume.protocol import Handover, Holds
from spark_lag_assign.errors import InputError
from spark_lag_assign.metrics import FollowerMetrics

#: the steps between two waits: they keep a wait for earlier owners going
_BETWEEN_WAITS = (ReadClaims, ReadPlan, Write, Fence, OpenCommits, AllowCommits)


class FollowerReport:
    """One follower's events and metrics; ``clock`` is the follower's own."""

    def __init__(self, metrics: FollowerMetrics, clock: Callable[[], float]) -> None:
        self.metrics = metrics
        self.clock = clock
        self.events: list[FollowerEvent] = []
        self.generations: list[int] = []  # every plan generation seen, in order
        self._blocked_since: dict[str, float] = {}  # holder -> when we began waiting for it
        self._handover_since: float | None = None  # when a plan that moves our partitions was seen

    def event(
        self,
        core: Handover | None,
        kind: str,
        detail: str = "",
        generation: int | None = None,
        holds: Holds | None = None,
        began: float | None = None,
    ) -> None:
        """Record an event; by default under the plan generation seen and what is being read."""
        if holds is None:
            holds = core.reading.holds if core is not None and core.reading is not None else frozenset()
        if generation is None:
            generation = core.plan_generation if core is not None else 0
        self.events.append(FollowerEvent(time.monotonic(), kind, generation, assign_of(holds), detail, began))

    def saw_plan(self, core: Handover | None, generation: int, new: Holds, reads: Holds, *, first: bool) -> None:
        """A newer plan, which the state machine has seen: it gives us ``new``, we read ``reads``.

        A handover begins with a plan that gives us partitions we do not read (all of them, if
        we read nothing), unless it is the first plan we see (that is a start), and lasts
        until a query reads them (``started``). A later plan that gives us nothing new (a stop,
        a plan that only takes some away, or exactly what we read) ends it uncounted."""
        if first or not new - reads:
            self._handover_since = None
        elif self._handover_since is None:
            self._handover_since = self.clock()
        self.generations.append(generation)
        self.event(core, "plan", f"generation {generation}")

    def foreign_commit(self, core: Handover | None, detail: str) -> None:
        """A commit in the group that no pipeline of the plan made: an event, and counted."""
        self.event(core, "foreign-commit", detail)
        self.metrics.foreign_commit()

    def started(self) -> None:
        """A query started: a handover that moved our partitions ends here."""
        if self._handover_since is not None:
            self.metrics.handover(self.clock() - self._handover_since)
            self._handover_since = None

    def state(self, core: Handover, action: object) -> None:
        """What the pipeline is doing, for its metrics: reading, waiting for earlier owners, stopped."""
        reading = core.reading
        blockers = action.blockers if isinstance(action, (Wait, Exit)) else ()
        now = self.clock()
        if reading is None and blockers and not isinstance(action, Exit):
            self._blocked_since = {b.holder: self._blocked_since.get(b.holder, now) for b in blockers}
        elif not isinstance(action, _BETWEEN_WAITS):
            self._blocked_since = {}
        state = "reading" if reading is not None else ("waiting" if self._blocked_since else "stopped")
        self.metrics.state(state, self._blocked_since)
        self.metrics.generations(reading.generation if reading else 0, core.plan_generation, len(reading.holds) if reading else 0)

    def progress(self, progress: Any, committer: ProgressCommitter) -> None:
        """A micro-batch completed (the listener's thread): records read, commits, lag per topic."""
        self.metrics.commits(committer.commits, committer.failures)
        committed = committer.committed(str(progress.id))
        lag: dict[str, int] = {}
        for source in progress.sources:
            try:
                latest = parse_source_offsets(source.latestOffset)
            except (InputError, TypeError, ValueError):
                continue
            for (topic, partition), offset in latest.items():
                done = committed.get((topic, partition))
                if done is not None:
                    lag[topic] = lag.get(topic, 0) + max(0, offset - done)
        self.metrics.progress(int(progress.numInputRows or 0), lag)

    def summary(
        self, consumer: str, reason: str, incarnation: str, committed: Offsets, failures: int, refusals: int
    ) -> RunSummary:
        return RunSummary(
            consumer,
            reason,
            list(self.generations),
            list(self.events),
            dict(committed),
            failures,
            incarnation,
            refusals,
        )


__all__ = ["FollowerReport"]
