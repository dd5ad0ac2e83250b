"""The cluster proof's fixtures, and why ``make test`` never runs it.

Every test under tests/cluster gets the ``cluster`` marker, and is *deselected* (reported as
"deselected", never "skipped" and never run) unless the ``-m`` expression names ``cluster``:
``make test-cluster`` runs ``pytest -m cluster tests/cluster``; a plain ``pytest`` (``make
test``) and ``pytest -m "not spark and not broker"`` (``make test-unit``) leave them out.
This needs no ``addopts = -m "not cluster"``, which a second ``-m`` would silently replace.

The ``cluster`` fixture starts a real Spark standalone master and two workers once per
test session; if they cannot start, every test that uses it fails with the reason
(``ClusterError``): a cluster test never skips itself into green.

The workers run a Python with nothing installed (a bare virtualenv of the base interpreter,
checked first: it must not import pandas, pyarrow, numpy, kafka-python, pydantic, tenacity or
this package), and every application ships ``make dist``'s packed environment with
``spark.archives``: executors run ``./environment/bin/python`` from it. The drivers (client
mode, on this host) run the same archive unpacked once into the session's temporary
directory, the way a submitting host would keep it; Spark's own ``pyspark`` comes from the
Spark installation (spark-submit puts ``$SPARK_HOME/python/lib/pyspark.zip`` on their path),
not from the archive, which leaves pyspark and py4j out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_lag_assign import jvm
from spark_lag_assign.testing.standalone import Shipped, StandaloneCluster, bare_python, missing_modules, unpack

HERE = Path(__file__).resolve().parent
ARCHIVE = jvm.REPO_ROOT / "dist" / "spark_lag_assign-env.tar.gz"
#: what the jobs import beyond Spark: none of it may come from the workers' own Python
NEEDED = ["pandas", "pyarrow", "numpy", "kafka", "pydantic", "tenacity", "prometheus_client", "spark_lag_assign"]

#: scheduling slots per worker: the planner and three pipelines (1 core each) at once, plus a
#: killed pipeline's executor until the master notices; cores are slots, not CPUs
WORKER_CORES = 3
WORKER_MEMORY = "2g"


def _asked_for_cluster(config: pytest.Config) -> bool:
    return "cluster" in (config.getoption("markexpr", "") or "")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if HERE in Path(item.path).resolve().parents]
    for item in ours:
        item.add_marker(pytest.mark.cluster)
    if not _asked_for_cluster(config):
        left_out = set(map(id, ours))
        config.hook.pytest_deselected(items=ours)
        items[:] = [item for item in items if id(item) not in left_out]


@pytest.fixture(scope="session")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Shipped:
    """``make dist``'s packed environment, and its copy unpacked for the drivers."""
    if not ARCHIVE.is_file():
        pytest.fail(f"no {ARCHIVE.relative_to(jvm.REPO_ROOT)}: run `make dist` (`make test-cluster` does)", pytrace=False)
    return unpack(ARCHIVE, tmp_path_factory.mktemp("driver-env"))


@pytest.fixture(scope="session")
def workers_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workers' Python: a bare virtualenv that must not import what the jobs need."""
    python = bare_python(tmp_path_factory.mktemp("workers-python"))
    importable = sorted(set(NEEDED) - set(missing_modules(python, NEEDED)))
    if importable:
        pytest.fail(f"the workers' Python {python} imports {', '.join(importable)}: the proof needs one that cannot", pytrace=False)
    return python


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory, workers_python: Path, shipped: Shipped) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and two workers on loopback (their logs under the test's tmp)
    whose Python has nothing installed; applications ship the packed environment."""
    workdir = tmp_path_factory.mktemp("standalone")
    with StandaloneCluster(workdir, workers=2, cores=WORKER_CORES, memory=WORKER_MEMORY, python=str(workers_python), shipped=shipped) as c:
        yield c


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    c = item.funcargs.get("cluster") if hasattr(item, "funcargs") else None
    if report.failed and c is not None:
        report.sections.append(("Spark standalone cluster", f"logs: {c.log_dir}\n{c.dump(20)}"))
