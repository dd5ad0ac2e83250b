"""The ``spark-lag-assign`` command: plan, snapshot, show, simulate.

    spark-lag-assign plan --bootstrap-servers HOST:9092 --group G --topics a,b --consumers c0,c1 --output DIR
    spark-lag-assign plan --offsets offsets.parquet --subscriptions subs.json --output DIR
    spark-lag-assign snapshot --bootstrap-servers HOST:9092 --group G --topics a,b --output offsets.parquet
    spark-lag-assign show DIR
    spark-lag-assign simulate --offsets offsets.parquet --consumers c0,c1 --rate 5000 --strategies range,lag-sticky

``jobs/plan_assignments.py`` is the same ``plan`` command for ``spark-submit``. Bad input
ends with one line on stderr naming the problem and exit status 1; nothing is written.
Every subcommand's settings are loaded, merged and validated by ``spark_lag_assign.config``
before any Spark or Kafka work starts, and ``plan`` starts Spark only when the job first
needs it, so input that is refused earlier (a store, a snapshot, the cluster) costs no
SparkSession. A usage mistake argparse catches is one line too, with exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from spark_lag_assign.cli.parser import build_parser, key_values, negative_values_joined
from spark_lag_assign.errors import ConfigError, SparkLagAssignError
from spark_lag_assign.metrics import PlannerMetrics

log = logging.getLogger("spark_lag_assign")

SessionFactory = Callable[[dict[str, str], str | None], Any]


def _check_master(master: str | None) -> None:
    if master and not master.startswith("local"):
        raise ConfigError(f"--master {master}: the console script runs local Spark; use spark-submit for a cluster")


#: the planner's own Spark settings, under those of the config's [spark] table. A new Python
#: worker per task: the lag rules' and the assignors' workers hand their memory back when their
#: task ends instead of idling at their peak beside the driver's plan (2.2-2.7 GiB
#: peak at a million partitions, 1.96 GiB without reuse, no slower within noise).
PLANNER_SPARK_CONF: dict[str, str] = {"spark.python.worker.reuse": "false"}


def local_session_factory(spark_conf: dict[str, str], master: str | None) -> Any:
    from spark_lag_assign.spark.session import local_session

    _check_master(master)
    conf = {**PLANNER_SPARK_CONF, **spark_conf}
    return local_session("spark-lag-assign", with_kafka=False, master=master or "local[2]", extra=conf, c1_only=True)


class SessionOnFirstUse:
    """Stands for the SparkSession and starts it when the job first uses it: whatever the job
    refuses before (the store, the snapshot, the cluster, the subscriptions) costs no Spark."""

    def __init__(self, start: Callable[[], Any]) -> None:
        self._start = start
        self._session: Any = None

    @property
    def started(self) -> bool:
        return self._session is not None

    def __getattr__(self, name: str) -> Any:
        if self._session is None:
            self._session = self._start()
        return getattr(self._session, name)


def _source_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "bootstrap_servers": args.bootstrap_servers,
        "group": args.group,
        "topics": args.topics,
        "topic_pattern": args.topic_pattern,
        "client": key_values(args.kafka_option, "--kafka-option"),
        "timeout_ms": args.timeout_ms,
    }


def plan_settings(args: argparse.Namespace) -> Any:
    """``plan``'s settings from its file, the environment and its flags: validated, or one line."""
    from spark_lag_assign import config

    return config.settings(
        args.config,
        **_source_overrides(args),
        offsets=args.offsets,
        consumers=args.consumers,
        subscriptions=args.subscriptions,
        strategy=args.strategy,
        reset=args.reset,
        seed=args.seed,
        history=args.history,
        options=key_values(args.option, "--option"),
        output=args.output,
        offsets_later=args.offsets_later,
        interval=args.interval,
        rate=args.rate,
        rates=args.rates,
        allow_shrink=args.allow_shrink,
        fencing=args.fencing,
        fencing_change=args.fencing_change,
        metrics_file=args.metrics_file,
        pushgateway=args.pushgateway,
        drain_within=args.drain_within,
        size_to_deadline=args.size_to_deadline,
        pinned=args.pinned,
    )


