"""The plan format, and publishing it to a plan directory: generations, whole or nothing, bad files."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, strategies as st

from spark_lag_assign.errors import InputError, PlanError
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.store import StoreError, open_store

SUBS = {"C0": ["t0", "t1"], "C1": ["t0"], "idle": ["t1"]}


def rows() -> pd.DataFrame:
    return pd.DataFrame(
        [
            ("C0", "t0", 0, 100, 7),
            ("C1", "t0", 2, 50, -2),
            ("C1", "t0", 1, 60, 11),
            ("C0", "t1", 0, 0, -1),
            (None, "nobody", 1, 5, -2),
            (None, "nobody", 0, 3, -2),
        ],
        columns=list(plan_io.PLAN_COLUMNS),
    )


def make(generation: int = 1) -> plan_io.Plan:
    return plan_io.build_plan(rows(), SUBS, generation=generation, strategy="lag", reset="latest", group="g")


def tree(directory: Path) -> dict[str, str]:
    """Every file's digest, every link's target and every directory, empty ones too (and the
    directory itself, if it exists): to prove a directory did not change."""
    out = {".": "dir"} if directory.is_dir() else {}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(root) / name
            rel = str(path.relative_to(directory))
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            elif path.is_dir():
                out[rel] = "dir"
    return out


def test_build_plan_has_the_contracted_fields() -> None:
    doc = make(3)
    assert doc["format"] == plan_io.FORMAT_VERSION
    assert (doc["generation"], doc["strategy"], doc["group"], doc["reset"]) == (3, "lag", "g", "latest")
    assert doc["created"].endswith("Z")
    c0, c1, idle = doc["consumers"]["C0"], doc["consumers"]["C1"], doc["consumers"]["idle"]
    assert c0["assign"] == {"t0": [0], "t1": [0]}
    assert c1["assign"] == {"t0": [1, 2]}  # ascending, whatever the row order
    assert c1["startingOffsets"] == {"t0": {"1": 11, "2": -2}}
    assert (c0["partitions"], c0["lag"], c1["partitions"], c1["lag"]) == (2, 100, 2, 110)
    assert idle == {"assign": {}, "startingOffsets": {}, "partitions": 0, "lag": 0, "subscriptions": ["t1"]}
    assert doc["unassigned"] == {"nobody": [0, 1]}
    assert doc["totals"] == {"partitions": 6, "assigned": 4, "unassigned": 2, "lag": 210}


def test_building_a_plan_leaves_the_garbage_collector_to_its_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    switched: list[str] = []
    monkeypatch.setattr(gc, "disable", lambda: switched.append("disable"))
    monkeypatch.setattr(gc, "enable", lambda: switched.append("enable"))
    rows = pd.DataFrame(
        {"consumer": ["c0", "c1", None], "topic": ["t", "t", "u"], "partition": [0, 1, 0], "lag": [1, 2, 3], "starting_offset": [5, 6, 7]}
    )
    doc = plan_io.build_plan(rows, {"c0": ["t"], "c1": ["t"]}, generation=1, strategy="range", reset="latest")
    assert doc["consumers"]["c1"]["assign"] == {"t": [1]} and doc["unassigned"] == {"u": [0]}
    assert switched == []


def test_assign_strings_are_what_the_kafka_source_takes() -> None:
    doc = make()
    assert json.loads(plan_io.assign_json(doc["consumers"]["C1"])) == {"t0": [1, 2]}
    assert plan_io.starting_offsets_json(doc["consumers"]["C1"]) == '{"t0":{"1":11,"2":-2}}'


def publish(directory: Path, doc: plan_io.Plan) -> None:
    with open_store(str(directory)) as store, store.publisher() as publisher:
        publisher.publish(doc)


def test_publish_then_read_round_trips_and_links_the_current_generation(tmp_path: Path) -> None:
    doc = make()
    publish(tmp_path, doc)
    assert plan_io.read_plan(tmp_path) == doc  # through the convenience link a user may point Spark at
    assert os.readlink(tmp_path / "current") == "generations/000001"
    assert (tmp_path / "assign" / "C1.json").read_text().strip() == '{"t0":[1,2]}'
    assert (tmp_path / "starting-offsets" / "C0.json").read_text().strip() == '{"t0":{"0":7},"t1":{"0":-1}}'
    assert (tmp_path / "assign" / "idle.json").read_text().strip() == "{}"


def test_generations_are_kept_and_the_assignment_frame_round_trips(tmp_path: Path) -> None:
    for g in (1, 2, 3):
        publish(tmp_path, make(g))
    with open_store(str(tmp_path)) as store:
        assert store.generations() == [1, 2, 3]
        assert store.get(2)["generation"] == 2  # type: ignore[index]
        latest = store.latest()
    assert latest is not None and latest["generation"] == 3
    frame = plan_io.assignment_frame(latest)
    want = rows().dropna(subset=["consumer"])[["consumer", "topic", "partition"]]
    assert sorted(map(tuple, frame.values.tolist())) == sorted(map(tuple, want.values.tolist()))


def test_a_store_path_that_is_a_file_is_one_line_and_untouched(tmp_path: Path) -> None:
    blocker = tmp_path / "plan-dir"
    blocker.write_text("a file where the directory should be")
    with pytest.raises(StoreError) as err:
        publish(blocker / "below", make())
    assert "\n" not in str(err.value) and str(blocker) in str(err.value)
    assert blocker.read_text() == "a file where the directory should be"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a plan"),
        ('{"format": 1, "generation": 1}', "missing strategy, created"),
        ('{"format": 99, "generation": 1, "strategy": "lag", "consumers": {}}', "format 99 is not supported"),
    ],
)
def test_a_bad_plan_file_gets_a_one_line_error(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "plan.json").write_text(content)
    with pytest.raises(PlanError) as err:
        plan_io.read_plan(tmp_path)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("consumer", ["", "../escape", "a/b", "has space", ".hidden", "-flag", "trailing-newline\n", "\nleading"])
def test_consumer_ids_that_cannot_name_a_file_are_refused(consumer: str) -> None:
    with pytest.raises(InputError, match="invalid consumer id"):
        plan_io.check_consumer_ids([consumer])


def test_a_consumer_id_given_twice_is_refused() -> None:
    with pytest.raises(InputError, match="'c1' is given twice"):
        plan_io.check_consumer_ids(["c1", "c2", "c1"])


WRITER = """
import sys, pandas as pd
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.store import open_store
out = sys.argv[1]
subs = {f"consumer-{i:04d}": ["t"] for i in range(400)}
rows = pd.DataFrame({"consumer": [f"consumer-{i % 400:04d}" for i in range(40000)], "topic": "t",
                     "partition": range(40000), "lag": 1, "starting_offset": -2})
