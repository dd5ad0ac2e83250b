"""Configuration: one code path that loads, merges and validates the settings of every
subcommand before any Spark or Kafka work starts.

Three layers, each key taken from the highest one that gives it::

    a TOML file (--config)  <  the environment (SPARK_LAG_ASSIGN_<KEY>)  <  the command line

``[kafka.client]`` and ``[plan.options]`` merge key by key (``--kafka-option`` and
``--option`` override one key each). Secrets come from environment variables that the file
names (``[kafka.client_env]``), never from the file itself. Types are checked by pydantic
models: the file's values must have the right TOML type (``seed = "2"``, ``seed = 2.9`` and
``seed = true`` are refused, not coerced); the environment's and the command line's are
strings, parsed as the key's type. Every mistake is one ``ConfigError`` line naming the file
and key, the variable or the flag, and what is wrong.

    [kafka]
    bootstrap_servers = "broker-1:9092,broker-2:9092"
    group = "orders-pipelines"
    topics = ["orders", "payments"]          # or: topic_pattern = "orders-.*"
    timeout_ms = 15000
    [kafka.client]                           # passed through to kafka-python
    security_protocol = "SASL_SSL"
    [kafka.client_env]                       # kafka-python option = environment variable
    sasl_plain_password = "PLANNER_KAFKA_PASSWORD"

    [plan]
    output = "/data/plans/orders"
    strategy = "lag-sticky"
    reset = "latest"
    consumers = ["pipeline-a", "pipeline-b"] # or a [plan.subscriptions] table
    allow_shrink = false                     # true: publish a plan that drops most partitions
    fencing = "self"                         # "service": a fencer fences on the pipelines' behalf
    fencing_change = false                   # true: publish a plan that fences otherwise than the last
    [plan.options]
    tolerance = 0.05

    [spark]                                  # extra settings for the local session
    "spark.driver.memory" = "4g"
"""

from __future__ import annotations

import inspect
import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from spark_lag_assign.assignors import DEFAULT_STRATEGY, STRATEGIES, get_strategy
from spark_lag_assign.config.layers import ENV_PREFIX, Merged, flag, load_file, merge
from spark_lag_assign.core.ids import check_consumer_ids
from spark_lag_assign.core.lag import check_reset
from spark_lag_assign.core.lists import comma_list
from spark_lag_assign.errors import ConfigError, InputError, SparkLagAssignError
from spark_lag_assign.store import parse_uri


@dataclass(frozen=True)
class Settings:
    """Everything one planning run needs, validated."""

    output: str  # the store: a plan directory, kafka://HOST:PORT/NAME or hdfs://...
    consumers: tuple[str, ...]
    subscriptions: dict[str, list[str]]  # consumer -> topics; a topic list of ["*"] means every planned topic
    strategy: str = DEFAULT_STRATEGY
    reset: str = "latest"
    seed: int = 0
    history: int = 20  # generations the store keeps readable (show --generation N)
    options: dict[str, Any] = field(default_factory=dict)
    bootstrap_servers: str | None = None
    group: str | None = None
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    timeout_ms: int = 15000
    client: dict[str, Any] = field(default_factory=dict)
    offsets: Path | None = None  # a snapshot file instead of a live cluster
    spark: dict[str, str] = field(default_factory=dict)
    # rates: a second snapshot taken ``interval`` seconds after ``offsets`` gives
    # produce rates offline; ``rate`` (every consumer) or ``rates`` (a CSV/JSON file per
    # consumer) are configured read rates, records per second
    offsets_later: Path | None = None
    interval: float | None = None
    rate: float | None = None
    rates: Path | None = None
    allow_shrink: bool = False  # publish even a plan that drops most of the previous plan's partitions
    fencing: str = "self"  # who fences a lapsed pipeline's commits: itself ("self") or the fencer ("service")
    fencing_change: bool = False  # publish a plan whose fencing differs from the previous plan's
    metrics_file: str | None = None  # write the run's metrics there (node_exporter textfile)
    pushgateway: str | None = None  # push the run's metrics to this Pushgateway
    drain_within: float | None = None  # seconds: how many pipelines drain the backlog by then
    size_to_deadline: bool = False  # publish drain's plan for that many pipelines
    pinned: tuple[str, ...] = ()  # pipelines sizing always keeps

    @property
    def live(self) -> bool:
        return self.offsets is None

    @property
    def source(self) -> str:
        return f"kafka://{self.bootstrap_servers}" if self.live else str(self.offsets)

    def resolved_subscriptions(self, planned_topics: Sequence[str]) -> dict[str, list[str]]:
        """Subscriptions with the wildcard ``*`` expanded to the planned topics."""
        return expand_wildcards(self.subscriptions, planned_topics)

    def subscribed_topics(self) -> list[str]:
        return sorted({t for topics in self.subscriptions.values() for t in topics if t != "*"})


