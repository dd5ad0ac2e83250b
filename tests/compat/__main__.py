"""``make test-compat``: the supported Spark lines, each in a virtualenv of its own.

    python -m tests.compat                    # the whole matrix (what CI runs after `make test`)
    python -m tests.compat --versions 3.5.7   # one version

For each version of ``MATRIX``: a virtualenv ``.venv-compat/<version>`` with the project
(editable) and exactly that PySpark, the jars that version needs (``make jvm``'s fetcher, run
by that virtualenv: its Kafka source and test HDFS go to directories named by version), the
tests its row selects, and an offline plan of the bench's 100,000-partition snapshot with
each of ``STRATEGIES``. Then the plans are compared: every version must write the same
bytes (``tests.compat.plans``), apart from the creation time.

Which tests where, to keep CI (``make test`` then this) within about 50 minutes on 2 cores:

- 3.5.7 (the LTS line, Scala 2.12): the planner's Spark tests (tests/spark), the consuming
  side's integration tests (``CONSUMING_TESTS``: the follower with its Kafka source, commits
  and handovers between pipelines of one process, and the multi-process proof), the offline
  plans;
- 4.0.0: the offline plans, from the default ``.venv``, where ``make test`` ran every test on
  it (if ``.venv`` has another version, 4.0.0 gets a virtualenv here and 3.5.7's selection);
- 4.3.0 (the newest): the planner's Spark tests and the offline plans. Its Kafka source is
  not on Maven Central (as reachable here), so the consuming side cannot run on it.

A virtualenv is made once and kept while pyproject.toml is unchanged (pip's cache makes a
new one take a minute or two). Exit status 0 only if every step passed; the last line counts
the tests and checks, ``compat: N passed, M failed``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.compat import plans

REPO = Path(__file__).resolve().parents[2]
VENVS = REPO / ".venv-compat"
OUT = REPO / "out" / "compat"

PLANNER_TESTS = ("tests/spark",)
CONSUMING_TESTS = ("tests/integration/test_follower.py", "tests/integration/test_handover_processes.py")


@dataclass(frozen=True)
class Row:
    version: str
    #: the planner's Spark tests
    planner: bool
    #: the consuming side's integration tests (they need the version's Kafka source)
    consuming: bool
    #: `make test` runs every test on this version when it is the default .venv's: then only the plans here
    default: bool = False


MATRIX = (
    Row("3.5.7", planner=True, consuming=True),
    Row("4.0.0", planner=True, consuming=True, default=True),
    # no Kafka source for 4.3.0 on Maven Central: the consuming side cannot run on it
    Row("4.3.0", planner=True, consuming=False),
)

#: the bench's 100,000-partition snapshot (tests.bench.bench_job.snapshot): 1,000 topics x 100
#: partitions, skewed lags, 100 consumers reading every topic
SNAPSHOT = {"topics": 1_000, "partitions": 100, "consumers": 100}
#: one whole-group strategy (one global applyInPandas group) and one per-topic strategy (buckets of topics)
STRATEGIES = ("lag-sticky", "lag")


@dataclass
class Outcome:
    passed: int = 0
    failed: int = 0
    lines: list[str] | None = None
    #: every failed step, and each failed test by name, repeated at the very end (CI may show
    #: only the output's last lines)
    failures: list[str] = field(default_factory=list)

    def add(self, passed: int, failed: int, line: str) -> None:
        self.passed += passed
        self.failed += failed
        (self.lines if self.lines is not None else []).append(line)
        if failed:
            self.failures.append(line.removeprefix("compat: "))
        print(line, flush=True)


def say(text: str) -> None:
    print(f"compat: {text}", flush=True)


def run(argv: Sequence[str], *, log: Path, env: dict[str, str] | None = None) -> int:
    """A command with its output to ``log`` (and the log's tail printed if it failed)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        status = subprocess.run(list(argv), stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=env, stdin=subprocess.DEVNULL).returncode
    if status != 0:
        tail = log.read_text(errors="replace").splitlines()[-25:]
        print("\n".join(f"  | {line}" for line in tail), flush=True)
    return status


def venv(version: str) -> Path:
    """``.venv-compat/<version>`` with the project (editable) and exactly that PySpark; made once per pyproject.toml."""
    root = VENVS / version
    python = root / "bin" / "python"
    stamp = root / ".installed"
    want = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest() + f" pyspark=={version}\n"
    if stamp.is_file() and stamp.read_text() == want and python.exists():
        return python
    began = time.monotonic()
    log = OUT / version / "venv.log"
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(root)],
        [str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
        [str(python), "-m", "pip", "install", "--quiet", "-e", ".[test]", f"pyspark=={version}"],
    ]
    for step in steps:
        if run(step, log=log) != 0:
            raise SystemExit(f"compat: the virtualenv for PySpark {version} could not be made; see {log}")
    stamp.write_text(want)
    say(f"{version}: virtualenv made in {time.monotonic() - began:.0f}s")
    return python


def default_version() -> str | None:
    """The PySpark of the default .venv (``make test``'s), if there is one."""
    python = REPO / ".venv" / "bin" / "python"
    if not python.exists():
        return None
    done = subprocess.run([str(python), "-c", "import pyspark; print(pyspark.__version__)"], capture_output=True, text=True)
    return done.stdout.strip() or None


def pytest_counts(report: Path) -> tuple[int, int]:
    """(passed, failed or errored) from pytest's JUnit XML; a run that wrote none failed as a whole."""
    if not report.is_file():
        return 0, 1
    root = ET.parse(report).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    tests = sum(int(s.get("tests", 0)) for s in suites)
    bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return tests - bad - skipped, bad + skipped  # a skip here is a prerequisite missing: it counts as a failure


