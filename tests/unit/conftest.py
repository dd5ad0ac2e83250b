"""The pure suite's report. Its hypothesis profiles (``ci`` by default, ``thorough``,
``unit-thorough`` for the handover protocol) are registered in ``tests/conftest.py``."""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    """Say how many steps the handover model explored, and in how many of its examples each
    dangerous moment happened: the protocol's claim rests on those, not on the step count."""
    import sys

    model = sys.modules.get("tests.unit.test_handover_model")
    if model is None:
        return
    steps = int(repr(model.STEPS)[len("count(") : -1])
    examples = int(repr(model.EXAMPLES)[len("count(") : -1])
    if not examples:
        return
    terminalreporter.write_line(
        f"handover model: {examples} examples, {steps} state-machine steps; invariants I1-I7 and D checked after each"
    )
    for moment, count in sorted(model.COVERAGE.items(), key=lambda kv: (-kv[1], kv[0])):
        terminalreporter.write_line(f"  {count / examples:6.1%}  of examples: {moment}")
    # the other measure of the proof: how many deliberate defects these tests catch, from the
    # last complete `make test-mutation` (too long for every run; it records its report)
    from pathlib import Path

    last = Path(__file__).resolve().parents[1] / "mutation" / "last-run.md"
    if last.exists():
        lines = last.read_text().splitlines()
        score = [line for line in lines if line.startswith(("mutmut:", "score:", "hand-written defects:"))]
        terminalreporter.write_line(f"mutation, {lines[0].strip('.')} (tests/mutation/last-run.md):")
        for line in score:
            terminalreporter.write_line(f"  {line}")
