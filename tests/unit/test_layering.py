"""Spark stays at the edge: the pure core imports no pyspark, and the public API resolves."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import spark_lag_assign as sla

PURE = [
    "spark_lag_assign",
    "spark_lag_assign.lag",
    "spark_lag_assign.assignors",
    "spark_lag_assign.invariants",
    "spark_lag_assign.metrics",
    "spark_lag_assign.plan",
    "spark_lag_assign.testing.workloads",
    "spark_lag_assign.config",
    "spark_lag_assign.offsets",
    "spark_lag_assign.report",
    "spark_lag_assign.simulate",
    "spark_lag_assign.uris",
    # the control plane: its protocol and store interface are pure; the consume package
    # imports Spark only inside the calls that need a session
    "spark_lag_assign.store",
    "spark_lag_assign.store.base",
    "spark_lag_assign.consume",
    "spark_lag_assign.consume.protocol",
]


def test_the_pure_core_imports_no_spark() -> None:
    code = "import sys\n" + "".join(f"import {m}\n" for m in PURE) + "print(sorted(m for m in sys.modules if m.startswith(('pyspark', 'py4j'))))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_every_public_name_resolves() -> None:
    for name in sla.__all__:
        assert getattr(sla, name) is not None, name


def _imported_modules(path: Path) -> set[str]:
    """Every module a source file imports, at any depth (inside functions too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_runtime_never_imports_the_testing_package() -> None:
    package = Path(sla.__file__).parent
    runtime = [p for p in package.rglob("*.py") if "testing" not in p.relative_to(package).parts]
    assert runtime
    offenders = {
        str(p.relative_to(package)): sorted(m for m in _imported_modules(p) if m.startswith("spark_lag_assign.testing"))
        for p in runtime
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_package_runs_as_a_module() -> None:
    done = subprocess.run([sys.executable, "-m", "spark_lag_assign", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("spark-lag-assign "), done.stderr