def metrics_targets(args: argparse.Namespace) -> argparse.Namespace:
    """Where a run whose settings failed to validate sends its metrics: ``metrics_file``,
    ``pushgateway`` and ``output`` (the Pushgateway group's store) from the command line, the
    environment and the config file, as far as those layers still read; where they do not
    (the config file itself is the problem), from the command line alone."""
    from spark_lag_assign import config

    given = {"metrics_file": args.metrics_file, "pushgateway": args.pushgateway, "output": args.output}
    try:
        merged = config.merge(args.config, None, given)
        found = {k: merged.get(k) for k in given}
    except SparkLagAssignError:
        found = given
    return argparse.Namespace(**{k: None if v is None else str(v) for k, v in found.items()})


def cmd_plan(args: argparse.Namespace, session_factory: SessionFactory) -> int:
    from spark_lag_assign.plan import report
    from spark_lag_assign.spark import job
    from spark_lag_assign.store import parse_uri

    metrics = PlannerMetrics()
    try:
        settings = plan_settings(args)
    except BaseException as exc:  # a failed run too: outcome failed, reason config
        metrics.record_outcome(*run_outcome(exc))
        _emit_metrics(metrics, metrics_targets(args))
        raise
    try:
        if settings.rates is not None:  # a bad rates file fails before Spark starts
            from spark_lag_assign.core import rates as rates_io

            rates_io.configured_rates(settings.consumers, None, rates_io.read_rates_file(settings.rates))
        spark: Any = SessionOnFirstUse(lambda: session_factory(settings.spark, args.master))
        if parse_uri(settings.output).scheme not in ("file", "kafka"):
            # a Hadoop store opens its file system through the session's Hadoop configuration
            # (spark.hadoop.* settings, Kerberos): Spark must be up before the store is opened
            spark.sparkContext  # noqa: B018
        result = job.run(settings, spark, metrics)
    except BaseException as exc:
        metrics.record_outcome(*run_outcome(exc))
        _emit_metrics(metrics, settings)
        raise
    metrics.record_outcome("published")
    if result.sizing is not None:
        metrics.record_sizing(**result.sizing.metrics())
    print(report.summary(result.plan))
    stuck = result.plan.get("cannot_keep_up") or []
    if stuck:
        print(
            f"spark-lag-assign: warning: {len(stuck)} consumer(s) cannot keep up with their producers and never drain: "
            f"{', '.join(stuck[:10])}",
            file=sys.stderr,
        )
    if args.timings:
        print("timings: " + ", ".join(f"{k} {v:.2f}s" for k, v in result.timings.phases.items()))
    if result.sizing is not None:
        print(result.sizing.describe())
    print(f"published generation {result.plan['generation']} to {result.store}")
    _emit_metrics(metrics, settings)
    return 0


def run_outcome(exc: BaseException) -> tuple[str, str]:
    """(outcome, reason) of a run that raised ``exc``: refused (the plan was judged unfit to
    publish) or failed, the reason one of ``metrics.REASONS``."""
    from spark_lag_assign.errors import (
        ConfigError,
        FencingChangeRefusedError,
        InputError,
        KafkaReadError,
        NotAuthorizedError,
        PlanError,
        ShrinkRefusedError,
        StrategyError,
    )
    from spark_lag_assign.store import PublishFencedError, StoreError

    if isinstance(exc, ShrinkRefusedError):
        return "refused", "shrink"
    if isinstance(exc, FencingChangeRefusedError):
        return "refused", "fencing-change"
    if isinstance(exc, PublishFencedError):
        return "refused", "fenced"
    kinds: list[tuple[type[BaseException], str]] = [
        (NotAuthorizedError, "not-authorized"),
        (ConfigError, "config"),
        (KafkaReadError, "kafka"),
        (StoreError, "store"),
        (InputError, "input"),
        (StrategyError, "input"),
        (PlanError, "input"),
    ]
    for kind, reason in kinds:
        if isinstance(exc, kind):
            return "failed", reason
    if type(exc).__module__.startswith(("pyspark", "py4j")):
        return "failed", "spark"
    return "failed", "other"


