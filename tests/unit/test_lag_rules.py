"""The lag rules (README, "Strategies"), without Spark or a broker."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from spark_lag_assign.core.lag import EARLIEST, LATEST, compute_lag, validate_offsets
from spark_lag_assign.errors import InputError
from spark_lag_assign.extract.offsets import _csv_numbers, read_snapshot


def offsets(*rows: tuple[str, int, int, int, int | None]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["topic", "partition", "beginning_offset", "end_offset", "committed_offset"])


def one(reset: str, beginning: int, end: int, committed: int | None) -> dict[str, object]:
    return compute_lag(offsets(("t", 0, beginning, end, committed)), reset).iloc[0].to_dict()


@pytest.mark.parametrize("reset", ["earliest", "latest", "none"])
def test_committed_within_range_is_end_minus_committed_whatever_the_reset(reset: str) -> None:
    row = one(reset, 10, 100, 40)
    assert (row["lag"], row["position"], row["out_of_range"], row["starting_offset"]) == (60, 40, False, 40)


def test_committed_at_either_end_of_the_range_is_valid() -> None:
    assert one("latest", 10, 100, 10)["lag"] == 90
    assert one("latest", 10, 100, 100)["lag"] == 0


def test_no_commit_with_latest_has_no_lag_and_starts_at_latest() -> None:
    row = one("latest", 10, 100, None)
    assert (row["lag"], row["position"], row["out_of_range"], row["starting_offset"]) == (0, 100, False, LATEST)


@pytest.mark.parametrize("reset", ["earliest", "none"])
def test_no_commit_with_earliest_or_any_other_reset_counts_every_available_message(reset: str) -> None:
    row = one(reset, 10, 100, None)
    assert (row["lag"], row["position"], row["out_of_range"], row["starting_offset"]) == (90, 10, False, EARLIEST)


@pytest.mark.parametrize(
    ("reset", "committed", "lag", "position", "marker"),
    [
        ("earliest", 5, 90, 10, EARLIEST),  # retention deleted data below the commit
        ("latest", 5, 0, 100, LATEST),
        ("earliest", 250, 90, 10, EARLIEST),  # topic recreated: commit beyond the end
        ("latest", 250, 0, 100, LATEST),
    ],
)
def test_commit_outside_the_range_applies_the_reset_rule_and_is_flagged(
    reset: str, committed: int, lag: int, position: int, marker: int
) -> None:
    row = one(reset, 10, 100, committed)
    assert (row["lag"], row["position"], row["out_of_range"], row["starting_offset"]) == (lag, position, True, marker)


def test_seed_000_backlog() -> None:
    got = compute_lag(offsets(("t0", 0, 0, 100_000, 0), ("t0", 1, 0, 150_000, 100_000), ("t0", 2, 0, 60_000, None)), "earliest")
    assert got["lag"].tolist() == [100_000, 50_000, 60_000]


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (offsets(("t", 0, 0, 10, 5)).drop(columns="end_offset"), "missing column(s) end_offset"),
        (offsets(("t", 0, -1, 10, 5)), "negative beginning_offset"),
        (offsets(("t", 0, 0, 10, -3)), "negative committed_offset"),
        (offsets(("t", 0, 20, 10, 5)), "beginning_offset 20 > end_offset 10"),
        (offsets(("t", 0, 0, 10, 5), ("t", 0, 0, 10, 5)), "t-0 appears more than once"),
        (offsets(("t", 0, 0, 10, 5)).assign(end_offset="ten"), "column end_offset must hold integers"),
        (offsets(("t", 0, 0, 10, 5)).assign(end_offset=1.5), "column end_offset must hold integers"),
        (offsets(("", 0, 0, 10, 5)), "column topic must hold non-empty strings"),
    ],
)
def test_malformed_offsets_get_a_one_line_error_naming_the_problem(frame: pd.DataFrame, message: str) -> None:
    with pytest.raises(InputError) as err:
        compute_lag(frame)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_the_largest_int64_is_an_offset_and_the_next_integer_is_not() -> None:
    assert compute_lag(offsets(("t", 0, 0, 2**63 - 1, 2**63 - 2)))["lag"].tolist() == [1]
    frame = offsets(("t", 0, 0, 10, 5)).assign(end_offset=np.array([2**63], dtype=np.uint64))
    with pytest.raises(InputError, match=r"end_offset 9223372036854775808 at row 0 is not below 2\*\*63"):
        compute_lag(frame)


def test_unknown_reset_policy_is_refused() -> None:
    with pytest.raises(InputError, match="unknown reset policy 'smallest'"):
        compute_lag(offsets(("t", 0, 0, 10, None)), "smallest")


SNAPSHOT_HEADER = "topic,partition,beginning_offset,end_offset,committed_offset\n"
# offsets beyond 2**53, where a float skips integers, beside a partition without a commit
BIG = [("t0", 0, 0, 5, None), ("t0", 1, 0, 2**53 + 3, 2**53 + 1), ("t0", 2, 0, 2**63 - 1, 2**63 - 2)]


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_a_snapshot_keeps_every_offset_exact_beside_partitions_without_a_commit(tmp_path, fmt: str) -> None:
    path = tmp_path / f"s.{fmt}"
    rows = [dict(zip(("topic", "partition", "beginning_offset", "end_offset", "committed_offset"), r)) for r in BIG]
    if fmt == "csv":
        path.write_text(SNAPSHOT_HEADER + "".join(",".join("" if v is None else str(v) for v in r) + "\n" for r in BIG))
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    got = read_snapshot(path)
    assert [tuple(None if pd.isna(v) else v for v in row) for row in got.itertuples(index=False)] == BIG
    assert got["end_offset"].dtype == np.int64 and str(got["committed_offset"].dtype) == "Int64"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("t0,0,0,1e0,1\nt0,1,0,9007199254740995,3\n", "end_offset 9007199254740995 at row 1 cannot be read exactly"),
        ("t0,0,0,18446744073709551616,1\n", "end_offset 18446744073709551616 at row 0 is not below 2**63"),
        ("t0,0,0,,1\n", "column end_offset must hold integers (row 0: empty)"),
        # one field too many: pandas would take the topic for an index and shift every column
        ("orders,3,0,10,20,15\norders,4,0,10,20\n", "not a readable csv snapshot: a row has more fields than the header"),
        ("orders,3,0,10,20,15\n", "not a readable csv snapshot: a row has more fields than the header"),
    ],
)
def test_a_snapshot_cell_that_cannot_be_an_exact_offset_is_named_as_the_file_writes_it(tmp_path, body, message) -> None:
    path = tmp_path / "s.csv"
    path.write_text(SNAPSHOT_HEADER + body)
    with pytest.raises(InputError) as err:
        read_snapshot(path)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("9223372036854775808", "end_offset 9223372036854775808 at row 0 is not below 2**63"),
        ("18446744073709551615", "end_offset 18446744073709551615 at row 0 is not below 2**63"),
        ("1.5", "column end_offset must hold integers (row 0: 1.5)"),
    ],
)
def test_a_json_snapshot_value_that_is_no_offset_is_named_as_the_file_writes_it(tmp_path, cell: str, message: str) -> None:
    """pyarrow reads such a column as floats (9223372036854775808 would be named 9.223372036854776e+18)."""
    path = tmp_path / "s.jsonl"
    path.write_text(
        f'{{"topic": "t0", "partition": 0, "beginning_offset": 0, "end_offset": {cell}, "committed_offset": 1}}\n'
        '{"topic": "t0", "partition": 1, "beginning_offset": 0, "end_offset": 7, "committed_offset": null}\n'
    )
    with pytest.raises(InputError) as err:
        read_snapshot(path)
    assert message in str(err.value) and "\n" not in str(err.value) and "e+" not in str(err.value), str(err.value)


def test_a_json_snapshot_with_a_byte_order_mark_reads_as_pyarrow_reads_it(tmp_path) -> None:
    """The exact re-read of a float column takes the mark as pyarrow does."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf"
        b'{"topic": "t0", "partition": 0, "beginning_offset": 0, "end_offset": 5.0, "committed_offset": 1}\n'
        b'{"topic": "t0", "partition": 1, "beginning_offset": 0, "end_offset": 7, "committed_offset": null}\n'
    )
    assert read_snapshot(path)["end_offset"].tolist() == [5, 7]


