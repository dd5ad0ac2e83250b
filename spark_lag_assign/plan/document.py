"""The plan document's format, checked in one place: ``parse_plan`` for bytes, ``check_plan`` for a dict.

Every reader of a plan (the stores, hence ``show``, the planner's previous plan,
``read_assigned`` and ``PlanFollower``) and every publisher goes through this module, so a
plan that is not UTF-8, not JSON or of the wrong shape is refused in one line
(``PlanFormatError``) before anything acts on it, never halfway through a run.

The model is the ``Plan`` TypedDict below, validated by pydantic in strict mode (a string
generation or a partition ``"0"`` is refused, not coerced) and published as a JSON Schema at
``conf/plan.schema.json`` (``python -m spark_lag_assign.plan.document`` prints it; a test keeps
the two equal). Fields this version does not know are kept and ignored, so a newer planner
may add optional fields without breaking older pipelines; an incompatible change bumps
``format``.

Numbers: Kafka offsets are int64, so offsets lie in ``[0, 2**63)`` (``-2`` earliest and
``-1`` latest as starting offsets) and partitions in ``[0, 2**31)``. Lags and their totals
are exact integers with no upper bound (a sum of many int64 lags exceeds int64); rates and
seconds are finite numbers or null.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Mapping
from functools import cache
from itertools import chain, islice
from typing import Annotated, Any, Final, Literal, NotRequired

import numpy as np
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

from spark_lag_assign.core.ids import CONSUMER_ID_PATTERN, consumer_id_problem
from spark_lag_assign.core.limits import INT64_LIMIT, PARTITION_LIMIT
from spark_lag_assign.core.subscriptions import factorize, partition_keys
from spark_lag_assign.errors import InputError, PlanError

FORMAT_VERSION: Final = 1
SCHEMA_ID: Final = "https://github.com/spark-lag-assign/spark-lag-assign/conf/plan.schema.json"

_PARTITION_KEY_PATTERN: Final = r"^(0|[1-9][0-9]{0,9})$"  # a partition number as an object key

_STRICT = ConfigDict(strict=True, extra="allow")


class PlanFormatError(InputError, PlanError):
    """A plan document that is not UTF-8, not JSON or not of the plan's shape (one line:
    where it came from and the first problem)."""


Partition = Annotated[int, Field(ge=0, lt=PARTITION_LIMIT)]
PartitionKey = Annotated[str, Field(pattern=_PARTITION_KEY_PATTERN)]
Offset = Annotated[int, Field(ge=0, lt=INT64_LIMIT)]
StartingOffset = Annotated[int, Field(ge=-2, lt=INT64_LIMIT, description="-2: earliest, -1: latest, else an offset")]
Count = Annotated[int, Field(ge=0)]
Lag = Annotated[int, Field(ge=0, description="messages; exact, unbounded (a total of int64 lags)")]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Rate = Annotated[float, Field(ge=0, allow_inf_nan=False, description="records per second")]
#: the one rule of ``spark_lag_assign.core.ids`` (a consumer id names topics, keys and files)
ConsumerId = Annotated[str, Field(pattern=CONSUMER_ID_PATTERN)]
Topic = Annotated[str, Field(min_length=1)]
Assign = dict[Topic, list[Partition]]


@with_config(_STRICT)
class ConsumerPlan(TypedDict):
    """One consumer's part of a plan."""

    assign: Assign  # the Kafka source's ``assign``: topic -> partitions ascending
    startingOffsets: dict[Topic, dict[PartitionKey, StartingOffset]]  # topic -> {"partition": offset}
    partitions: Count
    lag: Lag
    subscriptions: list[Topic] | Literal["*"]  # "*": every topic of the plan
    # with rates (build_plan(..., rates=...)): records per second, seconds; null where unknown or never
    read_rate: NotRequired[Rate | None]
    read_rate_source: NotRequired[Literal["measured", "configured", "floor"] | None]  # floor: caught up, a lower bound
    produce_rate: NotRequired[Rate]
    drain_seconds: NotRequired[Seconds | None]
    keeps_up: NotRequired[bool | None]  # false: producers append at least as fast as it reads
    partition_drain_seconds: NotRequired[dict[Topic, dict[PartitionKey, Seconds | None]]]


