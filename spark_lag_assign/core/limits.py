"""What Kafka's numbers can hold: one definition for every check of them.

Offsets are int64, so every offset lies in ``[0, INT64_LIMIT)``; partitions are int32, so
every partition id lies in ``[0, PARTITION_LIMIT)``. A lag is a difference of offsets and so
below ``INT64_LIMIT`` too; a total of lags is not, and is summed exactly (``core.quality``).
``outside`` is the one test of a column against such a range; the readers at the edges
(``core.lag`` for offsets, ``assignors.frontend`` for lags) keep finer messages of their own.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np

INT64_LIMIT: Final = 2**63  # Kafka offsets are int64: every offset is below this
PARTITION_LIMIT: Final = 2**31  # Kafka partitions are int32
#: the lag-balancing engine (lag-sticky, drain) keeps loads as int64 and adds a partition's lag
#: to a consumer's load before it compares: a total below this keeps every such sum exact
ENGINE_LOAD_LIMIT: Final = 2**62



def outside(values: Any, low: int, high: int) -> np.ndarray:
    """Which of ``values`` are not whole numbers in ``[low, high)``: missing, fractional,
    infinite, a bool, text or out of range. Compared in the values' own kind (integers as
    integers, floats as floats, Python ints exactly), so nothing wraps or rounds on the way:
    2**63 - 1 is in ``[0, INT64_LIMIT)`` and 2**63 is not, whatever the column's dtype."""
    dtype = getattr(values, "dtype", None)
    if dtype is not None and not isinstance(dtype, np.dtype):  # pandas' nullable and Arrow types: each value as it is
        array = values.to_numpy(dtype=object, na_value=None)
    else:
        array = np.asarray(values)
    if array.dtype.kind in "mM":  # times are no counts
        return np.ones(len(array), dtype=bool)
    if array.dtype.kind == "i":
        return (array < low) | (array > high - 1) if high - 1 <= np.iinfo(np.int64).max else array < low
    if array.dtype.kind == "u":
        return (array < np.uint64(max(low, 0))) | (array >= np.uint64(high))
    if array.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            return ~np.isfinite(array) | (array != np.floor(array)) | (array < low) | (array >= float(high))
    return np.fromiter((not _whole_in(v, low, high) for v in array.tolist()), dtype=bool, count=len(array))


def _whole_in(value: Any, low: int, high: int) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | np.integer):
        return bool(low <= int(value) < high)
    if isinstance(value, float | np.floating):
        return bool(np.isfinite(value) and float(value).is_integer() and low <= value < high)
    return False


__all__ = ["ENGINE_LOAD_LIMIT", "INT64_LIMIT", "PARTITION_LIMIT", "outside"]