def pytest_failures(report: Path) -> list[str]:
    """One line per failed, errored or skipped test of pytest's JUnit XML: where it is (class or
    module, and name) and why: the message's first line, or for a generic message (a module
    that fails to import is only "collection failure") the traceback's last ``E`` line."""
    if not report.is_file():
        return []
    lines = []
    for case in ET.parse(report).getroot().iter("testcase"):
        for kind in ("failure", "error", "skipped"):
            found = case.find(kind)
            if found is None:
                continue
            message = (found.get("message") or "").strip().splitlines()
            raised = [line.strip()[1:].strip() for line in (found.text or "").splitlines() if line.strip().startswith("E ")]
            why = raised[-1] if raised and (not message or message[0] == "collection failure") else (message or ["(no message)"])[0]
            where = "::".join(part for part in (case.get("classname"), case.get("name")) if part)
            lines.append(f"{kind} {where}: {why[:300]}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.compat", description=__doc__.splitlines()[0])
    parser.add_argument("--versions", help="comma-separated subset of the matrix (default: all)")
    args = parser.parse_args(argv)
    rows = [r for r in MATRIX if not args.versions or r.version in args.versions.split(",")]
    if not rows:
        parser.error(f"no such version in the matrix ({', '.join(r.version for r in MATRIX)})")
    began = time.monotonic()
    outcome = Outcome(lines=[])
    default = default_version()
    OUT.mkdir(parents=True, exist_ok=True)

    from tests.bench import bench_job

    with tempfile.TemporaryDirectory(prefix="sla-compat-") as tmp:
        snapshot, consumers = bench_job.snapshot(SNAPSHOT["topics"], SNAPSHOT["partitions"], SNAPSHOT["consumers"], Path(tmp))
        written: dict[str, dict[str, Path]] = {}
        for row in rows:
            covered = row.default and default == row.version
            planner, consuming = row.planner and not covered, row.consuming and not covered
            step = time.monotonic()
            # the default .venv has exactly this version and `make test` just ran in it: its plans come from there
            python = REPO / ".venv" / "bin" / "python" if covered else venv(row.version)
            env = {**os.environ, "PYSPARK_PYTHON": str(python), "PYSPARK_DRIVER_PYTHON": str(python)}
            env.pop("VIRTUAL_ENV", None)
            sets = ["broker", *(["spark-kafka", "hdfs"] if consuming else [])]
            log = OUT / row.version / "jvm.log"
            if run([str(python), "-m", "spark_lag_assign.testing.jvmfetch", "--sets", ",".join(sets)], log=log, env=env) != 0:
                outcome.add(0, 1, f"compat: {row.version}: the jars could not be fetched; see {log}")
                continue
            selected = [*(PLANNER_TESTS if planner else ()), *(CONSUMING_TESTS if consuming else ())]
            if selected:
                report = OUT / row.version / "pytest.xml"
                report.unlink(missing_ok=True)
                log = OUT / row.version / "pytest.log"
                t0 = time.monotonic()
                # without the version's Kafka source, the tests that read with it are left out (README, "Versions")
                marks = [] if consuming else ["-m", "not kafka_source"]
                status = run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={report}", *marks, *selected],
                             log=log, env=env)  # fmt: skip
                passed, failed = pytest_counts(report)
                if status != 0 and failed == 0:
                    failed = 1
                outcome.add(passed, failed, f"compat: {row.version}: {' '.join(selected)}: {passed} passed, {failed} failed "
                                            f"in {time.monotonic() - t0:.0f}s (log {log.relative_to(REPO)})")  # fmt: skip
                outcome.failures += [f"{row.version}: {line}" for line in pytest_failures(report)]
            else:
                say(f"{row.version}: no tests here: `make test` ran every test on it (the default .venv)")
            written[row.version] = {}
            for strategy in STRATEGIES:
                out_dir = Path(tmp) / row.version / strategy
                log = OUT / row.version / f"plan-{strategy}.log"
                argv = [str(python), "-m", "spark_lag_assign", "plan", "--offsets", str(snapshot), "--consumers", consumers,
                        "--strategy", strategy, "--output", str(out_dir)]  # fmt: skip
                t0 = time.monotonic()
                if run(argv, log=log, env=env) != 0:
                    outcome.add(0, 1, f"compat: {row.version}: the offline plan ({strategy}) failed; see {log}")
                    continue
                written[row.version][strategy] = out_dir
                say(f"{row.version}: offline plan of {SNAPSHOT['topics'] * SNAPSHOT['partitions']:,} partitions "
                    f"({strategy}) in {time.monotonic() - t0:.0f}s")  # fmt: skip
            say(f"{row.version}: done in {time.monotonic() - step:.0f}s")

        reference = rows[0].version
        for strategy in STRATEGIES:
            ref_dir = written.get(reference, {}).get(strategy)
            for row in rows[1:]:
                other = written.get(row.version, {}).get(strategy)
                if ref_dir is None or other is None:
                    continue  # its failure is counted above
                diff = plans.differences(plans.documents(ref_dir), plans.documents(other))
                if diff:
                    outcome.add(0, 1, f"compat: {strategy} plan of PySpark {row.version} differs from {reference}'s: " + "; ".join(diff[:5]))
                else:
                    n = len(plans.documents(other))
                    outcome.add(1, 0, f"compat: {strategy} plan of PySpark {row.version}: {n} documents byte-identical to {reference}'s")

    say(f"{len(rows)} versions in {time.monotonic() - began:.0f}s")
    for line in outcome.failures:
        say(line)
    print(f"compat: {outcome.passed} passed, {outcome.failed} failed", flush=True)
    return 0 if outcome.failed == 0 and outcome.passed > 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
