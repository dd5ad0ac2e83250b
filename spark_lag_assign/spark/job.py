"""The planning job: extract -> transform -> check -> load.

1. extract the group's offsets (live with kafka-python, or a snapshot file) and the
   previous plan of the output directory;
2. transform in Spark: the lag rules, then the assignor, in one applyInPandas stage;
3. check the collected plan with the invariant checker;
4. load: write the next generation atomically and print a summary.

Every step before the write may fail; none of them touches the output directory, whose lock
is held from before the previous plan is read until the new one is in place.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spark_lag_assign.assignors import validate_subscriptions
from spark_lag_assign.config import Settings
from spark_lag_assign.core import rates as rates_io
from spark_lag_assign.core.invariants import check_assignment
from spark_lag_assign.core.lag import lag_columns
from spark_lag_assign.core.previous import previous_owners
from spark_lag_assign.core.quality import Quality, quality as measure
from spark_lag_assign.core.subscriptions import SubscriptionIndex
from spark_lag_assign.errors import InputError
from spark_lag_assign.extract import offsets as offsets_io
from spark_lag_assign.metrics import PlannerMetrics
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.plan.guard import check_fencing, check_shrink
from spark_lag_assign.sizing import Sizing, size
from spark_lag_assign.spark import tuning
from spark_lag_assign.store import open_store

log = logging.getLogger(__name__)


@dataclass
class Timings:
    """Wall time per phase, in seconds (the benchmark prints them)."""

    phases: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start


@dataclass
class Result:
    plan: plan_io.Plan
    store: str  # the URI the generation was published to
    quality: Quality
    out_of_range: int
    timings: Timings
    rates: rates_io.Rates | None = None
    sizing: Sizing | None = None  # --drain-within's answer


def extract_offsets(settings: Settings, snapshot: Any = None) -> pd.DataFrame:
    """The offsets table of the run's source (or of ``snapshot``, a file), validated."""
    if settings.offsets is not None:
        frame = offsets_io.read_snapshot(snapshot or settings.offsets)
        wanted = set(settings.topics) | set(settings.subscribed_topics())
        missing = sorted(wanted - set(frame["topic"]))
        if missing:
            raise InputError(f"topic(s) not in the snapshot {settings.offsets}: {', '.join(missing)}")
        if settings.topics:
            frame = frame[frame["topic"].isin(set(settings.topics) | wanted)].reset_index(drop=True)
        return frame
    assert settings.bootstrap_servers and settings.group
    topics = settings.topics or tuple(settings.subscribed_topics())
    return offsets_io.read_offsets(
        settings.bootstrap_servers,
        settings.group,
        topics=topics or None,
        topic_pattern=settings.topic_pattern,
        client_options=settings.client,
        timeout_ms=settings.timeout_ms,
    )


def plan_rows(
    spark: Any,
    offsets: pd.DataFrame,
    subscriptions: Mapping[str, list[str]],
    settings: Settings,
    previous: pd.DataFrame | None,
    timings: Timings,
    topics: tuple[list[str], np.ndarray],
) -> pd.DataFrame:
    """Run lag rules and the assignor in Spark; the plan rows, one per partition, on the driver.

    The offsets are on the driver already (validated), and so is the previous plan: each row
    goes to Spark with its previous owner, a join done once here rather than a shuffle in Spark.
    The lag rules and the assignor run in one applyInPandas stage (``transforms.plan_partitions``).
    ``topics``: the sorted topic names and each offsets row's code into them (``_topics``);
    topics cross Spark as these codes, both ways.
    """
    import pyspark

    from spark_lag_assign import sparkcompat

    # the first Spark work of a run, after every check of its input: under spark-submit this
    # pyspark is the cluster's own (SPARK_HOME/python/lib/pyspark.zip), whatever was pip-installed
    sparkcompat.check_supported(pyspark.__version__)
    from spark_lag_assign.spark import transforms

    with tempfile.TemporaryDirectory(prefix="spark-lag-assign-") as scratch:
        with timings.phase("read"):
            names, codes = topics
            rows = pd.DataFrame(
                {
                    "topic_code": codes.astype(np.int32),
                    **{c: offsets[c] for c in _OFFSET_COLUMNS},
                    "previous_owner": _previous_owner(offsets, previous, subscriptions, topics),
                },
                index=offsets.index,
            )
            df = tuning.to_spark(spark, rows, _input_schema(), Path(scratch))
        with timings.phase("plan"):
            planned = df.transform(
                transforms.plan_partitions(subscriptions, settings.strategy, settings.reset, settings.seed, settings.options, names)
            )
            out = transforms.decode_plan(planned.toPandas(), list(subscriptions), names)
    return out


