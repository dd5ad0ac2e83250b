"""Refusals on a broker that enforces ACLs: one line naming exactly the missing ACL, at once.

Each operation below runs through the project's own API (the store, the committer, the
offset readers) under a fresh SCRAM user of the authorizing broker (``kafka_acl``) that
holds exactly the operation's ACLs. With all of them the operation succeeds; without any
one of them it fails with a ``NotAuthorizedError`` of the operation's own error family, in
one line, naming that ACL and no other, and never as a fencing or a topic-layout problem.

The ACL lists are what the broker was seen to need (Kafka 4.x, StandardAuthorizer): READ and
WRITE imply DESCRIBE, so a topic that is read or written needs no DESCRIBE of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from spark_lag_assign.consume.kafka_commit import FencedGroupCommit, commit_id, fence
from spark_lag_assign.consume.options import read_group_starting_offsets
from spark_lag_assign.errors import (
    CommitFencedError,
    KafkaCommitError,
    KafkaReadError,
    NotAuthorizedError,
)
from spark_lag_assign.extract.acls import Acl
from spark_lag_assign.extract.offsets import read_offsets
from spark_lag_assign.store import FencedError, StoreError, open_store
from spark_lag_assign.store.kafka import TopicLayoutError, claim_transactional_id, planner_transactional_id
from spark_lag_assign.testing.localkafka import LocalKafka, commit, create_topic, produce
from tests.contract.test_store_contract import make_plan

CONSUMER = "A"


@dataclass(frozen=True)
class Case:
    """One principal's view of the cluster: a fresh store name, group and data topic."""

    kafka: LocalKafka
    name: str
    group: str  # has committed offsets of ``topic`` (read here, never written)
    topic: str
    options: dict[str, Any]

    @property
    def commit_group(self) -> str:
        """The group this case commits to: its own, so that no case moves another's offsets."""
        return f"{self.name}-group"

    @property
    def uri(self) -> str:
        return f"kafka://{self.kafka.bootstrap_servers}/{self.name}"

    @property
    def plans(self) -> str:
        return f"{self.name}.plans"

    @property
    def claims(self) -> str:
        """The claims topic of ``CONSUMER``."""
        return f"{self.name}.claims.{CONSUMER}"

    @property
    def claims_prefix(self) -> str:
        return f"{self.name}.claims."


def topic(operation: str, name: str, pattern: str = "literal") -> Acl:
    return Acl(operation, "Topic", name, pattern)


def opening(c: Case) -> list[Acl]:
    """Opening a store whose plans topic exists: it describes it and checks its configuration."""
    return [topic(op, c.plans) for op in ("DESCRIBE", "DESCRIBE_CONFIGS")]


def without_describe(acls: list[Acl], *implied: str) -> list[Acl]:
    """``acls`` less DESCRIBE on the topics that another ACL (READ, WRITE) already implies."""
    return [a for a in acls if not (a.operation == "DESCRIBE" and a.name in implied)]


def open_store_op(c: Case) -> None:
    open_store(c.uri, client_options=c.options, timeout=5).close()


def publish_op(c: Case) -> None:
    with open_store(c.uri, client_options=c.options, timeout=5) as store, store.publisher() as publisher:
        publisher.publish(make_plan(publisher.next_generation()))


def claim_op(c: Case) -> None:
    with open_store(c.uri, client_options=c.options, timeout=5) as store, store.claim_writer(CONSUMER) as writer:
        writer.write(1, [(c.topic, 0)], lease=10.0)


def publish_as_admin(c: Case) -> None:
    """A plan to read: a reader of an empty topic fetches nothing, so READ is never checked."""
    with open_store(c.uri, client_options=c.kafka.client_options(), timeout=5) as store, store.publisher() as publisher:
        publisher.publish(make_plan(1))


def publish_and_claim_as_admin(c: Case) -> None:
    """Records to read: a reader of an empty topic fetches nothing, so READ is never checked."""
    with open_store(c.uri, client_options=c.kafka.client_options(), timeout=5) as store:
        with store.publisher() as publisher:
            publisher.publish(make_plan(1))
        with store.claim_writer(CONSUMER) as writer:
            writer.write(1, [(c.topic, 0)], lease=10.0)


def read_store_op(c: Case) -> None:
    with open_store(c.uri, client_options=c.options, timeout=5) as store:
        assert store.generations() == [1]
        assert set(store.claims()) == {CONSUMER}


def fence_op(c: Case) -> None:
    fence(c.kafka.bootstrap_servers, commit_id(c.name, CONSUMER), c.options, 5000)


