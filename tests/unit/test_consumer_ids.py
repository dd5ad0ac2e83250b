"""One rule for consumer ids (``spark_lag_assign.core.ids``), wherever an id enters: ``assign``
itself, subscriptions, a plan document a real store's publisher is handed (``publish``), the
plan builder and checker, the command line as parsed from argv and the config layers, the
stores' claim writers. Every entry point accepts an id or refuses it with the same line."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, strategies as st

import spark_lag_assign as sla
from spark_lag_assign import config
from spark_lag_assign.cli import build_parser, plan_settings
from spark_lag_assign.core.ids import CONSUMER_ID_PATTERN, consumer_id_problem
from spark_lag_assign.core.subscriptions import validate_subscriptions
from spark_lag_assign.errors import InputError
from spark_lag_assign.plan.build import PLAN_COLUMNS, build_plan, check_consumer_ids
from spark_lag_assign.plan.document import check_plan
from spark_lag_assign.store import FENCER, open_store


def _assign(c: str) -> None:
    sla.assign(pd.DataFrame({"topic": ["t"], "partition": [0], "lag": [5]}), {c: ["t"]}, "range")


def _subscriptions(c: str) -> None:
    validate_subscriptions({c: ["t"]})


def _publishing(c: str) -> None:
    """A plan document naming ``c`` handed to a real store's publisher (not built by us)."""
    rows = pd.DataFrame([("c0", "t", 0, 5, -2)], columns=list(PLAN_COLUMNS))
    plan = build_plan(rows, {"c0": ["t"]}, generation=1, strategy="range", reset="latest")
    plan = json.loads(json.dumps(plan))
    plan["consumers"] = {c: plan["consumers"]["c0"]}
    with tempfile.TemporaryDirectory() as root, open_store(root) as store, store.publisher() as publisher:
        try:
            publisher.publish(plan)
        finally:
            assert (store.latest() is None) != (consumer_id_problem(c) is None)  # published exactly when valid


def _cli_plan(c: str) -> None:
    plan_settings(build_parser().parse_args(["plan", "--offsets", "s.csv", "--output", "out", f"--consumers={c}"]))


def _plan_document(c: str) -> None:
    rows = pd.DataFrame([(c, "t", 0, 5, -2)], columns=list(PLAN_COLUMNS))
    check_plan(build_plan(rows, {c: ["t"]}, generation=1, strategy="range", reset="latest"), "plan.json")


def _config_subscriptions(c: str) -> None:
    config.settings(offsets="s.csv", output="out", subscriptions={c: ["t"]})


def _consumers_list(c: str) -> None:
    config.settings(offsets="s.csv", output="out", consumers=[c])  # a config file's list, or the API's


def _consumers_flag(c: str) -> None:
    config.settings(offsets="s.csv", output="out", consumers=c)


def _parsed_apart(c: str) -> bool:
    """The flag is a comma list: "a, b" is two ids and " a" is "a", parsed before any check."""
    return "," in c or c != c.strip() or not c


ENTRY_POINTS: dict[str, Callable[[str], None]] = {
    "assign": _assign,
    "subscriptions": _subscriptions,
    "publishing": _publishing,
    "ids of a plan": lambda c: check_consumer_ids([c]),
    "plan document": _plan_document,
    "config subscriptions": _config_subscriptions,
    "config consumers": _consumers_list,
    "cli --consumers": _consumers_flag,
    "cli argv": _cli_plan,
}


def refusals(c: str) -> dict[str, str | None]:
    """Entry point -> None (accepted) or its one-line refusal."""
    out: dict[str, str | None] = {}
    for name, enter in ENTRY_POINTS.items():
        if enter in (_consumers_flag, _cli_plan) and _parsed_apart(c):
            continue
        try:
            enter(c)
        except InputError as exc:
            out[name] = str(exc)
        else:
            out[name] = None
    return out


EXAMPLES = [
    "c0",
    "C",
    "0",
    "host01-5f0c1d2e-8b7a-4c3d-9e1f-0a2b3c4d5e6f",
    "a" * 100,
    "a" * 101,
    "a" * 249,
    "a" * 250,
    "",
    " ",
    "a b",
    " a",
    "a ",
    "a\n",
    "\na",
    "a\t",
    "a.b",
    ".a",
    "-a",
    "_a",
    "_fencer",
    "a_b-c",
    "a/b",
    "..",
    "a:b",
    "1:member",
    "kafka-python-3.0.12-5f0c1d2e-8b7a-4c3d-9e1f-0a2b3c4d5e6f",
    "my app.1-5f0c1d2e",
    "hôte-1",
    "节点-7",
    "\uffff",
    "\ue000",
    "\U0001f600",
    "host-\U00010000",
    "\ud800",
    "a\udfffb",
    "a\x00b",
    "\uff41",  # fullwidth a: a letter to str.isalnum, not to the rule
    "\u0661",  # an Arabic-Indic digit
]

