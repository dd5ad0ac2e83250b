"""Spark stays at the edge: the pure core imports no pyspark, and the public API resolves."""

from __future__ import annotations

import subprocess
import sys

import spark_lag_assign as sla

PURE = [
    "spark_lag_assign",
    "spark_lag_assign.lag",
    "spark_lag_assign.assignors",
    "spark_lag_assign.invariants",
    "spark_lag_assign.metrics",
    "spark_lag_assign.plan",
    "spark_lag_assign.workloads",
    "spark_lag_assign.config",
    "spark_lag_assign.offsets",
    "spark_lag_assign.report",
    "spark_lag_assign.simulate",
]


def test_the_pure_core_imports_no_spark() -> None:
    code = "import sys\n" + "".join(f"import {m}\n" for m in PURE) + "print(sorted(m for m in sys.modules if m.startswith(('pyspark', 'py4j'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_every_public_name_resolves() -> None:
    for name in sla.__all__:
        assert getattr(sla, name) is not None, name