def _emit_metrics(metrics: PlannerMetrics, settings: Any) -> None:
    """The run's metrics to the textfile and the Pushgateway it was given (``settings``: the
    run's, or ``metrics_targets``' where they failed); a failure is one warning line: metrics
    never block or undo a plan."""
    if settings.metrics_file:
        try:
            metrics.write_textfile(settings.metrics_file)
        except ConfigError as exc:
            print(f"spark-lag-assign: warning: metrics not written: {exc}", file=sys.stderr)
    if settings.pushgateway:
        from spark_lag_assign.errors import one_line
        from spark_lag_assign.store import parse_uri

        try:
            if not settings.output:  # the group's store: a run whose settings failed may name none
                raise ConfigError("no store to group them by (--output)")
            metrics.push(settings.pushgateway, PUSH_JOB, parse_uri(settings.output).uri)
        except Exception as exc:  # noqa: BLE001 - urllib's and the client's errors alike: one line
            print(
                f"spark-lag-assign: warning: pushing metrics to {settings.pushgateway} failed: {one_line(exc)}", file=sys.stderr
            )


#: the Pushgateway job the planner's metrics are grouped under (with the store as the other key)
PUSH_JOB = "spark_lag_assign_planner"


def cmd_snapshot(args: argparse.Namespace) -> int:
    from spark_lag_assign import config
    from spark_lag_assign.extract import offsets

    settings = config.snapshot_settings(args.config, **_source_overrides(args))
    frame = offsets.read_offsets(
        settings.bootstrap_servers,
        settings.group,
        topics=list(settings.topics) or None,
        topic_pattern=settings.topic_pattern,
        client_options=settings.client,
        timeout_ms=settings.timeout_ms,
    )
    path = offsets.write_snapshot(frame, args.output)
    print(f"wrote {len(frame)} partitions of {frame['topic'].nunique()} topic(s) to {path}")
    return 0


def cmd_fencer(args: argparse.Namespace) -> int:
    """Runs until SIGTERM or Ctrl-C; a newer fencer of the same store ends it."""
    import signal

    from spark_lag_assign import config
    from spark_lag_assign.consume.fencer import Fencer
    from spark_lag_assign.consume.kafka_commit import commit_id, commit_namespace, fence
    from spark_lag_assign.store import open_store, parse_uri

    merged = config.merge(args.config, None, {})
    client = config.client_options(merged.file_client, merged.client_env, key_values(args.kafka_option, "--kafka-option"))
    parsed = parse_uri(args.store)
    bootstrap = (
        args.bootstrap_servers or merged.get("bootstrap_servers") or (parsed.location if parsed.scheme == "kafka" else None)
    )
    if not bootstrap:
        raise ConfigError("the fencer needs the Kafka cluster of the commit ids: --bootstrap-servers (or a kafka:// store)")
    with open_store(args.store, client_options=client) as store:
        commit_namespace(store.name)  # before it fences anything under that name
        fencer = Fencer(store, lambda consumer, _version: fence(bootstrap, commit_id(store.name, consumer), client))
        signal.signal(signal.SIGTERM, lambda *_: fencer.stop())
        print(f"fencer of {store.uri} running", flush=True)
        try:
            fences = fencer.run()
        except KeyboardInterrupt:
            fences = fencer.fences
    print(f"fencer of {args.store} stopped after {fences} fence(s)")
    return 0


