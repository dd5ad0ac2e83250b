"""The cluster proof's fixtures, and why ``make test`` never runs it.

Every test under tests/cluster gets the ``cluster`` marker, and is *deselected* (reported as
"deselected", never "skipped" and never run) unless the ``-m`` expression names ``cluster``:
``make test-cluster`` runs ``pytest -m cluster tests/cluster``; a plain ``pytest`` (``make
test``) and ``pytest -m "not spark and not broker"`` (``make test-unit``) leave them out.
This needs no ``addopts = -m "not cluster"``, which a second ``-m`` would silently replace.

The ``cluster`` fixture starts a real Spark standalone master and two workers once per
test session; if they cannot start, every test that uses it fails with the reason
(``ClusterError``): a cluster test never skips itself into green.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_lag_assign.testing.standalone import StandaloneCluster

HERE = Path(__file__).resolve().parent

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
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and two workers on loopback (their logs under the test's tmp)."""
    with StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=2, cores=WORKER_CORES, memory=WORKER_MEMORY) as c:
        yield c


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    c = item.funcargs.get("cluster") if hasattr(item, "funcargs") else None
    if report.failed and c is not None:
        report.sections.append(("Spark standalone cluster", f"logs: {c.log_dir}\n{c.dump(20)}"))
