"""Retrying calls to Kafka and to the local test services, on tenacity.

Every retry here follows one policy: retry only the failures the caller calls transient,
pause between attempts (doubling from ``first`` up to ``most``), and stop at a deadline on
the monotonic clock. The pause never runs past the deadline, so the last attempt is made
at the deadline rather than after it. Anything else raises at once. When the policy gives
up, the last error is re-raised as it was and the caller turns it into its one-line message.

The clock and the sleep are parameters: a test drives a policy with a fake clock and sees
every pause it asks for, without waiting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception, wait_exponential

log = logging.getLogger(__name__)

Clock = Callable[[], float]
Sleep = Callable[[float], None]


def kafka_retriable(exc: BaseException) -> bool:
    """kafka-python's own verdict: coordinator loading, leader moving, a request timing out."""
    from kafka.errors import KafkaError

    return isinstance(exc, KafkaError) and bool(getattr(exc, "retriable", False))


def until(
    deadline: float,
    retriable: Callable[[BaseException], bool],
    *,
    what: str,
    first: float = 0.1,
    most: float = 0.5,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
    logger: logging.Logger = log,
    level: int = logging.DEBUG,
) -> Retrying:
    """A policy that retries ``retriable`` failures until ``clock()`` reaches ``deadline``.

    Call it with the function to run: ``until(deadline, kafka_retriable, what="listing topics")(admin.list_topics)``.
    """

    def remaining(state: RetryCallState) -> float:
        backoff = wait_exponential(multiplier=first, max=most)(state)
        return max(0.0, min(backoff, deadline - clock()))

    def past_deadline(state: RetryCallState) -> bool:
        return clock() >= deadline

    def note(state: RetryCallState) -> None:
        failure = state.outcome.exception() if state.outcome is not None else None
        logger.log(level, "%s: %s, retrying (attempt %d)", what, failure, state.attempt_number)

    return Retrying(
        retry=retry_if_exception(retriable),
        stop=past_deadline,
        wait=remaining,
        sleep=sleep,
        before_sleep=note,
        reraise=True,
    )


def within(
    seconds: float,
    retriable: Callable[[BaseException], bool],
    *,
    what: str,
    clock: Clock = time.monotonic,
    **options: Any,
) -> Retrying:
    """``until`` a deadline ``seconds`` from now."""
    return until(clock() + seconds, retriable, what=what, clock=clock, **options)