@with_config(_STRICT)
class Totals(TypedDict):
    """Partition counts and the total lag of the assigned partitions."""

    partitions: Count
    assigned: Count
    unassigned: Count
    lag: Lag


@with_config(_STRICT)
class Quality(TypedDict, total=False):
    """``spark_lag_assign.core.quality.Quality`` and the out-of-range count (empty when not measured)."""

    consumers: Count
    partitions: Count
    total_lag: Lag
    count_spread: Count
    topic_spread: Count
    max_lag: Lag
    mean_lag: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    lag_imbalance: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    lower_bound: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    optimality: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    moved: Count | None
    out_of_range: Count


@with_config(_STRICT)
class Observed(TypedDict):
    """The offsets a run saw, and when (epoch seconds): the next run measures rates from them."""

    time: Annotated[float, Field(allow_inf_nan=False)]
    end_offsets: dict[Topic, dict[PartitionKey, Offset]]
    committed_offsets: dict[Topic, dict[PartitionKey, Offset]]


@with_config(_STRICT)
class Sizing(TypedDict):
    """``--drain-within``: the fewest pipelines whose drain plan empties the backlog in time."""

    deadline_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    pipelines_configured: Count
    pipelines_needed: Count | None  # null: no number of the configured pipelines drains in time
    pipelines: list[ConsumerId]  # which ones: pinned first, then the fastest
    drain_seconds_configured: Seconds | None  # null: never (producers outrun them)
    drain_seconds_needed: Seconds | None
    produce_excess: Annotated[float, Field(ge=0, allow_inf_nan=False)]  # records/s producers outrun every pipeline by


@with_config(_STRICT)
class Plan(TypedDict):
    """A plan generation (README, "Stores"): who reads which partitions from where."""

    format: Literal[1]
    generation: Annotated[int, Field(ge=1)]
    strategy: Annotated[str, Field(min_length=1)]
    created: Annotated[str, Field(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")]  # ISO 8601, UTC
    group: str | None
    source: str
    reset: Literal["earliest", "latest", "none"]
    seed: int
    options: dict[str, Any]
    topics: NotRequired[list[Topic]]  # every planned topic (plans of the first versions have none)
    consumers: dict[ConsumerId, ConsumerPlan]
    unassigned: Assign  # partitions of topics nobody subscribes to
    totals: Totals
    quality: Quality
    # time to drain: the slowest consumer's seconds, null where unknown or never
    drain_seconds: NotRequired[Seconds | None]
    rates_source: NotRequired[Literal["measured", "configured", "measured+configured", "none"]]
    rates_estimated: NotRequired[bool]  # true: fewer than two observations (produce rates taken as 0)
    cannot_keep_up: NotRequired[list[ConsumerId]]  # consumers whose producers outrun them: they never drain
    rates_notes: NotRequired[list[str]]
    observed: NotRequired[Observed]  # end and committed offsets and their time: the next run's rates
    # who fences a pipeline whose lease ran out: "self" (absent) the pipeline taking over, with
    # WRITE on every commit id; "service" a fencer (``spark-lag-assign fencer``) on its behalf
    fencing: NotRequired[Literal["self", "service"]]
    sizing: NotRequired[Sizing]  # how many pipelines drain the backlog within a deadline


@cache
def _adapter() -> TypeAdapter[Plan]:
    """Built on first use (~0.1 s): importing the plan module stays cheap for executors."""
    return TypeAdapter(Plan)


# -- errors in one line -------------------------------------------------------------------

_SAID = {
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "dict_type": "must be an object",
    "list_type": "must be a list",
    "none_required": "must be null",
    "finite_number": "must be a finite number",
}


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out or "the document"


def _shown(value: Any) -> str:
    """A value as JSON would spell it, cut short; containers by kind only."""
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    text = json.dumps(value) if isinstance(value, (str, int, float, bool, type(None))) else type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _problem(error: ValidationError) -> str:
    """The first problem pydantic found, as ``where: what (got what)``."""
    first = error.errors(include_url=False)[0]
    kind = first["type"]
    # a union names each branch it tried in the location: the place is what matters
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and _BRANCH.match(p)))
    if loc == ("format",) and kind == "literal_error":
        return f"plan format {_shown(first['input'])} is not supported (expected {FORMAT_VERSION})"
    if _names_a_consumer(loc) and (problem := consumer_id_problem(first["input"])):
        return f"{_where(loc[:-2] if loc[-1] == '[key]' else loc)}: {problem}"  # the words every other check uses
    if loc and loc[-1] == "[key]":  # a bad object key: the key itself is the input
        return f"{_where(loc[:-2])} has an invalid key {_shown(first['input'])} ({_KEYS.get(str(loc[-3]) if len(loc) > 2 else '', 'a partition number')})"
    said = _SAID.get(kind) or first["msg"].replace("Input should be", "must be")
    if kind == "missing":  # every field missing from the same object, in one go
        names = [
            str(e["loc"][-1])
            for e in error.errors(include_url=False)
            if e["type"] == "missing" and tuple(e["loc"][:-1]) == tuple(first["loc"][:-1])
        ]
        return f"{_where(loc[:-1]) + ': ' if loc[:-1] else ''}missing {', '.join(names)}"
    return f"{_where(loc)} {said} (got {_shown(first['input'])})"