with open_store(out) as store:
    while True:
        with store.publisher() as publisher:
            g = publisher.next_generation()
            publisher.publish(plan_io.build_plan(rows, subs, generation=g, strategy="lag", reset="latest"))
        print(g, flush=True)
"""


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.45, 0.8])
def test_killing_a_writer_at_any_moment_leaves_a_whole_plan(tmp_path: Path, delay: float) -> None:
    publish(tmp_path, make(1))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    time.sleep(1.0 + delay)  # interpreter start, then somewhere inside a write
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with open_store(str(tmp_path)) as store:
        doc = store.latest()  # whole: never torn, never a mix
        assert doc is not None
        for consumer, entry in doc["consumers"].items():
            # every per-consumer file of the generation belongs to the same plan
            gen = tmp_path / "generations" / f"{doc['generation']:06d}"
            assert (gen / "assign" / f"{consumer}.json").read_text().strip() == plan_io.assign_json(entry)
        # the next run goes on after whatever the killed one left half-written
        with store.publisher() as publisher:
            nxt = publisher.next_generation()
            assert nxt > doc["generation"]
            publisher.publish(make(nxt))
        latest = store.latest()
    assert latest is not None and latest["generation"] == nxt


def test_plan_totals_past_int64_are_exact_in_the_document_and_in_plan_json(tmp_path: Path) -> None:
    big = 2**62
    huge = pd.DataFrame(
        [("C0", "t0", 0, big, 1), ("C0", "t0", 1, big, 2), ("C1", "t0", 2, big, 3), ("C1", "t0", 3, big, 2**63 - 1)],
        columns=list(plan_io.PLAN_COLUMNS),
    )
    doc = plan_io.build_plan(huge, {"C0": ["t0"], "C1": ["t0"]}, generation=1, strategy="range", reset="latest")
    assert (doc["consumers"]["C0"]["lag"], doc["consumers"]["C1"]["lag"]) == (2**63, 2**63)
    assert doc["totals"]["lag"] == 2**64
    publish(tmp_path, doc)
    again = plan_io.read_plan(tmp_path)
    assert again["totals"]["lag"] == 2**64 and again["consumers"]["C1"]["startingOffsets"]["t0"]["3"] == 2**63 - 1
    from spark_lag_assign.plan import report

    assert "lag 18,446,744,073,709,551,616" in report.summary(again)
    assert "50.0%" in report.consumer_table(again)


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("partition", 2**31, r"partition 2147483648 is not a whole number in \[0, 2\^31\)"),
        ("starting_offset", 2**63, r"starting_offset 9223372036854775808 is not a whole number in \[-2, 2\^63\)"),
        ("starting_offset", -3, r"starting_offset -3 is not"),
        ("lag", float("inf"), r"lag inf is not a whole number in \[0, 2\^63\)"),
        ("lag", -1, r"lag -1 is not"),
    ],
)
def test_a_plan_row_beyond_kafkas_types_is_one_line(column: str, value: object, message: str) -> None:
    frame = rows().astype({column: object})
    frame.loc[0, column] = value
    with pytest.raises(InputError, match=message) as err:
        plan_io.build_plan(frame, SUBS, generation=1, strategy="lag", reset="latest")
    assert "\n" not in str(err.value)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["C0", "C1", "C2"]),
            st.sampled_from(["t0", "t1", "t2"]),
            st.one_of(st.integers(0, 40), st.integers(0, 2**31 - 1)),
            st.integers(0, 10**6),
            st.integers(-2, 10**9),
        ),
        max_size=40,
        unique_by=lambda r: (r[1], r[2]),
    )
)
def test_each_consumers_entry_is_its_rows_however_the_partitions_fall_into_runs(data: list[tuple]) -> None:  # type: ignore[type-arg]
    frame = pd.DataFrame(data, columns=list(plan_io.PLAN_COLUMNS)).astype(
        {"partition": "int64", "lag": "int64", "starting_offset": "int64"}
    )
    subs = {c: ["t0", "t1", "t2"] for c in ("C0", "C1", "C2")}
    doc = plan_io.build_plan(frame, subs, generation=1, strategy="lag", reset="latest")
    for c in subs:
        mine = sorted((t, p, lag, o) for cc, t, p, lag, o in data if cc == c)
        want_assign: dict[str, list[int]] = {}
        want_start: dict[str, dict[str, int]] = {}
        for t, p, _, o in mine:
            want_assign.setdefault(t, []).append(p)
            want_start.setdefault(t, {})[str(p)] = o
        entry = doc["consumers"][c]
        assert entry["assign"] == want_assign and list(entry["assign"]) == sorted(want_assign)
        assert entry["startingOffsets"] == want_start
        assert (entry["partitions"], entry["lag"]) == (len(mine), sum(r[2] for r in mine))


_TEXT = st.text(st.characters(codec=None, categories=None), max_size=6)  # any code point: escapes, DEL, surrogates
# what a plan's per-partition parts can hold (floats never: the model refuses them there)
_SCALARS = st.one_of(_TEXT, st.integers(-(2**70), 2**70), st.booleans(), st.none())
_JSONISH = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4), max_leaves=20
)


@given(_JSONISH)
def test_the_fast_encoding_of_a_plans_parts_is_jsons_text_byte_for_byte(value: object) -> None:
    # plan files keep the exact text json.dumps gives (hashes in manifests, diffs between
    # generations): the faster encoder may only ever produce the same bytes
    assert plan_io._dumps_parts(value) == json.dumps(value, separators=(",", ":"))


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 2**31 - 1)), max_size=60),
    st.sampled_from([6, 2**27, 2**33]),
)
def test_the_plans_row_order_is_lexsorts_with_ties_kept_in_place(rows: list[tuple[int, int, int]], topics: int) -> None:
    import numpy as np

    owner, topic, part = (np.array([r[i] for r in rows], dtype=np.int64) for i in range(3))
    # 2^27 topics: a key near 2^61; 2^33 would pass 2^63, and the order comes from lexsort itself
    assert plan_io._order(owner, topic, part, topics).tolist() == np.lexsort((part, topic, owner)).tolist()
