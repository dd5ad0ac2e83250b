"""What each member tells the leader: its topics, what it owns and since which generation.

Every member sends what it owns in its JoinGroup subscription, so that whichever member
leads the next rebalance can keep partitions where they are (stickiness survives a
leader change):

- eager protocol: in the subscription's user data, in this module's format (KIP-54 does
  the same with its own struct);
- cooperative protocol (KIP-429): in the subscription's ``owned_partitions`` and
  ``generation_id`` fields (subscription version 2), as Kafka's own consumer does. Its user
  data then says what the member was *promised*: partitions the last round planned for it
  but left with their holder until the holder revokes them. The leader puts them in the
  member's assignment (same format, generation -1: the leader does not know the number
  yet), the member sends them back with its generation, and whichever member leads the
  next round plans from the same target as the round that made the promise.

User data, version 1, big-endian with Kafka's primitive types::

    int16 version (= 1)
    int32 generation            the generation of the assignment the member holds, -1 for none
    int32 topic count, then per topic, by name:
        int16 name length, UTF-8 name
        int32 partition count, then int32 per partition (ascending)

Anything else (an unknown version, a truncated or trailing byte, a duplicate, a negative
id) is a ``MemberDataError``: the leader treats such a member as owning nothing, logs one
warning, and the rebalance goes on.

Conflicting claims are settled as Kafka's AbstractStickyAssignor settles them: a claim of a
newer generation wins; two members claiming a partition in the same generation both lose it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spark_lag_assign.errors import InputError

USER_DATA_VERSION = 1
NO_GENERATION = -1

_HEAD = struct.Struct(">hii")  # version, generation, topic count
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

TopicPartitionKey = tuple[str, int]


class MemberDataError(InputError):
    """A member's subscription user data cannot be read; the member is taken to own nothing."""


def encode_user_data(owned: Iterable[TopicPartitionKey], generation: int) -> bytes:
    """The user data of a member that owns ``owned`` since ``generation``; same input, same bytes."""
    by_topic: dict[str, set[int]] = {}
    for topic, partition in owned:
        by_topic.setdefault(topic, set()).add(int(partition))
    out = [_HEAD.pack(USER_DATA_VERSION, int(generation), len(by_topic))]
    for topic in sorted(by_topic):
        name = topic.encode()
        partitions = sorted(by_topic[topic])
        out.append(_INT16.pack(len(name)) + name + _INT32.pack(len(partitions)))
        out.append(struct.pack(f">{len(partitions)}i", *partitions))
    return b"".join(out)


def decode_user_data(data: bytes) -> tuple[int, list[TopicPartitionKey]]:
    """(generation, owned partitions sorted) from user data; MemberDataError if it is not ours."""
    view = memoryview(bytes(data))
    if len(view) < _INT16.size:
        raise MemberDataError(f"user data of {len(view)} byte(s) is too short for a version")
    (version,) = _INT16.unpack_from(view, 0)
    if version != USER_DATA_VERSION:
        raise MemberDataError(f"unknown user data version {version} (this assignor reads version {USER_DATA_VERSION})")
    try:
        _, generation, topics = _HEAD.unpack_from(view, 0)
        at = _HEAD.size
        if topics < 0:
            raise MemberDataError(f"negative topic count {topics}")
        owned: list[TopicPartitionKey] = []
        seen: set[str] = set()
        for _ in range(topics):
            (length,) = _INT16.unpack_from(view, at)
            at += _INT16.size
            if length <= 0 or at + length > len(view):
                raise MemberDataError(f"bad topic name length {length}")
            topic = bytes(view[at : at + length]).decode("utf-8")
            at += length
            if topic in seen:
                raise MemberDataError(f"topic {topic!r} listed twice")
            seen.add(topic)
            (count,) = _INT32.unpack_from(view, at)
            at += _INT32.size
            if count < 0 or at + 4 * count > len(view):
                raise MemberDataError(f"bad partition count {count} for topic {topic!r}")
            partitions = struct.unpack_from(f">{count}i", view, at)
            at += 4 * count
            if any(p < 0 for p in partitions) or len(set(partitions)) != count:
                raise MemberDataError(f"negative or repeated partition ids for topic {topic!r}")
            owned.extend((topic, p) for p in partitions)
    except (struct.error, UnicodeDecodeError) as exc:
        raise MemberDataError(f"truncated or malformed user data: {exc}") from None
    if at != len(view):
        raise MemberDataError(f"{len(view) - at} unexpected trailing byte(s)")
    return generation, sorted(owned)


def member_key(member_id: str, group_instance_id: str | None) -> str:
    """The consumer id the pure assignors see for a member.

    Kafka orders static members (``group.instance.id``) before dynamic ones, each by its id
    (RangeAssignor's MemberInfo); the prefixes make plain string order say the same, and a
    static member keeps its key across restarts.
    """
    return f"0:{group_instance_id}" if group_instance_id else f"1:{member_id}"


@dataclass(frozen=True)
class MemberInfo:
    """One member as the leader sees it."""

    member_id: str
    key: str
    topics: tuple[str, ...]
    owned: tuple[TopicPartitionKey, ...] = ()
    generation: int = NO_GENERATION
    problem: str | None = None  # why its ownership was ignored, if it was
    promised: tuple[TopicPartitionKey, ...] = ()  # cooperative: planned for it, still with their holder
    promise_problem: str | None = None  # why its promises were ignored, if they were


