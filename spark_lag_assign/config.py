"""Configuration: a TOML file from ``conf/`` plus command-line overrides, loaded into one
validated, typed object. Secrets come from environment variables that the file names
(``[kafka.client_env]``), never from the file itself.

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
    [plan.options]
    tolerance = 0.05

    [spark]                                  # extra settings for the local session
    "spark.driver.memory" = "4g"
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from spark_lag_assign.assignors import DEFAULT_STRATEGY, get_strategy
from spark_lag_assign.errors import ConfigError, InputError
from spark_lag_assign.lag import check_reset
from spark_lag_assign.plan import check_consumer_ids
from spark_lag_assign.store import parse_uri

_SECTIONS: dict[str, set[str]] = {
    "kafka": {"bootstrap_servers", "group", "topics", "topic_pattern", "timeout_ms", "client", "client_env"},
    "plan": {
        "output", "history", "strategy", "reset", "seed", "consumers", "subscriptions", "options", "offsets",
        "offsets_later", "interval", "rate", "rates",
    },
    "spark": set(),  # free-form Spark settings
}


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
    # rates (issue 12): a second snapshot taken ``interval`` seconds after ``offsets`` gives
    # produce rates offline; ``rate`` (every consumer) or ``rates`` (a CSV/JSON file per
    # consumer) are configured read rates, records per second
    offsets_later: Path | None = None
    interval: float | None = None
    rate: float | None = None
    rates: Path | None = None

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


def load_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """A config file's sections; unknown sections or keys are errors (they are usually typos)."""
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    for section, value in doc.items():
        if section not in _SECTIONS or not isinstance(value, dict):
            raise ConfigError(f"{path}: unknown section [{section}]; known: {', '.join(_SECTIONS)}")
        unknown = sorted(set(value) - _SECTIONS[section]) if _SECTIONS[section] else []
        if unknown:
            raise ConfigError(f"{path}: unknown key(s) in [{section}]: {', '.join(unknown)}")
    return {s: dict(doc.get(s, {})) for s in _SECTIONS}


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
    if isinstance(consumers, str):
        consumers = [c.strip() for c in consumers.split(",") if c.strip()]
    if not consumers:
        raise InputError("no consumers: give at least one consumer id")
    check_consumer_ids(list(consumers))
    return {c: ["*"] for c in consumers}


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


def settings(file: str | Path | None = None, **overrides: Any) -> Settings:
    """Merge a config file (optional) and overrides (None means "not given"), then validate."""
    sections = load_file(file) if file else {s: {} for s in _SECTIONS}
    kafka, plan = sections["kafka"], sections["plan"]
    merged: dict[str, Any] = {**kafka, **plan}
    given = {k: v for k, v in overrides.items() if v is not None}
    # a choice made on the command line replaces the file's alternative to it
    for one, other in (("offsets", "bootstrap_servers"), ("consumers", "subscriptions")):
        for chosen, dropped in ((one, other), (other, one)):
            if chosen in given and dropped not in given:
                merged.pop(dropped, None)
    given_client = given.pop("client", None)  # --kafka-option overrides keys, not the whole table
    merged.update(given)

    offsets = merged.get("offsets")
    if offsets is None and not (merged.get("bootstrap_servers") and merged.get("group")):
        raise ConfigError("no offsets source: give bootstrap_servers and group (live) or an offsets snapshot file")
    if offsets is not None and merged.get("bootstrap_servers"):
        raise ConfigError("choose one offsets source: a live cluster (bootstrap_servers) or a snapshot (offsets)")
    if not merged.get("output"):
        raise ConfigError("no store to publish to (plan.output or --output: a plan directory or kafka://HOST:PORT/NAME)")
    parse_uri(str(merged["output"]))  # an unknown scheme or a bad plan name is one line, before any work

    subs = subscriptions_from(merged.get("consumers"), merged.get("subscriptions"))

    strategy = str(merged.get("strategy") or DEFAULT_STRATEGY)
    spec = get_strategy(strategy)
    options = dict(merged.get("options") or {})
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        raise ConfigError(f"strategy {strategy} takes no option {', '.join(unknown)}")

    topics = merged.get("topics") or ()
    if isinstance(topics, str):
        topics = [t.strip() for t in topics.split(",") if t.strip()]
    try:
        seed = int(merged.get("seed", 0))
        history = int(merged.get("history", 20))
        timeout_ms = int(merged.get("timeout_ms", 15000))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"seed, history and timeout_ms must be integers ({exc})") from None
    if history < 1:
        raise ConfigError(f"history must keep at least one generation, not {history}")
    client = client_options(merged.get("client"), merged.get("client_env"), given_client)
    offsets_later, interval, rate, rates = _rate_settings(merged, offsets)
    return Settings(
        output=str(merged["output"]),
        consumers=tuple(sorted(subs)),
        subscriptions=subs,
        strategy=strategy,
        reset=check_reset(str(merged.get("reset", "latest"))),
        seed=seed,
        history=history,
        options=options,
        bootstrap_servers=merged.get("bootstrap_servers"),
        group=merged.get("group"),
        topics=tuple(topics),
        topic_pattern=merged.get("topic_pattern"),
        timeout_ms=timeout_ms,
        client=client,
        offsets=Path(offsets) if offsets is not None else None,
        spark={str(k): str(v) for k, v in sections["spark"].items()},
        offsets_later=offsets_later,
        interval=interval,
        rate=rate,
        rates=rates,
    )


def _rate_settings(merged: Mapping[str, Any], offsets: Any) -> tuple[Path | None, float | None, float | None, Path | None]:
    """(offsets_later, interval, rate, rates), checked: one line for each mistake."""
    from spark_lag_assign.rates import check_interval, check_rate

    later, interval = merged.get("offsets_later"), merged.get("interval")
    if (later is None) != (interval is None):
        raise ConfigError("offsets_later and interval go together: produce rates need both snapshots and the time between")
    if later is not None and offsets is None:
        raise ConfigError("offsets_later is for offline planning: give the earlier snapshot as offsets")
    rate, rates = merged.get("rate"), merged.get("rates")
    if rate is not None and rates is not None:
        raise ConfigError("give rate (every consumer) or rates (a file per consumer), not both")
    return (
        Path(later) if later is not None else None,
        check_interval(interval) if interval is not None else None,
        check_rate(rate, "rate") if rate is not None else None,
        Path(rates) if rates is not None else None,
    )


__all__ = [
    "Settings",
    "client_options",
    "expand_wildcards",
    "load_file",
    "read_subscriptions_file",
    "replace",
    "settings",
    "subscriptions_from",
]
