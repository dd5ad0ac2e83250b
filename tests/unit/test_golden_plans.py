"""Every strategy plans byte for byte as recorded in tests/unit/golden/plans.json."""

from __future__ import annotations

import pytest

from spark_lag_assign.assignors import STRATEGIES
from tests.unit.golden import WORKLOADS, cases, recorded


def test_every_plan_is_as_recorded() -> None:
    want = recorded()
    got = dict(cases())
    assert set(got) == set(want)
    changed = sorted(k for k in want if got[k] != want[k])
    assert not changed, f"plans changed: {changed}"


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_the_record_covers_every_strategy_and_workload(strategy: str) -> None:
    names = set(recorded())
    for label in WORKLOADS:
        for way in ("scratch", "churn", "messy"):
            assert f"{label}/{strategy}/{way}" in names
