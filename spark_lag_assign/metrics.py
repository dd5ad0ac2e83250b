"""Prometheus metrics of the planner, of every pipeline and of the kafka-python group assignors.

Each emitter owns a ``CollectorRegistry`` of its own (never the client's global one): a
planner run writes exactly its own families to a textfile or a Pushgateway, a process that
runs several pipelines serves each on its own port, and tests read what one emitter did.
Names follow Prometheus' conventions: the ``spark_lag_assign_`` prefix, base units
(``_seconds``, ``_records``), ``_total`` counters, ``consumer``/``topic`` labels and no
per-partition label (a million partitions would be a million series).

Nothing here knows the plan document or the handover protocol: the planner, the follower and
the assignors call these with plain numbers. The follower's and the assignors' calls, and the
planner's records of a run, go through ``never_raises``: a metric that fails is logged once,
and the pipeline reads on (the plan stays published).
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from spark_lag_assign.errors import ConfigError

log = logging.getLogger(__name__)

PREFIX = "spark_lag_assign_"

#: a planner run ends in one of these; ``reason`` says why when it was not published
OUTCOMES = ("published", "refused", "failed")
#: the reasons, a fixed set so that an alert can name them (none: published)
REASONS = ("none", "shrink", "fencing-change", "fenced", "config", "input", "kafka", "store", "not-authorized", "spark", "other")
#: the follower's states, one series each (1 for the current one)
STATES = ("reading", "waiting", "stopped")

F = TypeVar("F", bound=Callable[..., Any])


def never_raises(method: F) -> F:
    """A metrics update that fails logs one warning per method and emitter (``self.failed``
    names the methods that have) and returns None: metrics must never stop a pipeline reading,
    a group rebalancing or a planner run that published."""

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - see the docstring
            if method.__name__ not in self.failed:
                self.failed.add(method.__name__)
                log.warning("metrics: %s failed (%s); going on without it", method.__name__, exc)
            return None

    return guarded  # type: ignore[return-value]


_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}


def metric_names(registry: CollectorRegistry) -> set[str]:
    """Every series name a registry can expose, whether or not a labelled child exists yet
    (counters with ``_total``, histograms with ``_bucket``, ``_sum``, ``_count``)."""
    return {family.name + suffix for family in registry.collect() for suffix in _SUFFIXES.get(family.type, ("",))}


# -- the planner --------------------------------------------------------------------------------


#: the planner's families: attribute -> (name without the prefix, help, labels)
_PLANNER: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "generation": ("plan_generation", "The generation this run published.", ()),
    "info": ("plan_info", "1, labelled with the run's strategy and where its rates came from.", ("strategy", "rates_source")),
    "partitions": ("plan_partitions", "Partitions planned (assigned and unassigned).", ()),
    "unassigned": ("plan_unassigned_partitions", "Partitions of topics no consumer subscribes to.", ()),
    "consumers": ("plan_consumers", "Consumers (pipelines) in the plan.", ()),
    "lag": ("plan_lag_records", "The group's total lag when planned, in records.", ()),
    "consumer_lag": ("plan_consumer_lag_records", "Each consumer's planned lag, in records.", ("consumer",)),
    "consumer_partitions": ("plan_consumer_partitions", "Partitions planned for each consumer.", ("consumer",)),
    "optimality": ("plan_optimality_ratio", "Largest consumer lag over the lower bound (1 is perfect).", ()),
    "count_spread": ("plan_count_spread_partitions", "Most minus fewest partitions per consumer.", ()),
    "topic_spread": ("plan_topic_count_spread_partitions", "The worst per-topic count spread.", ()),
    "moved": ("plan_moved_partitions", "Partitions whose owner changed against the previous plan (NaN: no previous plan).", ()),
    "drain": ("plan_drain_seconds", "Predicted time until the whole backlog is read (+Inf: never).", ()),
    "consumer_drain": (
        "plan_consumer_drain_seconds",
        "Predicted time until each consumer's backlog is read (+Inf: never).",
        ("consumer",),
    ),
    "phase": ("plan_phase_duration_seconds", "Wall time of each phase of the run.", ("phase",)),
    "outcome": ("plan_outcome", "1, labelled with how the run ended (published, refused, failed) and why.", ("outcome", "reason")),
    "last_run": ("plan_last_run_timestamp_seconds", "When the run ended (Unix time).", ()),
    "deadline": ("sizing_deadline_seconds", "The deadline --drain-within asked the backlog to drain by.", ()),
    "needed": ("sizing_pipelines_needed", "Fewest pipelines whose drain plan meets the deadline (NaN: none does).", ()),
    "configured": ("sizing_pipelines_configured", "Pipelines configured now.", ()),
    "sized_drain": (
        "sizing_drain_seconds",
        "Predicted time to drain with the pipelines configured now and with the number needed.",
        ("pipelines",),
    ),
    "outrun": (
        "sizing_produce_excess_records_per_second",
        "How much faster producers append than all pipelines read (0: they do not).",
        (),
    ),
}


class PlannerMetrics:
    """One planner run's metrics: gauges set once per run, written or pushed when it ends.

    A family joins the registry when it is first set, so a run exports what it found out and
    nothing else: a run that failed before planning exports its outcome, its time and the
    phases it got through, a run without rates no drain time, a run without
    ``--drain-within`` no sizing. An unset gauge would read 0 (a Pushgateway PUT replaces the
    last run's group, so a failed run would show "lag 0, drained in 0 s" on a dashboard).
    ``every_family=True`` registers them all at once (to list the names a planner can export).
    Recording is ``never_raises``: the metrics of a run must not fail a published plan.
    """

    def __init__(self, *, every_family: bool = False) -> None:
        self.registry = CollectorRegistry()
        self.failed: set[str] = set()
        self._gauges: dict[str, Gauge] = {}
        if every_family:
            for attr in _PLANNER:
                self._gauge(attr)

    def _gauge(self, attr: str) -> Gauge:
        found = self._gauges.get(attr)
        if found is None:
            name, doc, labels = _PLANNER[attr]
            found = self._gauges[attr] = Gauge(PREFIX + name, doc, labels, registry=self.registry)
        return found

    @never_raises
    def record_plan(self, plan: Mapping[str, Any], phases: Mapping[str, float]) -> None:
        """The published plan's numbers (``plan`` is the plan document) and the phases' times."""
        self._gauge("generation").set(int(plan["generation"]))
        self._gauge("info").labels(str(plan["strategy"]), str(plan.get("rates_source", "none"))).set(1)
        totals, quality = plan["totals"], plan["quality"]
        self._gauge("partitions").set(int(totals["partitions"]))
        self._gauge("unassigned").set(int(totals["unassigned"]))
        self._gauge("consumers").set(len(plan["consumers"]))
        self._gauge("lag").set(float(totals["lag"]))
        for consumer, entry in sorted(plan["consumers"].items()):
            self._gauge("consumer_lag").labels(consumer).set(float(entry["lag"]))
            self._gauge("consumer_partitions").labels(consumer).set(int(entry["partitions"]))
            if "drain_seconds" in entry:
                self._gauge("consumer_drain").labels(consumer).set(_seconds(entry.get("drain_seconds"), entry.get("keeps_up")))
        self._gauge("optimality").set(float(quality.get("optimality", 1.0)))
        self._gauge("count_spread").set(int(quality.get("count_spread", 0)))
        self._gauge("topic_spread").set(int(quality.get("topic_spread", 0)))
        moved = quality.get("moved")
        self._gauge("moved").set(float("nan") if moved is None else int(moved))
        if "drain_seconds" in plan:
            self._gauge("drain").set(_seconds(plan.get("drain_seconds"), not plan.get("cannot_keep_up")))
        self.record_phases(phases)

    @never_raises
    def record_phases(self, phases: Mapping[str, float]) -> None:
        for name, seconds in phases.items():
            self._gauge("phase").labels(name).set(float(seconds))

    @never_raises
    def record_sizing(
        self,
        deadline: float,
        needed: int | None,
        configured: int,
        drain_configured: float,
        drain_needed: float | None,
        outrun: float,
    ) -> None:
        self._gauge("deadline").set(deadline)
        self._gauge("needed").set(float("nan") if needed is None else needed)
        self._gauge("configured").set(configured)
        self._gauge("sized_drain").labels("configured").set(drain_configured)
        self._gauge("sized_drain").labels("needed").set(float("nan") if drain_needed is None else drain_needed)
        self._gauge("outrun").set(max(0.0, outrun))

    def record_outcome(self, outcome: str, reason: str = "none") -> None:
        if outcome not in OUTCOMES or reason not in REASONS:
            raise ValueError(f"outcome {outcome!r}/{reason!r} is not one of {OUTCOMES}/{REASONS}")
        self._gauge("outcome").labels(outcome, reason).set(1)
        self._gauge("last_run").set(time.time())

    def write_textfile(self, path: str) -> None:
        """node_exporter's textfile collector format, written atomically by the client library."""
        from prometheus_client import write_to_textfile

        try:
            write_to_textfile(path, self.registry)
        except OSError as exc:
            raise ConfigError(f"--metrics-file {path}: cannot write it ({exc.strerror or exc})") from None

    def push(self, gateway: str, job: str, store: str, timeout: float = 10.0) -> None:
        """Replace this job's and store's group on a Pushgateway (PUT): one run, one group."""
        from prometheus_client import push_to_gateway

        push_to_gateway(gateway, job=job, registry=self.registry, grouping_key={"store": store}, timeout=timeout)


def _seconds(value: Any, keeps_up: Any) -> float:
    """A time from the plan document: None means unknown (NaN) or, where it cannot keep up, never (+Inf)."""
    if value is None:
        return math.inf if keeps_up is False else float("nan")
    return float(value)


# -- a pipeline ---------------------------------------------------------------------------------


class _Waits(Collector):
    """``follower_wait_seconds{consumer, blocker}``, computed when scraped: how long this
    pipeline has waited for each earlier owner that has not released yet."""

    def __init__(self, consumer: str, clock: Callable[[], float]) -> None:
        self.consumer = consumer
        self.clock = clock
        self.since: dict[str, float] = {}
        self.lock = threading.Lock()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            PREFIX + "follower_wait_seconds",
            "Seconds this pipeline has waited for each blocker (an earlier owner) to release its partitions.",
            labels=["consumer", "blocker"],
        )
        now = self.clock()
        with self.lock:
            for blocker, since in sorted(self.since.items()):
                family.add_metric([self.consumer, blocker], max(0.0, now - since))
        yield family


