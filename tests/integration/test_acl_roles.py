"""Least privilege on a broker that enforces ACLs: each role holds exactly the ACLs README
lists for it (``acls.role_acls``, the same lists), does its own work, and cannot do another
role's or another consumer's: publish a plan, write another consumer's claim (through the
store, through a transaction of its own, with a plain producer), fence another consumer's
commit id, stall another consumer's claims with a transaction it leaves open. What Kafka
cannot refuse (any member with READ on the group may commit any of its partitions) is found
when the partition's next owner starts, reported, and never where it starts.

The fencing is "service": a fencer fences on the pipelines' behalf, so pipelines hold WRITE on
their own commit ids only.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from spark_lag_assign.consume.kafka_commit import FencedGroupCommit, commit_id, fence, metadata
from spark_lag_assign.consume.options import foreign_commits, read_group_starting_offsets
from spark_lag_assign.errors import NotAuthorizedError
from spark_lag_assign.extract.acls import Acl
from spark_lag_assign.roles import role_acls
from spark_lag_assign.store import ClaimRecord, open_store
from spark_lag_assign.store.kafka import claim_transactional_id, claims_topic, plans_topic
from spark_lag_assign.testing.localkafka import LocalKafka, commit, create_topic, produce
from tests.contract.test_store_contract import make_plan

pytestmark = pytest.mark.broker


class Cluster:
    """One store on the authorizing broker, and a principal per role holding its README list."""

    def __init__(self, kafka: LocalKafka) -> None:
        self.kafka = kafka
        tag = uuid.uuid4().hex[:8]
        self.name = f"roles-{tag}"
        self.group = f"roles-group-{tag}"
        self.topic = f"roles-data-{tag}"
        self.uri = f"kafka://{kafka.bootstrap_servers}/{self.name}"
        admin = kafka.client_options()
        create_topic(kafka.bootstrap_servers, self.topic, 2, client_options=admin)
        produce(kafka.bootstrap_servers, self.topic, {0: 10, 1: 10}, client_options=admin)
        commit(kafka.bootstrap_servers, self.group, {(self.topic, 0): 0, (self.topic, 1): 0}, client_options=admin)
        self.users: dict[str, str] = {}
        self._grant("planner", role_acls("planner", self.name, group=self.group, topics=[self.topic]))
        for consumer in ("a", "b"):
            self._grant(
                f"pipe-{consumer}",
                role_acls("pipeline", self.name, consumer=consumer, group=self.group, topics=[self.topic], fencing="service"),
            )
        self._grant("fencer", role_acls("fencer", self.name))
        self._grant("operator", role_acls("operator", self.name))

    def _grant(self, role: str, acls: list[Acl]) -> None:
        user = f"{role}-{uuid.uuid4().hex[:6]}"
        self.kafka.add_user(user)
        self.kafka.grant(user, acls)
        self.users[role] = user

    def options(self, role: str) -> dict[str, Any]:
        return self.kafka.client_options(self.users[role])

    def store(self, role: str) -> Any:
        return open_store(self.uri, client_options=self.options(role), timeout=5)


@pytest.fixture(scope="module")
def cluster(kafka_acl: LocalKafka) -> Cluster:
    c = Cluster(kafka_acl)
    with open_store(c.uri, client_options=c.options("operator"), timeout=5):
        pass  # the operator creates the plans topic
    with c.store("planner") as store, store.publisher() as publisher:  # the planner: a plan naming a and b
        plan = make_plan(publisher.next_generation(), consumers=2, partitions=2, topic=c.topic)
        plan["consumers"] = {"a": plan["consumers"]["c0"], "b": plan["consumers"]["c1"]}
        plan["group"] = c.group
        publisher.publish(plan)
    return c


def refused(call: Callable[[], Any]) -> str:
    """The one line a refusal gives."""
    with pytest.raises(NotAuthorizedError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and "not authorized: grant" in message, message
    return message


def test_each_role_does_its_own_work(cluster: Cluster) -> None:
    with cluster.store("pipe-a") as store, store.claim_writer("a") as writer:
        assert store.latest() is not None
        mine = writer.write(1, [(cluster.topic, 0)], lease=10.0, state="reading")
        assert store.claims()["a"] == mine
    committer = FencedGroupCommit(
        cluster.kafka.bootstrap_servers, cluster.group, commit_id(cluster.name, "a"), "a",
        client_options=cluster.options("pipe-a"), timeout_ms=5000,
    )  # fmt: skip
    try:
        committer.open()
        committer.allow(new_query=True)
        committer({(cluster.topic, 0): 3}, 1)
    finally:
        committer.close()
    starting = read_group_starting_offsets(
        cluster.kafka.bootstrap_servers, cluster.group, {cluster.topic: [0]}, "earliest",
        client_options=cluster.options("pipe-a"), timeout_ms=5000,
    )  # fmt: skip
    assert starting == {cluster.topic: {"0": 3}}
    fence(cluster.kafka.bootstrap_servers, commit_id(cluster.name, "b"), cluster.options("fencer"), 5000)  # the fencer may


def test_the_planner_alone_sets_a_new_store_up_with_its_list(cluster: Cluster) -> None:
    """The operator is optional: with no topic made beforehand, the planner's own list creates
    the plans topic and the claims topics of the consumers it plans, and publishes."""
    name = f"fresh-{uuid.uuid4().hex[:8]}"
    user = f"planner-{uuid.uuid4().hex[:6]}"
    cluster.kafka.add_user(user)
    cluster.kafka.grant(user, role_acls("planner", name, group=cluster.group, topics=[cluster.topic]))
    uri = f"kafka://{cluster.kafka.bootstrap_servers}/{name}"
    with open_store(uri, client_options=cluster.kafka.client_options(user), timeout=5) as store, store.publisher() as publisher:
        plan = make_plan(publisher.next_generation(), consumers=1, partitions=2, topic=cluster.topic)
        publisher.publish(plan)
        assert store.latest() == plan


def test_a_pipeline_cannot_publish_a_plan(cluster: Cluster) -> None:
    def publish() -> None:
        with cluster.store("pipe-a") as store, store.publisher() as publisher:
            publisher.publish(make_plan(publisher.next_generation()))

    line = refused(publish)
    assert f"TransactionalId:spark-lag-assign.{cluster.name}.planner" in line


def test_a_pipeline_cannot_write_another_consumers_claim_in_any_way(cluster: Cluster) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    def through_the_store() -> None:
        with cluster.store("pipe-a") as store, store.claim_writer("b") as writer:
            writer.write(1, [(cluster.topic, 0), (cluster.topic, 1)], lease=10.0)

    line = refused(through_the_store)
    assert f"{cluster.name}.claims.b" in line or f"{cluster.name}.claim.b" in line
    forged = ClaimRecord("b", "forged", 99, 1, frozenset({(cluster.topic, 0)}), 10.0, "released").to_json().encode()
    plain = KafkaProducer(bootstrap_servers=cluster.kafka.bootstrap_servers, **cluster.options("pipe-a"), max_block_ms=5000)
    try:
        with pytest.raises(KafkaError, match="TopicAuthorizationFailed"):
            plain.send(claims_topic(cluster.name, "b"), key=b"b", value=forged, partition=0).get(timeout=10)
    finally:
        plain.close()
    # a's own claim id in a transaction of its own: still not into b's topic
    own = KafkaProducer(
        bootstrap_servers=cluster.kafka.bootstrap_servers, transactional_id=claim_transactional_id(cluster.name, "a"),
        max_block_ms=5000, **cluster.options("pipe-a"),
    )  # fmt: skip
    try:
        own.init_transactions()
        own.begin_transaction()
        with pytest.raises(KafkaError, match="TopicAuthorizationFailed"):
            own.send(claims_topic(cluster.name, "b"), key=b"b", value=forged, partition=0).get(timeout=10)
    finally:
        own.close(timeout=2)
    with cluster.store("fencer") as store:  # and nobody sees a forged claim of b
        assert not isinstance(store.claims().get("b"), ClaimRecord) or store.claims()["b"].incarnation != "forged"  # type: ignore[union-attr]


def test_a_pipeline_cannot_fence_another_and_the_planner_cannot_claim(cluster: Cluster) -> None:
    line = refused(lambda: fence(cluster.kafka.bootstrap_servers, commit_id(cluster.name, "b"), cluster.options("pipe-a"), 5000))
    assert f"TransactionalId:{commit_id(cluster.name, 'b')}" in line

    def planner_claims() -> None:
        with cluster.store("planner") as store, store.claim_writer("a") as writer:
            writer.write(1, [], lease=10.0)

    refused(planner_claims)
    refused(lambda: fence(cluster.kafka.bootstrap_servers, commit_id(cluster.name, "a"), cluster.options("planner"), 5000))

    def fencer_publishes() -> None:
        with cluster.store("fencer") as store, store.publisher() as publisher:
            publisher.publish(make_plan(publisher.next_generation()))

    refused(fencer_publishes)


def test_a_transaction_a_pipeline_leaves_open_stalls_only_its_own_claims(cluster: Cluster) -> None:
    from kafka import KafkaProducer

    with cluster.store("pipe-a") as store, store.claim_writer("a") as writer:
        writer.write(1, [(cluster.topic, 0)], lease=10.0)
    stuck = KafkaProducer(
        bootstrap_servers=cluster.kafka.bootstrap_servers, transactional_id=claim_transactional_id(cluster.name, "a"),
        transaction_timeout_ms=120_000, max_block_ms=5000, **cluster.options("pipe-a"),
    )  # fmt: skip
    try:
        stuck.init_transactions()
        stuck.begin_transaction()
        pending = ClaimRecord("a", "stuck", 1, 1, frozenset(), 10.0, "released").to_json().encode()
        stuck.send(claims_topic(cluster.name, "a"), key=b"a", value=pending, partition=0).get(timeout=10)
        began = time.monotonic()
        with cluster.store("pipe-b") as store, store.claim_writer("b") as writer:
            written = writer.write(1, [(cluster.topic, 1)], lease=10.0)  # b's claim is not held back by a's open transaction
            claims = store.claims()
        assert claims["b"] == written
        assert isinstance(claims["a"], ClaimRecord) and claims["a"].incarnation != "stuck"  # a's pending claim is invisible
        print(f"\nb wrote and read its claim in {time.monotonic() - began:.2f}s beside a's open transaction")
    finally:
        stuck.close(timeout=0)


def test_a_commit_of_another_consumers_partition_is_found_and_never_a_starting_point(cluster: Cluster) -> None:
    """Kafka lets pipe-a commit b's partition (READ on the group covers all of them); a commit
    whose metadata names a, not b's owner, is found at b's next start, reported, and not
    started from. (A forged note naming b itself cannot be told apart: README says so.)"""
    from kafka import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka.bootstrap_servers, **cluster.options("pipe-a"))
    try:  # a plain offset commit as pipe-a, moving b's partition back to 0 under "a, generation 1"
        admin.alter_group_offsets(cluster.group, {TopicPartition(cluster.topic, 1): OffsetAndMetadata(0, metadata("a", 1), -1)})
    finally:
        admin.close()
    with cluster.store("pipe-b") as store:
        plan = store.get(1)
    assert plan is not None
    owners = {(t, p): c for c, e in plan["consumers"].items() for t, ps in e["assign"].items() for p in ps}
    found: dict[tuple[str, int], str] = {}

    def distrust(meta: dict[tuple[str, int], str]) -> dict[tuple[str, int], str]:
        found.update(foreign_commits(meta, lambda g: owners if g == 1 else None, newest=1))
        return found

    starting = read_group_starting_offsets(
        cluster.kafka.bootstrap_servers, cluster.group, {cluster.topic: [1]}, "earliest",
        client_options=cluster.options("pipe-b"), timeout_ms=5000, distrust=distrust,
    )  # fmt: skip
    assert found == {(cluster.topic, 1): "names a under generation 1, where b owned it"}
    assert starting == {cluster.topic: {"1": -2}}  # the reset rule, not the forged offset
    assert plans_topic(cluster.name)  # the store's names stay under its plan name