def _topics(offsets: pd.DataFrame) -> tuple[list[str], np.ndarray]:
    """The sorted topic names of ``offsets`` and each row's code into them, in one pass."""
    codes, names = pd.factorize(offsets["topic"], sort=True)
    return [str(t) for t in names], codes


_OFFSET_COLUMNS = ("partition", "beginning_offset", "end_offset", "committed_offset")


def _input_schema() -> Any:
    """The offsets as they go to Spark: the topic as a code into the sorted topics, the previous owner."""
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    from spark_lag_assign.spark import transforms

    fields = {f.name: f for f in transforms.OFFSETS_SCHEMA.fields}
    return StructType(
        [
            StructField("topic_code", IntegerType(), False),
            *(fields[c] for c in _OFFSET_COLUMNS),
            StructField("previous_owner", StringType(), True),
        ]
    )


def _previous_owner(
    offsets: pd.DataFrame,
    previous: pd.DataFrame | None,
    subscriptions: Mapping[str, list[str]],
    topics: tuple[list[str], np.ndarray],
) -> pd.Series:
    """Each offsets row's owner in the previous plan (None where it has none), by the rule of
    ``core.previous`` that ``spark_lag_assign.assign`` reads a previous plan by; ``topics``:
    the sorted topic names and each row's code into them (``_topics``)."""
    names, codes = topics
    index = SubscriptionIndex(subscriptions, names)
    row_topics = codes if len(index.topics) == len(names) else index.topic_codes(names)[codes]
    partitions = offsets["partition"].to_numpy().astype(np.int64, copy=False)
    owners = previous_owners(previous, row_topics.astype(np.int64, copy=False), partitions, index)
    return pd.Series(owners, index=offsets.index, dtype=object)


def run(settings: Settings, spark: Any, metrics: PlannerMetrics | None = None) -> Result:
    """Plan once and publish the next generation to the store ``settings.output`` names.

    The planner's role is taken before any work (an unreachable or unwritable store fails
    fast, and a second planner is fenced: ``PublishFencedError``, nothing published); the
    previous plan is read after that, so the new generation's number cannot collide.
    ``metrics``: the published plan's numbers and each phase's time (also of a run that
    fails: the phases it got through) are recorded there; the caller writes or pushes them.
    """
    timings = Timings()
    try:
        result = _run(settings, spark, timings)
    finally:
        if metrics is not None:
            metrics.record_phases(timings.phases)
    if metrics is not None:
        metrics.record_plan(result.plan, timings.phases)
    return result


def _run(settings: Settings, spark: Any, timings: Timings) -> Result:
    """One planning run holding the store's planner role (``publisher``): extract, plan,
    check, publish. Long because the phases are timed one after another (``timings.phase``)
    inside that one role: nothing is published unless every phase before it succeeded."""
    with (
        open_store(settings.output, client_options=settings.client, history=settings.history) as store,
        store.publisher() as publisher,
    ):
        current = publisher.previous()
        check_fencing(current, settings.fencing, allow=settings.fencing_change)  # before any work
        previous = plan_io.assignment_frame(current) if current else None
        with timings.phase("extract"):
            offsets = extract_offsets(settings)
            observed = rates_io.Observation(time.time(), offsets.loc[:, ["topic", "partition", "end_offset", "committed_offset"]])
            earlier = None
            if settings.offsets_later is not None:  # offline: the later snapshot is the backlog to plan
                earlier = rates_io.Observation(0.0, observed.offsets)
                offsets = extract_offsets(settings, settings.offsets_later)
                observed = rates_io.Observation(float(settings.interval or 0), offsets.loc[:, list(observed.offsets.columns)])
        topics = _topics(offsets)
        subscriptions = validate_subscriptions(settings.resolved_subscriptions(topics[0]))
        rates = measured_rates(settings, list(subscriptions), current, observed, earlier)
        # the rates drain plans with: a pipeline without one at the median of the whole group's
        # (sizing's too, so that the sized plan is planned with the rates it was sized with)
        known = rates_io.filled(rates, list(subscriptions))
        sizing = None
        if settings.drain_within is not None:
            with timings.phase("sizing"):
                sizing = _size(settings, offsets, subscriptions, known, previous)
            if settings.size_to_deadline and sizing is not None:
                if sizing.needed is None:
                    log.warning("size_to_deadline: no number of pipelines drains in time; every configured one is planned")
                else:  # the plan for the pipelines the deadline needs: the others are left out of it
                    keep = set(sizing.pipelines)
                    subscriptions = validate_subscriptions({c: ts for c, ts in subscriptions.items() if c in keep})
                    rates, known = _only(rates, keep), _only(known, keep)
        for note in rates.notes:
            log.warning("rates: %s", note)
        if settings.strategy == "drain" and known.read:
            options = {**settings.options, **known.options()}
            rows = plan_rows(spark, offsets, subscriptions, replace(settings, options=options), previous, timings, topics)
        else:
            rows = plan_rows(spark, offsets, subscriptions, settings, previous, timings, topics)
        with timings.phase("check"):
            assigned = rows[rows["consumer"].notna()]
            # the guard of the write: per-topic stages are checked nowhere else, and whatever a
            # stage returned crossed Arrow and Spark's shuffle before it got here
            check_assignment(assigned, rows, subscriptions)
            quality = measure(assigned, subscriptions, previous)
            out_of_range = _out_of_range(offsets)
        with timings.phase("write"):
            doc = plan_io.build_plan(
                rows,
                subscriptions,
                generation=publisher.next_generation(),
                strategy=settings.strategy,
                reset=settings.reset,
                seed=settings.seed,
                group=settings.group,
                source=settings.source,
                options=settings.options,
                quality={**quality.as_dict(), "out_of_range": out_of_range},
                rates=rates,
                observed=observed if settings.live else None,
                fencing=settings.fencing,
            )
            if sizing is not None:
                doc["sizing"] = sizing.as_json()  # type: ignore[typeddict-item]
            check_shrink(current, doc, allow=settings.allow_shrink)  # an empty snapshot must not replace a real plan
            publisher.publish(doc)
        where = store.uri
    log.info("published generation %d to %s", doc["generation"], where)
    return Result(doc, where, quality, out_of_range, timings, rates, sizing)


