"""The pure parts of the consuming side: offset JSON, source options, where a new owner
starts, the claim files of the handover protocol, and the committer's retry logic. No
Spark, no broker: the commit function here is ours to fail, since what is tested is what
we do when a commit fails, not what Kafka does."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from spark_lag_assign.errors import HandoverTimeoutError, InputError, KafkaCommitError, KafkaReadError, PlanError
from spark_lag_assign.stream import (
    Claim,
    ProgressCommitter,
    blocking_claims,
    offsets_json,
    parse_source_offsets,
    read_claims,
    source_options,
    starting_offsets,
    wait_for_release,
    write_claim,
)

# -- offsets JSON --------------------------------------------------------------------------


def test_the_kafka_sources_offset_json_becomes_topic_partition_pairs() -> None:
    text = '{"orders":{"0":120,"2":7},"pay.ments":{"10":0}}'
    assert parse_source_offsets(text) == {("orders", 0): 120, ("orders", 2): 7, ("pay.ments", 10): 0}
    assert parse_source_offsets(None) == {} == parse_source_offsets("")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not a Kafka source offset JSON"),
        ("[1, 2]", "expected an object"),
        ('{"t": 5}', "topic 't' maps to int"),
        ('{"t": {"x": 5}}', "partition 'x' of 't'"),
        ('{"t": {"0": "5"}}', "offset '5' of t-0"),
        ('{"t": {"0": true}}', "offset True of t-0"),
    ],
)
def test_malformed_offset_json_is_an_input_error(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_source_offsets(text)


def test_starting_offsets_json_is_compact_and_ordered() -> None:
    assert offsets_json({"b": {"1": 5}, "a": {"0": -2}}) == '{"a":{"0":-2},"b":{"1":5}}'


# -- source options ------------------------------------------------------------------------


def test_source_options_pass_through_verbatim_with_one_keyword_alias() -> None:
    got = source_options(
        {"bootstrap_servers": "b:9092", "kafka.security.protocol": "SSL", "maxOffsetsPerTrigger": 500,
         "failOnDataLoss": False, "minPartitions": None}
    )  # fmt: skip
    assert got == {
        "kafka.bootstrap.servers": "b:9092",
        "kafka.security.protocol": "SSL",
        "maxOffsetsPerTrigger": "500",
        "failOnDataLoss": "false",
    }


@pytest.mark.parametrize("name", ["assign", "subscribe", "SubscribePattern", "startingOffsets", "startingoffsetsbytimestamp"])
def test_the_options_that_the_plan_decides_are_refused(name: str) -> None:
    with pytest.raises(InputError, match=f"option '{name}' is taken from the plan"):
        source_options({"kafka.bootstrap.servers": "b:9092", name: "x"})


def test_bootstrap_servers_are_required() -> None:
    with pytest.raises(InputError, match="no Kafka bootstrap servers"):
        source_options({"maxOffsetsPerTrigger": 5})


# -- where a new owner starts --------------------------------------------------------------

ASSIGN = {"t": [0, 1, 2, 3]}
BEGIN = {("t", 0): 0, ("t", 1): 10, ("t", 2): 0, ("t", 3): 5}
END = {("t", 0): 100, ("t", 1): 50, ("t", 2): 30, ("t", 3): 5}
# t-0 committed inside the log; t-1 committed before its beginning (retention); t-2 never; t-3 at the end
COMMITTED: dict[tuple[str, int], int | None] = {("t", 0): 40, ("t", 1): 3, ("t", 2): None, ("t", 3): 5}


@pytest.mark.parametrize(
    ("reset", "expected"),
    [
        ("earliest", {"0": 40, "1": -2, "2": -2, "3": 5}),
        ("latest", {"0": 40, "1": -1, "2": -1, "3": 5}),
        ("none", {"0": 40, "1": -2, "2": -2, "3": 5}),  # the lag rules treat it as earliest
    ],
)
def test_a_new_owner_starts_at_the_commit_or_by_the_reset_rule(reset: str, expected: dict[str, int]) -> None:
    assert starting_offsets(ASSIGN, COMMITTED, BEGIN, END, reset) == {"t": expected}


def test_starting_offsets_need_every_partitions_log_bounds() -> None:
    with pytest.raises(KafkaReadError, match="no beginning/end offsets for t-9"):
        starting_offsets({"t": [9]}, {}, BEGIN, END, "earliest")
    assert starting_offsets({}, {}, {}, {}, "latest") == {}


# -- claims --------------------------------------------------------------------------------


def claim(consumer: str, generation: int, assign: dict[str, list[int]], state: str = "reading") -> Claim:
    return Claim(consumer, generation, assign, state)


def test_a_claim_round_trips_and_is_replaced_whole(tmp_path: Path) -> None:
    write_claim(tmp_path, claim("A", 3, {"t": [2, 0]}))
    write_claim(tmp_path, Claim("A", 4, {"t": [1]}, "reading", {"t": {"1": 17}}))
    got = read_claims(tmp_path)
    assert set(got) == {"A"}
    a = got["A"]
    assert isinstance(a, Claim)
    assert (a.generation, a.assign, a.committed, a.partitions) == (4, {"t": [1]}, {"t": {"1": 17}}, {("t", 1)})
    assert a.updated and a.host and a.pid
    assert [p.name for p in tmp_path.iterdir()] == ["A.json"]  # no temporary file left behind


def test_an_unreadable_claim_is_reported_not_skipped(tmp_path: Path) -> None:
    (tmp_path / "A.json").write_text("{torn")
    (tmp_path / "B.json").write_text(json.dumps({"generation": "two", "assign": {}}))
    got = read_claims(tmp_path)
    assert isinstance(got["A"], str) and "A.json" in got["A"]
    assert isinstance(got["B"], str) and "not a claim" in got["B"]
    assert read_claims(tmp_path / "nowhere") == {}


def test_a_claim_cannot_be_written_where_no_directory_can_be_made(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(PlanError, match="cannot write the claim of A"):
        write_claim(tmp_path / "file" / "handover", claim("A", 1, {}))


def test_only_older_claims_on_the_same_partitions_block() -> None:
    claims = {
        "old": claim("old", 1, {"t": [0, 1]}),  # still on generation 1 with t-1
        "same": claim("same", 2, {"t": [2]}),  # generation 2 owner of t-2: cannot overlap ours
        "newer": claim("newer", 3, {"t": [3]}),  # already on 3, waiting for us: never blocks us
        "released": claim("released", 1, {}, "released"),
        "me": claim("me", 1, {"t": [1, 3]}),  # our own older claim never blocks us
        "broken": "handover/broken.json: JSONDecodeError",
    }
    blockers = blocking_claims(claims, "me", 2, [("t", 1), ("t", 3)])
    assert [(b.holder, b.generation, b.partitions) for b in blockers] == [
        ("broken", None, (("t", 1), ("t", 3))),
        ("old", 1, (("t", 1),)),
    ]
    assert "old holds t-1 under generation 1" in blockers[1].describe()
    assert "broken's claim is unreadable" in blockers[0].describe()
    del claims["broken"]
    assert blocking_claims(claims, "me", 2, [("t", 3)]) == []
    assert blocking_claims(claims, "me", 2, []) == []


def test_claims_order_a_chain_of_handovers_by_generation() -> None:
    # t-0 moves A (gen 1) -> B (gen 2) -> C (gen 3) while A has not yet seen either plan
    claims = {"A": claim("A", 1, {"t": [0]}), "B": claim("B", 2, {"t": [0]}, "waiting"), "C": claim("C", 3, {"t": [0]}, "waiting")}
    assert [b.holder for b in blocking_claims(claims, "B", 2, [("t", 0)])] == ["A"]
    assert [b.holder for b in blocking_claims(claims, "C", 3, [("t", 0)])] == ["A", "B"]
    claims["A"] = claim("A", 3, {}, "released")  # A jumps to the newest plan
    assert blocking_claims(claims, "B", 2, [("t", 0)]) == []  # B may read until it sees generation 3 ...
    assert [b.holder for b in blocking_claims(claims, "C", 3, [("t", 0)])] == ["B"]  # ... and C waits for it


def test_waiting_ends_when_the_holder_releases(tmp_path: Path) -> None:
    write_claim(tmp_path, claim("A", 1, {"t": [0, 1]}))
    release = threading.Timer(0.5, lambda: write_claim(tmp_path, claim("A", 2, {"t": [0]})))
    release.start()
    started = time.monotonic()
    try:
        assert wait_for_release(tmp_path, "B", 2, [("t", 1)], timeout=20, poll=0.05) is True
    finally:
        release.join()
    assert 0.4 < time.monotonic() - started < 10


def test_waiting_times_out_naming_the_holder(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_claim(tmp_path, claim("A", 1, {"t": [0, 1]}))
    started = time.monotonic()
    with pytest.raises(HandoverTimeoutError, match=r"B waited 0.3s to read t-1 under generation 2, but A holds t-1 under generation 1"):
        wait_for_release(tmp_path, "B", 2, [("t", 1)], timeout=0.3, poll=0.05)
    assert time.monotonic() - started < 5
    assert any(r.levelname == "ERROR" and "A holds t-1" in r.getMessage() for r in caplog.records)


def test_waiting_can_be_interrupted(tmp_path: Path) -> None:
    write_claim(tmp_path, claim("A", 1, {"t": [0]}))
    polls: list[float] = []

    def newer_plan_after_three_polls() -> bool:
        polls.append(time.monotonic())
        return len(polls) >= 3

    assert wait_for_release(tmp_path, "B", 2, [("t", 0)], timeout=20, poll=0.01, interrupted=newer_plan_after_three_polls) is False
    assert len(polls) == 3


# -- the committer's retry logic ----------------------------------------------------------------


class FlakyCommit:
    """Records every commit; fails the calls whose numbers (1-based) it is given."""

    def __init__(self, fail: set[int] | None = None, fail_always: bool = False) -> None:
        self.calls: list[tuple[str, dict[tuple[str, int], int], str]] = []
        self.fail, self.fail_always = fail or set(), fail_always

    def __call__(self, group: str, offsets: dict[tuple[str, int], int], metadata: str) -> None:
        self.calls.append((group, dict(offsets), metadata))
        if self.fail_always or len(self.calls) in self.fail:
            raise KafkaCommitError("committing offsets for group g failed: KafkaConnectionError")


def test_each_batch_commits_what_moved_for_the_tracked_partitions_only() -> None:
    commit = FlakyCommit()
    c = ProgressCommitter(commit)
    c.track("q1", "g", [("t", 0), ("t", 1)], "meta")
    assert c.record("q1", ['{"t":{"0":10,"1":5}}', '{"rate": 3}', None])  # another source's JSON is skipped
    assert c.record("q1", ['{"t":{"0":10,"1":9,"2":99}}'])  # t-2 is not this query's
    assert c.record("q1", ['{"t":{"0":10,"1":9}}'])  # nothing new: no call
    assert commit.calls == [("g", {("t", 0): 10, ("t", 1): 5}, "meta"), ("g", {("t", 1): 9}, "meta")]
    assert c.committed("q1") == {("t", 0): 10, ("t", 1): 9}
    assert not c.record("other", ['{"t":{"0":50}}'])  # a query nobody tracks (another pipeline's)
    assert len(commit.calls) == 2


def test_a_failed_commit_is_retried_with_the_next_batch_and_never_goes_back() -> None:
    commit = FlakyCommit(fail={2})
    c = ProgressCommitter(commit)
    c.track("q", "g", [("t", 0), ("t", 1)])
    assert c.record("q", ['{"t":{"0":10,"1":5}}'])
    assert not c.record("q", ['{"t":{"0":20,"1":5}}'])  # fails: logged, pending
    assert c.failures == 1 and c.committed("q") == {("t", 0): 10, ("t", 1): 5}
    assert c.record("q", ['{"t":{"0":15,"1":8}}'])  # a stale report cannot move t-0 back to 15
    assert commit.calls[-1][1] == {("t", 0): 20, ("t", 1): 8}
    assert c.committed("q") == {("t", 0): 20, ("t", 1): 8}


def test_an_idle_query_retries_its_pending_commit() -> None:
    commit = FlakyCommit(fail={1})
    c = ProgressCommitter(commit)
    c.track("q", "g", [("t", 0)])
    assert not c.record("q", ['{"t":{"0":7}}'])
    assert c.retry("q")
    assert c.committed("q") == {("t", 0): 7} and len(commit.calls) == 2


def test_the_final_commit_retries_until_it_succeeds_then_forgets_the_query() -> None:
    commit = FlakyCommit(fail={1, 2, 3})
    c = ProgressCommitter(commit)
    c.track("q", "g", [("t", 0)])
    assert c.finish("q", ['{"t":{"0":42}}'], timeout=10, pause=0.01) == {("t", 0): 42}
    assert len(commit.calls) == 4 and c.failures == 3
    assert not c.tracked("q")
    assert not c.record("q", ['{"t":{"0":50}}'])  # a late progress report of the stopped query is ignored
    assert len(commit.calls) == 4


def test_a_final_commit_that_never_succeeds_raises_and_keeps_it_pending() -> None:
    c = ProgressCommitter(FlakyCommit(fail_always=True))
    c.track("q", "g", [("t", 0)])
    started = time.monotonic()
    with pytest.raises(KafkaCommitError, match=r"final commit to group g .* did not succeed within 0.2s"):
        c.finish("q", ['{"t":{"0":42}}'], timeout=0.2, pause=0.02)
    assert time.monotonic() - started < 5
    assert c.tracked("q") and c.committed("q") == {}


def test_the_consuming_side_imports_no_spark_until_it_is_used() -> None:
    code = "import sys, spark_lag_assign.stream; assert 'pyspark' not in sys.modules, 'pyspark imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
