"""The plan format in one place: the model, its published JSON Schema, and what every
reader does with a plan.json that is not UTF-8 or not of the plan's shape."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from spark_lag_assign import cli
from spark_lag_assign.consume import PlanFollower, read_assigned
from spark_lag_assign.core import quality, rates
from spark_lag_assign.errors import InputError, PlanError
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.plan.document import (
    PlanFormatError,
    check_plan,
    parse_plan,
    parse_plan_parts,
    plan_schema,
    schema_json,
)
from spark_lag_assign.store import open_store
from spark_lag_assign.store.kafka import consumer_key, encode_plan, header_key

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "conf" / "plan.schema.json"
SUBS = {"C0": ["t0", "t1"], "C1": ["t0"], "idle": ["t1"]}


def rows() -> pd.DataFrame:
    return pd.DataFrame(
        [
            ("C0", "t0", 0, 100, 7),
            ("C1", "t0", 2, 50, -2),
            ("C1", "t0", 1, 60, 11),
            ("C0", "t1", 0, 0, -1),
            (None, "nobody", 0, 3, -2),
        ],
        columns=list(plan_io.PLAN_COLUMNS),
    )


def make(generation: int = 1, **extra: Any) -> plan_io.Plan:
    return plan_io.build_plan(rows(), SUBS, generation=generation, strategy="lag", reset="latest", group="g", **extra)


def validator() -> Any:
    """A validator of the published schema (jsonschema is a dev dependency: a missing one fails, never skips)."""
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


# -- the published schema ---------------------------------------------------------------------------


def test_the_published_schema_is_the_models_schema() -> None:
    # regenerate with: python -m spark_lag_assign.plan.document > conf/plan.schema.json
    assert SCHEMA.read_text() == schema_json()
    assert json.loads(SCHEMA.read_text()) == plan_schema()


def written_plans() -> dict[str, plan_io.Plan]:
    """Every kind of plan.json the project writes: without rates, with rates (some consumer
    cannot keep up, another has no rate), with the offsets observed, with quality metrics,
    with no assignment at all, and with totals past int64."""
    produce = pd.DataFrame({"topic": "t0", "partition": [0, 1, 2], "produce_rate": [1.0, 2.0, 500.0]})
    with_rates = rates.combine(list(SUBS), configured={"C0": 10.0, "C1": 50.0}, produce=produce)
    observed = rates.Observation(
        1_700_000_000.5,
        pd.DataFrame({"topic": ["t0", "t0", "t1"], "partition": [0, 1, 0], "end_offset": [9, 2**63 - 1, 0],
                      "committed_offset": [7, None, 0]}),
    )  # fmt: skip
    assigned = rows().dropna(subset=["consumer"])
    measured = {**quality.quality(assigned, SUBS, assigned[["consumer", "topic", "partition"]]).as_dict(), "out_of_range": 2}
    big = 2**62
    huge = pd.DataFrame(
        [("a", "t", 0, big, 2**63 - 1), ("a", "t", 1, big, 0), ("b", "t", 2, big, -1), ("b", "t", 2**31 - 1, big, -2)],
        columns=list(plan_io.PLAN_COLUMNS),
    )
    empty = pd.DataFrame({c: pd.Series([], dtype="int64" if c in ("partition", "lag", "starting_offset") else object)
                          for c in plan_io.PLAN_COLUMNS})  # fmt: skip
    return {
        "plain": make(),
        "rates": make(rates=with_rates, observed=observed, quality=measured, options={"tolerance": 0.05}),
        "no rates": make(rates=rates.combine(list(SUBS))),
        "huge": plan_io.build_plan(huge, {"a": ["t"], "b": ["t"]}, generation=7, strategy="range", reset="earliest"),
        "empty": plan_io.build_plan(empty, {"c": ["t"]}, generation=2, strategy="sticky", reset="none"),
    }


@pytest.mark.parametrize("name", list(written_plans()))
def test_every_plan_the_project_writes_validates_against_the_published_schema(name: str, tmp_path: Path) -> None:
    doc = written_plans()[name]
    check = validator()
    text = plan_io.plan_json(doc)
    check.validate(json.loads(text))
    assert parse_plan(text.encode(), "test") == doc
    # as the directory store writes it
    with open_store(str(tmp_path)) as store, store.publisher() as publisher:
        publisher.publish({**doc, "generation": publisher.next_generation()})  # type: ignore[typeddict-item]
    stored = (tmp_path / "generations" / "000001" / "plan.json").read_bytes()
    check.validate(json.loads(stored))
    # as the Kafka store splits it into records (a header, then each consumer), put back together
    records = dict(encode_plan(doc)[0])
    g = doc["generation"]
    header = b"".join(records[header_key(g, i)] for i in range(len(records)) if header_key(g, i) in records)
    check.validate({**json.loads(header), "consumers": {c: json.loads(records[consumer_key(g, c, 0)]) for c in doc["consumers"]}})
    parts = {
        c: b"".join(records[consumer_key(g, c, i)] for i in range(len(records)) if consumer_key(g, c, i) in records)
        for c in doc["consumers"]
    }
    assert parse_plan_parts(header, parts, "kafka") == doc


@settings(max_examples=60, deadline=None)
@given(
    lags=st.lists(st.integers(min_value=0, max_value=2**63 - 1), min_size=0, max_size=12),
    starts=st.lists(st.integers(min_value=-2, max_value=2**63 - 1), min_size=12, max_size=12),
    consumers=st.integers(min_value=1, max_value=4),
)
def test_plans_of_any_lags_and_offsets_validate_and_round_trip(lags: list[int], starts: list[int], consumers: int) -> None:
    frame = pd.DataFrame(
        {"consumer": [f"c{i % consumers}" for i in range(len(lags))], "topic": "t", "partition": range(len(lags)),
         "lag": pd.Series(lags, dtype="int64"), "starting_offset": pd.Series(starts[: len(lags)], dtype="int64")}
    )  # fmt: skip
    doc = plan_io.build_plan(frame, {f"c{i}": ["t"] for i in range(consumers)}, generation=1, strategy="x", reset="latest")
    assert doc["totals"]["lag"] == sum(lags)  # exact, never wrapped
    text = plan_io.plan_json(doc)
    validator().validate(json.loads(text))
    assert parse_plan(text.encode(), "p") == doc


# -- bad plans: one line naming the source and the first problem ----------------------------------


def good_text() -> str:
    return plan_io.plan_json(make(3))


def edited(change: Any) -> bytes:
    doc = json.loads(good_text())
    change(doc)
    return json.dumps(doc).encode()


BAD: dict[str, tuple[bytes, str]] = {
    "not utf-8": (good_text().encode().replace(b'"lag"', b'"l\xe4g"', 1), "not UTF-8 (byte 0xe4"),
    "not json": (b'{"format": 1,', "not valid JSON"),
    "a list": (b"[1, 2]", "not a plan (expected a JSON object)"),
    "consumers as a list": (edited(lambda d: d.__setitem__("consumers", [])), "consumers must be an object (got a list)"),
    "partition as a string": (
        edited(lambda d: d["consumers"]["C1"]["assign"].__setitem__("t0", ["1", 2])),
        'consumers.C1.assign.t0[0] must be an integer (got "1")',
    ),
    "string generation": (edited(lambda d: d.__setitem__("generation", "3")), 'generation must be an integer (got "3")'),
    "boolean generation": (edited(lambda d: d.__setitem__("generation", True)), "generation must be an integer (got true)"),
    "partition past int32": (
        edited(lambda d: d["unassigned"].__setitem__("nobody", [2**31])),
        "unassigned.nobody[0] must be less than 2147483648",
    ),
    "offset past int64": (
        edited(lambda d: d["consumers"]["C0"]["startingOffsets"]["t0"].__setitem__("0", 2**63)),
        'consumers.C0.startingOffsets.t0["0"] must be less than 9223372036854775808',
    ),
    "negative lag": (edited(lambda d: d["totals"].__setitem__("lag", -5)), "totals.lag must be greater than or equal to 0"),
    "infinite rate": (
        good_text().replace('"lag":100,', '"lag":100,"read_rate":Infinity,', 1).encode(),
        "consumers.C0.read_rate must be a finite number",
    ),
    "format 2": (edited(lambda d: d.__setitem__("format", 2)), "plan format 2 is not supported (expected 1)"),
    "fields missing": (edited(lambda d: [d.pop(k) for k in ("strategy", "totals")]), "missing strategy, totals"),
    "bad consumer id": (
        edited(lambda d: d["consumers"].__setitem__("../x", d["consumers"].pop("idle"))),
        "consumers: invalid consumer id '../x': starts with '.'",  # the words of every other check (core.ids)
    ),
    "offsets of other partitions": (
        edited(lambda d: d["consumers"]["C1"]["startingOffsets"].__setitem__("t0", {"1": 0, "5": 0})),
        "consumers.C1.startingOffsets.t0 must name exactly the assigned partitions",
    ),
    "a wrong count": (edited(lambda d: d["consumers"]["C1"].__setitem__("partitions", 5)), "consumers.C1.partitions is 5"),
    "a partition twice": (
        edited(
            lambda d: (
                d["consumers"]["C0"]["assign"].__setitem__("t0", [0, 1]),
                d["consumers"]["C0"]["startingOffsets"]["t0"].__setitem__("1", 0),
                d["consumers"]["C0"].__setitem__("partitions", 3),
            )
        ),
        "partition t0-1 is assigned to more than one consumer (C0, C1)",
    ),
    "unsorted partitions": (
        edited(lambda d: d["consumers"]["C1"]["assign"].__setitem__("t0", [2, 1])),
        "consumers.C1.assign.t0 must list partitions ascending, each once",
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_plan_is_one_line_naming_its_source_and_the_first_problem(name: str) -> None:
    data, expected = BAD[name]
    with pytest.raises(PlanFormatError) as err:
        parse_plan(data, "store X generation 3")
    message = str(err.value)
    assert message.startswith("store X generation 3: ") and expected in message, message
    assert "\n" not in message
    assert isinstance(err.value, InputError) and isinstance(err.value, PlanError)  # the CLI prints it in one line, exit 1


DECODED = [name for name in BAD if name not in ("not utf-8", "not json", "a list")]


@pytest.mark.parametrize("name", DECODED)
def test_a_bad_dict_about_to_be_published_is_refused_with_the_same_line_as_its_file(name: str) -> None:
    data, expected = BAD[name]
    with pytest.raises(PlanFormatError) as err:
        check_plan(json.loads(data), "store X generation 3")  # the whole-array checks decline, the field checks name it
    assert str(err.value).startswith("store X generation 3: ") and expected in str(err.value), str(err.value)


def test_a_built_plan_takes_the_whole_array_checks_and_one_in_another_key_order_the_field_checks() -> None:
    from spark_lag_assign.plan import document

    doc = plan_io.build_plan(
        pd.concat([rows(), pd.DataFrame([("C1", "t0", 3, 1, 4)], columns=list(plan_io.PLAN_COLUMNS))]),
        SUBS, generation=1, strategy="lag", reset="latest",
    )  # fmt: skip
    assert document._partitions_consistent(doc)  # the fast path a million-partition plan relies on
    doc["consumers"]["C1"]["startingOffsets"]["t0"] = dict(reversed(doc["consumers"]["C1"]["startingOffsets"]["t0"].items()))
    assert not document._partitions_consistent(doc)
    assert check_plan(doc, "p") is doc  # still valid: JSON objects have no order


# what JSON Schema can say (the rest: not JSON at all, and how a consumer's fields agree with each other)
SHAPE_ONLY = [
    "consumers as a list", "partition as a string", "string generation", "boolean generation", "partition past int32",
    "offset past int64", "negative lag", "format 2", "fields missing", "bad consumer id",
]  # fmt: skip


@pytest.mark.parametrize("name", SHAPE_ONLY)
def test_the_schema_refuses_what_the_model_refuses(name: str) -> None:
    doc = json.loads(BAD[name][0])
    assert not validator().is_valid(doc)
    with pytest.raises(PlanFormatError):
        check_plan(doc, "in memory")  # the publishers' check of a dict about to be written


def test_a_newer_planners_extra_fields_are_kept_not_refused() -> None:
    doc = json.loads(good_text())
    doc["future"] = {"anything": 1}
    doc["consumers"]["C0"]["hint"] = "x"
    assert parse_plan(json.dumps(doc), "p")["future"] == {"anything": 1}


def test_a_publisher_refuses_a_malformed_plan_and_writes_nothing(tmp_path: Path) -> None:
    doc = make()
    doc["consumers"]["C0"]["assign"]["t0"] = ["0"]  # type: ignore[list-item]
    with open_store(str(tmp_path)) as store, store.publisher() as publisher:
        with pytest.raises(PlanFormatError, match=r"generation 1: not a valid plan: consumers.C0.assign.t0\[0\]"):
            publisher.publish(doc)
        assert store.generations() == []


# -- the readers: the stores, show, read_assigned, the follower ---------------------------------------


def forge(root: Path, generation: int, data: bytes) -> None:
    """A generation whose plan.json is ``data``, with a manifest that vouches for it (a
    planner of another version, a hand edit): only the plan format can refuse it."""
    generations = root / "generations"
    directory = generations / f"{generation:06d}"
    directory.mkdir(parents=True)
    (directory / "plan.json").write_bytes(data)
    manifest = {"format": 1, "generation": generation, "dir": directory.name, "consumers": [],
                "sha256": hashlib.sha256(data).hexdigest()}  # fmt: skip
    (generations / f"{generation:06d}.manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("name", ["not utf-8", "consumers as a list", "partition as a string", "string generation"])
def test_a_store_skips_a_malformed_generation_and_says_why_in_one_line(
    name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with open_store(str(tmp_path)) as store, store.publisher() as publisher:
        publisher.publish(make(1))
    forge(tmp_path, 2, BAD[name][0].replace(b'"generation": 3', b'"generation": 2').replace(b'"generation":3', b'"generation":2'))
    with caplog.at_level(logging.WARNING), open_store(str(tmp_path)) as store:
        assert store.latest()["generation"] == 1  # type: ignore[index]
        assert store.get(2) is None
        assert store.wait_for_plan(1, 0.05) is None
        with store.publisher() as publisher:
            assert publisher.previous()["generation"] == 1  # type: ignore[index]  # the planner's previous plan
            assert publisher.next_generation() == 3  # a number is never used twice
    warnings = [r.getMessage() for r in caplog.records if "generation 2 is skipped" in r.getMessage()]
    assert warnings and all("\n" not in w for w in warnings)
    assert BAD[name][1].split(" (")[0] in warnings[0]


def test_show_of_a_store_holding_only_a_malformed_plan_is_one_error_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    forge(tmp_path, 1, BAD["partition as a string"][0].replace(b'"generation": 3', b'"generation": 1'))
    with caplog.at_level(logging.WARNING):
        assert cli.main(["show", str(tmp_path)]) == 1
        assert cli.main(["show", str(tmp_path), "--generation", "1"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = err.splitlines()
    assert len(errors) == 2 and all(line.startswith("spark-lag-assign: error: ") for line in errors)
    assert "no readable plan (generations kept: 1;" in errors[0]  # not "no plan": one exists, unreadable
    # why, in one warning line of the store (on stderr outside pytest)
    reasons = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert reasons and 'consumers.C1.assign.t0[0] must be an integer (got "1")' in reasons[0] and "\n" not in reasons[0]


def test_read_assigned_of_a_malformed_plan_is_a_one_line_plan_error(tmp_path: Path) -> None:
    forge(tmp_path, 1, BAD["consumers as a list"][0].replace(b'"generation": 3', b'"generation": 1'))
    no_spark: Any = object()  # never reached: the plan is refused first
    for generation in (None, 1):
        with pytest.raises(PlanError) as err:
            read_assigned(no_spark, str(tmp_path), "C0", generation=generation, **{"kafka.bootstrap.servers": "127.0.0.1:9"})
        assert "\n" not in str(err.value) and str(tmp_path) in str(err.value)


def fail_plan_reads(store: Any, failures: int) -> None:
    """Make ``store``'s plan reads fail with a format error ``failures`` times (a backend that
    hands the follower a plan it cannot parse), then behave."""
    real = store.wait_for_plan
    left = [failures]

    def wait_for_plan(newer_than: int, timeout: float) -> Any:
        if left[0] > 0:
            left[0] -= 1
            raise PlanFormatError(
                f"{store.uri} generation {newer_than + 1}: not a valid plan: consumers must be an object (got a list)"
            )
        return real(newer_than, timeout)

    store.wait_for_plan = wait_for_plan


@pytest.mark.parametrize("flaky", [False, True])
def test_a_running_follower_keeps_its_generation_over_a_malformed_plan_and_follows_the_next_good_one(
    flaky: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    idle = {"A": {}}  # A holds nothing: the follower claims and waits, no Spark query and no Kafka needed

    def publish(generation: int) -> None:
        frame = pd.DataFrame({c: pd.Series([], dtype="int64" if c in ("partition", "lag", "starting_offset") else object)
                              for c in plan_io.PLAN_COLUMNS})  # fmt: skip
        doc = plan_io.build_plan(
            frame, {c: ["t"] for c in idle}, generation=generation, strategy="range", reset="latest", group="g"
        )
        with open_store(str(tmp_path)) as store, store.publisher() as publisher:
            assert publisher.next_generation() == generation
            publisher.publish(doc)

    publish(1)
    store = open_store(str(tmp_path), poll=0.05)
    if flaky:
        fail_plan_reads(store, 3)
    spark: Any = SimpleNamespace(streams=SimpleNamespace(addListener=lambda listener: None, removeListener=lambda listener: None))
    follower = PlanFollower(
        spark, store, "A", lambda stream, checkpoint: None, checkpoint_root=str(tmp_path / "chk"),
        kafka_options={"kafka.bootstrap.servers": "127.0.0.1:9"}, commit=lambda offsets, generation: None,
        lease=30.0, poll_interval=0.1,
    )  # fmt: skip
    outcome: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: outcome.update(summary=follower.run()), daemon=True)
    with caplog.at_level(logging.WARNING):
        runner.start()
        deadline = time.monotonic() + 30
        while not any(e.kind == "claim" for e in follower.events) and time.monotonic() < deadline:
            time.sleep(0.05)
        forge(tmp_path, 2, BAD["consumers as a list"][0].replace(b'"generation": 3', b'"generation": 2'))
        time.sleep(0.5)  # several polls see generation 2 and refuse it
        assert runner.is_alive() and [e.generation for e in follower.events if e.kind == "plan"] == [1]
        publish(3)
        while 3 not in [e.generation for e in follower.events if e.kind == "plan"] and time.monotonic() < deadline:
            time.sleep(0.05)
        follower.stop()
        runner.join(30)
    store.close()
    assert not runner.is_alive()
    summary = outcome["summary"]
    assert summary.reason == "stopped" and summary.generations == [1, 3]
    lines = [r.getMessage() for r in caplog.records if "not a valid plan" in r.getMessage()]
    assert lines and all("\n" not in line for line in lines)
    if flaky:  # the follower's own guard: one line however many polls failed alike
        kept = [line for line in lines if "keeps generation 1" in line]
        assert len(kept) == 1


def test_a_follower_started_on_a_store_holding_only_a_malformed_plan_is_one_line_and_claims_nothing(tmp_path: Path) -> None:
    forge(tmp_path, 1, BAD["string generation"][0])
    spark: Any = SimpleNamespace(streams=SimpleNamespace(addListener=lambda listener: None, removeListener=lambda listener: None))
    follower = PlanFollower(
        spark, str(tmp_path), "C0", lambda stream, checkpoint: None, checkpoint_root=str(tmp_path / "chk"),
        kafka_options={"kafka.bootstrap.servers": "127.0.0.1:9"}, commit=lambda offsets, generation: None,
    )  # fmt: skip
    with pytest.raises(PlanError, match=r"^no plan in the store ") as err:
        follower.run()
    assert "\n" not in str(err.value)
    assert not (tmp_path / "claims").exists() or not any((tmp_path / "claims").iterdir())


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["C0", "C1"]), st.sampled_from(["t0", "t1", "t2"]), st.integers(0, 70) | st.integers(0, 2**31 - 1)
        ),
        max_size=30,
    ),
    st.booleans(),
)
def test_the_whole_array_checks_find_a_partition_of_two_consumers(
    rows: list[tuple[str, str, int]], topics_reversed: bool
) -> None:
    from spark_lag_assign.plan import document

    # each consumer's lists ascending and distinct; the same partition may go to both consumers
    doc = make()
    held = {c: {t: sorted({p for cc, tt, p in rows if (cc, tt) == (c, t)}) for t in ("t0", "t1", "t2")} for c in ("C0", "C1")}
    for c, entry in doc["consumers"].items():
        assign = {t: ps for t, ps in held.get(c, {}).items() if ps}
        entry["assign"] = assign
        starting = {t: {str(p): 5 for p in ps} for t, ps in assign.items()}
        entry["startingOffsets"] = dict(reversed(starting.items())) if topics_reversed else starting
        entry["partitions"] = sum(map(len, assign.values()))
    shared = {(t, p) for t in ("t0", "t1", "t2") for p in set(held["C0"][t]) & set(held["C1"][t])}
    assert document._partitions_consistent(doc) == (not shared)
    assert (document._consistent(doc) is None) == (not shared)
