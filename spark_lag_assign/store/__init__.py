"""Where plans and claims live, chosen by URI (see ``spark_lag_assign.store.base``).

    kafka://broker-1:9092,broker-2:9092/orders   the cluster default: compacted topics in Kafka
    /data/plans/orders, file:///data/plans/orders a directory on this host or a shared POSIX mount
    hdfs://namenode:8020/plans/orders             a directory on HDFS, through Hadoop

Object stores without an atomic rename (``s3a://``, ``gs://``, ...) cannot hold the control
plane; plans can be exported there (``spark_lag_assign.store.export``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from spark_lag_assign.core.ids import CONSUMER_ID_PATTERN
from spark_lag_assign.errors import ConfigError
from spark_lag_assign.store.base import (
    FENCER,
    ClaimFencedError,
    ClaimRecord,
    Claims,
    ClaimWriter,
    FencedError,
    Publisher,
    PublishFencedError,
    Store,
    StoreError,
    StoreNotAuthorizedError,
)

#: schemes of object stores: no atomic rename, no exclusive create that readers can rely on
NO_ATOMIC_RENAME = frozenset({"s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "wasb", "wasbs", "oss", "cos", "r2"})
#: a plan name of the Kafka store: it starts every topic and transactional id of the store,
#: where "." separates the parts, so no name may hold one (a prefix ACL on "orders." must
#: not cover another store's "orders.eu.plans"): the consumer ids' rule, for the same reasons
KAFKA_NAME = re.compile(CONSUMER_ID_PATTERN[1:-1])


@dataclass(frozen=True)
class StoreURI:
    """A parsed store URI: ``scheme`` is kafka, file or hdfs (or another Hadoop scheme)."""

    uri: str
    scheme: str
    location: str  # kafka: bootstrap servers; file: an absolute local path; hadoop: the URI itself
    name: str  # kafka: the plan name; directories: the last path element


def parse_uri(uri: str) -> StoreURI:
    """Check a store URI and split it; a ``ConfigError`` names what is wrong with it."""
    if not isinstance(uri, str) or not uri.strip():
        raise ConfigError("no store: give a store URI (kafka://HOST:PORT/NAME) or a plan directory")
    text = uri.strip()
    if "://" not in text and not text.startswith("file:"):
        return _local(text, uri)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme == "kafka":
        servers = parts.netloc
        name = parts.path.strip("/")
        if not servers or any(not re.fullmatch(r"[^\s:/,]+:\d{1,5}", s) for s in servers.split(",")):
            raise ConfigError(f"store {uri}: expected kafka://HOST:PORT[,HOST:PORT]/NAME")
        if not name:
            raise ConfigError(f"store {uri}: no plan name after the servers (kafka://HOST:PORT/NAME)")
        if not KAFKA_NAME.fullmatch(name):
            raise ConfigError(
                f"store {uri}: plan name {name!r} cannot start Kafka topic names: use letters, digits, '_' or '-' "
                "(at most 100, not starting with a symbol; '.' separates the parts of the store's names)"
            )
        return StoreURI(uri, "kafka", servers, name)
    if scheme == "file":
        return _local(parts.path or "/", uri)
    if scheme in NO_ATOMIC_RENAME:
        raise ConfigError(
            f"store {uri}: {scheme}:// has no atomic rename or exclusive create, so it cannot hold plans and "
            "claims; use kafka:// or hdfs:// as the store and export plans to it instead"
        )
    if scheme == "hdfs" or scheme == "viewfs" or scheme == "webhdfs":
        name = parts.path.rstrip("/").rsplit("/", 1)[-1]
        if not parts.path.strip("/"):
            raise ConfigError(f"store {uri}: give a directory under the file system's root")
        return StoreURI(uri, scheme, text.rstrip("/"), name)
    raise ConfigError(f"store {uri}: unknown scheme {scheme}://; use kafka://, hdfs://, file: or a local path")


def _local(path: str, uri: str) -> StoreURI:
    import os

    absolute = os.path.abspath(os.path.expanduser(path))
    name = os.path.basename(absolute.rstrip("/")) or "root"
    return StoreURI(uri, "file", absolute, name)


def open_store(uri: str, *, client_options: Mapping[str, Any] | None = None, **settings: Any) -> Store:
    """The store a URI names. ``client_options`` are kafka-python settings (security) for a
    Kafka store; ``settings`` are the backend's own (see each backend)."""
    parsed = parse_uri(uri)
    if parsed.scheme == "kafka":
        from spark_lag_assign.store.kafka import KafkaStore

        return KafkaStore(parsed, client_options=client_options, **settings)
    if parsed.scheme == "file":
        from spark_lag_assign.store.directory import DirectoryStore

        return DirectoryStore(parsed, **settings)
    from spark_lag_assign.store.directory import hadoop_store

    return hadoop_store(parsed, **settings)


__all__ = [
    "FENCER",
    "ClaimFencedError",
    "ClaimRecord",
    "ClaimWriter",
    "Claims",
    "FencedError",
    "PublishFencedError",
    "Publisher",
    "Store",
    "StoreError",
    "StoreNotAuthorizedError",
    "StoreURI",
    "open_store",
    "parse_uri",
]
