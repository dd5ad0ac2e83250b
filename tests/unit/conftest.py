"""Hypothesis settings for the pure suite: the same examples on every run and machine.

``derandomize`` makes a red run reproducible by anyone and a green one meaningful in CI;
``deadline=None`` because a slow first call (imports, numpy warm-up) is not a failure.
``pytest --hypothesis-profile=unit-thorough`` draws many more examples when hunting bugs.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "unit",
    derandomize=True,
    max_examples=15,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("unit-thorough", settings.get_profile("unit"), max_examples=1000)

# an explicit --hypothesis-profile on the command line wins over the suite's default
if settings.get_current_profile_name() == "default":
    settings.load_profile("unit")


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    """Say how many steps the handover model explored: the protocol's claim rests on it."""
    import sys

    model = sys.modules.get("tests.unit.test_handover_model")
    if model is not None:
        steps = int(repr(model.STEPS)[len("count(") : -1])
        terminalreporter.write_line(
            f"handover model: {steps} state-machine steps explored, invariants I1-I5 checked after each"
        )
