"""Kafka ACLs: the ones a request needs, and a refusal turned into the one ACL to grant.

Kafka refuses a request its principal may not make with an authorization error that names
the kind of resource (topic, group, transactional id, cluster) but neither the resource nor
the operation. The caller knows what it asked for, so every call site that talks to Kafka
lists the ACLs its request needs, and ``not_authorized`` picks the one the error is about::

    except KafkaError as exc:
        refused = not_authorized(exc, [Acl("WRITE", "Topic", topic)], CommitNotAuthorizedError, "committing")
        if refused:
            raise refused from None

giving ``committing: not authorized: grant WRITE on Topic:orders (literal) to this principal``.

kafka-python does not always raise the error class itself: a transactional producer in an
error state raises a plain ``KafkaError`` whose text names the class. So an error is
recognised by the class name in its type or its text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from spark_lag_assign.errors import NotAuthorizedError

#: the operations Kafka's ACLs know, as ``kafka-acls --operation`` and kafka-python's ACLOperation name them
OPERATIONS = frozenset(
    {
        "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS",
    }
)  # fmt: skip
#: resource type -> kafka-python's ResourceType name
RESOURCES = {"Topic": "TOPIC", "Group": "GROUP", "TransactionalId": "TRANSACTIONAL_ID", "Cluster": "CLUSTER"}
PATTERNS = ("literal", "prefixed")
#: the one name a Cluster resource has
CLUSTER = "kafka-cluster"

#: kafka-python's authorization errors, and the Java client's (in a failed Spark query's
#: error), -> the resource type they are about
_REFUSALS = (
    ("TopicAuthorizationFailed", "Topic"),
    ("GroupAuthorizationFailed", "Group"),
    ("ClusterAuthorizationFailed", "Cluster"),
    ("TransactionalIdAuthorizationFailed", "TransactionalId"),
    ("TopicAuthorizationException", "Topic"),
    ("GroupAuthorizationException", "Group"),
    ("ClusterAuthorizationException", "Cluster"),
    ("TransactionalIdAuthorizationException", "TransactionalId"),
)

E = TypeVar("E", bound=NotAuthorizedError)


@dataclass(frozen=True, order=True)
class Acl:
    """One ALLOW ACL: ``operation`` on the resource ``resource:name``, matched literally or as a prefix."""

    operation: str
    resource: str
    name: str
    pattern: str = "literal"

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise ValueError(f"unknown ACL operation {self.operation!r}; one of {', '.join(sorted(OPERATIONS))}")
        if self.resource not in RESOURCES:
            raise ValueError(f"unknown ACL resource type {self.resource!r}; one of {', '.join(RESOURCES)}")
        if self.pattern not in PATTERNS:
            raise ValueError(f"unknown ACL pattern type {self.pattern!r}; literal or prefixed")
        if not self.name:
            raise ValueError("an ACL needs a resource name")

    def __str__(self) -> str:
        return f"{self.operation} on {self.resource}:{self.name} ({self.pattern})"

    def to_kafka(self, principal: str, host: str = "*") -> Any:
        """This ACL for ``principal`` (``User:pipe-a``) as kafka-python's ``ACL``, for ``create_acls``."""
        from kafka.admin import ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourcePattern, ResourceType

        pattern = ResourcePattern(
            ResourceType[RESOURCES[self.resource]], self.name, ACLResourcePatternType[self.pattern.upper()]
        )
        return ACL(principal, host, ACLOperation[self.operation], ACLPermissionType.ALLOW, pattern)


def cluster(operation: str) -> Acl:
    return Acl(operation, "Cluster", CLUSTER)


def refused_resource(exc: BaseException) -> str | None:
    """The resource type an authorization error is about, or None if ``exc`` is no authorization error."""
    text = f"{type(exc).__name__} {exc}"
    for name, resource in _REFUSALS:
        if name in text:
            return resource
    return None


def refusal(exc: BaseException, needed: Iterable[Acl]) -> tuple[tuple[Acl, ...], str] | None:
    """The ACLs of ``needed`` that ``exc`` says are missing, and one line naming them to grant;
    None if ``exc`` is no authorization error.

    Of several needed ACLs on the refused resource type, those whose resource the error
    text names are picked (kafka-python names the refused topics); if it names none, all
    are given.
    """
    resource = refused_resource(exc)
    if resource is None:
        return None
    candidates = sorted({a for a in needed if a.resource == resource})
    words = set(re.findall(r"[A-Za-z0-9._-]+", str(exc)))  # a name is a whole word of the text, never a part
    named = [a for a in candidates if a.name in words]
    acls = tuple(named if len(candidates) > 1 and named else candidates)
    if not acls:  # a call site that does not know this refusal: still one line, never a retry
        return (), f"not authorized: this principal lacks an ACL on a {resource} resource ({type(exc).__name__})"
    return acls, f"not authorized: grant {' and '.join(map(str, acls))} to this principal"


def not_authorized(exc: BaseException, needed: Iterable[Acl], error: type[E], doing: str) -> E | None:
    """``error("<doing>: not authorized: grant ...")`` if ``exc`` is an authorization refusal, else None."""
    found = refusal(exc, needed)
    if found is None:
        return None
    acls, line = found
    return error(f"{doing}: {line}", acls)


__all__ = ["CLUSTER", "Acl", "cluster", "not_authorized", "refusal", "refused_resource"]