@dataclass(frozen=True)
class SnapshotSettings:
    """``snapshot``: a live group's offsets, read with these settings."""

    bootstrap_servers: str
    group: str
    topics: tuple[str, ...]
    topic_pattern: str | None
    timeout_ms: int
    client: dict[str, Any]


@dataclass(frozen=True)
class SimulateSettings:
    """``simulate``: snapshots, a group and read rates; strategies with their options checked."""

    offsets: Path
    subscriptions: dict[str, list[str]]  # ["*"]: every topic of the snapshot
    strategies: dict[str, dict[str, Any]]  # name -> the options it takes, in the order given
    reset: str = "latest"
    seed: int = 0
    offsets_later: Path | None = None
    interval: float | None = None
    rate: float | None = None
    rates: Path | None = None
    drain_within: float | None = None  # seconds: how many pipelines drain the backlog by then
    pinned: tuple[str, ...] = ()


# -- loading one layer ---------------------------------------------------------------------


# -- cross-key rules -----------------------------------------------------------------------


def _named(origin: str, check: Callable[[], Any]) -> Any:
    """``check()``, its error led by the place the checked value came from."""
    try:
        return check()
    except SparkLagAssignError as exc:
        if str(exc).startswith(origin):
            raise
        raise type(exc)(f"{origin}: {exc}") from None


def option_parser(strategy: str) -> Callable[[Mapping[str, Any]], Any] | None:
    """The ``options(raw)`` parser of a strategy's module, if it takes options."""
    spec = get_strategy(strategy)
    module = inspect.getmodule(spec.assign_codes)
    parser = getattr(module, "options", None)
    return parser if callable(parser) else None


def check_options(strategy: str, options: Mapping[str, Any], origin: Callable[[str], str]) -> dict[str, Any]:
    """A strategy's options, each checked by the strategy's own parser (its rules stay there)."""
    spec = get_strategy(strategy)
    parser = option_parser(strategy)
    for name, value in options.items():
        if name not in spec.options:
            takes = f"; it takes: {', '.join(spec.options)}" if spec.options else ""
            raise ConfigError(f"{origin(name)}: strategy {strategy} takes no option {name}{takes}")
        if parser is not None:
            _named(origin(name), partial(parser, {name: value}))
    if parser is not None and options:
        _named(", ".join(origin(n) for n in options), lambda: parser(options))
    return dict(options)


