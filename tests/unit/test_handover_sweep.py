"""Every dangerous schedule of the handover model, every run: each takeover kind of
``HandoverModel.take_over``, with and without the successor replaced by a new incarnation
after it fenced, under clocks within the margin (the same, or the holder's slow and the
successor's fast by the drift the margin covers), wild clocks (the holder's slow or fast)
and service fencing, the holder resuming with a batch first or its loop first.

The stateful tests (``test_handover_model``) draw these schedules among everything else,
and which of them a derandomized run reaches shifts whenever the model changes; here each
one is played with fixed choices, then every pipeline runs on for a while, and the same
invariants (I1-I7, D) are checked after every step. Deterministic, so a defect that one of
these schedules exposes cannot hide behind the draw."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.test_handover_model import (
    DRIFT,
    MAX_RECORDS,
    PARTITIONS,
    TAKEOVERS,
    HandoverModel,
    ServiceFencing,
    WildClocks,
    _Fixed,
)
from tests.unit.test_handover_scenarios import check

P = ("t", 0)
FIXED: dict[str, object] = {
    "successor": "B",
    "sink": "files",
    "records": MAX_RECORDS,
    "outage steps": 3,
    "outage dt": 3.5,
    "outage settle": 4,
    "steps after": 2,
    "dt after": 2.0,
    "decide before pause": True,
    "the read returns after": 0.1,
}


class Choices(_Fixed):
    """The draws of one schedule: the holder is A, t-0 moves to B, B's clock runs at ``rate``."""

    def __init__(self, rate: float, order: str) -> None:
        self.rate, self.order = rate, order

    def draw(self, strategy: Any, label: str = "") -> object:
        if label == "holder":
            return next(p for p in strategy.elements if p.consumer == "A")
        if label == "moved":
            return {P}
        if label == "clock rate":
            return self.rate
        if label == "on resuming":
            return self.order
        if label in FIXED:
            return FIXED[label]
        return super().draw(strategy, label)


class WildClocksWithAFencer(ServiceFencing):
    """Service fencing under wild clocks: only the fencer's notes stop a pipeline whose slow
    clock says its lease still runs."""

    exclusive = False


def schedules() -> list[Any]:
    out = []
    # within the margin: the same rate, or the holder's clock slow and the successor's fast by
    # the drift the margin covers (what the tight takeover needs the margin for)
    models = (
        (HandoverModel, (1.0, 1.0 - DRIFT)),
        (WildClocks, (0.5, 2.0)),
        (ServiceFencing, (1.0,)),
        (WildClocksWithAFencer, (0.5, 2.0)),
    )
    for model, rates in models:
        for how in TAKEOVERS:
            for restart in ("same", "restart", "restart-copy"):
                for rate in rates:
                    for order in ("batch, report", "loop first"):
                        name = f"{model.__name__}-{how}-{restart}-A{rate}-{order.replace(', ', '+')}"
                        out.append(pytest.param(model, how, restart, rate, order, id=name))
    return out


@pytest.mark.parametrize(("kind", "how", "restart", "rate", "order"), schedules())
def test_every_takeover_schedule_keeps_every_invariant(
    kind: type[HandoverModel], how: str, restart: str, rate: float, order: str
) -> None:
    model = kind()
    w = model.world
    w.plans.append(dict.fromkeys(PARTITIONS, "A"))
    w.members.append({"A", "B"})
    a = model.spawn("A", False, rate)
    b = model.spawn("B", False, 1.0 / rate if rate != 1.0 else 1.0)  # wild clocks: the two disagree both ways
    data = Choices(b.rate, order)
    for proc in (a, b):
        model.settle(proc, data, 30)
    assert a.query is not None and P in a.query.holds
    model.run_batch(a, data, report_now=True)
    # take_over replaces the successor on odd counts, first by a copy of its claim (a directory store) on 1, 5, ...
    model.takeovers = {"same": 2, "restart": 3, "restart-copy": 1}[restart]
    model.take_over(data, how)
    check(model)
    for _ in range(40):  # everyone runs on: the holder resumes, sees the plan, reopens, stops or commits
        if model.service:
            model.fencer_acts()
        for proc in [p for p in model.procs if p.runs]:
            g = len(w.plans)
            proc.core.saw_plan(g, w.assignment(g, proc.consumer))
            model.perform(proc, data)
            if model.can_batch(proc):
                for tp in proc.query.holds:  # type: ignore[union-attr]
                    w.end[tp] += 1
                model.run_batch(proc, data, report_now=True)
            check(model)
        w.now += 0.5
    expected = {f"takeover ({how})", "a successor reads what it took over"}
    if how == "slow-read":
        expected.add("a successor's read shows a renewal written while it ran")
    if how == "late-renewal" and kind.exclusive:  # with wild clocks "late but within its lease" may not exist
        expected.add("a successor decides a lease after it first saw a claim renewed since")
    if how == "tight" and kind.exclusive:
        expected.add("a successor waits on a holder paused right after its renewal")
    if restart != "same":
        expected.add("a successor that fenced is replaced by a new incarnation")
    assert expected <= model.moments, f"the schedule missed {sorted(expected - model.moments)}"
