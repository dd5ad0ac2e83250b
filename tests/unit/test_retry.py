"""The retry policy against Kafka, driven by a fake clock: what is retried, what is not, how
long it pauses, and that it gives up at the deadline with one line (no real time passes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kafka.errors import (
    CoordinatorLoadInProgressError,
    GroupAuthorizationFailedError,
    NotLeaderForPartitionError,
)

from spark_lag_assign.errors import KafkaReadError, ReadNotAuthorizedError
from spark_lag_assign.extract import offsets, retry
from spark_lag_assign.extract.acls import Acl
from spark_lag_assign.extract.retry import kafka_retriable, until


class FakeTime:
    """A monotonic clock that moves only when the policy sleeps; every pause is recorded."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self.pauses: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.pauses.append(seconds)
        self.now += seconds


class Flaky:
    """Raises the given errors in turn, then returns ``result``; records when it was called."""

    def __init__(self, fake: FakeTime, errors: list[BaseException], result: object = "ok") -> None:
        self.fake, self.errors, self.result = fake, list(errors), result
        self.calls: list[float] = []

    def __call__(self) -> object:
        self.calls.append(self.fake.now)
        if self.errors:
            raise self.errors.pop(0)
        return self.result


def policy(fake: FakeTime, seconds: float, **options: Any) -> Callable[[Callable[[], object]], object]:
    return until(fake.now + seconds, kafka_retriable, what="reading", clock=fake.clock, sleep=fake.sleep, **options)


def test_kafka_python_says_which_errors_pass() -> None:
    assert kafka_retriable(CoordinatorLoadInProgressError())
    assert kafka_retriable(NotLeaderForPartitionError())
    assert not kafka_retriable(GroupAuthorizationFailedError())
    assert not kafka_retriable(TimeoutError())  # not a Kafka error: ours to report, not to retry


def test_transient_errors_are_retried_with_a_growing_pause_until_it_works() -> None:
    fake = FakeTime()
    call = Flaky(fake, [CoordinatorLoadInProgressError()] * 4, result=42)
    assert policy(fake, 10)(call) == 42
    assert fake.pauses == pytest.approx([0.1, 0.2, 0.4, 0.5])
    assert len(call.calls) == 5


@pytest.mark.parametrize("error", [GroupAuthorizationFailedError(), ValueError("bad reply")])
def test_anything_else_raises_at_once(error: BaseException) -> None:
    fake = FakeTime()
    call = Flaky(fake, [error])
    with pytest.raises(type(error)):
        policy(fake, 10)(call)
    assert len(call.calls) == 1 and fake.pauses == []


def test_it_gives_up_at_the_deadline_with_the_last_error_and_never_sleeps_past_it() -> None:
    fake = FakeTime()
    start = fake.now
    call = Flaky(fake, [NotLeaderForPartitionError(str(n)) for n in range(100)])
    with pytest.raises(NotLeaderForPartitionError) as raised:
        policy(fake, 2.0)(call)
    # 0.1 + 0.2 + 0.4 + 0.5 + 0.5 = 1.7 s, then the 0.3 s left: the last attempt is at the deadline
    assert fake.pauses == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5, 0.3])
    assert call.calls[-1] == pytest.approx(start + 2.0) and fake.now == pytest.approx(start + 2.0)
    assert raised.value.args == ("6",)  # the seventh error, the last one


def test_a_deadline_already_past_allows_one_attempt() -> None:
    fake = FakeTime()
    call = Flaky(fake, [CoordinatorLoadInProgressError()])
    with pytest.raises(CoordinatorLoadInProgressError):
        policy(fake, -1.0)(call)
    assert len(call.calls) == 1 and fake.pauses == []


def test_reading_offsets_gives_up_with_one_line_naming_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # the same policy under offsets.with_retries, given the fake clock
    fake = FakeTime()
    monkeypatch.setattr(retry, "until", _with_defaults(retry.until, clock=fake.clock, sleep=fake.sleep))
    failing = Flaky(fake, [CoordinatorLoadInProgressError("loading\nthe group")] * 100)
    with pytest.raises(KafkaReadError) as raised:
        offsets.with_retries("listing topics", failing, fake.now + 1.0)
    assert "\n" not in str(raised.value)
    assert str(raised.value).startswith("listing topics: ")
    assert fake.now == pytest.approx(1001.0)

    refused = Flaky(fake, [GroupAuthorizationFailedError("not yours")])
    needed = [Acl("DESCRIBE", "Group", "g")]
    with pytest.raises(ReadNotAuthorizedError) as denied:
        offsets.with_retries("describing the group", refused, fake.now + 100.0, needed)
    assert isinstance(denied.value, KafkaReadError)
    assert str(denied.value) == "describing the group: not authorized: grant DESCRIBE on Group:g (literal) to this principal"
    assert len(refused.calls) == 1  # never retried


def _with_defaults(function: Callable[..., Any], **defaults: Any) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **{**defaults, **kwargs})

    return call
