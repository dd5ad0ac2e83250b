"""``core.limits.outside``: the one test of a column against a range, in the column's own kind."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from spark_lag_assign.core.limits import INT64_LIMIT, outside


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (np.array([0, 2**63 - 1], dtype=np.int64), [False, False]),
        (np.array([2**63 - 1, 2**63], dtype=np.uint64), [False, True]),
        (pd.Series([2**63 - 1, None], dtype="Int64"), [False, True]),  # no float on the way: 2**63 - 1 stays exact
        (pd.Series([1.0, 1.5, np.inf, np.nan, -1.0]), [False, True, True, True, True]),
        (pd.Series([1.5, None], dtype="Float64"), [True, True]),
        (pd.Series([7, 2**64, True, "3", None], dtype=object), [False, True, True, True, True]),
        (pd.Series(pd.to_datetime(["1970-01-01"])), [True]),  # a time is no count
        (pd.Series([], dtype="Int64"), []),
    ],
)
def test_only_whole_numbers_in_the_range_pass_whatever_the_dtype(values: object, expected: list[bool]) -> None:
    assert outside(values, 0, INT64_LIMIT).tolist() == expected