def _only(rates: rates_io.Rates, keep: set[str]) -> rates_io.Rates:
    """``rates`` of the pipelines ``keep`` alone."""
    return replace(
        rates,
        read={c: r for c, r in rates.read.items() if c in keep},
        read_source={c: r for c, r in rates.read_source.items() if c in keep},
    )


def _size(
    settings: Settings,
    offsets: pd.DataFrame,
    subscriptions: Mapping[str, list[str]],
    known: rates_io.Rates,
    previous: pd.DataFrame | None,
) -> Sizing | None:
    """``--drain-within``: the fewest pipelines whose drain plan meets the deadline, from the
    run's rates (``known``: ``rates_io.filled``, a pipeline without one at the median of the
    others); None, with a warning, where no read rate is known at all (a first live run
    measures none yet). Each size is planned as ``--size-to-deadline`` publishes it: from the
    ``previous`` plan, with the run's drain options and rates (drain keeps previous owners
    unless it finds a plan ``margin`` sooner, so a plan sized from scratch could be published
    later than sizing said)."""
    assert settings.drain_within is not None
    if not known.read:
        log.warning("drain_within: no read rate known (give rate or rates, or plan again to measure them): not sized")
        return None
    rules = lag_columns(offsets["beginning_offset"], offsets["end_offset"], offsets["committed_offset"], settings.reset)
    lags = pd.DataFrame({"topic": offsets["topic"], "partition": offsets["partition"], "lag": rules["lag"]})
    produce = known.options().get("produce_rates")
    drain_options = {k: v for k, v in settings.options.items() if k in ("margin", "max_swaps")}
    return size(
        lags, subscriptions, known.read, settings.drain_within, produce, settings.pinned, previous=previous, **drain_options
    )


def measured_rates(
    settings: Settings,
    consumers: list[str],
    current: plan_io.Plan | None,
    now: rates_io.Observation,
    earlier: rates_io.Observation | None,
) -> rates_io.Rates:
    """The run's rates: configured read rates, then what two observations measure (offline: the
    two snapshots; live: the previous generation's recorded offsets and this run's)."""
    configured = rates_io.configured_rates(
        consumers, settings.rate, rates_io.read_rates_file(settings.rates) if settings.rates is not None else None
    )
    if earlier is not None:
        return rates_io.measure(consumers, now, earlier, configured)
    before = rates_io.observation_from_plan(current) if (current is not None and settings.live) else None
    if before is not None and not now.time > before.time:
        # the wall clock went back since the previous generation: measure nothing this time
        got = rates_io.measure(consumers, now, None, configured)
        return replace(
            got,
            notes=(
                (
                    f"the previous generation's offsets are not older than this run's ({before.time:.3f} >= "
                    f"{now.time:.3f}): no rates measured"
                ),
            ),
        )
    return rates_io.measure(consumers, now, before, configured)


def _out_of_range(offsets: pd.DataFrame) -> int:
    """Partitions whose committed offset lies outside the log (the lag rules reset them)."""
    rules = lag_columns(offsets["beginning_offset"], offsets["end_offset"], offsets["committed_offset"])
    return int(rules["out_of_range"].sum())
