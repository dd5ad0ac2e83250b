"""``make test-mutation``: how many deliberate defects of the handover's decision code the
protocol tests that ``make test`` runs catch.

1. mutmut (``[tool.mutmut]`` in pyproject.toml) mutates the decision modules
   (``consume/protocol.py``, ``gate.py``, ``fencer.py``, ``committer.py``,
   ``kafka_commit.py``) and the follower's lease checks (``SCOPE``) one change at a time
   and runs the selected tests against each mutant (hypothesis' ci examples, without
   shrinking);
2. the hand-written defects of ``tests/mutation/defects.py`` (whole checks removed, which
   mutmut does not write) are applied one at a time and the same tests run;
3. every surviving mutant must be named in ``tests/mutation/equivalent.md`` with the
   argument why it cannot change what the protocol does; the score counts the others.

Everything runs in a copy of the checkout (``out/mutation/work``), never in it. The report
goes to ``out/mutation/report.md``; the exit status is 1 if a mutant that is not argued
equivalent survived, or a hand-written defect was not caught.

    python -m tests.mutation.run [--max-children N] [--defects-only] [--keep] [--report-only]

A complete run also records its report in ``tests/mutation/last-run.md``, whose score the
pure suite's summary prints (``tests/unit/conftest.py``).

``--report-only`` writes the report from the results mutmut keeps in the work copy (a run
stopped part-way, or one continued with ``mutmut run`` there), without running anything;
mutants not run yet are counted as such.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from tests.mutation.defects import DEFECTS

REPO = Path(__file__).resolve().parents[2]
#: the mutants that are run and counted (fnmatch patterns of mutmut's names): every function of
#: the decision modules, and of ``follower.py`` and ``reading.py`` (which mutmut mutates
#: whole) only the lease checks: the rest of those is Spark, store and Kafka glue that the
#: integration tests drive, not a decision
SCOPE = (
    *(f"spark_lag_assign.consume.{module}.*" for module in ("protocol", "gate", "fencer", "committer", "kafka_commit")),
    *(f"spark_lag_assign.consume.follower.xǁPlanFollowerǁ{f}__mutmut_*" for f in ("lease_valid", "write_batch", "_observe")),
    *(f"spark_lag_assign.consume.reading.xǁRunningQueryǁ{f}__mutmut_*" for f in ("guard", "lapse_stopped")),
)
EQUIVALENT = REPO / "tests" / "mutation" / "equivalent.md"
LAST_RUN = REPO / "tests" / "mutation" / "last-run.md"
MUTANT = re.compile(r"spark_lag_assign(?:\.\w+)+\.x\S*?__mutmut_\d+")


def copy_checkout(work: Path) -> None:
    """The tracked files as they are in the working tree (uncommitted changes included)."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout.split(b"\0")
    for name in filter(None, names):
        source = REPO / name.decode()
        if source.is_file():
            target = work / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def run_mutmut(work: Path, max_children: int, log: Path, resume: bool) -> dict[str, str]:
    """mutant name -> status (killed, survived, timeout, no tests, ...) of the mutants in
    ``SCOPE``; ``resume``: only those an earlier run in ``work`` left unchecked (mutmut reruns
    every mutant it is given by name)."""
    names: Sequence[str] = SCOPE
    if resume and (work / "mutants").exists():
        names = [n for n, status in mutmut_results(work, log).items() if status == "not checked"]
    if names:
        with log.open("a" if resume else "w") as out:
            command = [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children), *names]
            subprocess.run(command, cwd=work, stdout=out, stderr=subprocess.STDOUT, check=False)
    return mutmut_results(work, log)


def mutmut_results(work: Path, log: Path) -> dict[str, str]:
    """What mutmut keeps in ``work`` of the mutants in ``SCOPE``: mutant name -> status
    ("not checked" for one not run yet)."""
    listing = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work, capture_output=True, text=True, check=True)
    found: dict[str, str] = {}
    for line in listing.stdout.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in SCOPE):
            found[name] = status
    if not found:
        raise SystemExit(f"mutmut produced no results; see {log}")
    return found


def show(work: Path, name: str) -> str:
    out = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=work, capture_output=True, text=True, check=False)
    return "\n".join(line for line in out.stdout.splitlines() if line.startswith(("-", "+")) and not line.startswith(("---", "+++")))


def test_command() -> list[str]:
    conf = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    return [sys.executable, "-m", "pytest", *conf["pytest_add_cli_args_test_selection"], *conf["pytest_add_cli_args"]]


