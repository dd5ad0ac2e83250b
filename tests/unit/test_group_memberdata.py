"""The member data of the group assignors: the user data format and how claims are settled."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest
from hypothesis import given, strategies as st

from spark_lag_assign.group.memberdata import (
    NO_GENERATION,
    USER_DATA_VERSION,
    MemberDataError,
    MemberInfo,
    decode_user_data,
    encode_user_data,
    member_key,
    read_member,
    settle_claims,
)

topic_names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)
owned_sets = st.sets(st.tuples(topic_names, st.integers(0, 2**31 - 1)), max_size=30)


@given(owned_sets, st.integers(-1, 2**31 - 1))
def test_user_data_round_trips(owned: set[tuple[str, int]], generation: int) -> None:
    assert decode_user_data(encode_user_data(owned, generation)) == (generation, sorted(owned))


def test_user_data_is_the_same_bytes_for_the_same_ownership() -> None:
    a = encode_user_data([("t1", 2), ("t0", 5), ("t1", 0)], 7)
    b = encode_user_data([("t1", 0), ("t1", 2), ("t0", 5)], 7)
    assert a == b
    assert a == (
        struct.pack(">hii", USER_DATA_VERSION, 7, 2)
        + struct.pack(">h", 2) + b"t0" + struct.pack(">ii", 1, 5)
        + struct.pack(">h", 2) + b"t1" + struct.pack(">iii", 2, 0, 2)
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "too short"),
        (b"\x00", "too short"),
        (struct.pack(">hii", 2, 1, 0), "unknown user data version 2"),
        (struct.pack(">hii", 0, 1, 0), "unknown user data version 0"),
        (struct.pack(">hi", 1, 1), "truncated"),
        (struct.pack(">hii", 1, 1, 1) + struct.pack(">h", 5) + b"ab", "bad topic name length"),
        (struct.pack(">hii", 1, 1, -1), "negative topic count"),
        (struct.pack(">hii", 1, 1, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 3) + struct.pack(">i", 0), "bad partition count"),
        (struct.pack(">hii", 1, 1, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">iii", 2, 1, 1), "repeated"),
        (struct.pack(">hii", 1, 1, 1) + struct.pack(">h", 1) + b"t" + struct.pack(">ii", 1, -4), "negative"),
        (struct.pack(">hii", 1, 1, 1) + struct.pack(">h", 2) + b"\xff\xfe" + struct.pack(">i", 0), "malformed"),
        (encode_user_data([("t", 1)], 3) + b"\x00", "trailing"),
        (struct.pack(">hii", 1, 1, 2) + (struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)) * 2, "listed twice"),
    ],
)
def test_bad_user_data_is_a_member_data_error(data: bytes, message: str) -> None:
    with pytest.raises(MemberDataError, match=message):
        decode_user_data(data)


@given(st.binary(max_size=64))
def test_any_bytes_decode_or_raise_member_data_error(data: bytes) -> None:
    try:
        generation, owned = decode_user_data(data)
    except MemberDataError:
        return
    # valid but not canonical (unsorted ids) decodes too; the canonical form round-trips
    assert decode_user_data(encode_user_data(owned, generation)) == (generation, owned)


def test_static_members_sort_before_dynamic_ones() -> None:
    keys = sorted([member_key("a-1", None), member_key("z-9", "host-b"), member_key("0-0", None), member_key("x", "host-a")])
    assert keys == ["0:host-a", "0:host-b", "1:0-0", "1:a-1"]


def subscription(topics: list[str], user_data: bytes = b"", version: int = 0, **fields: object) -> SimpleNamespace:
    return SimpleNamespace(version=version, topics=topics, user_data=user_data, **fields)


def test_read_member_eager_and_cooperative() -> None:
    eager = SimpleNamespace(member_id="m1", group_instance_id=None, metadata=subscription(["b", "a"], encode_user_data([("a", 1)], 4)))
    assert read_member(eager, cooperative=False) == MemberInfo("m1", "1:m1", ("a", "b"), (("a", 1),), 4)
    entry = SimpleNamespace(topic="a", partitions=[3, 1])
    coop = SimpleNamespace(
        member_id="m2", group_instance_id="i2", metadata=subscription(["a"], version=2, owned_partitions=[entry], generation_id=9)
    )
    assert read_member(coop, cooperative=True) == MemberInfo("m2", "0:i2", ("a",), (("a", 1), ("a", 3)), 9)
    fresh = SimpleNamespace(member_id="m3", group_instance_id=None, metadata=subscription(["a"]))
    assert read_member(fresh, cooperative=False) == MemberInfo("m3", "1:m3", ("a",))


def test_read_member_never_raises_on_what_a_member_sent() -> None:
    garbled = SimpleNamespace(member_id="m", group_instance_id=None, metadata=subscription(["a"], b"\x00\x01\xff"))
    info = read_member(garbled, cooperative=False)
    assert info.owned == () and info.problem and "truncated" in info.problem
    old = SimpleNamespace(member_id="m", group_instance_id=None, metadata=subscription(["a"], version=0, owned_partitions=[]))
    assert "version 0" in (read_member(old, cooperative=True).problem or "")
    bad_entry = SimpleNamespace(topic="a", partitions=[-1])
    neg = SimpleNamespace(member_id="m", group_instance_id=None, metadata=subscription(["a"], version=2, owned_partitions=[bad_entry], generation_id=1))
    assert "bad partition id" in (read_member(neg, cooperative=True).problem or "")


def test_a_newer_generation_wins_a_tie_loses_for_both() -> None:
    members = [
        MemberInfo("a", "1:a", ("t",), (("t", 0), ("t", 1), ("t", 2)), 3),  # missed rounds 4 and 5
        MemberInfo("b", "1:b", ("t",), (("t", 0),), 5),
        MemberInfo("c", "1:c", ("t",), (("t", 1), ("t", 3)), 5),
        MemberInfo("d", "1:d", ("t",), (("t", 3),), 5),
        MemberInfo("e", "1:e", ("t",), (("t", 4),), NO_GENERATION, problem="garbled"),
    ]
    claims = settle_claims(members)
    assert dict(claims.owners) == {("t", 0): "1:b", ("t", 1): "1:c", ("t", 2): "1:a"}
    assert claims.conflicts == (("t", 3),)
    # the newest claim of each partition holds it: a newer one overrides a's, but t-2, which
    # only a reports, is a's until a lets it go
    assert dict(claims.holders) == {
        ("t", 0): frozenset({"1:b"}),
        ("t", 1): frozenset({"1:c"}),
        ("t", 2): frozenset({"1:a"}),
        ("t", 3): frozenset({"1:c", "1:d"}),
    }


def test_a_member_that_missed_a_round_still_holds_what_it_reports() -> None:
    """b led round 1 (generation 1), which promised b's t-1 to c; b's own sync of round 1
    failed, so in round 2 it still holds t-1 and reports generation 0, while a and c report
    generation 1. t-1 is b's until b revokes it: handing it to c now would give it two owners."""
    claims = settle_claims(
        [
            MemberInfo("a", "1:a", ("t",), (("t", 0),), 1),
            MemberInfo("b", "1:b", ("t",), (("t", 1), ("t", 2)), 0),
            MemberInfo("c", "1:c", ("t",), (), 1, promised=(("t", 1),)),
        ]
    )
    assert dict(claims.holders)[("t", 1)] == frozenset({"1:b"})
    assert dict(claims.holders)[("t", 2)] == frozenset({"1:b"})