def read_member(member: Any, cooperative: bool) -> MemberInfo:
    """A JoinGroup member (``member_id``, ``group_instance_id``, decoded ``metadata``) as MemberInfo.

    Never raises on what the member sent: unreadable ownership becomes ``problem``.
    """
    metadata = member.metadata
    key = member_key(member.member_id, getattr(member, "group_instance_id", None))
    topics = tuple(sorted({str(t) for t in (getattr(metadata, "topics", None) or ())}))
    promised: tuple[TopicPartitionKey, ...] = ()
    why: str | None = None
    try:
        if cooperative:
            generation, owned = _read_owned_partitions(metadata)
            promised, why = _read_promises(metadata, generation)
        else:
            user_data = getattr(metadata, "user_data", None)
            if not user_data:
                return MemberInfo(member.member_id, key, topics)
            generation, owned = decode_user_data(user_data)
    except (MemberDataError, TypeError, ValueError, AttributeError) as exc:
        return MemberInfo(member.member_id, key, topics, problem=str(exc))
    return MemberInfo(member.member_id, key, topics, tuple(owned), generation, promised=promised, promise_problem=why)


def _read_owned_partitions(metadata: Any) -> tuple[int, list[TopicPartitionKey]]:
    version = getattr(metadata, "version", None)
    if version is not None and version < 1:
        raise MemberDataError(
            f"subscription version {version} carries no owned partitions; a cooperative member sends version 2"
        )
    owned: list[TopicPartitionKey] = []
    for entry in getattr(metadata, "owned_partitions", None) or ():
        topic = entry.topic
        if not isinstance(topic, str) or not topic:
            raise MemberDataError(f"bad topic name {topic!r} in owned partitions")
        for p in entry.partitions:
            if not isinstance(p, int) or p < 0:
                raise MemberDataError(f"bad partition id {p!r} of topic {topic!r} in owned partitions")
            owned.append((topic, p))
    if len(set(owned)) != len(owned):
        raise MemberDataError("a partition is listed twice in owned partitions")
    generation = getattr(metadata, "generation_id", NO_GENERATION)
    return (NO_GENERATION if generation is None else int(generation)), sorted(owned)


def _read_promises(metadata: Any, generation: int) -> tuple[tuple[TopicPartitionKey, ...], str | None]:
    """The partitions a cooperative member was promised, and why they were ignored, if they
    were. Unreadable promises cost the member its promises only, never its ownership: what it
    holds must still be revoked before anyone else gets it."""
    user_data = getattr(metadata, "user_data", None)
    if not user_data:
        return (), None
    try:
        promised_in, promised = decode_user_data(user_data)
    except (MemberDataError, TypeError, ValueError) as exc:
        return (), str(exc)
    if promised_in != generation:
        return (), f"promises of generation {promised_in} sent with ownership of generation {generation}"
    return tuple(promised), None


@dataclass(frozen=True)
class Claims:
    """Who owns what, settled from every member's report.

    ``owners``: partition -> the key of its owner, for stickiness (a newer generation wins; a
    tie in one generation leaves the partition unowned). ``holders``: partition -> the keys
    that may really hold it right now (the newest generation that reported it), for the
    cooperative protocol, which must not hand a partition on before its holder let it go.
    ``promised``: partition -> the key of the member the newest round planned it for while
    another still held it (cooperative); a partition promised to two members is promised to
    neither. ``target()`` is the plan that round aimed at: promises over ownership.
    """

    owners: Mapping[TopicPartitionKey, str] = field(default_factory=dict)
    holders: Mapping[TopicPartitionKey, frozenset[str]] = field(default_factory=dict)
    conflicts: tuple[TopicPartitionKey, ...] = ()
    promised: Mapping[TopicPartitionKey, str] = field(default_factory=dict)

    def target(self) -> dict[TopicPartitionKey, str]:
        """Who each claimed partition is meant for: its promised member, else its owner."""
        return {**self.owners, **self.promised}


def settle_claims(members: Sequence[MemberInfo]) -> Claims:
    """Settle the members' claims (see ``Claims``); members with a ``problem`` claim nothing."""
    best: dict[TopicPartitionKey, tuple[int, list[str]]] = {}
    newest = max((m.generation for m in members if m.owned and m.problem is None), default=NO_GENERATION)
    # promises count if no one reports a newer round: a member promised all it gets owns nothing
    # yet, so it may be the only one that reports the round which promised them
    promising = max((m.generation for m in members if m.promised and m.problem is None), default=NO_GENERATION)
    promised: dict[TopicPartitionKey, list[str]] = {}
    for m in sorted(members, key=lambda m: m.key):
        if m.problem is not None:
            continue
        if m.generation == promising >= newest:  # an older round's promise was overtaken by a newer round's plan
            for tp in m.promised:
                promised.setdefault(tp, []).append(m.key)
        for tp in m.owned:
            current = best.get(tp)
            if current is None or m.generation > current[0]:
                best[tp] = (m.generation, [m.key])
            elif m.generation == current[0]:
                current[1].append(m.key)
    # a member that missed a round (its sync failed) still holds what it reports, with the
    # older generation: the newest claim of each partition is who holds it, whatever the
    # newest generation of the whole group is
    holders = {tp: set(keys) for tp, (_, keys) in best.items()}
    owners = {tp: keys[0] for tp, (_, keys) in best.items() if len(keys) == 1}
    conflicts = tuple(sorted(tp for tp, (_, keys) in best.items() if len(keys) > 1))
    return Claims(
        owners,
        {tp: frozenset(ks) for tp, ks in holders.items()},
        conflicts,
        {tp: keys[0] for tp, keys in promised.items() if len(keys) == 1},
    )