def commit_op(c: Case) -> None:
    committer = FencedGroupCommit(
        c.kafka.bootstrap_servers,
        c.commit_group,
        commit_id(c.name, CONSUMER),
        CONSUMER,
        client_options=c.options,
        timeout_ms=5000,
    )
    try:
        committer.open()  # as the handover does before a query's first commit
        committer.allow(new_query=True)
        committer({(c.topic, 0): 1}, 1)
    finally:
        committer.close()


def start_offsets_op(c: Case) -> None:
    got = read_group_starting_offsets(
        c.kafka.bootstrap_servers, c.group, {c.topic: [0, 1]}, "earliest", client_options=c.options, timeout_ms=5000
    )
    assert got == {c.topic: {"0": 2, "1": -2}}  # partition 0 from the group's commit, 1 by the reset rule


def planner_offsets_op(c: Case) -> None:
    got = read_offsets(c.kafka.bootstrap_servers, c.group, topics=[c.topic], client_options=c.options, timeout_ms=5000)
    assert list(got["committed_offset"].astype(object)) == [2, pd.NA] and list(got["end_offset"]) == [5, 3]


@dataclass(frozen=True)
class Operation:
    name: str
    needs: Callable[[Case], list[Acl]]
    run: Callable[[Case], None]
    family: type[Exception]  # the error family its callers catch
    store_topics: bool = True  # the store's topics exist (made by the super user) before it runs
    prepare: Callable[[Case], None] | None = None  # run by the super user before the operation


OPERATIONS = [
    Operation("open a store", opening, open_store_op, StoreError),
    Operation(
        "open a store, creating its topics",
        lambda c: [*opening(c), topic("CREATE", c.plans)],
        open_store_op,
        StoreError,
        store_topics=False,
    ),
    Operation(
        "publish a plan",  # it creates the claims topics of the consumers it names
        lambda c: [
            *without_describe(opening(c), c.plans),
            topic("READ", c.plans),
            topic("WRITE", c.plans),
            Acl("WRITE", "TransactionalId", planner_transactional_id(c.name)),
            *(topic(op, c.claims_prefix, "prefixed") for op in ("DESCRIBE", "CREATE", "DESCRIBE_CONFIGS")),
        ],
        publish_op,
        StoreError,
    ),
    Operation(
        "write a claim",  # into its own claims topic, reading everyone's
        lambda c: [
            *without_describe(opening(c), c.plans),
            topic("READ", c.plans),
            topic("READ", c.claims_prefix, "prefixed"),
            topic("WRITE", c.claims),
            topic("DESCRIBE_CONFIGS", c.claims),
            Acl("WRITE", "TransactionalId", claim_transactional_id(c.name, CONSUMER)),
        ],
        claim_op,
        StoreError,
        prepare=publish_as_admin,
    ),
    Operation(
        "read plans and claims",
        lambda c: [*without_describe(opening(c), c.plans), topic("READ", c.plans), topic("READ", c.claims_prefix, "prefixed")],
        read_store_op,
        StoreError,
        prepare=publish_and_claim_as_admin,
    ),
    Operation(
        "fence a commit id", lambda c: [Acl("WRITE", "TransactionalId", commit_id(c.name, CONSUMER))], fence_op, KafkaCommitError
    ),
    Operation(
        "commit offsets",
        lambda c: [
            Acl("WRITE", "TransactionalId", commit_id(c.name, CONSUMER)),
            Acl("READ", "Group", c.commit_group),
            topic("READ", c.topic),
        ],
        commit_op,
        KafkaCommitError,
    ),
    Operation(
        "read a pipeline's start offsets",
        lambda c: [Acl("DESCRIBE", "Group", c.group), topic("DESCRIBE", c.topic)],
        start_offsets_op,
        KafkaReadError,
    ),
    Operation(
        "read the group's offsets for a plan",
        lambda c: [Acl("DESCRIBE", "Group", c.group), topic("DESCRIBE", c.topic)],
        planner_offsets_op,
        KafkaReadError,
    ),
]

#: the names of a case before it has any: the cases are named (and counted) with these
TEMPLATE = Case(None, "NAME", "GROUP", "DATA", {})  # type: ignore[arg-type]
#: every operation with all its ACLs (None), then with each one left out (its index)
CASES = [(op, None) for op in OPERATIONS] + [(op, i) for op in OPERATIONS for i in range(len(op.needs(TEMPLATE)))]


