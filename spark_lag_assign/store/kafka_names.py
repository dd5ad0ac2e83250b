"""The Kafka store's layout: topic names, transactional ids, record keys and sizes, and a
plan's records (see ``spark_lag_assign.store.kafka``)."""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Iterable
from typing import Any

from spark_lag_assign.plan.build import Plan, compact_json
from spark_lag_assign.store.base import (
    StoreError,
    utc_stamp,
)

#: largest value of one plan record; well under the ~1 MB a broker accepts by default
CHUNK_BYTES = 256 * 1024
#: the producer's batch size: several small records share one compressed batch
BATCH_BYTES = 512 * 1024
#: the topics' max.message.bytes: a whole batch (uncompressed bound) fits with room to spare
MAX_MESSAGE_BYTES = 1024 * 1024
MANIFEST_FORMAT = 1
PLANS_SUFFIX = ".plans"
CLAIMS_INFIX = ".claims."


def plans_topic(name: str) -> str:
    """The plans topic of a plan name."""
    return name + PLANS_SUFFIX


def claims_prefix(name: str) -> str:
    """What every claims topic of a plan name begins with (a prefixed READ ACL on it reads them all)."""
    return name + CLAIMS_INFIX


def claims_topic(name: str, consumer: str) -> str:
    """The topic ``consumer`` (or the fencer, ``FENCER``) writes its claims to."""
    return claims_prefix(name) + consumer


def planner_transactional_id(name: str) -> str:
    return f"spark-lag-assign.{name}.planner"


def claim_transactional_id(name: str, consumer: str) -> str:
    return f"spark-lag-assign.{name}.claim.{consumer}"


def generation_prefix(generation: int) -> str:
    return f"g/{generation:010d}/"


def manifest_key(generation: int) -> str:
    return generation_prefix(generation) + "manifest"


def header_key(generation: int, chunk: int) -> str:
    return f"{generation_prefix(generation)}plan/{chunk:04d}"


def consumer_key(generation: int, consumer: str, chunk: int) -> str:
    return f"{generation_prefix(generation)}c/{consumer}/{chunk:04d}"


def record_generation(key: str) -> int | None:
    parts = key.split("/", 2)
    if len(parts) == 3 and parts[0] == "g" and len(parts[1]) == 10 and parts[1].isdigit():
        return int(parts[1])
    return None


def record_consumer(key: str) -> str | None:
    """The consumer a plan record's key names (``g/<generation>/c/<consumer>/<chunk>``), if any."""
    parts = key.split("/")
    return parts[3] if len(parts) == 5 and parts[2] == "c" else None


def _chunks(data: bytes) -> list[bytes]:
    return [data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)] or [b""]


def records_digest(records: Iterable[tuple[str, bytes]]) -> str:
    """sha256 over (key, value) pairs, each length-prefixed so that no two layouts collide."""
    h = hashlib.sha256()
    for key, value in records:
        k = key.encode()
        h.update(len(k).to_bytes(4, "big") + k + len(value).to_bytes(8, "big"))
        h.update(value)
    return h.hexdigest()


def _dumps(value: Any) -> bytes:
    return compact_json(value).encode()


def encode_plan(plan: Plan) -> tuple[list[tuple[str, bytes]], tuple[str, bytes]]:
    """A generation's records in publishing order, and its manifest (written after them)."""
    generation = int(plan["generation"])
    records: list[tuple[str, bytes]] = []
    header = {k: (None if k == "consumers" else v) for k, v in plan.items()}
    header_chunks = _chunks(_dumps(header))
    records += [(header_key(generation, i), c) for i, c in enumerate(header_chunks)]
    listed: list[list[Any]] = []
    for consumer, entry in plan["consumers"].items():
        chunks = _chunks(_dumps(entry))
        listed.append([consumer, len(chunks)])
        records += [(consumer_key(generation, consumer, i), c) for i, c in enumerate(chunks)]
    manifest = {
        "format": MANIFEST_FORMAT,
        "generation": generation,
        "plan": len(header_chunks),
        "consumers": listed,
        "records": len(records),
        "sha256": records_digest(records),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "written": utc_stamp(),
    }
    value = _dumps(manifest)
    if len(value) > CHUNK_BYTES:
        raise StoreError(
            f"generation {generation}: {len(plan['consumers'])} consumers make a manifest of {len(value)} bytes, "
            f"over the {CHUNK_BYTES} a record may hold; use fewer or shorter consumer ids"
        )
    return records, (manifest_key(generation), value)
