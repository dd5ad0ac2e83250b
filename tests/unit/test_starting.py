"""Where a pipeline starts a generation: the group's commit, raised only by an owner's own claim.

The group is a stand-in here (what it holds is the input); the decision under test is whose
claim may move a start ahead of it.
"""

from __future__ import annotations

from typing import Any

import pytest

from spark_lag_assign.consume import starting
from spark_lag_assign.store import ClaimRecord, StoreError

# generation 1: a reads t0-0, b reads t1-0; generation 2: t0-0 moves to b
PLANS = {
    1: {"generation": 1, "reset": "latest", "consumers": {"a": {"assign": {"t0": [0]}}, "b": {"assign": {"t1": [0]}}}},
    2: {"generation": 2, "reset": "latest", "consumers": {"a": {"assign": {}}, "b": {"assign": {"t0": [0], "t1": [0]}}}},
}


class NoOlderPlans:
    def get(self, generation: int) -> None:
        return None


def start_of_b(monkeypatch: pytest.MonkeyPatch, group: dict[str, dict[str, int]], claims: dict[str, Any]) -> dict:
    monkeypatch.setattr(starting, "read_group_starting_offsets", lambda *a, **k: {t: dict(ps) for t, ps in group.items()})
    offsets = starting.StartOffsets(
        NoOlderPlans(), "b", "127.0.0.1:9", {}, timeout_ms=1000, commit_timeout=1.0, on_foreign=lambda *a: None, pause=lambda s: None
    )
    for plan in PLANS.values():
        offsets.remember(plan)
    return offsets.read(PLANS[2], {"t0": [0], "t1": [0]}, "g", 2, claims)


def claim(consumer: str, generation: int, committed: dict[str, dict[str, int]]) -> ClaimRecord:
    return ClaimRecord.to_write(consumer, f"{consumer}-1", 3, generation, [], 30.0, "released", committed)


def test_the_releasing_owner_s_claim_raises_the_start_above_a_group_that_does_not_show_its_commit_yet(monkeypatch) -> None:
    got = start_of_b(monkeypatch, {"t0": {"0": 100}, "t1": {"0": 7}}, {"a": claim("a", 2, {"t0": {"0": 150}})})
    assert got == {"t0": {"0": 150}, "t1": {"0": 7}}


@pytest.mark.parametrize("group_t0", [100, -1], ids=["over-a-commit", "over-the-reset-rule"])
def test_a_claim_of_a_consumer_that_never_owned_the_partition_does_not_move_the_start(monkeypatch, group_t0: int) -> None:
    # c owns nothing in either plan (or t1 only): its word on t0-0 must not make b skip records
    forged = {"c": claim("c", 2, {"t0": {"0": 10**9}}), "b": claim("b", 2, {"t1": {"0": 10**9 + 1}})}
    got = start_of_b(monkeypatch, {"t0": {"0": group_t0}, "t1": {"0": 7}}, forged)
    assert got["t0"] == {"0": group_t0}
    assert got["t1"] == {"0": 10**9 + 1}  # b's own word on a partition it owned counts


def test_a_releasing_owner_s_word_counts_whatever_generation_its_claim_names(monkeypatch) -> None:
    # a releases under the newest plan it has seen (4, skipping some): it owned t0-0 in 1
    got = start_of_b(monkeypatch, {"t0": {"0": 100}, "t1": {"0": 7}}, {"a": claim("a", 4, {"t0": {"0": 150}})})
    assert got["t0"] == {"0": 150}


def test_an_owner_from_before_the_last_few_generations_does_not_move_the_start(monkeypatch) -> None:
    # a owned t0-0 in generation 1 only; c, d, e held it in 2 to 4; b starts it in 5
    history = {
        g: {"generation": g, "reset": "latest", "consumers": {c: {"assign": {"t0": [0]}}, "b": {"assign": {"t1": [0]}}}}
        for g, c in ((2, "c"), (3, "d"), (4, "e"))
    }
    history[1] = PLANS[1]
    history[5] = {"generation": 5, "reset": "latest", "consumers": {"b": {"assign": {"t0": [0], "t1": [0]}}}}

    class Kept:
        def get(self, generation: int) -> dict | None:
            return history.get(generation)

    monkeypatch.setattr(starting, "read_group_starting_offsets", lambda *a, **k: {"t0": {"0": 100}, "t1": {"0": 7}})
    offsets = starting.StartOffsets(
        Kept(), "b", "127.0.0.1:9", {}, timeout_ms=1000, commit_timeout=1.0, on_foreign=lambda *a: None, pause=lambda s: None
    )
    claims = {"a": claim("a", 5, {"t0": {"0": 10**9}}), "e": claim("e", 5, {"t0": {"0": 120}})}
    got = offsets.read(history[5], {"t0": [0], "t1": [0]}, "g", 5, claims)
    assert got["t0"] == {"0": 120}  # e, its owner in 4, counts; a, three generations further back, does not


def test_a_store_that_fails_once_is_asked_again_for_a_generation_s_owners() -> None:
    calls = []

    class Flaky:
        def get(self, generation: int) -> dict | None:
            calls.append(generation)
            if len(calls) == 1:
                raise StoreError("the store is away")
            return PLANS[1]

    offsets = starting.StartOffsets(
        Flaky(), "b", "127.0.0.1:9", {}, timeout_ms=1000, commit_timeout=1.0, on_foreign=lambda *a: None, pause=lambda s: None
    )
    assert offsets.owners(1) is None
    assert offsets.owners(1) == {("t0", 0): "a", ("t1", 0): "b"}
    assert calls == [1, 1]


def test_a_commit_under_a_generation_the_store_no_longer_keeps_is_judged_by_the_plans_it_keeps(monkeypatch) -> None:
    """The wiring: the start hands ``foreign_commits`` every kept generation's consumers, and
    reports what it finds; an outsider's commit is not started from, a pipeline's is."""
    kept = {
        3: {"generation": 3, "reset": "latest", "consumers": {"a": {"assign": {"t1": [0]}}, "b": {"assign": {"t0": [0]}}}},
        4: {"generation": 4, "reset": "latest", "consumers": {"b": {"assign": {"t0": [0], "t1": [0]}}}},
    }

    class Kept:
        def get(self, generation: int) -> dict | None:
            return kept.get(generation)

        def generations(self) -> list[int]:
            return sorted(kept)

    def group(*args: Any, distrust: Any, **kwargs: Any) -> dict[str, dict[str, int]]:
        found = distrust({("t0", 0): "spark-lag-assign consumer=m generation=1", ("t1", 0): "spark-lag-assign consumer=a generation=2"})
        return {t: {"0": -1 if (t, 0) in found else n} for t, n in (("t0", 100), ("t1", 7))}

    monkeypatch.setattr(starting, "read_group_starting_offsets", group)
    reported: list[tuple[str, int, str]] = []
    offsets = starting.StartOffsets(
        Kept(), "b", "127.0.0.1:9", {}, timeout_ms=1000, commit_timeout=1.0,
        on_foreign=lambda t, p, why: reported.append((t, p, why)), pause=lambda s: None,
    )  # fmt: skip
    got = offsets.read(kept[4], {"t0": [0], "t1": [0]}, "g", 4, {})
    assert reported == [("t0", 0, "names m under generation 1 (no longer kept), and no plan the store keeps has m")]
    assert got == {"t0": {"0": -1}, "t1": {"0": 7}} and offsets.foreign_commits == 1
