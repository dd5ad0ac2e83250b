"""A refusal becomes one line naming the ACL to grant, whatever form kafka-python gives it.

The error objects here are the ones kafka-python 3.0.12 raised on the authorizing broker
(tests/integration/test_acl_errors.py runs the real thing): the error class itself, a plain
KafkaError whose text names it, and a per-partition error wrapped in a response's message.
"""

from __future__ import annotations

import pytest
from kafka import errors as kerrors

from spark_lag_assign.errors import CommitNotAuthorizedError, KafkaCommitError, NotAuthorizedError
from spark_lag_assign.extract.acls import Acl, cluster, not_authorized, refusal, refused_resource

TXN = Acl("WRITE", "TransactionalId", "spark-lag-assign.orders.commit.A")
GROUP = Acl("READ", "Group", "orders")
TOPIC = Acl("READ", "Topic", "payments")
OTHER_TOPIC = Acl("READ", "Topic", "orders")


@pytest.mark.parametrize(
    ("exc", "resource"),
    [
        (kerrors.TopicAuthorizationFailedError({"payments"}), "Topic"),
        (kerrors.GroupAuthorizationFailedError("FindCoordinatorResponse error for GROUP/orders:"), "Group"),
        (kerrors.ClusterAuthorizationFailedError(), "Cluster"),
        (kerrors.TransactionalIdAuthorizationFailedError(), "TransactionalId"),
        # a transactional producer in an error state raises a plain KafkaError naming the cause
        (kerrors.KafkaError("Cannot execute transactional method: TransactionalIdAuthorizationFailedError"), "TransactionalId"),
        (kerrors.KafkaError("Unexpected error in TxnOffsetCommitResponse: [Error 29] TopicAuthorizationFailedError"), "Topic"),
        # Spark's Kafka source fails a query with the Java client's error in its text
        (
            Exception("org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: [orders]"),
            "Topic",
        ),
        (kerrors.ProducerFencedError(), None),
        (kerrors.KafkaTimeoutError("commit_transaction did not complete within 5000 ms"), None),
        (kerrors.SaslAuthenticationFailedError(), None),  # a refused login is authentication, not an ACL
        (OSError(29, "Illegal seek"), None),  # errno 29 is Kafka's code for a topic refusal, but not here
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_the_refused_resource_type_is_read_from_class_or_text(exc: BaseException, resource: str | None) -> None:
    assert refused_resource(exc) == resource


def test_the_line_names_the_one_needed_acl_of_the_refused_resource_type() -> None:
    acls, line = refusal(kerrors.GroupAuthorizationFailedError("orders"), [TXN, GROUP, TOPIC]) or ((), "")
    assert acls == (GROUP,)
    assert line == "not authorized: grant READ on Group:orders (literal) to this principal"


def test_of_several_topics_the_one_the_error_names_is_picked_else_all() -> None:
    named = refusal(kerrors.TopicAuthorizationFailedError({"payments"}), [OTHER_TOPIC, TOPIC, GROUP])
    assert named is not None and named[0] == (TOPIC,)
    short = Acl("READ", "Topic", "t")  # a name inside another word of the text is not named by it
    found = refusal(kerrors.TopicAuthorizationFailedError("OffsetFetchResponse failed for partition 0"), [short, TOPIC])
    assert found is not None and found[0] == (TOPIC, short)
    unnamed = refusal(kerrors.KafkaError("[Error 29] TopicAuthorizationFailedError"), [TOPIC, OTHER_TOPIC])
    assert unnamed is not None and unnamed[0] == (OTHER_TOPIC, TOPIC)
    assert unnamed[1] == (
        "not authorized: grant READ on Topic:orders (literal) and READ on Topic:payments (literal) to this principal"
    )


def test_the_java_clients_refusal_names_its_topics_in_brackets() -> None:
    text = "StreamingQueryException: org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: [payments]"
    found = refusal(Exception(text), [OTHER_TOPIC, TOPIC])
    assert found is not None and found[0] == (TOPIC,)


def test_prefixed_and_cluster_acls_read_as_kafka_acls_takes_them() -> None:
    assert str(Acl("WRITE", "TransactionalId", "spark-lag-assign.orders.", "prefixed")) == (
        "WRITE on TransactionalId:spark-lag-assign.orders. (prefixed)"
    )
    assert str(cluster("CREATE")) == "CREATE on Cluster:kafka-cluster (literal)"


def test_a_refusal_the_call_site_did_not_expect_is_still_a_refusal() -> None:
    found = refusal(kerrors.ClusterAuthorizationFailedError(), [TOPIC])
    assert found is not None
    acls, line = found
    assert acls == () and line.startswith("not authorized: this principal lacks an ACL on a Cluster resource")


def test_anything_else_is_no_refusal() -> None:
    assert refusal(kerrors.ProducerFencedError(), [TXN]) is None
    assert not_authorized(kerrors.RequestTimedOutError(), [TXN], CommitNotAuthorizedError, "committing") is None


def test_the_error_is_of_the_callers_family_and_never_a_fencing() -> None:
    error = not_authorized(kerrors.TransactionalIdAuthorizationFailedError(), [TXN], CommitNotAuthorizedError, "fencing X")
    assert isinstance(error, CommitNotAuthorizedError)
    assert isinstance(error, KafkaCommitError) and isinstance(error, NotAuthorizedError)
    assert error.acls == (TXN,)
    assert str(error) == (
        "fencing X: not authorized: grant WRITE on TransactionalId:spark-lag-assign.orders.commit.A (literal) to this principal"
    )


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (("WRITES", "Topic", "t"), "unknown ACL operation 'WRITES'"),
        (("WRITE", "topic", "t"), "unknown ACL resource type 'topic'"),
        (("WRITE", "Topic", "t", "prefix"), "unknown ACL pattern type 'prefix'"),
        (("WRITE", "Topic", ""), "an ACL needs a resource name"),
    ],
)
def test_a_malformed_acl_is_refused_in_one_line(args: tuple[str, ...], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        Acl(*args)


def test_an_acl_becomes_kafka_pythons_acl_for_create_acls() -> None:
    from kafka.admin import ACLOperation, ACLPermissionType, ACLResourcePatternType, ResourceType

    made = Acl("WRITE", "TransactionalId", "spark-lag-assign.orders.", "prefixed").to_kafka("User:planner")
    assert (made.principal, made.host, made.operation, made.permission_type) == (
        "User:planner", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
    )  # fmt: skip
    pattern = made.resource_pattern
    assert (pattern.resource_type, pattern.resource_name, pattern.pattern_type) == (
        ResourceType.TRANSACTIONAL_ID, "spark-lag-assign.orders.", ACLResourcePatternType.PREFIXED,
    )  # fmt: skip


def test_each_role_lists_only_its_own_resources() -> None:
    from spark_lag_assign.roles import role_acls

    pipe_a = role_acls("pipeline", "orders", consumer="a", group="g", topics=["orders"], fencing="service")
    names = {(x.operation, x.resource, x.name, x.pattern) for x in pipe_a}
    assert ("WRITE", "Topic", "orders.claims.a", "literal") in names
    assert ("WRITE", "TransactionalId", "spark-lag-assign.orders.commit.a", "literal") in names
    assert not [x for x in pipe_a if x.operation == "WRITE" and x.pattern == "prefixed"]  # no one else's claims or commits
    assert not [x for x in pipe_a if x.name in ("orders.plans",) and x.operation == "WRITE"]  # publishes nothing
    self_fencing = role_acls("pipeline", "orders", consumer="a", group="g", fencing="self")
    assert ("WRITE", "TransactionalId", "spark-lag-assign.orders.commit.", "prefixed") in {
        (x.operation, x.resource, x.name, x.pattern) for x in self_fencing
    }
    planner = role_acls("planner", "orders", group="g", topics=["orders"])
    assert not [x for x in planner if x.resource == "TransactionalId" and ("commit" in x.name or ".claim." in x.name)]
    fencer = role_acls("fencer", "orders")
    assert ("WRITE", "TransactionalId", "spark-lag-assign.orders.commit.", "prefixed") in {
        (x.operation, x.resource, x.name, x.pattern) for x in fencer
    }
    with pytest.raises(ValueError, match="consumer id and group"):
        role_acls("pipeline", "orders")


def test_kafka_acls_lines_group_operations_per_resource() -> None:
    from spark_lag_assign.roles import kafka_acls_lines

    lines = kafka_acls_lines(
        [Acl("READ", "Topic", "o.plans"), Acl("DESCRIBE_CONFIGS", "Topic", "o.plans"), Acl("WRITE", "TransactionalId", "p.", "prefixed")],
        "User:x", "b:9092",
    )  # fmt: skip
    assert lines == [
        "kafka-acls.sh --bootstrap-server b:9092 --command-config admin.properties --add --allow-principal User:x "
        "--operation Read --operation DescribeConfigs --topic o.plans --resource-pattern-type literal",
        "kafka-acls.sh --bootstrap-server b:9092 --command-config admin.properties --add --allow-principal User:x "
        "--operation Write --transactional-id p. --resource-pattern-type prefixed",
    ]
