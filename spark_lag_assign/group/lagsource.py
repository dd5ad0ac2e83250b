"""The group's lag, read in the background, so that the leader never waits for it.

kafka-python runs ``assign()`` on the consumer's network thread: an assignor that reads
offsets there (even a 50-150 ms wait) kept the leader from answering the coordinator until
the broker evicted it, and the consumer's own blocking calls raise inside ``assign()``.
So a ``GroupLagMonitor`` reads the group's committed offsets and the end offsets on a
thread of its own, every ``interval_s`` seconds, and keeps the latest ``LagSnapshot``;
the assignor takes the snapshot as it stands at the rebalance (a reference read, no lock
held across I/O), and balances by count if there is none.

The lag rules are those of ``spark_lag_assign.core.lag`` (``compute_lag``), resets included.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pandas as pd

from spark_lag_assign.core.lag import check_reset, compute_lag
from spark_lag_assign.errors import ConfigError, one_line

log = logging.getLogger(__name__)

#: reads the offsets table (``spark_lag_assign.core.lag.OFFSET_COLUMNS``) of the given topics
OffsetsReader = Callable[[Sequence[str]], pd.DataFrame]


@dataclass(frozen=True)
class LagSnapshot:
    """The lag of every partition of the watched topics at one moment."""

    lags: pd.DataFrame  # topic, partition, lag; sorted by (topic, partition)
    taken: float  # time.monotonic() when the read began

    def age(self, now: float | None = None) -> float:
        return (time.monotonic() if now is None else now) - self.taken


class LagSource(Protocol):
    """What an assignor asks of a lag source; both calls return at once."""

    def watch(self, topics: Iterable[str]) -> None:
        """Add topics whose lag the source should read from now on."""

    def snapshot(self) -> LagSnapshot | None:
        """The latest snapshot, or None if there is none yet."""


class StaticLags:
    """A fixed lag table: for tests, and for callers that compute lags themselves."""

    def __init__(self, lags: pd.DataFrame, taken: float | None = None) -> None:
        frame = lags.loc[:, ["topic", "partition", "lag"]].sort_values(["topic", "partition"]).reset_index(drop=True)
        self._snapshot = LagSnapshot(frame, time.monotonic() if taken is None else taken)

    def watch(self, topics: Iterable[str]) -> None:
        pass

    def snapshot(self) -> LagSnapshot | None:
        return self._snapshot


class AdminOffsetsReader:
    """Reads a group's offsets table with one kafka-python admin client kept open between reads."""

    def __init__(
        self,
        bootstrap_servers: str,
        group_id: str,
        client_options: Mapping[str, Any] | None = None,
        timeout_ms: int = 10000,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.group_id = group_id
        self.client_options = dict(client_options or {})
        self.timeout_ms = timeout_ms
        self._admin: Any = None

    def __call__(self, topics: Sequence[str]) -> pd.DataFrame:
        from kafka import KafkaAdminClient
        from kafka.structs import TopicPartition

        from spark_lag_assign.extract.offsets import offsets_table, with_retries

        deadline = time.monotonic() + self.timeout_ms / 1000
        if self._admin is None:
            self._admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap_servers,
                request_timeout_ms=self.timeout_ms,
                client_id=f"sla-lag-monitor-{self.group_id}",
                **self.client_options,
            )
        admin = self._admin
        try:
            existing = set(with_retries("listing topics", admin.list_topics, deadline))
            chosen = sorted(set(topics) & existing)
            if not chosen:
                return pd.DataFrame(columns=["topic", "partition", "beginning_offset", "end_offset", "committed_offset"])
            described = with_retries("describing topics", lambda: admin.describe_topics(chosen), deadline)
            tps = sorted(
                TopicPartition(
                    t["topic"] if "topic" in t else t["name"], p["partition"] if "partition" in p else p["partition_index"]
                )
                for t in described
                for p in t["partitions"]
            )
            committed = with_retries(
                f"reading the offsets of group {self.group_id}",
                lambda: admin.list_group_offsets({self.group_id: tps}),
                deadline,
            ).get(self.group_id, {})
            return offsets_table(admin, self.group_id, tps, committed, deadline)
        except BaseException:
            self.close()  # a fresh client next time: this one may be wedged
            raise

    def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:  # closing a broken client must not hide why it broke
                log.debug("closing the lag monitor's admin client failed", exc_info=True)


