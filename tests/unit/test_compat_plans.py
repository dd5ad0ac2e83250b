"""``make test-compat`` compares the plans that each Spark line writes: what it may ignore, and what not."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.store import open_store
from tests.compat import plans
from tests.compat.__main__ import Outcome, pytest_counts, pytest_failures


def written(root: Path, created: datetime, owners: list[str]) -> Path:
    """A plan directory with one generation: partitions of ``t`` owned as ``owners`` says."""
    rows = pd.DataFrame(
        {
            "consumer": owners,
            "topic": "t",
            "partition": range(len(owners)),
            "lag": [10 * (p + 1) for p in range(len(owners))],
            "starting_offset": [-2] * len(owners),
        }
    )
    doc = plan_io.build_plan(rows, {"a": ["t"], "b": ["t"]}, generation=1, strategy="range", reset="earliest", created=created)
    with open_store(str(root)) as store, store.publisher() as publisher:
        publisher.publish(doc)
    return root


def test_plans_that_differ_only_in_creation_time_are_the_same_documents(tmp_path: Path) -> None:
    first = written(tmp_path / "one", datetime(2025, 1, 1, tzinfo=UTC), ["a", "a", "b"])
    second = written(tmp_path / "two", datetime(2025, 6, 30, 12, 1, 2, tzinfo=UTC), ["a", "a", "b"])
    assert (first / "generations" / "000001" / "plan.json").read_bytes() != (second / "generations" / "000001" / "plan.json").read_bytes()
    docs = plans.documents(first)
    assert sorted(docs) == ["assign/a.json", "assign/b.json", "plan.json", "starting-offsets/a.json", "starting-offsets/b.json"]
    assert plans.differences(docs, plans.documents(second)) == []


def test_a_partition_with_another_owner_is_a_difference_named_by_file(tmp_path: Path) -> None:
    first = plans.documents(written(tmp_path / "one", datetime(2025, 1, 1, tzinfo=UTC), ["a", "a", "b"]))
    second = plans.documents(written(tmp_path / "two", datetime(2025, 1, 1, tzinfo=UTC), ["a", "b", "b"]))
    found = plans.differences(first, second)
    assert [line.split(":")[0] for line in found] == [
        "assign/a.json", "assign/b.json", "plan.json", "starting-offsets/a.json", "starting-offsets/b.json",
    ]  # fmt: skip
    assert "key 'consumers' differs" in found[2]
    assert plans.differences(first, {k: v for k, v in first.items() if k != "assign/b.json"}) == ["assign/b.json: missing"]


def test_a_generation_without_plan_json_is_an_error_not_an_empty_match(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no plan\.json of generation 1"):
        plans.documents(tmp_path)


def test_a_failed_test_is_named_with_its_reason_from_pytests_junit_report(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        "def test_fine():\n    pass\n\n\ndef test_broken():\n    assert 1 == 2, 'the offsets went backwards'\n"
    )
    (tmp_path / "test_unimportable.py").write_text("import pyspark_of_another_line\n")
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", "--continue-on-collection-errors",
         "test_sample.py", "test_unimportable.py"],
        cwd=tmp_path,
        capture_output=True,
    )  # fmt: skip
    assert done.returncode == 1
    assert pytest_counts(report) == (1, 2)
    unimportable, broken = sorted(pytest_failures(report))  # "error ..." sorts first
    assert unimportable.startswith("error test_unimportable: ") and "No module named 'pyspark_of_another_line'" in unimportable
    assert broken.startswith("failure test_sample::test_broken: ") and "the offsets went backwards" in broken
    assert pytest_failures(tmp_path / "missing.xml") == []


def test_every_failed_step_is_repeated_at_the_end() -> None:
    outcome = Outcome(lines=[])
    outcome.add(5, 0, "compat: 3.5.7: tests: 5 passed, 0 failed")
    outcome.add(0, 1, "compat: 3.5.7: the offline plan (lag) failed; see plan-lag.log")
    assert outcome.failures == ["3.5.7: the offline plan (lag) failed; see plan-lag.log"]
    assert (outcome.passed, outcome.failed) == (5, 1)
