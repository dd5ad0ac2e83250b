"""The directory store's own guarantees: races, crashes at each step, layout, errors.

The contract suite (tests/contract) checks what every backend promises; these tests check
how this backend keeps those promises on a real local file system: exactly one winner per
race, nothing half-written visible after a kill at any step, leftovers cleaned up.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from spark_lag_assign.errors import ConfigError, InputError
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.store import (
    ClaimFencedError,
    ClaimRecord,
    PublishFencedError,
    StoreError,
    open_store,
    parse_uri,
)
from spark_lag_assign.store.claimfiles import CLAIMS_KEPT
from spark_lag_assign.store.directory import DirectoryStore
from spark_lag_assign.store.fs import LocalFileSystem

REPO = Path(__file__).resolve().parents[2]
CREATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)  # plans built twice compare equal


def make_plan(generation: int, consumers: int = 3, partitions: int = 12, tag: int = 0) -> plan_io.Plan:
    names = [f"c{i}" for i in range(consumers)]
    rows = pd.DataFrame(
        {
            "consumer": [names[p % consumers] for p in range(partitions)],
            "topic": "t",
            "partition": range(partitions),
            "lag": [tag + p for p in range(partitions)],
            "starting_offset": [-2] * partitions,
        }
    )
    subscriptions = {c: ["t"] for c in names}
    return plan_io.build_plan(rows, subscriptions, generation=generation, strategy="range", reset="earliest", created=CREATED)


def store_at(root: Path, **settings: object) -> DirectoryStore:
    store = open_store(str(root), **settings)
    assert isinstance(store, DirectoryStore)
    return store


def publish(store: DirectoryStore, tag: int = 0, consumers: int = 3) -> plan_io.Plan:
    with store.publisher() as publisher:
        doc = make_plan(publisher.next_generation(), consumers=consumers, tag=tag)
        publisher.publish(doc)
    return doc


class GatedFileSystem(LocalFileSystem):
    """Every manifest create waits at a barrier: racing planners get there together."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__()
        self.barrier = barrier

    def create(self, path: str, data: bytes) -> bool:
        if path.endswith(".manifest.json"):
            self.barrier.wait(10)
        return super().create(path, data)


# -- publishing ----------------------------------------------------------------------------------


def test_the_layout_on_disk(tmp_path: Path) -> None:
    store = store_at(tmp_path / "plans")
    doc = publish(store, tag=4)
    gens = tmp_path / "plans" / "generations"
    manifest = json.loads((gens / "000001.manifest.json").read_text())
    data = (gens / "000001" / "plan.json").read_bytes()
    assert manifest["generation"] == 1 and manifest["dir"] == "000001"
    assert manifest["consumers"] == ["c0", "c1", "c2"]
    assert manifest["sha256"] == hashlib.sha256(data).hexdigest()
    assert json.loads(data) == doc
    assert json.loads((gens / "000001" / "assign" / "c1.json").read_text()) == doc["consumers"]["c1"]["assign"]
    starting = json.loads((gens / "000001" / "starting-offsets" / "c1.json").read_text())
    assert starting == doc["consumers"]["c1"]["startingOffsets"]
    assert sorted(p.name for p in gens.iterdir()) == ["000001", "000001.manifest.json"]  # no temp files left
    # today's convenience links, through ``current``
    root = tmp_path / "plans"
    assert os.readlink(root / "current") == "generations/000001"
    assert plan_io.read_plan(root) == doc
    second = publish(store, tag=5)
    assert os.readlink(root / "current") == "generations/000002"
    assert plan_io.read_plan(root) == second
    assert json.loads((root / "assign" / "c0.json").read_text()) == second["consumers"]["c0"]["assign"]


