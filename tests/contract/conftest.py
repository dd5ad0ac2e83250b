"""Backends of the store contract: each gives a fresh store location and a way to damage it.

A backend's harness knows its storage (files, topics) so that the contract tests can damage
a generation or a claim the way a disk fault or a stray producer would; the tests themselves
only use the ``Store`` interface.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spark_lag_assign.store import Store, open_store

_names = itertools.count(1)


@dataclass
class Harness:
    """One store location of one backend: open it as many times as a test needs."""

    backend: str
    uri: str
    options: dict[str, Any]
    damage_generation: Callable[[int], None]  # make that generation undecodable
    damage_claim: Callable[[str], None]  # make that consumer's newest claim undecodable

    def open(self, **settings: Any) -> Store:
        return open_store(self.uri, **{**self.options, **settings})


def _directory(tmp_path: Path) -> Harness:
    from tests.contract import directory_faults

    root = tmp_path / f"plans-{next(_names)}"
    return Harness(
        "directory",
        str(root),
        {},
        lambda generation: directory_faults.damage_generation(root, generation),
        lambda consumer: directory_faults.damage_claim(root, consumer),
    )


def _kafka(request: pytest.FixtureRequest) -> Harness:
    from tests.contract import kafka_faults

    broker = request.getfixturevalue("kafka")
    name = f"contract-{next(_names)}"
    uri = f"kafka://{broker.bootstrap_servers}/{name}"
    return Harness(
        "kafka",
        uri,
        {},
        lambda generation: kafka_faults.damage_generation(broker.bootstrap_servers, name, generation),
        lambda consumer: kafka_faults.damage_claim(broker.bootstrap_servers, name, consumer),
    )


def _hdfs(request: pytest.FixtureRequest) -> Harness:
    from tests.contract import hdfs_faults

    cluster = request.getfixturevalue("hdfs")
    root = f"{cluster.uri}/contract/plans-{next(_names)}"
    return Harness(
        "hdfs",
        root,
        {"hadoop_conf": cluster.client_conf},
        lambda generation: hdfs_faults.damage_generation(root, generation),
        lambda consumer: hdfs_faults.damage_claim(root, consumer),
    )


BACKENDS = (
    pytest.param("directory"),
    pytest.param("kafka", marks=pytest.mark.broker),
    pytest.param("hdfs", marks=pytest.mark.hdfs),
)


@pytest.fixture(params=BACKENDS)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    if request.param == "directory":
        yield _directory(tmp_path)
    elif request.param == "hdfs":
        yield _hdfs(request)
    else:
        yield _kafka(request)
