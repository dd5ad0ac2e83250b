"""One exception type per way a run can fail; each message is one line naming the problem."""

from __future__ import annotations

from typing import Any


def one_line(exc: BaseException) -> str:
    """An exception as one line, led by its type unless the message names it already."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


class SparkLagAssignError(Exception):
    """Base of every error this package raises on bad input or a failed dependency."""


class ConfigError(SparkLagAssignError):
    """The configuration file or the command-line options are invalid."""


class InputError(SparkLagAssignError):
    """Offsets, lags, subscriptions or a previous plan are malformed."""


class StrategyError(SparkLagAssignError):
    """An unknown strategy name or an invalid strategy option."""


class InvariantError(SparkLagAssignError):
    """An assignment breaks an invariant (``core.invariants``); it must never be written."""


class KafkaReadError(SparkLagAssignError):
    """The cluster could not be read: unreachable, refused, unknown group or topic."""


class KafkaCommitError(SparkLagAssignError):
    """Offsets could not be committed to the consumer group."""


class PlanError(SparkLagAssignError):
    """A plan file could not be read or written."""


class BrokerError(SparkLagAssignError):
    """The local Kafka broker could not be started."""


class JvmError(SparkLagAssignError):
    """Java or the Maven-fetched jars are missing."""


class SparkVersionError(SparkLagAssignError):
    """A Spark (or its Kafka source) of a version this package does not support or that does not match."""


class ConsumerNotInPlanError(PlanError):
    """A pipeline asked for a consumer id that the plan does not name."""


class NothingAssignedError(PlanError):
    """The plan gives the consumer no partitions, so there is no stream to read."""


class HandoverTimeoutError(SparkLagAssignError):
    """A pipeline waited too long for another consumer to release partitions it now owns."""


class CommitFencedError(KafkaCommitError):
    """The partition has a newer owner: a commit under an older generation was refused."""


class CommitHeldError(KafkaCommitError):
    """The committer has no producer that its handover confirmed: the commit waits (and is retried)."""


class ShrinkRefusedError(PlanError):
    """The new plan drops most of the previous generation's partitions, and that was not allowed."""


class FencingChangeRefusedError(PlanError):
    """The new plan fences otherwise than the previous generation, and that was not allowed."""


class NotAuthorizedError(SparkLagAssignError):
    """Kafka refused a request for want of an ACL; the message names the ACL to grant.

    Never retried: waiting does not grant an ACL. ``acls`` holds the ACLs named (empty when
    the refusal came from a request whose needs the caller did not know).
    """

    def __init__(self, message: str, acls: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        self.acls = acls


class ReadNotAuthorizedError(KafkaReadError, NotAuthorizedError):
    """Reading offsets, topics or the group was refused for want of an ACL."""


class CommitNotAuthorizedError(KafkaCommitError, NotAuthorizedError):
    """Committing or fencing was refused for want of an ACL; not a fencing by a newer owner."""
