"""Lag rules: how far behind a consumer group is on each partition (README, "Strategies": seeds 000/001).

- A committed offset within ``[beginning_offset, end_offset]``: ``lag = end - committed``.
- No committed offset: the group would start at its ``auto.offset.reset`` position, so
  ``latest`` gives lag 0 and ``earliest`` (or ``none``, as the seeds say: any other value)
  gives ``end - beginning``.
- A committed offset outside the range (retention deleted the data, the topic was
  recreated): a real consumer resets, so the reset rule applies and ``out_of_range`` flags it.

Lag is never negative. ``starting_offset`` is where a pipeline that takes the partition
over should start, in the form of Spark's ``startingOffsets`` JSON: the committed offset,
or ``-2`` (earliest) / ``-1`` (latest) where the group has no usable commit.

Everything here is plain pandas/numpy: the Spark job calls the same ``lag_columns`` from a
pandas UDF.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pandas as pd

from spark_lag_assign.core.limits import INT64_LIMIT, PARTITION_LIMIT
from spark_lag_assign.errors import InputError

RESETS: Final = ("earliest", "latest", "none")
EARLIEST: Final = -2  # Spark's startingOffsets marker for "earliest"
LATEST: Final = -1  # ... and for "latest"

OFFSET_COLUMNS: Final = ("topic", "partition", "beginning_offset", "end_offset", "committed_offset")
LAG_COLUMNS: Final = ("lag", "position", "out_of_range", "starting_offset")


def check_reset(reset: str) -> str:
    if reset not in RESETS:
        raise InputError(f"unknown reset policy {reset!r}; expected one of: {', '.join(RESETS)}")
    return reset


def lag_columns(beginning: pd.Series, end: pd.Series, committed: pd.Series, reset: str = "latest") -> pd.DataFrame:
    """The lag-rule columns for aligned offset Series; ``committed`` is null where nothing is committed."""
    check_reset(reset)
    b = beginning.to_numpy(dtype=np.int64)
    e = end.to_numpy(dtype=np.int64)
    has_commit = committed.notna().to_numpy()
    c = committed.fillna(-1).to_numpy(dtype=np.int64)
    valid = has_commit & (c >= b) & (c <= e)
    if reset == "latest":
        reset_lag, reset_position, marker = np.zeros_like(e), e, LATEST
    else:
        reset_lag, reset_position, marker = e - b, b, EARLIEST
    lag = np.where(valid, e - c, reset_lag)
    return pd.DataFrame(
        {
            "lag": np.maximum(lag, 0),
            "position": np.where(valid, c, reset_position),
            "out_of_range": has_commit & ~valid,
            "starting_offset": np.where(valid, c, marker),
        },
        index=beginning.index,
    )


def _cell(value: object) -> str:
    """A cell as the file has it: numbers plain (also where a CSV column is read as text), other text quoted."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return "empty"
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return repr(value)
        return value.strip()
    return str(value)


# a float holds every integer up to 2**53 and skips some beyond it
FLOAT_EXACT_LIMIT: Final = 2**53


def _integers(cells: pd.Series, col: str, source: str) -> pd.Series:
    """One offsets column as int64 (committed_offset: nullable Int64), or one line naming its first bad cell.

    Every comparison with a limit is made in the column's own kind (integer or float), so
    2**63 - 1 is an offset and 2**63 is not, and nothing wraps or rounds on the way.
    """
    values = pd.to_numeric(cells, errors="coerce")
    as_float = values.to_numpy(dtype=np.float64, na_value=np.nan)
    missing = np.isnan(as_float)
    unreadable = missing & (cells.notna().to_numpy() | (col != "committed_offset"))
    fraction = ~missing & ~(np.isfinite(as_float) & (as_float == np.floor(as_float)))
    if (unreadable | fraction).any():
        row = int(np.argmax(unreadable | fraction))
        raise InputError(f"{source}: column {col} must hold integers (row {row}: {_cell(cells.iloc[row])})")
    negative = as_float < 0
    if negative.any():
        row = int(np.argmax(negative))
        raise InputError(f"{source}: negative {col} {cells.iloc[row]} at row {row}")
    limit, kind = (
        (PARTITION_LIMIT, "2**31 (partitions are int32)") if col == "partition" else (INT64_LIMIT, "2**63 (offsets are int64)")
    )
    if values.dtype.kind == "f":
        over = as_float >= float(limit)
    elif values.dtype.kind == "u":
        over = values.to_numpy(dtype=np.uint64, na_value=0) >= np.uint64(limit)
    elif limit <= np.iinfo(np.int64).max:
        over = values.to_numpy(dtype=np.int64, na_value=0) >= limit
    else:  # an int64 column holds nothing at or above 2**63
        over = np.zeros(len(values), dtype=bool)
    if over.any():
        row = int(np.argmax(over))
        raise InputError(f"{source}: {col} {_cell(cells.iloc[row])} at row {row} is not below {kind}")
    inexact = as_float >= FLOAT_EXACT_LIMIT if values.dtype.kind == "f" else np.zeros(len(as_float), dtype=bool)
    if inexact.any():
        row = int(np.argmax(inexact))
        raise InputError(
            f"{source}: {col} {_cell(cells.iloc[row])} at row {row} cannot be read exactly: its column is not all "
            "integers, and beyond 2**53 a float skips integers; write every offset as an integer"
        )
    return values.astype("Int64") if col == "committed_offset" else values.astype(np.int64)


def validate_offsets(offsets: pd.DataFrame, source: str = "offsets") -> pd.DataFrame:
    """Check an offsets table (``OFFSET_COLUMNS``) and return it with canonical dtypes."""
    missing = [c for c in OFFSET_COLUMNS if c not in offsets.columns]
    if missing:
        raise InputError(f"{source}: missing column(s) {', '.join(missing)}")
    out = offsets.loc[:, list(OFFSET_COLUMNS)].copy()
    topics = out["topic"].to_numpy(dtype=object)
    # every topic a non-empty str, checked in C (a Python loop costs 0.2 s a million rows)
    if len(topics) and (pd.api.types.infer_dtype(topics, skipna=False) != "string" or (topics == "").any()):
        raise InputError(f"{source}: column topic must hold non-empty strings")
    out["topic"] = topics
    for col in OFFSET_COLUMNS[1:]:
        out[col] = _integers(out[col], col, source)
    inverted = out["beginning_offset"] > out["end_offset"]
    if inverted.any():
        r = out[inverted].iloc[0]
        raise InputError(
            f"{source}: {r.topic}-{r.partition} has beginning_offset {r.beginning_offset} > end_offset {r.end_offset}"
        )
    dup = out.duplicated(["topic", "partition"])
    if dup.any():
        r = out[dup].iloc[0]
        raise InputError(f"{source}: partition {r.topic}-{r.partition} appears more than once")
    return out.reset_index(drop=True)


def compute_lag(offsets: pd.DataFrame, reset: str = "latest") -> pd.DataFrame:
    """offsets[topic, partition, beginning_offset, end_offset, committed_offset] -> same + lag rules."""
    out = validate_offsets(offsets)
    cols = lag_columns(out["beginning_offset"], out["end_offset"], out["committed_offset"], reset)
    return pd.concat([out, cols], axis=1)