ids = st.one_of(
    st.from_regex(CONSUMER_ID_PATTERN[1:-1], fullmatch=True),  # valid
    st.text(st.characters(codec=None, categories=None), max_size=8),  # anything: surrogates, controls, white space
    st.text(st.sampled_from("aZ09_-. \n:/é"), max_size=6),  # near the rule's edges
    st.integers(95, 105).map(lambda n: "x" * n),
    st.integers(245, 255).map(lambda n: "y" * n),
    st.tuples(st.from_regex(CONSUMER_ID_PATTERN[1:-1], fullmatch=True), st.sampled_from(". \n\t/:@\u00e9\U0001f600")).map(
        lambda p: p[0] + p[1]
    ),
)


def check_alike(consumer: str) -> None:
    got = refusals(consumer)
    problem = consumer_id_problem(consumer)
    assert set(ENTRY_POINTS) - set(got) <= {"cli --consumers", "cli argv"}
    if problem is None:
        assert all(msg is None for msg in got.values()), got
    else:
        for name, msg in got.items():
            assert msg is not None, (name, "accepts", consumer, got)
            assert msg.endswith(problem), (name, msg)  # a where-prefix at most ("--consumers: ")
            assert "\n" not in msg, (name, msg)


@given(ids)
def test_every_entry_point_accepts_or_refuses_an_id_alike_and_says_the_same(consumer: str) -> None:
    check_alike(consumer)


@pytest.mark.parametrize("consumer", EXAMPLES)
def test_the_examples_agree_too(consumer: str) -> None:
    check_alike(consumer)


@pytest.mark.parametrize(
    ("consumer", "what"),
    [
        ("", "''"),
        ("a" * 101, "101 characters long"),
        ("a" * 250, "250 characters long"),
        ("-a", "starts with '-'"),
        (".a", "starts with '.'"),
        ("_fencer", "starts with '_'"),
        ("a.b", "holds '.' (U+002E)"),
        ("my app.1-5f0c", "holds ' ' (U+0020)"),
        ("a\n", "holds '\\n' (U+000A)"),
        ("a\ud800", "holds '\\ud800' (U+D800)"),
        ("host-\U0001f600", "(U+1F600)"),
    ],
)
def test_a_bad_id_gets_one_line_naming_it_and_what_is_wrong(consumer: str, what: str) -> None:
    problem = consumer_id_problem(consumer)
    assert problem is not None and problem.startswith("invalid consumer id ") and what in problem
    assert "\n" not in problem and "at most 100 characters" in problem


def test_valid_ids_reach_a_plan_and_back() -> None:
    for consumer in ["c0", "a" * 100, "Z-_9"]:
        assert refusals(consumer) == dict.fromkeys(ENTRY_POINTS)
    assert refusals(" c0")["config consumers"] is not None  # only the flag's text is split and stripped


def test_the_directory_store_refuses_with_the_same_line(tmp_path: Path) -> None:
    store = open_store(str(tmp_path))
    try:
        for consumer in ["a.b", "", "../x", "-a", "a b"]:
            with pytest.raises(InputError) as err:
                store.claim_writer(consumer)
            assert str(err.value) == consumer_id_problem(consumer)
    finally:
        store.close()


def test_the_fencer_is_no_consumer() -> None:
    assert consumer_id_problem(FENCER) is not None  # its claims can never be a consumer's


def test_validated_subscriptions_are_read_only_so_no_id_skips_the_rule() -> None:
    """``validate_subscriptions`` hands validated subscriptions back unchecked: changed in
    place, one would reach ``assign`` with an id publishing refuses (or topics that disagree
    with its kinds). It refuses the change; a copy is validated like any input, and a pickled
    one (a Spark closure) comes back validated."""
    import pickle

    subs = validate_subscriptions({"b": ["t1", "t0"], "a": ["t0", "t1"]})
    for change in (
        lambda: subs.__setitem__("-bad.id", ["t0"]),
        lambda: subs.update({"c": ["t0"]}),
        lambda: subs.pop("a"),
        lambda: subs.setdefault("c", ["t0"]),
        lambda: subs.__delitem__("a"),
    ):
        with pytest.raises(TypeError, match=r"^validated subscriptions are read-only"):
            change()
    assert dict(subs) == {"a": ["t0", "t1"], "b": ["t0", "t1"]} and subs.kinds == {("t0", "t1"): ["a", "b"]}
    copy = dict(subs)
    copy["-bad.id"] = ["t0"]
    with pytest.raises(InputError, match=r"-bad\.id"):
        validate_subscriptions(copy)
    again = pickle.loads(pickle.dumps(subs))
    assert again == subs and again.kinds == subs.kinds and type(again) is type(subs)
