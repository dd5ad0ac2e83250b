"""The pure suite's report. Its hypothesis profiles (``ci`` by default, ``thorough``,
``unit-thorough`` for the handover protocol) are registered in ``tests/conftest.py``."""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    """Say how many steps the handover model explored: the protocol's claim rests on it."""
    import sys

    model = sys.modules.get("tests.unit.test_handover_model")
    if model is not None:
        steps = int(repr(model.STEPS)[len("count(") : -1])
        terminalreporter.write_line(
            f"handover model: {steps} state-machine steps explored, invariants I1-I5 checked after each"
        )
