"""The test pipeline's report lines share a log with its driver's JVM: each is one write."""

from __future__ import annotations

import io
import json

import pytest

from spark_lag_assign.testing import pipeline_app


class Writes(io.StringIO):
    """A stdout that keeps every write call apart, as an unbuffered stream passes them on."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_a_report_line_reaches_the_shared_log_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    out = Writes()
    monkeypatch.setattr("sys.stdout", out)
    pipeline_app._emit("EVENT", {"consumer": "A", "kind": "stop", "generation": 1})
    [line] = out.calls  # nothing written between the text and its newline can split the line
    assert line.endswith("\n") and line.count("\n") == 1
    kind, _, payload = line.rstrip("\n").partition(" ")
    assert (kind, json.loads(payload)) == ("EVENT", {"consumer": "A", "generation": 1, "kind": "stop"})