def _names_a_consumer(loc: tuple[int | str, ...]) -> bool:
    """Whether the value at ``loc`` is a consumer id: a key of ``consumers``, an item of ``pipelines`` or ``cannot_keep_up``."""
    if len(loc) >= 3 and loc[-1] == "[key]":
        return loc[-3] == "consumers"
    return len(loc) >= 2 and isinstance(loc[-1], int) and loc[-2] in ("pipelines", "cannot_keep_up")


_BRANCH = re.compile(r"^(literal\[|list\[|nullable\[|dict\[|constrained-|function-|json-or-python\[)|^(int|float|str|bool|none)$")
_TOPIC_KEY = "topic names are not empty"
_KEYS = {
    **dict.fromkeys(
        ("assign", "startingOffsets", "unassigned", "partition_drain_seconds", "end_offsets", "committed_offsets"), _TOPIC_KEY
    ),
}


def _consistent(doc: Plan) -> str | None:
    """What pydantic's per-field rules cannot see: each consumer's parts agree with each
    other, and no partition has two consumers (C loops only: a plan may hold millions)."""
    by_topic: dict[str, list[int]] = {}
    for consumer, entry in doc["consumers"].items():
        count = 0
        starting = entry["startingOffsets"]
        for topic, parts in entry["assign"].items():
            count += len(parts)
            if not all(map(operator.lt, parts, islice(parts, 1, None))):
                return f"{_where(('consumers', consumer, 'assign', topic))} must list partitions ascending, each once"
            starts = starting.get(topic, {})
            if len(starts) != len(parts) or not all(map(starts.__contains__, map(str, parts))):
                return f"{_where(('consumers', consumer, 'startingOffsets', topic))} must name exactly the assigned partitions"
            by_topic.setdefault(topic, []).extend(parts)
        extra = sorted(set(starting) - set(entry["assign"]))
        if extra:
            return f"{_where(('consumers', consumer, 'startingOffsets'))} names topic {extra[0]!r}, which it is not assigned"
        if entry["partitions"] != count:
            return f"{_where(('consumers', consumer, 'partitions'))} is {entry['partitions']} but it is assigned {count}"
    for topic, parts in sorted(by_topic.items()):
        if len(set(parts)) != len(parts):
            seen: set[int] = set()
            twice = next(p for p in parts if p in seen or seen.add(p))  # type: ignore[func-returns-value]
            owners = sorted(c for c, e in doc["consumers"].items() if twice in e["assign"].get(topic, ()))
            return f"partition {topic}-{twice} is assigned to more than one consumer ({', '.join(owners)})"
    return None


def _ints_within(values: list[Any], low: int, high: int) -> bool:
    """Every value a plain int (not a bool, not a float) in ``[low, high)``: C loops only."""
    return not values or (set(map(type, values)) == {int} and min(values) >= low and max(values) < high)


