"""The Kafka source's options and offsets: what a pipeline passes to Spark, and where it starts.

``read_assigned`` and ``PlanFollower`` take the Kafka source's own option names, verbatim:
``kafka.``-prefixed ones configure Spark's consumers (``kafka.bootstrap.servers``,
``kafka.security.protocol``, ``kafka.sasl.jaas.config``, ...), the others are options of the
source (``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``minPartitions``, ...). Since a dotted
name is no Python keyword, ``bootstrap_servers=`` is accepted for ``kafka.bootstrap.servers``.
The options that the plan decides (``assign``, ``subscribe``, ``startingOffsets``, ...) are
refused. The pipeline's own kafka-python clients (commits, a Kafka store) name their
settings differently (``security_protocol``, ``sasl_plain_password``): they take them as
``client_options``, like ``[kafka.client]`` in the planner's config file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any

import pandas as pd

from spark_lag_assign.core.lag import check_reset, lag_columns
from spark_lag_assign.errors import InputError, KafkaReadError
from spark_lag_assign.plan.build import compact_json

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]

#: options the plan decides; Spark's option names are case-insensitive
PLANNED_OPTIONS = frozenset(
    {
        "assign",
        "subscribe",
        "subscribepattern",
        "startingoffsets",
        "startingoffsetsbytimestamp",
        "startingtimestamp",
        "startingoffsetsbytimestampstrategy",
        "endingoffsets",
        "endingoffsetsbytimestamp",
        "endingtimestamp",
    }
)


def tp_names(partitions: Iterable[TopicPartition]) -> str:
    """``t-0, t-3``: partitions for people, sorted."""
    return ", ".join(f"{t}-{p}" for t, p in sorted(partitions))


def source_options(options: Mapping[str, Any]) -> dict[str, str]:
    """The Kafka source options to pass through, as strings; the plan's own options are refused."""
    out: dict[str, str] = {}
    for key, value in options.items():
        name = "kafka.bootstrap.servers" if key == "bootstrap_servers" else str(key)
        if name.lower() in PLANNED_OPTIONS:
            raise InputError(f"Kafka source option {key!r} is taken from the plan; do not pass it")
        if value is None:
            continue
        out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    if not out.get("kafka.bootstrap.servers"):
        raise InputError("no Kafka bootstrap servers: pass kafka.bootstrap.servers (or bootstrap_servers=)")
    return out


def partitions_of(assign: Mapping[str, Iterable[int]]) -> list[TopicPartition]:
    """An ``assign`` object as sorted (topic, partition) pairs."""
    return sorted((str(t), int(p)) for t, ps in assign.items() for p in ps)


def parse_source_offsets(text: str | None) -> Offsets:
    """The Kafka source's offset JSON (``{"topic": {"partition": offset}}``) as {(topic, partition): offset}.

    A progress report carries it as each source's ``endOffset``: the next offset to read,
    which is exactly what a Kafka consumer group commits.
    """
    if text is None or text == "":
        return {}
    try:
        doc = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise InputError(f"not a Kafka source offset JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise InputError(f"not a Kafka source offset JSON (expected an object): {text[:80]!r}")
    out: Offsets = {}
    for topic, parts in doc.items():
        if not isinstance(parts, dict):
            raise InputError(f"not a Kafka source offset JSON (topic {topic!r} maps to {type(parts).__name__})")
        for partition, offset in parts.items():
            try:
                key = (str(topic), int(partition))
            except ValueError:
                raise InputError(f"not a Kafka source offset JSON (partition {partition!r} of {topic!r})") from None
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise InputError(f"not a Kafka source offset JSON (offset {offset!r} of {topic}-{partition})")
            out[key] = offset
    return out


def offsets_json(offsets: Mapping[str, Mapping[str, int]]) -> str:
    """A ``startingOffsets`` object as the exact string the Kafka source takes."""
    return compact_json({t: dict(ps) for t, ps in offsets.items()}, sort_keys=True)


def starting_offsets(
    assign: Mapping[str, Iterable[int]],
    committed: Mapping[TopicPartition, int | None],
    beginning: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    reset: str,
) -> dict[str, dict[str, int]]:
    """Where to start each assigned partition: the group's commit, else the reset rule (-2/-1).

    The same lag rules as the planner's, so a pipeline starts where the plan's lag was
    counted from.
    """
    tps = partitions_of(assign)
    if not tps:
        return {}
    missing = [tp for tp in tps if tp not in beginning or tp not in end]
    if missing:
        raise KafkaReadError(f"no beginning/end offsets for {tp_names(missing)}")
    rules = lag_columns(
        pd.Series([beginning[tp] for tp in tps], dtype="int64"),
        pd.Series([end[tp] for tp in tps], dtype="int64"),
        pd.Series([committed.get(tp) for tp in tps], dtype="Int64"),
        check_reset(reset),
    )
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), start in zip(tps, rules["starting_offset"]):
        out.setdefault(topic, {})[str(partition)] = int(start)
    return out