def read_subscriptions_file(path: str | Path) -> dict[str, list[str]]:
    """``{"consumer": ["topic", ...]}`` from a JSON file; a consumer named twice is an error."""
    path = Path(path)

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise InputError(f"{path}: consumer id {twice[0]!r} is given twice")
        return dict(pairs)

    try:
        doc = json.loads(path.read_text(), object_pairs_hook=no_duplicates)
    except FileNotFoundError:
        raise InputError(f"subscriptions file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"subscriptions file {path} cannot be read ({exc})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return _subscriptions(doc, str(path))


def _subscriptions(doc: Any, where: str) -> dict[str, list[str]]:
    if not isinstance(doc, dict) or not doc:
        raise InputError(f"{where}: subscriptions must be a non-empty object of consumer -> [topics]")
    out: dict[str, list[str]] = {}
    for consumer, topics in doc.items():
        if not isinstance(topics, list) or not all(isinstance(t, str) and t for t in topics):
            raise InputError(f"{where}: consumer {consumer!r} must map to a list of topic names")
        out[consumer] = sorted(set(topics))
    check_consumer_ids(list(out))
    return out


def subscriptions_from(consumers: str | Sequence[str] | None, subscriptions: Any) -> dict[str, list[str]]:
    """consumer -> topics from either a consumer list (each reads ``*``, every planned topic) or
    subscriptions (a JSON file's path, or a mapping); exactly one of the two."""
    if consumers is not None and subscriptions is not None:
        raise ConfigError("give consumers or subscriptions, not both")
    if subscriptions is not None:
        if isinstance(subscriptions, (str, Path)):
            return read_subscriptions_file(subscriptions)
        return _subscriptions(subscriptions, "subscriptions")
    if consumers is None:
        raise ConfigError("no consumers: give consumers (a list) or subscriptions")
    # text is a flag's comma list ("a, b"); a list's ids are checked as given, as assign() would
    consumers = comma_list(consumers) if isinstance(consumers, str) else list(consumers)
    if not consumers:
        raise InputError("no consumers: give at least one consumer id")
    check_consumer_ids(list(consumers))
    return {c: ["*"] for c in consumers}


def _group(merged: Merged) -> dict[str, list[str]]:
    """The group's subscriptions, errors led by the key they came from."""
    consumers, subscriptions = merged.get("consumers"), merged.get("subscriptions")
    if consumers is not None and subscriptions is not None:
        raise ConfigError(
            f"give consumers or subscriptions, not both ({merged.origin('consumers')}, {merged.origin('subscriptions')})"
        )
    key = "consumers" if subscriptions is None else "subscriptions"
    if consumers is None and subscriptions is None:
        raise ConfigError("no consumers: give consumers (--consumers, plan.consumers) or subscriptions")
    if key == "subscriptions" and isinstance(subscriptions, dict):
        return _named(merged.origin(key), lambda: _subscriptions(subscriptions, "subscriptions"))
    return _named(merged.origin(key), lambda: subscriptions_from(consumers, subscriptions))


def expand_wildcards(subscriptions: Mapping[str, Sequence[str]], topics: Sequence[str]) -> dict[str, list[str]]:
    """Subscriptions with ``["*"]`` replaced by every topic of ``topics``."""
    everything = sorted(set(topics))
    # one shared list for every "*" consumer: pickled once when Spark ships it to a worker
    return {c: everything if list(ts) == ["*"] else sorted(set(ts)) for c, ts in subscriptions.items()}


def client_options(
    file_client: Mapping[str, Any] | None, file_env: Mapping[str, Any] | None, given: Mapping[str, Any] | None
) -> dict[str, Any]:
    """kafka-python options, key by key: the file's ``[kafka.client]`` < its secrets from the
    environment (``[kafka.client_env]``) < the command line's ``--kafka-option``."""
    merged = dict(file_client or {})
    merged.update(_env_secrets(file_env or {}))
    merged.update(given or {})
    return merged


def _env_secrets(client_env: Mapping[str, Any]) -> dict[str, str]:
    out = {}
    for option, variable in sorted(client_env.items()):
        value = os.environ.get(str(variable))
        if value is None:
            raise ConfigError(f"environment variable {variable} (for Kafka option {option}) is not set")
        out[option] = value
    return out


def _rate_settings(merged: Merged, offline: bool) -> tuple[Path | None, float | None, float | None, Path | None]:
    """(offsets_later, interval, rate, rates), checked: one line for each mistake."""
    from spark_lag_assign.core.rates import check_interval, check_rate

    later, interval = merged.get("offsets_later"), merged.get("interval")
    if (later is None) != (interval is None):
        given = merged.origin("offsets_later" if later is not None else "interval")
        raise ConfigError(
            f"{given}: offsets_later and interval go together: produce rates need both snapshots and the time between"
        )
    if later is not None and not offline:
        raise ConfigError(
            f"{merged.origin('offsets_later')}: offsets_later is for offline planning: give the earlier snapshot as offsets"
        )
    rate, rates = merged.get("rate"), merged.get("rates")
    if rate is not None and rates is not None:
        raise ConfigError("give rate (every consumer) or rates (a file per consumer), not both")
    return (
        Path(later) if later is not None else None,
        _named(merged.origin("interval"), lambda: check_interval(interval)) if interval is not None else None,
        _as_config_error(lambda: check_rate(rate, merged.origin("rate"))) if rate is not None else None,
        Path(rates) if rates is not None else None,
    )


def _as_config_error(check: Callable[[], Any]) -> Any:
    try:
        return check()
    except InputError as exc:
        raise ConfigError(str(exc)) from None


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|d|h|m|s)?")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: object, what: str = "drain_within") -> float:
    """Seconds from ``"45m"``, ``"1h30m"``, ``"90s"``, ``"1.5h"`` or a number of seconds; more
    than zero and finite, or one ``ConfigError`` line naming ``what``."""
    if isinstance(value, bool):
        raise ConfigError(f"{what}: {value!r} is not a duration (e.g. 45m, 1h30m, 90s)")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = str(value).strip().replace(" ", "")
        if text.startswith("-"):
            raise ConfigError(f"{what}: {value!r} is negative: a deadline is a time from now (e.g. 45m)")
        pieces = list(_DURATION.finditer(text))
        if not text or "".join(m.group(0) for m in pieces) != text or any(m.start() != 0 and m.group(2) is None for m in pieces):
            raise ConfigError(f"{what}: {value!r} is not a duration (e.g. 45m, 1h30m, 90s)")
        seconds = sum(float(m.group(1)) * _UNIT[m.group(2)] for m in pieces)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(f"{what}: {value!r} must be a time of more than zero seconds (e.g. 45m)")
    return seconds


