"""The guards before publishing: a plan that drops most of the previous generation's partitions,
or that changes who fences, is refused."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, strategies as st

from spark_lag_assign.errors import FencingChangeRefusedError, ShrinkRefusedError
from spark_lag_assign.plan.guard import check_fencing, check_shrink, plan_partitions, shrink


def plan(
    generation: int, assign: dict[str, dict[str, list[int]]], unassigned: dict[str, list[int]] | None = None
) -> dict[str, Any]:
    return {
        "generation": generation,
        "consumers": {c: {"assign": a} for c, a in assign.items()},
        "unassigned": unassigned or {},
    }


# ten partitions: t0 0-5 over two consumers, t1 0-3 nobody reads
TEN = plan(7, {"a": {"t0": [0, 1, 2]}, "b": {"t0": [3, 4, 5]}}, {"t1": [0, 1, 2, 3]})


def test_every_partition_named_counts_assigned_or_not() -> None:
    parts = plan_partitions(TEN)
    assert {t: p.tolist() for t, p in parts.items()} == {"t0": [0, 1, 2, 3, 4, 5], "t1": [0, 1, 2, 3]}


@pytest.mark.parametrize(
    ("new", "dropped", "refused"),
    [
        (plan(8, {"a": {}, "b": {}}), 10, True),  # an empty snapshot: every partition gone
        (plan(8, {"a": {"t0": [0, 1, 2, 3, 4]}}), 5, False),  # exactly half: allowed
        (plan(8, {"a": {"t0": [0, 1, 2, 3]}}), 6, True),  # more than half
        (plan(8, {"a": {"t0": [0, 1, 2]}, "b": {"t0": [3, 4, 5]}}, {"t1": [0, 1, 2, 3]}), 0, False),
        # a moved partition is not a dropped one; an unassigned partition still counts
        (plan(8, {"b": {"t0": [0, 1, 2, 3, 4, 5], "t1": [0, 1, 2, 3]}}), 0, False),
        # a renamed topic: the new partitions do not make up for the old ones
        (plan(8, {"a": {"t0-new": list(range(20))}}), 10, True),
        (plan(8, {"a": {"t0": [0, 1, 2, 3, 4, 5, 6, 7]}}), 4, False),  # t1 gone, t0 grew
    ],
)
def test_dropped_partitions_and_the_limit(new: dict[str, Any], dropped: int, refused: bool) -> None:
    found = shrink(TEN, new)
    assert (found.previous, found.dropped, found.too_far) == (10, dropped, refused)
    if refused:
        with pytest.raises(ShrinkRefusedError) as err:
            check_shrink(TEN, new, allow=False)
        message = str(err.value)
        assert "\n" not in message and "--allow-shrink" in message and "generation 7" in message
        assert ("drops all 10 partitions" if dropped == 10 else f"drops {dropped} of the 10 partitions") in message
    else:
        assert check_shrink(TEN, new, allow=False) == found


def test_allowed_it_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    empty = plan(8, {"a": {}})
    found = check_shrink(TEN, empty, allow=True)
    assert found is not None and found.dropped == 10
    assert "drops all 10 partitions of generation 7" in caplog.text


def test_no_previous_plan_or_an_empty_one_drops_nothing() -> None:
    empty = plan(1, {"a": {}})
    assert check_shrink(None, empty, allow=False) is None
    assert check_shrink(empty, plan(2, {"a": {}}), allow=False) == shrink(empty, plan(2, {"a": {}}))
    assert shrink(empty, TEN).dropped == 0


topic_lists = st.dictionaries(
    st.sampled_from(["t0", "t1", "t2", "x"]), st.lists(st.integers(0, 2**31 - 1) | st.integers(0, 9), max_size=6), max_size=3
)
plans = st.builds(
    lambda consumers, spare: plan(1, consumers, spare),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), topic_lists, max_size=3),
    topic_lists,
)


@given(previous=plans, new=plans)
def test_counts_are_those_of_sets_of_topic_partition_pairs(previous: dict[str, Any], new: dict[str, Any]) -> None:
    def pairs(p: dict[str, Any]) -> set[tuple[str, int]]:
        named = [*(a for e in p["consumers"].values() for a in [e["assign"]]), p["unassigned"]]
        return {(t, n) for lists in named for t, parts in lists.items() for n in parts}

    found = shrink(previous, new)
    before, after = pairs(previous), pairs(new)
    assert (found.previous, found.planned, found.dropped) == (len(before), len(after), len(before - after))


def fenced(generation: int, fencing: str | None) -> dict[str, Any]:
    doc = plan(generation, {"a": {"t0": [0]}})
    if fencing is not None:
        doc["fencing"] = fencing
    return doc


@pytest.mark.parametrize(
    ("before", "after"), [("self", "service"), (None, "service"), ("service", "self"), ("service", None)]
)
def test_a_plan_that_changes_who_fences_is_refused_in_either_direction(before: str | None, after: str | None) -> None:
    """Absent is "self". Either way a pipeline on the old plan and one on the new trust
    different fence notes, so the change waits for every pipeline to be stopped."""
    with pytest.raises(FencingChangeRefusedError) as refused:
        check_fencing(fenced(3, before), after or "self", allow=False)
    line = str(refused.value)
    assert "\n" not in line
    assert line.startswith(
        f"the new plan fences by {after or 'self'!r} where generation 3 fences by {before or 'self'!r}: "
    )
    assert line.endswith("nothing published: stop every pipeline, then run again with --fencing-change (or plan.fencing_change = true)")


def test_the_same_fencing_or_no_previous_plan_passes_and_an_allowed_change_warns(caplog: pytest.LogCaptureFixture) -> None:
    check_fencing(fenced(3, None), "self", allow=False)
    check_fencing(fenced(3, "service"), "service", allow=False)
    check_fencing(None, "service", allow=False)
    assert not caplog.records
    check_fencing(fenced(3, None), "service", allow=True)
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "published as --fencing-change permits" in caplog.records[0].getMessage()