def read_group_starting_offsets(
    bootstrap_servers: str,
    group: str,
    assign: Mapping[str, Iterable[int]],
    reset: str,
    *,
    client_options: Mapping[str, Any] | None = None,
    timeout_ms: int = 15000,
    distrust: Callable[[Mapping[TopicPartition, str]], Mapping[TopicPartition, str]] | None = None,
) -> dict[str, dict[str, int]]:
    """``starting_offsets`` from the group's committed offsets, read live with kafka-python.

    ``distrust(metadata)``: given each commit's metadata, the partitions whose commit must not
    be a starting point (and why); those start by the reset rule, as if nothing was committed."""
    from spark_lag_assign.extract.offsets import read_partition_offsets

    tps = partitions_of(assign)
    if not tps:
        return {}
    table = read_partition_offsets(bootstrap_servers, group, tps, client_options=client_options, timeout_ms=timeout_ms)
    keys = list(zip(table["topic"], table["partition"].astype(int)))
    committed = dict(zip(keys, (None if pd.isna(c) else int(c) for c in table["committed_offset"])))
    if distrust is not None:
        for tp in distrust(table.attrs.get("commit_metadata", {})):
            committed[tp] = None
    return starting_offsets(
        assign,
        committed,
        dict(zip(keys, table["beginning_offset"].astype(int))),
        dict(zip(keys, table["end_offset"].astype(int))),
        reset,
    )


def metadata(consumer: str, generation: int) -> str:
    """The offset-commit metadata string: who committed, under which plan generation."""
    return f"spark-lag-assign consumer={consumer} generation={generation}"


def parse_metadata(text: str | None) -> tuple[str, int] | None:
    """(consumer, generation) from a commit's metadata, or None if it is not one of ours."""
    if not text or not text.startswith("spark-lag-assign "):
        return None
    fields = dict(part.split("=", 1) for part in text.split()[1:] if "=" in part)
    try:
        return fields["consumer"], int(fields["generation"])
    except (KeyError, ValueError):
        return None


def foreign_commits(
    metadata: Mapping[TopicPartition, str],
    owners: Callable[[int], Mapping[TopicPartition, str] | None],
    newest: int,
    kept: Callable[[], Mapping[int, frozenset[str]] | None] = lambda: None,
) -> dict[TopicPartition, str]:
    """Commits the group holds that no pipeline of the plan made, and why: a pipeline names
    itself and the generation it reads under in every commit's metadata (``metadata``),
    and only the partition's owner in that generation commits it. Kafka cannot refuse another
    member's commit of a partition (the group's READ ACL covers them all): this finds one whose
    metadata names a consumer that did not own the partition in the generation it names, or a
    generation no plan has. Commits without our metadata are not judged.

    ``owners(g)``: partition -> consumer in generation g (None: not kept, or not readable now);
    ``kept()``: generation -> its consumers, for every generation the store keeps (None: not
    readable now). A commit under a generation the store no longer keeps is foreign only if
    it names a consumer that no kept plan has: who owned the partition back then is gone, and
    an honest commit that old is common (a pipeline reads under one generation while its
    partitions stay the same; a successor that was down while the planner published on finds
    its predecessor's commit under a long-gone generation), where distrusting it would start
    the successor by the reset rule and could skip records. What cannot be read is not judged."""
    found: dict[TopicPartition, str] = {}
    kept_once = cache(kept)
    for tp, text in sorted(metadata.items()):
        named = parse_metadata(text)
        if named is None:
            continue
        consumer, generation = named
        if generation > newest:
            found[tp] = f"names {consumer} under generation {generation}, newer than any plan ({newest})"
            continue
        plan_owners = owners(generation)
        if plan_owners is not None:
            if plan_owners.get(tp) != consumer:
                found[tp] = f"names {consumer} under generation {generation}, where {plan_owners.get(tp) or 'nobody'} owned it"
            continue
        generations = kept_once()
        if not generations or generation in generations:
            continue  # kept, or maybe kept, but not readable now: not judged
        if not any(consumer in members for members in generations.values()):
            found[tp] = f"names {consumer} under generation {generation} (no longer kept), and no plan the store keeps has {consumer}"
    return found


__all__ = [
    "PLANNED_OPTIONS",
    "Offsets",
    "TopicPartition",
    "foreign_commits",
    "metadata",
    "offsets_json",
    "parse_metadata",
    "parse_source_offsets",
    "partitions_of",
    "read_group_starting_offsets",
    "source_options",
    "starting_offsets",
    "tp_names",
]