class GroupLagMonitor:
    """A consumer group's lag, refreshed on a daemon thread; share one per group and process.

        monitor = GroupLagMonitor("broker:9092", "orders", topics=["orders"], reset="earliest")
        consumer = KafkaConsumer("orders", group_id="orders", partition_assignment_strategy=[LagStickyAssignor(monitor)])

    ``reset`` is the consumers' ``auto_offset_reset`` (the lag of a partition without a
    usable commit). A failed read is logged once per run of failures and retried at the next
    interval; the last good snapshot stays until the assignor finds it too old.
    """

    def __init__(
        self,
        bootstrap_servers: str | None,
        group_id: str,
        *,
        topics: Iterable[str] = (),
        reset: str = "latest",
        interval_s: float = 5.0,
        timeout_ms: int = 10000,
        client_options: Mapping[str, Any] | None = None,
        reader: OffsetsReader | None = None,
        start: bool = True,
    ) -> None:
        if reader is None and not bootstrap_servers:
            raise ConfigError("GroupLagMonitor needs bootstrap_servers or a reader")
        self.group_id = group_id
        self.reset = check_reset(reset)
        self.interval_s = float(interval_s)
        self._reader: OffsetsReader = reader or AdminOffsetsReader(str(bootstrap_servers), group_id, client_options, timeout_ms)
        self._lock = threading.Lock()
        self._topics: frozenset[str] = frozenset(topics)
        self._snapshot: LagSnapshot | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._ready = threading.Condition(self._lock)
        self._failing = False
        self.reads = 0  # successful reads so far
        self._thread = threading.Thread(target=self._run, name=f"sla-lag-monitor-{group_id}", daemon=True)
        if start:
            self._thread.start()

    # -- what the assignor calls: never blocks on I/O --------------------------------------

    def watch(self, topics: Iterable[str]) -> None:
        new = frozenset(topics) - self._topics
        if new:
            with self._lock:
                self._topics = self._topics | new
            self._wake.set()

    def snapshot(self) -> LagSnapshot | None:
        return self._snapshot

    # -- for callers and tests -------------------------------------------------------------

    @property
    def topics(self) -> frozenset[str]:
        return self._topics

    def wait_ready(self, timeout: float) -> bool:
        """Wait until a snapshot exists (not from an assignor: it blocks)."""
        with self._ready:
            return self._ready.wait_for(lambda: self._snapshot is not None, timeout)

    def refresh(self) -> LagSnapshot | None:
        """Read once, now, on the calling thread (the background thread does this by itself)."""
        topics = sorted(self._topics)
        if not topics:
            return None
        taken = time.monotonic()
        offsets = self._reader(topics)
        lags = compute_lag(offsets, self.reset).loc[:, ["topic", "partition", "lag"]]
        snap = LagSnapshot(lags.sort_values(["topic", "partition"]).reset_index(drop=True), taken)
        with self._ready:
            self._snapshot = snap
            self.reads += 1
            self._ready.notify_all()
        return snap

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        close = getattr(self._reader, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> GroupLagMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.refresh() is not None and self._failing:
                    log.info("lag monitor of group %s: reading lags again", self.group_id)
                    self._failing = False
            except Exception as exc:  # noqa: BLE001 - the monitor thread must outlive any failed read
                if not self._failing:
                    log.warning(
                        "lag monitor of group %s: cannot read lags (%s); retrying every %.1f s",
                        self.group_id,
                        one_line(exc),
                        self.interval_s,
                    )
                    self._failing = True
            self._wake.wait(self.interval_s)
            self._wake.clear()