def _partitions_consistent(doc: Any) -> bool:
    """Whether every per-partition part of ``doc`` (each consumer's ``assign`` and
    ``startingOffsets``, and ``unassigned``) keeps both the model's rules and ``_consistent``'s,
    checked over whole lists and arrays at once. False means "not shown": the caller then runs
    the field-by-field checks, which find the first problem and name it.

    The startingOffsets must list their keys in the order of the partitions (build_plan's and
    every plan.json's order): a plan that names them in another order is checked the slow way.
Long because each of the rules is one array expression over all parts at once, and they
share the arrays built at the start.
    """
    consumers, unassigned = doc.get("consumers"), doc.get("unassigned")
    if type(consumers) is not dict or type(unassigned) is not dict:
        return False
    lists: list[Any] = []  # every assign list, consumer by consumer
    starts: list[Any] = []  # the startingOffsets of the same topics, in the same order
    topics: list[Any] = []
    ends: list[int] = []  # where each consumer's topics end in ``lists``
    for entry in consumers.values():
        if type(entry) is not dict:
            return False
        assign, starting = entry.get("assign"), entry.get("startingOffsets")
        if type(assign) is not dict or type(starting) is not dict or assign.keys() != starting.keys():
            return False
        names = list(assign)
        lists.extend(assign.values())
        # in the order of the partitions (build_plan's): its values as they are, else looked up
        starts.extend(starting.values() if list(starting) == names else map(starting.__getitem__, names))
        topics.extend(names)
        ends.append(len(lists))
    if set(map(type, lists)) - {list} or set(map(type, starts)) - {dict} or set(map(type, topics)) - {str} or "" in topics:
        return False
    sizes = list(map(len, lists))
    if sizes != list(map(len, starts)):
        return False
    total = np.r_[0, np.cumsum(sizes, dtype=np.int64)]
    counted = (total[ends] - total[[0, *ends[:-1]]]).tolist() if ends else []
    if [entry.get("partitions") for entry in consumers.values()] != counted:
        return False
    if {type(entry["partitions"]) for entry in consumers.values()} - {int}:
        return False
    numbers = list(chain.from_iterable(lists))
    if not _ints_within(numbers, 0, PARTITION_LIMIT):
        return False
    top = max(numbers, default=0)
    text = list(map(str, range(top + 1))) if top < 4 * len(numbers) + 1024 else None  # each number's key made once
    if list(chain.from_iterable(starts)) != list(map(text.__getitem__ if text else str, numbers)):
        return False
    if not _ints_within(list(chain.from_iterable(map(dict.values, starts))), -2, INT64_LIMIT):
        return False
    spare = list(unassigned.values())
    if set(map(type, spare)) - {list} or set(map(type, unassigned)) - {str} or "" in unassigned:
        return False
    if not _ints_within(list(chain.from_iterable(spare)), 0, PARTITION_LIMIT):
        return False
    if not numbers:
        return True
    # ascending within each topic's list, and no (topic, partition) twice in the whole plan
    parts = np.asarray(numbers, dtype=np.int64)
    first_of_list = np.zeros(len(parts), dtype=bool)
    first_of_list[np.cumsum(sizes)[:-1]] = True  # empty lists add no row
    if not (first_of_list[1:] | (parts[1:] > parts[:-1])).all():
        return False
    codes, distinct = factorize(np.asarray(topics, dtype=object))
    width = top + 1
    keys = partition_keys(np.repeat(codes, sizes), parts, width)
    if len(distinct) * width <= 4 * len(keys) + 4096:  # dense keys: counted, not sorted
        return int(np.bincount(keys, minlength=len(distinct) * width).max(initial=0)) <= 1
    keys.sort()
    return not (keys[1:] == keys[:-1]).any()


