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





# -- the roles: what each principal of a Kafka store needs, and nothing more ----------------------

ROLES = ("planner", "pipeline", "fencer", "operator")


def role_acls(
    role: str,
    store: str,
    *,
    consumer: str | None = None,
    group: str | None = None,
    topics: Iterable[str] = (),
    fencing: str = "self",
) -> list[Acl]:
    """The ACLs of one role on the Kafka store ``store`` (its plan name), for README and tests.

    planner   publishes plans: the plans topic and its transactional id; creates the claims
              topics of the consumers it plans; reads the group's offsets of ``topics``;
    pipeline  one ``consumer``: reads plans and every claim, writes its own claims topic under
              its own claim id, commits to ``group`` under its own commit id, reads ``topics``;
              with ``fencing="self"`` it also fences others: WRITE on every commit id of the store;
    fencer    fences on the pipelines' behalf (``fencing="service"``): every commit id of the
              store, its own record;
    operator  creates the store's topics instead of the planner (optional).
    """
    from spark_lag_assign.consume.kafka_commit import commit_id
    from spark_lag_assign.store.base import FENCER
    from spark_lag_assign.store.kafka import (
        claim_transactional_id,
        claims_prefix,
        claims_topic,
        planner_transactional_id,
        plans_topic,
    )

    plans = plans_topic(store)
    claims = claims_prefix(store)
    txn_prefix = f"spark-lag-assign.{store}."
    if role == "planner":
        acls = [
            Acl("READ", "Topic", plans), Acl("WRITE", "Topic", plans), Acl("DESCRIBE_CONFIGS", "Topic", plans),
            Acl("CREATE", "Topic", claims, "prefixed"), Acl("DESCRIBE", "Topic", claims, "prefixed"),
            Acl("DESCRIBE_CONFIGS", "Topic", claims, "prefixed"),
            Acl("WRITE", "TransactionalId", planner_transactional_id(store)),
        ]  # fmt: skip
        if group is not None:
            acls.append(Acl("DESCRIBE", "Group", group))
        acls += [Acl("DESCRIBE", "Topic", t) for t in topics]
        return acls
    if role == "pipeline":
        if consumer is None or group is None:
            raise ValueError("a pipeline's ACLs need its consumer id and group")
        own = claims_topic(store, consumer)
        acls = [
            Acl("READ", "Topic", plans), Acl("DESCRIBE_CONFIGS", "Topic", plans),
            Acl("READ", "Topic", claims, "prefixed"),
            Acl("WRITE", "Topic", own), Acl("DESCRIBE_CONFIGS", "Topic", own),
            Acl("WRITE", "TransactionalId", claim_transactional_id(store, consumer)),
            Acl("READ", "Group", group),
        ]  # fmt: skip
        if fencing == "self":
            acls.append(Acl("WRITE", "TransactionalId", f"{txn_prefix}commit.", "prefixed"))
        else:
            acls.append(Acl("WRITE", "TransactionalId", commit_id(store, consumer)))
        acls += [Acl("READ", "Topic", t) for t in topics]
        return acls
    if role == "fencer":
        own = claims_topic(store, FENCER)
        return [
            Acl("READ", "Topic", plans), Acl("DESCRIBE_CONFIGS", "Topic", plans),
            Acl("READ", "Topic", claims, "prefixed"),
            Acl("WRITE", "Topic", own), Acl("DESCRIBE_CONFIGS", "Topic", own), Acl("CREATE", "Topic", own),
            Acl("WRITE", "TransactionalId", claim_transactional_id(store, FENCER)),
            Acl("WRITE", "TransactionalId", f"{txn_prefix}commit.", "prefixed"),
        ]  # fmt: skip
    if role == "operator":  # opening the store creates and checks the plans topic
        return [Acl(op, "Topic", f"{store}.", "prefixed") for op in ("CREATE", "DESCRIBE", "DESCRIBE_CONFIGS")]
    raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")


def kafka_acls_lines(acls: Iterable[Acl], principal: str, bootstrap: str = "BROKER:9092") -> list[str]:
    """``acls`` for ``principal`` as ``kafka-acls.sh`` command lines, one per resource."""
    flags = {"Topic": "--topic", "Group": "--group", "TransactionalId": "--transactional-id", "Cluster": "--cluster"}
    by_resource: dict[tuple[str, str, str], list[str]] = {}
    for acl in acls:
        by_resource.setdefault((acl.resource, acl.name, acl.pattern), []).append(acl.operation)
    lines = []
    for (resource, name, pattern), operations in by_resource.items():
        target = flags[resource] if resource == "Cluster" else f"{flags[resource]} {name}"
        ops = " ".join(f"--operation {op.title().replace('_', '')}" for op in operations)  # DESCRIBE_CONFIGS: DescribeConfigs
        lines.append(
            f"kafka-acls.sh --bootstrap-server {bootstrap} --command-config admin.properties --add "
            f"--allow-principal {principal} {ops} {target} --resource-pattern-type {pattern}"
        )
    return lines
__all__ = ["CLUSTER", "ROLES", "Acl", "cluster", "kafka_acls_lines", "not_authorized", "refusal", "refused_resource", "role_acls"]