def cooperative_member(member_id: str, owned: list[int], generation: int, user_data: bytes = b"") -> SimpleNamespace:
    entry = SimpleNamespace(topic="t", partitions=owned)
    meta = subscription(["t"], user_data, version=2, owned_partitions=[entry] if owned else [], generation_id=generation)
    return SimpleNamespace(member_id=member_id, group_instance_id=None, metadata=meta)


def test_a_cooperative_member_reports_what_it_was_promised() -> None:
    info = read_member(cooperative_member("m", [0], 6, encode_user_data([("t", 2), ("t", 1)], 6)), cooperative=True)
    assert info == MemberInfo("m", "1:m", ("t",), (("t", 0),), 6, promised=(("t", 1), ("t", 2)))


@pytest.mark.parametrize(
    ("user_data", "why"),
    [(encode_user_data([("t", 1)], 5), "promises of generation 5 sent with ownership of generation 6"), (b"\x00\x01\x00", "truncated")],
    ids=["another-generation", "garbled"],
)
def test_unreadable_or_stale_promises_are_dropped_but_ownership_stays(user_data: bytes, why: str) -> None:
    info = read_member(cooperative_member("m", [0], 6, user_data), cooperative=True)
    # what it holds must still be revoked before anyone else may have it: only the promises go
    assert info.owned == (("t", 0),) and info.problem is None
    assert info.promised == () and info.promise_problem is not None and why in info.promise_problem


def test_promises_of_the_newest_round_count_and_win_over_ownership() -> None:
    members = [
        MemberInfo("a", "1:a", ("t",), (("t", 0), ("t", 1)), 7),  # still holds t-1, promised to b
        MemberInfo("b", "1:b", ("t",), (), 7, promised=(("t", 1), ("t", 2))),
        MemberInfo("c", "1:c", ("t",), (("t", 3),), 7, promised=(("t", 2),)),  # t-2 promised twice: to neither
        MemberInfo("d", "1:d", ("t",), (("t", 4),), 6, promised=(("t", 5),)),  # an older round's promise
    ]
    claims = settle_claims(members)
    assert dict(claims.promised) == {("t", 1): "1:b"}
    assert claims.target() == {("t", 0): "1:a", ("t", 1): "1:b", ("t", 3): "1:c", ("t", 4): "1:d"}
    assert dict(claims.holders)[("t", 1)] == frozenset({"1:a"})  # the promise moves nothing by itself


def test_promises_newer_than_every_ownership_count_and_still_wait_for_the_holder() -> None:
    # b was promised t-0 in round 4; a, which holds it, reports round 3 (it missed round 4)
    claims = settle_claims([MemberInfo("a", "1:a", ("t",), (("t", 0),), 3), MemberInfo("b", "1:b", ("t",), (), 4, promised=(("t", 0),))])
    assert dict(claims.promised) == {("t", 0): "1:b"}
    assert dict(claims.holders) == {("t", 0): frozenset({"1:a"})}