def cmd_acls(args: argparse.Namespace) -> int:
    from spark_lag_assign.core.lists import comma_list
    from spark_lag_assign.roles import kafka_acls_lines, role_acls
    from spark_lag_assign.store import parse_uri

    parsed = parse_uri(args.store)
    if parsed.scheme != "kafka":
        raise ConfigError(f"{args.store}: ACLs are for a kafka:// store (a directory's are the file system's permissions)")
    try:
        acls = role_acls(
            args.role, parsed.name, consumer=args.consumer, group=args.group,
            topics=comma_list(args.topics) if args.topics else (), fencing=args.fencing,
        )  # fmt: skip
    except ValueError as exc:
        raise ConfigError(f"acls --role {args.role}: {exc}") from None
    for line in kafka_acls_lines(acls, args.principal, parsed.location):
        print(line)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from spark_lag_assign.plan import report
    from spark_lag_assign.store import open_store

    with open_store(args.store) as store:
        current = store.latest() if args.generation is None else store.get(args.generation)
        if current is None:
            kept = store.generations()
            if args.generation is None and kept:  # generations exist, none readable: the store logged why
                raise ConfigError(
                    f"{args.store} has no readable plan (generations kept: {', '.join(map(str, kept))}; "
                    "see the warning above for why each was skipped)"
                )
            what = "no plan" if args.generation is None else f"no generation {args.generation}"
            raise ConfigError(f"{args.store} has {what} (generations kept: {', '.join(map(str, kept)) or 'none'})")
        previous = store.get(current["generation"] - 1) if current["generation"] > 1 else None
    print(report.summary(current, args.limit))
    if previous is not None:
        print(report.moves(previous, current))
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    """Plans from the pure assignors and their drain, all in this process: no Spark session.

    Long because it is the whole offline command in order (settings, snapshot, lag, one plan
    per strategy, drain, table, files), each step a call or two; split, the order would hide."""
    from spark_lag_assign import assignors, config
    from spark_lag_assign.core import draintime, quality, rates as rates_io
    from spark_lag_assign.core.lag import compute_lag
    from spark_lag_assign.extract import offsets
    from spark_lag_assign.plan import build as plan_io

    settings = config.simulate_settings(
        args.config,
        strategies=args.strategies,
        offsets=args.offsets,
        offsets_later=args.offsets_later,
        interval=args.interval,
        consumers=args.consumers,
        subscriptions=args.subscriptions,
        rate=args.rate,
        rates=args.rates,
        reset=args.reset,
        seed=args.seed,
        options=key_values(args.option, "--option"),
        drain_within=args.drain_within,
        pinned=args.pinned,
    )
    snapshot = offsets.read_snapshot(settings.offsets)
    produce = None
    if settings.offsets_later is not None and settings.interval is not None:
        later = offsets.read_snapshot(settings.offsets_later)
        produce = draintime.produce_rates(snapshot, later, settings.interval)
        snapshot = later  # the backlog to drain is the newest one
    lags = compute_lag(snapshot, settings.reset).loc[:, ["topic", "partition", "lag"]]
    topics = sorted(lags["topic"].unique())
    subs = config.expand_wildcards(settings.subscriptions, topics)
    if settings.rates is not None:
        per_consumer = rates_io.configured_rates(list(subs), None, rates_io.read_rates_file(settings.rates))
        missing = sorted(set(subs) - set(per_consumer))
        if missing:
            raise ConfigError(f"--rates {settings.rates}: no rate for consumer(s) {', '.join(missing[:5])}")
        rate: float | dict[str, float] = per_consumer
    else:
        assert settings.rate is not None
        rate = settings.rate
    read_rates = rate if isinstance(rate, dict) else dict.fromkeys(subs, rate)

    plans: dict[str, Any] = {}
    members: dict[str, list[str]] = {}
    previous = None
    unplanned = 0
    if args.previous is not None:
        from spark_lag_assign.store import open_store

        with open_store(args.previous) as store:
            current = store.latest()
        if current is None:
            raise ConfigError(f"--previous {args.previous}: the store holds no plan")
        previous = plan_io.assignment_frame(current)
        # partitions deleted since are gone; partitions created since are read by nobody under this plan
        kept = previous.merge(lags, on=["topic", "partition"], how="inner")
        unplanned = len(lags[lags["topic"].isin({t for ts in subs.values() for t in ts})]) - len(kept)
        plans["current"], members["current"] = kept, list(current["consumers"])
    for name, chosen in settings.strategies.items():
        spec = assignors.get_strategy(name)
        chosen = dict(chosen)
        if "read_rates" in spec.options:  # drain plans with the rates it is simulated with
            chosen.update(read_rates=read_rates, **({"produce_rates": produce} if produce is not None else {}))
        plans[name] = assignors.assign(lags, subs, name, previous=previous, seed=settings.seed, **chosen)
        members[name] = list(subs)
    drains = {n: draintime.simulate(lags, a, rate, produce, consumers=members[n]) for n, a in plans.items()}

    read = {t for ts in subs.values() for t in ts}
    assigned = lags[lags["topic"].isin(read)]
    print(
        f"simulate: {len(assigned):,} partitions of {len(read & set(topics))} topic(s), lag {quality.exact_sum(assigned['lag']):,}, "
        + (
            f"{len(subs)} consumers reading {rate:,g} msg/s each"
            if not isinstance(rate, dict)
            else f"{len(subs)} consumers reading {min(rate.values()):,g}-{max(rate.values()):,g} msg/s"
        )
    )
    if produce is not None:
        total = float(produce.merge(assigned, on=["topic", "partition"])["produce_rate"].sum())
        print(f"producers append {total:,.1f} msg/s (from two snapshots {settings.interval:g} s apart)")
    nobody = sorted(set(topics) - read)
    if nobody:
        print(f"not simulated: {len(lags) - len(assigned)} partition(s) of topics nobody reads: {', '.join(nobody[:10])}")
    if unplanned > 0:
        print(f"the current plan names none of {unplanned} partition(s) (created since?): under it nobody reads them")
    for name, d in drains.items():
        print(
            f"\n{name}: drains in {draintime.duration(d.time_to_drain)}; no plan of this group can beat "
            f"{draintime.duration(d.lower_bound)}"
        )
        print(draintime.consumer_table(d, args.limit))
        if d.never_drains:
            more = f" and {len(d.never_drains) - 10} more" if len(d.never_drains) > 10 else ""
            print(f"never drain (producers append at least as fast as they read): {', '.join(d.never_drains[:10])}{more}")
    moved = None if previous is None else {n: quality.moved(a, previous, subs) for n, a in plans.items() if n != "current"}
    print("\n" + draintime.summary_table(drains, moved))
    if settings.drain_within is not None:
        from spark_lag_assign.sizing import size

        # sized as drain plans here: from the --previous plan, with drain's options
        drain_options = {k: v for k, v in settings.strategies.get("drain", {}).items() if k in ("margin", "max_swaps")}
        answer = size(lags, subs, read_rates, settings.drain_within, produce, settings.pinned, previous=previous, **drain_options)
        print("\n" + answer.describe())
    return 0


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    # PythonException carries the worker's traceback: its last line is the error itself
    return (lines[-1] if "Traceback" in str(exc) else lines[0]) if lines else type(exc).__name__


def main(argv: Sequence[str] | None = None, session_factory: SessionFactory | None = None) -> int:
    args = build_parser().parse_args(negative_values_joined(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # kafka-python logs every failed connection attempt at ERROR; our one-line error says it once
    logging.getLogger("kafka").setLevel(logging.INFO if args.verbose else logging.CRITICAL)
    try:
        if args.command == "plan":
            if session_factory is None:
                _check_master(args.master)
            return cmd_plan(args, session_factory or local_session_factory)
        if args.command == "snapshot":
            return cmd_snapshot(args)
        if args.command == "simulate":
            return cmd_simulate(args)
        if args.command == "fencer":
            return cmd_fencer(args)
        if args.command == "acls":
            return cmd_acls(args)
        return cmd_show(args)
    except SparkLagAssignError as exc:
        print(f"spark-lag-assign: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # Spark's and py4j's errors, reduced to one line
        if not type(exc).__module__.startswith(("pyspark", "py4j")):
            raise
        print(f"spark-lag-assign: error: Spark failed: {_first_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("spark-lag-assign: interrupted; the previous plan is unchanged", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