@pytest.fixture(scope="module")
def data(kafka_acl: LocalKafka) -> tuple[str, str]:
    """A data topic of two partitions (5 and 3 records) and a group that committed offset 2 of partition 0."""
    admin = kafka_acl.client_options()
    name = f"acl-data-{uuid.uuid4().hex[:8]}"
    group = f"acl-group-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_acl.bootstrap_servers, name, 2, client_options=admin)
    produce(kafka_acl.bootstrap_servers, name, {0: 5, 1: 3}, client_options=admin)
    commit(kafka_acl.bootstrap_servers, group, {(name, 0): 2}, client_options=admin)
    return name, group


def lacking_only(needed: list[Acl], missing: Acl | None) -> list[Acl]:
    """``needed`` less exactly the permission ``missing`` grants: READ or WRITE also grant
    DESCRIBE, which a principal lacking only READ or WRITE still has."""
    kept = [a for a in needed if a != missing]
    if missing is not None and missing.operation in ("READ", "WRITE"):
        implied = Acl("DESCRIBE", missing.resource, missing.name, missing.pattern)
        if implied not in kept and not any(a.name == missing.name and a.operation in ("READ", "WRITE") for a in kept):
            kept.append(implied)
    return kept


def fresh_case(kafka: LocalKafka, data: tuple[str, str], with_store_topics: bool) -> tuple[Case, str]:
    user = f"u-{uuid.uuid4().hex[:10]}"
    kafka.add_user(user)
    case = Case(kafka, f"acl-{uuid.uuid4().hex[:10]}", data[1], data[0], kafka.client_options(user))
    if with_store_topics:  # as an operator would: compacted, one partition
        for name in (case.plans, case.claims):
            create_topic_compacted(kafka, name)
    return case, user


def create_topic_compacted(kafka: LocalKafka, name: str) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers, **kafka.client_options())
    try:
        admin.create_topics(
            {name: {"num_partitions": 1, "replication_factor": 1, "configs": {"cleanup.policy": "compact"}}},
            wait_for_metadata=True,
        )
    finally:
        admin.close()


@pytest.mark.parametrize(
    ("operation", "left_out"),
    CASES,
    ids=[f"{op.name} | {'all ACLs' if i is None else f'without {op.needs(TEMPLATE)[i]}'}" for op, i in CASES],
)
def test_a_missing_acl_is_named_in_one_line_and_the_full_list_suffices(
    kafka_acl: LocalKafka, data: tuple[str, str], operation: Operation, left_out: int | None
) -> None:
    case, user = fresh_case(kafka_acl, data, operation.store_topics)
    if operation.prepare is not None:
        operation.prepare(case)
    needed = operation.needs(case)
    missing = needed[left_out] if left_out is not None else None
    kafka_acl.grant(user, lacking_only(needed, missing))
    if missing is None:
        operation.run(case)
        return
    with pytest.raises(NotAuthorizedError) as caught:
        operation.run(case)
    error = caught.value
    message = str(error)
    assert error.acls == (missing,), message
    assert f"not authorized: grant {missing} to this principal" in message
    assert message.count("grant") == 1 and "\n" not in message
    assert isinstance(error, operation.family)
    assert not isinstance(error, (FencedError, CommitFencedError, TopicLayoutError))


def test_prefixed_acls_cover_a_store_name_and_its_transactional_ids(kafka_acl: LocalKafka, data: tuple[str, str]) -> None:
    """One principal with every right on the store (a trusted single-team setup) under prefixed ACLs."""
    case, user = fresh_case(kafka_acl, data, with_store_topics=False)
    kafka_acl.grant(user, [
        Acl(op, "Topic", f"{case.name}.", "prefixed") for op in ("CREATE", "DESCRIBE_CONFIGS", "READ", "WRITE")
    ] + [Acl("WRITE", "TransactionalId", f"spark-lag-assign.{case.name}.", "prefixed")])  # fmt: skip
    publish_op(case)
    claim_op(case)
    with open_store(case.uri, client_options=kafka_acl.client_options(), timeout=5) as store:
        assert store.generations() == [1] and set(store.claims()) == {CONSUMER}


def test_a_commit_id_whose_acl_is_revoked_is_refused_and_not_taken_for_fenced(
    kafka_acl: LocalKafka, data: tuple[str, str]
) -> None:
    """Kafka answers a commit under an id one may no longer write with the same error as a
    first refusal; nobody newer holds the id, so it is no fencing: the committer stays usable."""
    case, user = fresh_case(kafka_acl, data, with_store_topics=False)
    txn = Acl("WRITE", "TransactionalId", commit_id(case.name, CONSUMER))
    kafka_acl.grant(user, [txn, Acl("READ", "Group", case.commit_group), topic("READ", case.topic)])
    committer = FencedGroupCommit(
        kafka_acl.bootstrap_servers, case.commit_group, txn.name, CONSUMER, client_options=case.options, timeout_ms=5000
    )
    try:
        committer.open()
        committer.allow(new_query=True)
        committer({(case.topic, 0): 1}, 1)
        kafka_acl.revoke(user, [txn])
        with pytest.raises(NotAuthorizedError) as caught:
            committer({(case.topic, 0): 2}, 1)
        assert isinstance(caught.value, KafkaCommitError) and not isinstance(caught.value, CommitFencedError)
        assert caught.value.acls == (txn,) and "\n" not in str(caught.value)
        assert not committer.fenced
        kafka_acl.grant(user, [txn])  # granted again: the handover's reopening is enough, no new incarnation
        committer.open()
        committer.allow(new_query=False)
        committer({(case.topic, 0): 3}, 1)
    finally:
        committer.close()


