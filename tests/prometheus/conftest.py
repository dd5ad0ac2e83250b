"""Tests that run a real Prometheus server (``make test-prometheus`` builds it from its Go module).

Every test under tests/prometheus gets the ``prometheus`` marker and is *deselected* (never
skipped, never run) unless the ``-m`` expression names ``prometheus``, as tests/cluster does:
building the server takes about twenty minutes on 2 cores, so it is opt-in. Once selected, a
missing binary fails the test with the command that builds it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if HERE in Path(item.path).resolve().parents]
    for item in ours:
        item.add_marker(pytest.mark.prometheus)
    if "prometheus" not in (config.getoption("markexpr", "") or ""):
        left_out = set(map(id, ours))
        config.hook.pytest_deselected(items=ours)
        items[:] = [item for item in items if id(item) not in left_out]