class FollowerMetrics:
    """One pipeline's metrics, served on ``PlanFollower(metrics_port=...)``.

    Every method is ``never_raises``: a metrics failure never stops the pipeline.
    """

    def __init__(self, consumer: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.consumer = consumer
        #: the updates that failed (each warned about once)
        self.failed: set[str] = set()
        self.registry = r = CollectorRegistry()
        labels = ("consumer",)

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(PREFIX + name, doc, (*labels, *extra), registry=r)

        def gauge(name: str, doc: str, extra: tuple[str, ...] = ()) -> Gauge:
            return Gauge(PREFIX + name, doc, (*labels, *extra), registry=r)

        self._generation = gauge("follower_generation", "The plan generation this pipeline reads under (0: none).")
        self._seen = gauge("follower_plan_generation", "The newest plan generation this pipeline has seen.")
        self._partitions = gauge("follower_partitions", "Partitions this pipeline reads now.")
        self._state = gauge(
            "follower_state", "1 for the state the pipeline is in: reading, waiting (for a release), stopped.", ("state",)
        )
        self._handovers = counter(
            "follower_handovers_total",
            "Handovers completed: a plan (not the first seen) gave this pipeline partitions it did not read,"
            " and it reads them.",
        )
        self._handover_seconds = Histogram(
            PREFIX + "follower_handover_duration_seconds",
            "From seeing the plan that began a handover to reading its partitions.",
            labels,
            registry=r,
            buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
        )
        self._commits = counter("follower_commits_total", "Commits of completed micro-batches to the group.")
        self._commit_failures = counter("follower_commit_failures_total", "Commits that failed and are retried.")
        self._refused = counter("follower_refused_commits_total", "Commits refused: another pipeline took the partitions over.")
        self._foreign = counter(
            "follower_foreign_commits_total",
            "Group commits found at a start that no pipeline of the plan made (not started from).",
        )
        self._renewals = counter("follower_lease_renewals_total", "Claim writes that renewed this pipeline's lease.")
        self._lapses = counter("follower_lease_lapses_total", "Times the lease lapsed while reading (the query stopped unread).")
        self._records = counter("follower_records_read_total", "Records read by this pipeline's queries.")
        self._lag = gauge(
            "follower_committed_lag_records", "Records behind the source's latest offsets, from the group's commits.", ("topic",)
        )
        self._waits = _Waits(consumer, clock)
        r.register(self._waits)
        for state in STATES:
            self._state.labels(consumer, state).set(1 if state == "stopped" else 0)
        # every series exists from the start (at 0): a rate() or an alert sees its first increase
        families: list[Counter | Gauge | Histogram] = [
            self._handovers, self._handover_seconds, self._commits, self._commit_failures, self._refused,
            self._renewals, self._lapses, self._records, self._generation, self._seen, self._partitions,
        ]  # fmt: skip
        for family in families:
            family.labels(consumer)
        self._lag_topics: set[str] = set()
        self._mirrored = {"commits": 0, "failures": 0}  # the committer's totals already counted

    @never_raises
    def generations(self, reading: int, seen: int, partitions: int) -> None:
        self._generation.labels(self.consumer).set(reading)
        self._seen.labels(self.consumer).set(seen)
        self._partitions.labels(self.consumer).set(partitions)

    @never_raises
    def state(self, state: str, blockers: Mapping[str, float] | None = None) -> None:
        """The current state; ``blockers``: holder -> since when (own clock) this pipeline waits for it."""
        for s in STATES:
            self._state.labels(self.consumer, s).set(1 if s == state else 0)
        with self._waits.lock:
            self._waits.since = dict(blockers or {})

    @never_raises
    def handover(self, seconds: float) -> None:
        self._handovers.labels(self.consumer).inc()
        self._handover_seconds.labels(self.consumer).observe(max(0.0, seconds))

    @never_raises
    def commits(self, total: int, failures: int) -> None:
        """The committer's running totals (it counts them; this mirrors them)."""
        for name, counter, count in (("commits", self._commits, total), ("failures", self._commit_failures, failures)):
            if count > self._mirrored[name]:  # counters only go up
                counter.labels(self.consumer).inc(count - self._mirrored[name])
                self._mirrored[name] = count

    @never_raises
    def refused(self) -> None:
        self._refused.labels(self.consumer).inc()

    @never_raises
    def foreign_commit(self) -> None:
        self._foreign.labels(self.consumer).inc()

    @never_raises
    def renewal(self) -> None:
        self._renewals.labels(self.consumer).inc()

    @never_raises
    def lapse(self) -> None:
        self._lapses.labels(self.consumer).inc()

    @never_raises
    def progress(self, records: int, lag_by_topic: Mapping[str, int]) -> None:
        """One micro-batch: records it read, and per topic the records behind the source's latest."""
        self._records.labels(self.consumer).inc(max(0, records))
        for topic in self._lag_topics - set(lag_by_topic):  # topics no longer read: no stale series
            self._lag.remove(self.consumer, topic)
        for topic, lag in lag_by_topic.items():
            self._lag.labels(self.consumer, topic).set(max(0, lag))
        self._lag_topics = set(lag_by_topic)


# -- the kafka-python group assignors -----------------------------------------------------------

#: why a rebalance balanced by partition count instead of lag
FALLBACKS = ("no-lag-source", "no-snapshot", "stale-snapshot", "strategy-failed")


class GroupMetrics:
    """A group assignor's metrics. Pass ``registry=prometheus_client.REGISTRY`` to serve them
    with the process's other metrics (once per registry: every assignor of the process then
    shares that one object, its series labelled by assignor); by default each assignor has a
    registry of its own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        #: the updates that failed (each warned about once)
        self.failed: set[str] = set()
        self.registry = r = registry if registry is not None else CollectorRegistry()
        try:
            self._register(r)
        except ValueError:  # prometheus_client registers a name once per registry
            raise ConfigError(
                "GroupMetrics: this registry holds the group assignor metrics already; "
                "create one GroupMetrics per registry and pass it to every assignor (metrics=...)"
            ) from None

    def _register(self, r: CollectorRegistry) -> None:
        self._rebalances = Counter(PREFIX + "group_rebalances_total", "Rebalances this member led.", ("assignor",), registry=r)
        self._age = Gauge(
            PREFIX + "group_lag_snapshot_age_seconds",
            "Age of the lag snapshot the last rebalance used.",
            ("assignor",),
            registry=r,
        )
        self._fallbacks = Counter(
            PREFIX + "group_count_balance_fallbacks_total",
            "Rebalances that balanced by partition count, not lag, and why.",
            ("assignor", "reason"),
            registry=r,
        )

    @never_raises
    def rebalance(self, assignor: str, snapshot_age: float | None, fallback: str | None) -> None:
        self._rebalances.labels(assignor).inc()
        self._age.labels(assignor).set(float("nan") if snapshot_age is None else snapshot_age)
        if fallback is not None:
            if fallback not in FALLBACKS:
                raise ValueError(f"fallback {fallback!r} is not one of {FALLBACKS}")
            self._fallbacks.labels(assignor, fallback).inc()


def serve(registry: CollectorRegistry, port: int, addr: str = "0.0.0.0") -> tuple[Any, int]:
    """Serve ``registry`` on ``port`` (0: a free one) in a daemon thread: (server, bound port).
    A port in use is one ``ConfigError`` line."""
    from prometheus_client import start_http_server

    try:
        server, _thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        raise ConfigError(f"metrics_port {port}: cannot serve metrics there ({exc.strerror or exc})") from None
    return server, int(server.server_port)


def all_registries() -> Iterable[CollectorRegistry]:
    """A registry of each emitter, for checks that list every exported name (the dashboard's test)."""
    return (PlannerMetrics(every_family=True).registry, FollowerMetrics("c").registry, GroupMetrics().registry)


__all__ = [
    "FALLBACKS",
    "OUTCOMES",
    "PREFIX",
    "REASONS",
    "STATES",
    "FollowerMetrics",
    "GroupMetrics",
    "PlannerMetrics",
    "all_registries",
    "metric_names",
    "never_raises",
    "serve",
]