def _without_partitions(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with empty per-partition parts: what pydantic still checks once those passed ``_partitions_consistent``."""
    consumers = {c: {**e, "assign": {}, "startingOffsets": {}} for c, e in doc["consumers"].items()}
    return {**doc, "consumers": consumers, "unassigned": {}}


def _checked(doc: Plan, source: str) -> Plan:
    if _partitions_consistent(doc):
        return doc
    problem = _consistent(doc)
    if problem is not None:
        raise PlanFormatError(f"{source}: not a valid plan: {problem}")
    return doc


# -- the entry points ---------------------------------------------------------------------


def parse_plan(data: bytes | str, source: str) -> Plan:
    """The plan in ``data`` (plan.json's bytes), checked; ``PlanFormatError`` naming ``source``
    and the first problem otherwise."""
    if isinstance(data, bytes):
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PlanFormatError(
                f"{source}: not a valid plan: not UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start})"
            ) from None
    try:
        doc = _adapter().validate_json(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        if first["type"] == "json_invalid":
            detail = str(first.get("ctx", {}).get("error", first["msg"]))
            raise PlanFormatError(f"{source}: not valid JSON ({detail})") from None
        if first["type"] == "json_type" or (first["type"] == "dict_type" and not first["loc"]):
            raise PlanFormatError(f"{source}: not a plan (expected a JSON object)") from None
        raise PlanFormatError(f"{source}: not a valid plan: {_problem(exc)}") from None
    return _checked(doc, source)


def _decoded(data: bytes, source: str) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PlanFormatError(
            f"{source}: not a valid plan: not UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start})"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanFormatError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def parse_plan_parts(header: bytes, consumers: Mapping[str, bytes], source: str) -> Plan:
    """A plan stored in pieces (the Kafka store's records): ``header`` is the document with
    ``"consumers": null``, ``consumers`` each consumer's entry; checked as ``parse_plan`` does."""
    doc = _decoded(header, source)
    if not isinstance(doc, dict):
        raise PlanFormatError(f"{source}: not a plan (expected a JSON object)")
    doc["consumers"] = {c: _decoded(raw, f"{source} consumer {c!r}") for c, raw in consumers.items()}
    return check_plan(doc, source)


def check_plan(doc: Any, source: str) -> Plan:
    """``doc`` (a decoded plan, or one about to be written) if it is a valid plan;
    ``PlanFormatError`` naming ``source`` and the first problem otherwise."""
    if not isinstance(doc, Mapping):
        raise PlanFormatError(f"{source}: not a plan (expected a JSON object)")
    # a plan of a million partitions: its per-partition parts checked over whole arrays, the
    # rest by the model (~20x faster than the model over every partition, as one C loop each)
    fast = type(doc) is dict and _partitions_consistent(doc)
    try:
        _adapter().validate_python(_without_partitions(doc) if fast else doc)  # type: ignore[arg-type]
    except ValidationError as exc:
        problem = _problem(exc)
        if fast:  # the whole document's first problem, as the model orders them
            try:
                _adapter().validate_python(doc)
            except ValidationError as whole:
                problem = _problem(whole)
        raise PlanFormatError(f"{source}: not a valid plan: {problem}") from None
    return doc if fast else _checked(doc, source)  # type: ignore[return-value,arg-type]


def _key_patterns(node: Any) -> Any:
    """pydantic writes ``dict[PatternStr, V]`` as ``patternProperties``, which lets a key that
    does not match through unchecked; say what the model means: every key matches, every value is V."""
    if isinstance(node, list):
        return [_key_patterns(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _key_patterns(v) for k, v in node.items()}
    patterns = out.get("patternProperties")
    if isinstance(patterns, dict) and len(patterns) == 1 and "additionalProperties" not in out and "properties" not in out:
        ((pattern, value),) = patterns.items()
        del out["patternProperties"]
        out["propertyNames"] = {**out.get("propertyNames", {}), "pattern": pattern}
        out["additionalProperties"] = value
    return out


def plan_schema() -> dict[str, Any]:
    """The JSON Schema of plan.json, as published at ``conf/plan.schema.json``."""
    schema = _key_patterns(_adapter().json_schema(mode="validation"))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "description": (
            f"plan.json of spark-lag-assign, format {FORMAT_VERSION}: one plan generation. Generated from "
            "spark_lag_assign.plan.document.Plan (python -m spark_lag_assign.plan.document); the reader also checks that "
            "each consumer's startingOffsets name exactly its assigned partitions, listed ascending, that "
            "'partitions' counts them and that no partition has two consumers."
        ),
        **{k: v for k, v in schema.items() if k != "description"},
    }


def schema_json() -> str:
    """``plan_schema()`` as the text of conf/plan.schema.json."""
    return json.dumps(plan_schema(), indent=2, sort_keys=True) + "\n"


def main() -> int:
    print(schema_json(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "FORMAT_VERSION",
    "ConsumerPlan",
    "Observed",
    "Plan",
    "PlanFormatError",
    "Quality",
    "Totals",
    "check_plan",
    "parse_plan",
    "parse_plan_parts",
    "plan_schema",
    "schema_json",
]