def _sizing(merged: Merged, consumers: Sequence[str]) -> tuple[float | None, tuple[str, ...]]:
    """(drain_within in seconds, pinned pipelines), checked."""
    within = merged.get("drain_within")
    seconds = parse_duration(within, merged.origin("drain_within")) if within is not None else None
    pinned = tuple(merged.get("pinned") or ())
    unknown = sorted(set(pinned) - set(consumers))
    if unknown:
        raise ConfigError(f"{merged.origin('pinned')}: pinned pipeline(s) not in the group: {', '.join(unknown[:5])}")
    if pinned and seconds is None:
        raise ConfigError(f"{merged.origin('pinned')}: pinned pipelines are for sizing: give drain_within too")
    return seconds, pinned


def _common(merged: Merged) -> tuple[str, int]:
    reset = _named(merged.origin("reset"), lambda: check_reset(str(merged.get("reset", "latest"))))
    return reset, int(merged.get("seed", 0))


# -- one path for every subcommand -----------------------------------------------------------


def settings(file: str | Path | None = None, *, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
    """``plan``: merge a config file (optional), the environment and overrides (the command
    line's values; None means "not given"), then validate."""
    merged = merge(file, environ, overrides)
    offsets = merged.get("offsets")
    if offsets is None and not (merged.get("bootstrap_servers") and merged.get("group")):
        raise ConfigError("no offsets source: give bootstrap_servers and group (live) or an offsets snapshot file")
    if offsets is not None and merged.get("bootstrap_servers"):
        raise ConfigError(
            "choose one offsets source: a live cluster (bootstrap_servers, from "
            f"{merged.origin('bootstrap_servers')}) or a snapshot (offsets, from {merged.origin('offsets')})"
        )
    if not merged.get("output"):
        raise ConfigError("no store to publish to (plan.output or --output: a plan directory or kafka://HOST:PORT/NAME)")
    _named(merged.origin("output"), lambda: parse_uri(str(merged.get("output"))))

    subs = _group(merged)
    strategy = str(merged.get("strategy") or DEFAULT_STRATEGY)
    _named(merged.origin("strategy"), lambda: get_strategy(strategy))
    options = check_options(strategy, merged.get("options") or {}, lambda n: merged.origin(f"options.{n}"))
    reset, seed = _common(merged)
    client = client_options(merged.file_client, merged.client_env, merged.get("client"))
    offsets_later, interval, rate, rates = _rate_settings(merged, offsets is not None)
    drain_within, pinned = _sizing(merged, list(subs))
    size_to_deadline = bool(merged.get("size_to_deadline", False))
    if size_to_deadline and drain_within is None:
        raise ConfigError(f"{merged.origin('size_to_deadline')}: size_to_deadline needs drain_within (the deadline)")
    if size_to_deadline and strategy != "drain":
        raise ConfigError(f"{merged.origin('size_to_deadline')}: the sized plan is drain's: use strategy drain (not {strategy})")
    return Settings(
        output=str(merged.get("output")),
        consumers=tuple(sorted(subs)),
        subscriptions=subs,
        strategy=strategy,
        reset=reset,
        seed=seed,
        history=int(merged.get("history", 20)),
        options=options,
        bootstrap_servers=merged.get("bootstrap_servers"),
        group=merged.get("group"),
        topics=tuple(merged.get("topics") or ()),
        topic_pattern=merged.get("topic_pattern"),
        timeout_ms=int(merged.get("timeout_ms", 15000)),
        client=client,
        offsets=Path(offsets) if offsets is not None else None,
        spark=merged.spark,
        offsets_later=offsets_later,
        interval=interval,
        rate=rate,
        rates=rates,
        allow_shrink=bool(merged.get("allow_shrink", False)),
        fencing=str(merged.get("fencing") or "self"),
        fencing_change=bool(merged.get("fencing_change", False)),
        metrics_file=merged.get("metrics_file"),
        pushgateway=merged.get("pushgateway"),
        drain_within=drain_within,
        size_to_deadline=size_to_deadline,
        pinned=pinned,
    )


def snapshot_settings(
    file: str | Path | None = None, *, environ: Mapping[str, str] | None = None, **overrides: Any
) -> SnapshotSettings:
    """``snapshot``: the ``[kafka]`` settings, merged and validated like ``plan``'s."""
    merged = merge(file, environ, overrides)
    if not merged.get("bootstrap_servers") or not merged.get("group"):
        raise ConfigError("snapshot needs bootstrap_servers and group (--bootstrap-servers, --group or [kafka])")
    return SnapshotSettings(
        bootstrap_servers=str(merged.get("bootstrap_servers")),
        group=str(merged.get("group")),
        topics=tuple(merged.get("topics") or ()),
        topic_pattern=merged.get("topic_pattern"),
        timeout_ms=int(merged.get("timeout_ms", 15000)),
        client=client_options(merged.file_client, merged.client_env, merged.get("client")),
    )


def simulate_settings(
    file: str | Path | None = None,
    *,
    strategies: str | Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> SimulateSettings:
    """``simulate``: a snapshot, the group, read rates and the strategies to compare, each
    strategy's options checked by its own parser; an option must suit at least one of them."""
    merged = merge(file, environ, overrides)
    offsets = merged.get("offsets")
    if offsets is None:
        raise ConfigError("simulate needs an offsets snapshot (--offsets)")
    subs = _group(merged)
    names = comma_list(strategies) if strategies is not None else list(STRATEGIES)
    if not names:
        raise ConfigError("--strategies names no strategy")
    for name in names:
        _named("--strategies", partial(get_strategy, name))
    options = merged.get("options") or {}

    def origin(name: str) -> str:
        return merged.origin(f"options.{name}")

    for key in options:
        # the file's options are for its plan's strategy: only a flag's must suit a chosen one
        if not any(key in get_strategy(n).options for n in names) and origin(key).startswith(flag("options")):
            raise ConfigError(f"{origin(key)}: none of the chosen strategies takes it")
    chosen = {n: check_options(n, {k: v for k, v in options.items() if k in get_strategy(n).options}, origin) for n in names}
    reset, seed = _common(merged)
    offsets_later, interval, rate, rates = _rate_settings(merged, True)
    if rate is None and rates is None:
        raise ConfigError("simulate needs read rates: --rate (every consumer) or --rates (a file per consumer)")
    drain_within, pinned = _sizing(merged, list(subs))
    return SimulateSettings(
        offsets=Path(offsets),
        subscriptions=subs,
        strategies=chosen,
        reset=reset,
        seed=seed,
        offsets_later=offsets_later,
        interval=interval,
        rate=rate,
        rates=rates,
        drain_within=drain_within,
        pinned=pinned,
    )


__all__ = [
    "ENV_PREFIX",
    "Settings",
    "SimulateSettings",
    "SnapshotSettings",
    "check_options",
    "client_options",
    "comma_list",
    "expand_wildcards",
    "load_file",
    "merge",
    "parse_duration",
    "read_subscriptions_file",
    "replace",
    "settings",
    "simulate_settings",
    "snapshot_settings",
    "subscriptions_from",
]
