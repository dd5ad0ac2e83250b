"""Lag rules: how far behind a consumer group is on each partition (DESIGN.md, seeds 000/001).

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
    """A cell as the file has it: numbers plain, text quoted."""
    return repr(value) if isinstance(value, str) else str(value)


def validate_offsets(offsets: pd.DataFrame, source: str = "offsets") -> pd.DataFrame:
    """Check an offsets table (columns of DESIGN.md) and return it with canonical dtypes."""
    missing = [c for c in OFFSET_COLUMNS if c not in offsets.columns]
    if missing:
        raise InputError(f"{source}: missing column(s) {', '.join(missing)}")
    out = offsets.loc[:, list(OFFSET_COLUMNS)].copy()
    topics = out["topic"].to_numpy(dtype=object)
    # every topic a non-empty str, checked in C (a Python loop costs 0.2 s a million rows)
    if len(topics) and (pd.api.types.infer_dtype(topics, skipna=False) != "string" or (topics == "").any()):
        raise InputError(f"{source}: column topic must hold non-empty strings")
    for col in OFFSET_COLUMNS[1:]:
        values = pd.to_numeric(out[col], errors="coerce")
        finite = np.isfinite(values.to_numpy(dtype=np.float64, na_value=np.nan))
        bad = (values.isna() & (out[col].notna() | (col != "committed_offset"))).to_numpy() | (
            values.notna().to_numpy() & ~finite
        )
        whole = np.isnan(values.to_numpy(dtype=np.float64, na_value=np.nan)) | ~finite | (values == np.floor(values)).to_numpy()
        if bad.any() or not whole.all():
            row = int(np.argmax(bad)) if bad.any() else int(np.argmax(~whole))
            raise InputError(f"{source}: column {col} must hold integers (row {row}: {_cell(out[col].iloc[row])})")
        if (values < 0).any():
            row = int(np.argmax((values < 0).to_numpy()))
            raise InputError(f"{source}: negative {col} {out[col].iloc[row]} at row {row}")
        limit, kind = (
            (PARTITION_LIMIT, "2**31 (partitions are int32)")
            if col == "partition"
            else (INT64_LIMIT, "2**63 (offsets are int64)")
        )
        # compared before the cast to int64, which would wrap a uint64 or round a float
        if values.dtype == np.uint64:
            over = (values >= np.uint64(limit)).to_numpy()
        else:
            over = values.to_numpy(dtype=np.float64, na_value=np.nan) >= float(limit)
        if over.any():
            row = int(np.argmax(over))
            raise InputError(f"{source}: {col} {out[col].iloc[row]} at row {row} is not below {kind}")
        out[col] = values.astype("Int64") if col == "committed_offset" else values.astype(np.int64)
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
