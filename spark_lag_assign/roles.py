"""The roles of a Kafka store and the ACLs each needs, and nothing more.

``spark-lag-assign acls ROLE`` prints them as ``kafka-acls.sh`` lines; the integration tests
grant exactly these on an authorizing broker. The vocabulary (``Acl``, turning a refusal into
the ACL to grant) is ``spark_lag_assign.extract.acls``; this module sits above the store and
the consuming side because it names their topics and transactional ids.
"""

from __future__ import annotations

from collections.abc import Iterable

from spark_lag_assign.consume.kafka_commit import commit_id
from spark_lag_assign.extract.acls import Acl
from spark_lag_assign.store.base import FENCER
from spark_lag_assign.store.kafka_names import (
    claim_transactional_id,
    claims_prefix,
    claims_topic,
    planner_transactional_id,
    plans_topic,
)

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

    planner   publishes plans: the plans topic (which it creates if it is missing) and its
              transactional id; creates the claims topics of the consumers it plans; reads the group's offsets of ``topics``;
    pipeline  one ``consumer``: reads plans and every claim, writes its own claims topic under
              its own claim id, commits to ``group`` under its own commit id, reads ``topics``;
              with ``fencing="self"`` it also fences others: WRITE on every commit id of the store;
    fencer    fences on the pipelines' behalf (``fencing="service"``): every commit id of the
              store, its own record;
    operator  creates the store's topics instead of the planner (optional).

Long because it is the table above as code, one block per role, read against README's.
    """
    plans = plans_topic(store)
    claims = claims_prefix(store)
    txn_prefix = f"spark-lag-assign.{store}."
    if role == "planner":
        acls = [
            Acl("READ", "Topic", plans), Acl("WRITE", "Topic", plans), Acl("DESCRIBE_CONFIGS", "Topic", plans),
            Acl("CREATE", "Topic", plans), Acl("CREATE", "Topic", claims, "prefixed"), Acl("DESCRIBE", "Topic", claims, "prefixed"),
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


__all__ = ["ROLES", "kafka_acls_lines", "role_acls"]