def test_readers_never_use_the_convenience_links(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    store = store_at(root)
    publish(store)
    second = publish(store, tag=2)
    (root / "current").unlink()
    os.symlink("generations/000001", root / "current")  # a stale or hand-edited link
    assert store.latest() == second


def test_a_file_where_a_link_would_go_is_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    root.mkdir()
    (root / "plan.json").write_text("mine\n")
    store = store_at(root)
    doc = publish(store)
    assert (root / "plan.json").read_text() == "mine\n"
    assert store.latest() == doc


def test_racing_planners_exactly_one_wins(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    publish(store_at(root))
    racers = 4
    barrier = threading.Barrier(racers)
    stores = [DirectoryStore(parse_uri(str(root)), fs=GatedFileSystem(barrier)) for _ in range(racers)]
    publishers = [s.publisher() for s in stores]
    assert {p.next_generation() for p in publishers} == {2}
    outcome: dict[int, str] = {}

    def race(i: int) -> None:
        try:
            publishers[i].publish(make_plan(2, tag=100 * i))
            outcome[i] = "won"
        except PublishFencedError:
            outcome[i] = "fenced"

    threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcome.values()) == ["fenced"] * (racers - 1) + ["won"]
    winner = next(i for i, o in outcome.items() if o == "won")
    assert store_at(root).latest() == make_plan(2, tag=100 * winner)
    assert store_at(root).generations() == [1, 2]
    gens = root / "generations"
    assert sorted(p.name for p in gens.iterdir()) == [  # the losers left nothing behind
        "000001", "000001.manifest.json", "000002", "000002.manifest.json",
    ]  # fmt: skip


def _race_in_process(root: str, barrier: Any, tag: int, results: Any) -> None:
    store = open_store(root)
    publisher = store.publisher()
    barrier.wait(30)  # every process holds a publisher for generation 2 before any publishes
    try:
        publisher.publish(make_plan(publisher.next_generation(), tag=tag))
        results.put((tag, "won"))
    except PublishFencedError:
        results.put((tag, "fenced"))


def test_racing_planner_processes_exactly_one_wins(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    publish(store_at(root))
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(3)
    results = context.Queue()
    processes = [context.Process(target=_race_in_process, args=(str(root), barrier, tag, results)) for tag in (10, 20, 30)]
    for p in processes:
        p.start()
    outcome = dict(results.get(timeout=60) for _ in processes)
    for p in processes:
        p.join(30)
    assert sorted(outcome.values()) == ["fenced", "fenced", "won"]
    winner = next(tag for tag, o in outcome.items() if o == "won")
    assert store_at(root).latest() == make_plan(2, tag=winner)


def test_a_publisher_outrun_by_many_generations_is_fenced(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    slow_store = store_at(root, history=2)
    publish(slow_store)
    slow = slow_store.publisher()  # will publish 2, but stalls
    for tag in range(5):  # meanwhile 2..6 come and generation 2 leaves the history
        publish(store_at(root, history=2), tag=tag)
    assert store_at(root).generations() == [5, 6]
    with pytest.raises(PublishFencedError):
        slow.publish(make_plan(2))
    assert store_at(root).generations() == [5, 6]


KILL = """
import os, sys
sys.path.insert(0, {repo!r})
from spark_lag_assign.store import parse_uri
from spark_lag_assign.store.directory import DirectoryStore
from spark_lag_assign.store.fs import LocalFileSystem
from tests.unit.test_directory_store import make_plan

class Dying(LocalFileSystem):
    def create(self, path, data):
        if {step!r} == "manifest" and path.endswith(".manifest.json"):
            os._exit(9)
        return super().create(path, data)
    def rename(self, src, dst):
        if {step!r} == "rename" and os.path.basename(src).startswith(".0"):
            os._exit(9)
        return super().rename(src, dst)

store = DirectoryStore(parse_uri({root!r}), fs=Dying())
publisher = store.publisher()
publisher.publish(make_plan(publisher.next_generation(), tag=99))
"""


def kill_while_publishing(root: Path, step: str) -> None:
    code = KILL.format(repo=str(REPO), root=str(root), step=step)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 9, result.stderr


def test_a_writer_killed_before_its_manifest_leaves_the_previous_plan(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    first = publish(store_at(root))
    kill_while_publishing(root, "manifest")
    gens = root / "generations"
    leftovers = [p for p in gens.iterdir() if p.name.startswith(".")]
    assert leftovers  # the dead writer's staging directory
    store = store_at(root)
    assert store.latest() == first and store.generations() == [1]
    assert os.readlink(root / "current") == "generations/000001"
    publish(store)  # a live writer's staging directory is young: left alone
    assert all(p.exists() for p in leftovers)
    store.stale_after = 0.0  # now it counts as a dead writer's
    with store.publisher() as publisher:
        assert publisher.next_generation() == 3  # the dead writer used no number
        publisher.publish(make_plan(3, tag=3))
    assert not any(p.exists() for p in leftovers)
    assert store.generations() == [1, 2, 3]


def test_a_writer_killed_after_its_manifest_loses_only_that_number(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = tmp_path / "plans"
    first = publish(store_at(root))
    kill_while_publishing(root, "rename")
    store = store_at(root)
    with caplog.at_level(logging.WARNING):
        assert store.latest() == first
    assert "generation 2 is skipped" in caplog.text
    assert store.generations() == [1] and store.get(2) is None
    store.stale_after = 0.0
    with store.publisher() as publisher:
        assert publisher.previous() == first
        assert publisher.next_generation() == 3
        third = make_plan(3, tag=3)
        publisher.publish(third)
    assert store.latest() == third
    assert not [p for p in (root / "generations").iterdir() if p.name.startswith(".")]


def test_a_reader_never_sees_a_torn_or_mixed_generation(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    writer = store_at(root, history=4)
    reader = store_at(root, history=4)
    publish(writer, tag=1, consumers=20)
    expected = {g: make_plan(g, consumers=20, tag=g) for g in range(1, 16)}
    expected[1] = make_plan(1, consumers=20, tag=1)
    problems: list[str] = []
    seen: list[int] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            doc = reader.latest()
            if doc is None:
                problems.append("no plan")
                continue
            seen.append(doc["generation"])
            if doc != expected[doc["generation"]]:
                problems.append(f"generation {doc['generation']} differs")
            old = reader.get(max(1, doc["generation"] - 2))
            if old is not None and old != expected[old["generation"]]:
                problems.append(f"old generation {old['generation']} differs")

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for g in range(2, 16):
            with writer.publisher() as publisher:
                publisher.publish(make_plan(g, consumers=20, tag=g))
    finally:
        done.set()
        thread.join(60)
    assert not problems and seen == sorted(seen) and seen
    assert reader.latest() == expected[15]


def test_a_generation_whose_files_were_damaged_is_skipped(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    store = store_at(root)
    first = publish(store)
    publish(store)
    plan_file = root / "generations" / "000002" / "plan.json"
    plan_file.write_bytes(plan_file.read_bytes()[:-10])  # a torn write
    assert store.latest() == first and store.generations() == [1]
    (root / "generations" / "000001.manifest.json").write_text("{")  # and an undecodable manifest
    assert store.latest() is None and store.generations() == []
    with store.publisher() as publisher:
        assert publisher.next_generation() == 3


def test_history_deletes_manifest_and_directory(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    store = store_at(root, history=2)
    for tag in range(5):
        publish(store, tag=tag)
    assert sorted(p.name for p in (root / "generations").iterdir()) == [
        "000004", "000004.manifest.json", "000005", "000005.manifest.json",
    ]  # fmt: skip


def test_wait_for_plan_polls(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    store = store_at(root, poll=0.05)
    assert store.wait_for_plan(0, timeout=0.1) is None  # no directory at all yet
    timer = threading.Timer(0.3, lambda: publish(store_at(root)))
    timer.start()
    try:
        found = store.wait_for_plan(0, timeout=30)
    finally:
        timer.join()
    assert found is not None and found["generation"] == 1


# -- URIs and errors -----------------------------------------------------------------------------


def test_the_file_uri_form_names_the_same_store(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    with open_store(f"file://{root}") as by_uri:
        assert isinstance(by_uri, DirectoryStore) and by_uri.name == "plans"
        doc = publish(by_uri)  # type: ignore[arg-type]
    assert store_at(root).latest() == doc
    assert open_store(f"file:{root}").latest() == doc


def test_an_unwritable_root_is_one_store_error_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    store = store_at(blocker / "plans")
    with pytest.raises(StoreError, match="cannot read the newest plan: Not a directory"):
        store.latest()
    with pytest.raises(StoreError) as failed:
        store.publisher()
    message = str(failed.value)
    assert "\n" not in message and str(blocker / "plans") in message
    with pytest.raises(StoreError) as failed:
        store.claim_writer("A")
    assert "\n" not in str(failed.value) and "take consumer A over" in str(failed.value)


def test_a_missing_root_reads_as_empty(tmp_path: Path) -> None:
    store = store_at(tmp_path / "nothing-here")
    assert store.latest() is None and store.generations() == [] and store.claims() == {}
    assert not (tmp_path / "nothing-here").exists()  # readers create nothing


def test_bad_settings_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="history"):
        store_at(tmp_path, history=0)
    with pytest.raises(ConfigError, match="poll"):
        store_at(tmp_path, poll=0)


# -- claims --------------------------------------------------------------------------------------


def test_claim_files_are_numbered_and_only_the_last_few_kept(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    store = store_at(root)
    writer = store.claim_writer("A")
    records = [writer.write(g, [("t", g)], lease=5.0) for g in range(1, 11)]
    assert [r.seq for r in records] == list(range(2, 12))  # seq 1 was the take-over write
    files = sorted(p.name for p in (root / "claims" / "A").iterdir())
    assert files == [f"{n:010d}.json" for n in range(12 - CLAIMS_KEPT, 12)]
    assert store.claims()["A"] == records[-1]
    again = store.claim_writer("A")  # numbers continue across incarnations
    assert again.predecessor == records[-1]
    assert (root / "claims" / "A" / f"{12:010d}.json").exists()


def test_the_take_over_copy_keeps_the_predecessors_fence_notes(tmp_path: Path) -> None:
    """The copy a new incarnation writes is every reader's newest claim of the id until it
    writes its own: without the notes, a pipeline its predecessor fenced could reopen its
    producer, find no note and commit (``consume.protocol``)."""
    root = tmp_path / "plans"
    store_at(root).claim_writer("B").write(2, [("t", 0)], 5.0, "reading", None, {"A": ("A1", 3)})
    again = store_at(root).claim_writer("B")
    copy = store_at(root).claims()["B"]
    assert isinstance(copy, ClaimRecord) and copy.incarnation == again.incarnation and copy.state == "taken over"
    assert copy.fences == {"A": ("A1", 3)} and copy.holds == frozenset({("t", 0)})


def test_racing_take_overs_each_fence_the_one_before(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    first = store_at(root).claim_writer("A")
    first.write(1, [("t", 0)], lease=5.0)
    writers = []
    lock = threading.Lock()

    def take() -> None:
        w = store_at(root).claim_writer("A")
        with lock:
            writers.append(w)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(writers) == 4
    newest = store_at(root).claims()["A"]
    assert isinstance(newest, ClaimRecord) and newest.holds == frozenset({("t", 0)})
    live = [w for w in writers if w.incarnation == newest.incarnation]
    assert len(live) == 1
    for w in [first, *writers]:
        if w is not live[0]:
            with pytest.raises(ClaimFencedError):
                w.write(2, [], lease=5.0)
    live[0].write(2, [], lease=5.0)


def test_a_claim_write_that_reported_failure_but_landed_is_not_a_fencing(tmp_path: Path) -> None:
    class Flaky(LocalFileSystem):
        fail_next = False

        def create(self, path: str, data: bytes) -> bool:
            created = super().create(path, data)
            if self.fail_next:
                self.fail_next = False
                raise OSError(5, "Input/output error", path)
            return created

    fs = Flaky()
    store = DirectoryStore(parse_uri(str(tmp_path / "plans")), fs=fs)
    writer = store.claim_writer("A")
    fs.fail_next = True
    with pytest.raises(StoreError, match="cannot write a claim of A"):
        writer.write(1, [("t", 0)], lease=5.0)
    record = writer.write(2, [("t", 1)], lease=5.0)  # not fenced by its own earlier write
    assert store.claims()["A"] == record


def test_claims_survive_files_vanishing_while_read(tmp_path: Path) -> None:
    class Vanishing(LocalFileSystem):
        misses = 2

        def read(self, path: str) -> bytes | None:
            if "/claims/" in path and self.misses:
                self.misses -= 1
                return None  # deleted between listing and reading
            return super().read(path)

    root = tmp_path / "plans"
    record = store_at(root).claim_writer("A").write(1, [("t", 0)], lease=5.0)
    assert DirectoryStore(parse_uri(str(root)), fs=Vanishing()).claims() == {"A": record}


def test_an_unreadable_newest_claim_is_named_and_blocks_a_take_over(tmp_path: Path) -> None:
    root = tmp_path / "plans"
    store = store_at(root)
    store.claim_writer("A").write(1, [("t", 0)], lease=5.0)
    newest = max((root / "claims" / "A").iterdir())
    newest.write_text('{"consumer": "A"')
    report = store.claims()["A"]
    assert isinstance(report, str) and newest.name in report and "\n" not in report
    with pytest.raises(StoreError, match="cannot take A over"):
        store.claim_writer("A")


@pytest.mark.parametrize("committed", [{"t": {"0": None}}, {"t": [5]}, ["t"], {"t": {"0": True}}])
def test_a_claim_whose_committed_offsets_are_not_offsets_is_unreadable_and_blocks_a_take_over(
    tmp_path: Path, committed: object
) -> None:
    root = tmp_path / "plans"
    store = store_at(root)
    store.claim_writer("A").write(1, [("t", 0)], lease=5.0, committed={"t": {"0": 7}})
    newest = max((root / "claims" / "A").iterdir())
    assert store.claims()["A"].committed == {"t": {"0": 7}}  # what is written reads back
    newest.write_text(json.dumps({**json.loads(newest.read_text()), "committed": committed}))
    report = store.claims()["A"]
    assert isinstance(report, str) and "committed" in report and "\n" not in report
    with pytest.raises(StoreError, match="cannot take A over: its newest claim cannot be read"):
        store.claim_writer("A")


@pytest.mark.parametrize("consumer", ["a/b", "", ".", "..", ".hidden"])
def test_a_consumer_id_that_cannot_name_a_directory_is_refused(tmp_path: Path, consumer: str) -> None:
    with pytest.raises(InputError):
        store_at(tmp_path).claim_writer(consumer)