def run_defects(work: Path) -> list[tuple[str, bool, float]]:
    """(defect, caught, seconds) for each hand-written defect."""
    results = []
    for defect in DEFECTS:
        path = work / defect.path
        original = path.read_text()
        if original.count(defect.old) != 1:
            raise SystemExit(f"defect {defect.name!r}: its code is not in {defect.path} exactly once; update tests/mutation/defects.py")
        path.write_text(original.replace(defect.old, defect.new))
        began = time.monotonic()
        try:
            status = subprocess.run(test_command(), cwd=work, capture_output=True, check=False).returncode
        finally:
            path.write_text(original)
        results.append((defect.name, status != 0, time.monotonic() - began))
        print(f"  {'caught ' if status else 'MISSED '} {defect.name}", flush=True)
    return results


def equivalents() -> set[str]:
    return set(MUTANT.findall(EQUIVALENT.read_text())) if EQUIVALENT.exists() else set()


def report(statuses: dict[str, str], defects: list[tuple[str, bool, float]], work: Path, out: Path) -> bool:
    argued = equivalents()
    counts = Counter(statuses.values())
    survived = sorted(n for n, s in statuses.items() if s == "survived")
    unargued = [n for n in survived if n not in argued]
    equivalent = [n for n in survived if n in argued]
    stale = sorted(argued - set(survived)) if statuses else []  # a defects-only run judges no mutant
    caught = counts["killed"] + counts["timeout"]
    judged = caught + len(unargued)
    lines = ["# Mutation score of the handover's decision code", ""]
    if statuses:
        lines += [
            f"mutmut: {len(statuses)} mutants; killed {counts['killed']}, timed out {counts['timeout']}, "
            f"survived {len(survived)} ({len(equivalent)} argued equivalent in tests/mutation/equivalent.md, "
            f"{len(unargued)} not), no tests {counts['no tests']}, not run yet {counts['not checked']}, "
            f"other {len(statuses) - sum(counts[k] for k in ('killed', 'timeout', 'survived', 'no tests', 'not checked'))}",
            f"score: {caught} / {judged} non-equivalent mutants caught = {caught / judged:.1%}" if judged else "score: nothing to judge",
            "",
        ]
    if defects:
        lines += [f"hand-written defects: {sum(c for _, c, _ in defects)} / {len(defects)} caught", ""]
        lines += [f"- {'caught' if c else '**missed**'} ({s:.0f} s): {name}" for name, c, s in defects]
        lines.append("")
    if unargued:
        lines += ["## Survivors not argued equivalent", ""]
        for name in unargued:
            lines += [f"### {name}", "```diff", show(work, name), "```", ""]
    if stale:
        lines += ["## Named as equivalent but not a survivor now (mutmut renumbers a function's mutants when it changes)", ""]
        lines += [f"- {name}: {statuses.get(name, 'gone')}" for name in stale]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[: 6 + len(defects)]))
    return not unargued and all(c for _, c, _ in defects)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=REPO / "out" / "mutation")
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--defects-only", action="store_true", help="only the hand-written defects")
    parser.add_argument("--keep", action="store_true", help="reuse the work copy and mutmut's earlier results")
    parser.add_argument("--report-only", action="store_true", help="only the report, from the work copy's results")
    args = parser.parse_args(argv)
    work = args.workdir / "work"
    if args.report_only:
        statuses = mutmut_results(work, args.workdir / "mutmut.log")
        ok = report(statuses, [], work, args.workdir / "report.md")
        print(f"report: {args.workdir / 'report.md'}")
        return 0 if ok else 1
    began = time.monotonic()
    if not (args.keep and work.exists()):
        copy_checkout(work)
    statuses: dict[str, str] = {}
    if not args.defects_only:
        print(f"mutmut on the decision code (log: {args.workdir / 'mutmut.log'}) ...", flush=True)
        statuses = run_mutmut(work, args.max_children, args.workdir / "mutmut.log", resume=args.keep)
    print("hand-written defects ...", flush=True)
    defects = run_defects(work)
    ok = report(statuses, defects, work, args.workdir / "report.md")
    print(f"report: {args.workdir / 'report.md'}")
    if statuses and "not checked" not in statuses.values():
        record(args.workdir / "report.md", time.monotonic() - began)
    return 0 if ok else 1


def record(report_path: Path, seconds: float) -> None:
    """A complete run's report becomes ``LAST_RUN`` (committed; ``make test`` prints its score)."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True, check=True)
    where = head.stdout.strip() + (" with uncommitted changes" if dirty.stdout.strip() else "")
    stamp = f"`make test-mutation` on {where}, {time.strftime('%Y-%m-%d')}, {seconds / 60:.0f} minutes.\n\n"
    LAST_RUN.write_text(stamp + report_path.read_text())
    print(f"recorded: {LAST_RUN.relative_to(REPO)}")


if __name__ == "__main__":
    raise SystemExit(main())