def test_a_pipeline_that_may_not_fence_its_predecessor_ends_at_once_naming_the_acl(
    kafka_acl: LocalKafka, data: tuple[str, str], spark: Any, tmp_path: Path
) -> None:
    """B takes partition 0 over from A, whose lease ran out, and must fence A's commits first.
    Without WRITE on A's commit id B used to retry until its handover timeout."""
    from tests.integration.test_follower import follower, hand_plan

    data_topic, _ = data
    plan_dir = tmp_path / "plan"
    hand_plan(plan_dir, 1, {"A": {data_topic: [0]}, "B": {}}, {})
    hand_plan(plan_dir, 2, {"A": {}, "B": {data_topic: [0]}}, {})
    with open_store(str(plan_dir)) as store, store.claim_writer("A") as writer:  # A read under 1, then went silent
        writer.write(1, [(data_topic, 0)], lease=1.0, state="reading")
        name = store.name
    user = f"u-{uuid.uuid4().hex[:10]}"
    kafka_acl.add_user(user)
    kafka_acl.grant(user, [Acl("WRITE", "TransactionalId", commit_id(name, "B"))])  # its own id only
    pipeline = follower(
        spark, plan_dir, "B", tmp_path, kafka_acl.bootstrap_servers,
        client_options=kafka_acl.client_options(user), handover_timeout=120.0, lease=3.0,
    )  # fmt: skip
    with pytest.raises(NotAuthorizedError) as caught:
        pipeline.run()
    expected = Acl("WRITE", "TransactionalId", commit_id(name, "A"))
    assert caught.value.acls == (expected,)
    assert str(caught.value) == f"fencing {expected.name} failed: not authorized: grant {expected} to this principal"
    assert [e.kind for e in pipeline.events if e.kind in ("fence", "start")] == []  # it never read A's partition
    assert pipeline.query is None


@pytest.mark.kafka_source  # its query reads with Spark's Kafka source, also when this file runs alone
def test_a_pipeline_whose_query_may_not_read_its_topic_ends_naming_the_acl(
    kafka_acl: LocalKafka, data: tuple[str, str], spark: Any, tmp_path: Path
) -> None:
    """Spark's Kafka source fails the query with the Java client's refusal, which names the
    topic but not the ACL; the pipeline ends with the line that does."""
    from tests.integration.test_follower import follower, hand_plan

    data_topic, _ = data
    plan_dir = tmp_path / "plan"
    group = f"acl-read-{uuid.uuid4().hex[:8]}"
    hand_plan(plan_dir, 1, {"B": {data_topic: [0, 1]}}, {}, group=group)
    with open_store(str(plan_dir)) as store:
        name = store.name
    user = f"u-{uuid.uuid4().hex[:10]}"
    kafka_acl.add_user(user)
    # all it needs to start (its committer, its start offsets) but READ on the topic
    kafka_acl.grant(user, [
        Acl("WRITE", "TransactionalId", commit_id(name, "B")), Acl("READ", "Group", group), topic("DESCRIBE", data_topic),
    ])  # fmt: skip
    spark_login = {f"kafka.{k}": v for k, v in kafka_acl.java_options(user).items()}
    pipeline = follower(
        spark, plan_dir, "B", tmp_path, kafka_acl.bootstrap_servers, client_options=kafka_acl.client_options(user),
        kafka_options={"kafka.bootstrap.servers": kafka_acl.bootstrap_servers, **spark_login},
    )  # fmt: skip
    with pytest.raises(NotAuthorizedError) as caught:
        pipeline.run()
    assert isinstance(caught.value, KafkaReadError)
    assert caught.value.acls == (topic("READ", data_topic),)
    assert (
        str(caught.value)
        == f"B reading under generation 1: not authorized: grant READ on Topic:{data_topic} (literal) to this principal"
    )
    assert "start" in [e.kind for e in pipeline.events]  # it got as far as starting the query
