"""What a pipeline did: its events (for logs and tests) and the summary of a run."""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_lag_assign.consume.options import Offsets
from spark_lag_assign.consume.protocol import Holds


@dataclass(frozen=True)
class FollowerEvent:
    """What a follower did and when (``time.monotonic()``), for logs and tests. A claim's
    ``began`` is when its write was sent (the same clock): its lease counts from there."""

    at: float
    kind: str  # claim | start | stop | fence | plan | left | drained | stopped | idle | fenced | ...
    generation: int
    assign: dict[str, list[int]]
    detail: str = ""
    began: float | None = None


@dataclass
class RunSummary:
    consumer: str
    reason: str  # stopped | left | drained | idle | fenced
    generations: list[int]
    events: list[FollowerEvent]
    committed: Offsets
    commit_failures: int
    incarnation: str = ""
    refused: int = field(default=0)


def assign_of(holds: Holds) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(holds):
        out.setdefault(topic, []).append(partition)
    return out


__all__ = ["FollowerEvent", "RunSummary", "assign_of"]