def read_as_text(path) -> pd.DataFrame:
    """The oracle of the CSV reader: every column read as text, each number cell converted."""
    frame = pd.read_csv(path, dtype=str, index_col=False)
    for col in ("partition", "beginning_offset", "end_offset", "committed_offset"):
        if col in frame.columns:
            frame[col] = _csv_numbers(frame[col])
    return validate_offsets(frame, str(path))


# cells the C reader parses as integers, floats, text or nothing, around the limits that matter
CELLS = st.one_of(
    st.integers(0, 2**20).map(str),
    st.sampled_from([2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -1]).map(str),
    st.sampled_from(["", "NA", "null", "1e0", "1.0", "+7", "007", " 5", "inf", "x", "nan"]),
)
ROWS = st.lists(st.tuples(st.sampled_from(["t0", "t1", "007", "NA", ""]), CELLS, CELLS, CELLS, CELLS), max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=ROWS, uniform=st.booleans())
def test_a_csv_snapshot_reads_as_when_every_column_is_read_as_text(tmp_path, rows, uniform) -> None:
    """The reader parses numbers in C and reads a column again as text only where it must; the
    frame, or the one-line refusal, is the same as reading everything as text."""
    if uniform:  # most snapshots: every cell of a column a plain integer, the fast path's case
        rows = [(t, str(i), "0", str(10 + i), str(i)) for i, (t, *_) in enumerate(rows)]
    path = tmp_path / "s.csv"
    path.write_text(SNAPSHOT_HEADER + "".join(",".join(r) + "\n" for r in rows))
    try:
        expected: pd.DataFrame | str = read_as_text(path)
    except InputError as exc:
        expected = str(exc)
    try:
        got: pd.DataFrame | str = read_snapshot(path)
    except InputError as exc:
        got = str(exc)
    if isinstance(expected, str) or isinstance(got, str):
        assert got == expected
    else:
        pd.testing.assert_frame_equal(got, expected)


def test_a_bad_cell_far_into_a_large_snapshot_is_named_in_one_line(tmp_path) -> None:
    """pandas reads a large file in chunks; a column whose type changes in a later chunk must
    still give the cell's one line, not a warning about mixed types."""
    path = tmp_path / "s.csv"
    rows = "".join(f"t,{i},0,5,1\n" for i in range(140_000))
    path.write_text(SNAPSHOT_HEADER + rows + "t,140000,0,5,x\n")
    with pytest.raises(InputError) as err:
        read_snapshot(path)
    assert str(err.value) == f"{path}: column committed_offset must hold integers (row 140000: 'x')"
