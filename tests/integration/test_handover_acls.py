"""The multi-process handover proof on a broker that enforces ACLs: every
process under a principal of its own, holding exactly its role's list (``roles.role_acls``,
the lists README gives), with the plan's ``fencing = "service"``.

The planner runs as ``planner``, the fencer (``spark-lag-assign fencer``) as ``fencer``,
pipeline A as ``pipe-a`` and pipeline B as ``pipe-b``; the super user ``admin`` only sets up
(topics, users, ACLs, the plans topic, the group's first offsets), produces the data and
reads what the proof judges (the sinks, ``__consumer_offsets``). Besides its role's list a
pipeline may write its sink topic and the sink's batch markers: the application's own
output, no part of the store.

Generation 1 gives A and B partitions; both read and commit. A freezes itself (driver and
JVM) just before a commit; generation 2 moves A's partitions to B. B may not fence A itself
(checked: pipe-b's fence of A's commit id is refused): it asks, the fencer sees A's lease run
out and fences A's commit id, and B reads A's partitions. A resumes while B reads them: its
commit is refused and it leaves. Judged as the proof without ACLs judges
(tests/integration/test_handover_processes.py, whose helpers this reuses): nothing lost, no
two readers of a partition at once, no commit going backwards or coming from a replaced
query, duplicates within the protocol's bound; and no process logged an authorization
failure: every operation of every path was allowed by exactly the role lists.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from spark_lag_assign.consume.kafka_commit import commit_id, fence
from spark_lag_assign.errors import NotAuthorizedError
from spark_lag_assign.extract.acls import Acl
from spark_lag_assign.roles import role_acls
from spark_lag_assign.store import ClaimRecord, open_store
from spark_lag_assign.store.kafka import claims_topic
from spark_lag_assign.testing import pipeline_app as app
from spark_lag_assign.testing.localkafka import LocalKafka, create_topic
from spark_lag_assign.testing.namespaces import NamespacedProcess
from tests.integration.test_handover_processes import (
    GROUP,
    LEASE,
    ORDERS,
    PARTITIONS,
    SINK,
    STEP_TIMEOUT,
    STORE_NAME,
    CommitSampler,
    Producers,
    Scenario,
    end_offsets,
    judge,
    namespace_check,
    pause_findings,
    readers,
    seed_group,
)

pytestmark = pytest.mark.broker

#: one topic, of the local proof's (its four partitions: A's two move to B), to keep the run short
TOPICS = {ORDERS: PARTITIONS[ORDERS]}

#: the principal of each process: the planner, the fencer, and pipeline A and B by consumer id
PRINCIPALS = {"planner": "planner", "fencer": "fencer", "A": "pipe-a", "B": "pipe-b"}
#: what a log line of a refused request looks like, from our one line (``NotAuthorizedError``),
#: kafka-python (``TopicAuthorizationFailedError``, ...) or the Java clients (``...AuthorizationException``)
REFUSED = re.compile(r"not authorized|AuthorizationFailed|AuthorizationException|NotAuthorized", re.IGNORECASE)


def role_lists(store: str) -> dict[str, list[Acl]]:
    """Each principal's ACLs: exactly its role's list with service fencing, and a pipeline's sink."""
    topics = sorted(TOPICS)
    sink = [Acl("WRITE", "Topic", SINK), Acl("WRITE", "Topic", app.markers_topic(SINK))]
    pipeline = {c: role_acls("pipeline", store, consumer=c, group=GROUP, topics=topics, fencing="service") for c in "AB"}
    return {
        "planner": role_acls("planner", store, group=GROUP, topics=topics),
        "fencer": role_acls("fencer", store),
        "pipe-a": pipeline["A"] + sink,
        "pipe-b": pipeline["B"] + sink,
    }


class AclScenario(Scenario):
    """The local proof's processes, each logging in as its own principal."""

    def __init__(self, kafka: LocalKafka, logs: Path) -> None:
        super().__init__(kafka, logs)
        self.kafka = kafka
        self.fencer: NamespacedProcess | None = None

    def login(self, who: str) -> list[str]:
        """kafka-python settings of ``who``'s principal, as ``--kafka-option`` flags."""
        return [f for k, v in self.kafka.client_options(PRINCIPALS[who]).items() for f in ("--kafka-option", f"{k}={v}")]

    def plan(self, consumers: str, topics: str = ORDERS, extra: Sequence[str] = ()) -> int:
        return super().plan(consumers, topics, ["--fencing", "service", *self.login("planner"), *extra])

    def pipeline(self, consumer: str, *extra: str, run: int = 1) -> NamespacedProcess:
        source = [f for k, v in self.kafka.java_options(PRINCIPALS[consumer]).items() for f in ("--source-option", f"kafka.{k}={v}")]
        return super().pipeline(consumer, *extra, *self.login(consumer), *source, run=run)

    def start_fencer(self) -> NamespacedProcess:
        argv = [sys.executable, "-m", "spark_lag_assign.cli", "fencer", "--store", self.store, *self.login("fencer")]
        proc = NamespacedProcess("fencer", argv, self.logs / "fencer.log").start()
        self.processes.append(proc)
        self.fencer = proc
        self.wait(lambda: "running" in proc.log_text() or not proc.alive, "the fencer runs")
        assert proc.alive, proc.log_text()
        return proc

    def refusals(self) -> list[str]:
        """Every line of every process's log (planner runs, fencer, pipelines) that tells of a refused request."""
        return [f"{proc.name}: {line.strip()}" for proc in self.processes for line in proc.log_text().splitlines() if REFUSED.search(line)]


def test_two_pipelines_under_their_own_principals_hand_over_through_the_fencer(
    kafka_acl: LocalKafka, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace_check()
    began = time.monotonic()
    kafka, bootstrap = kafka_acl, kafka_acl.bootstrap_servers
    admin = kafka.client_options()
    for topic, n in TOPICS.items():
        create_topic(bootstrap, topic, n, client_options=admin)
    create_topic(bootstrap, SINK, 1, client_options=admin)
    create_topic(bootstrap, app.markers_topic(SINK), 1, client_options=admin)
    seeded = seed_group(bootstrap, GROUP, TOPICS, admin)
    for user, acls in role_lists(STORE_NAME).items():
        kafka.add_user(user, f"pw-{uuid.uuid4().hex}")  # never a number to --kafka-option's JSON
        kafka.grant(user, acls)
    s = AclScenario(kafka, tmp_path / "logs")
    with open_store(s.store, client_options=admin, timeout=5):
        pass  # the plans topic, made by the admin here as an operator would (the planner could: its list has CREATE)

    producers = Producers(bootstrap, TOPICS, client_options=admin)
    sampler = CommitSampler(bootstrap, GROUP, client_options=admin)
    sampler.start()
    try:
        # generation 1: A and B (their Spark starts while the planner runs); the fencer
        # watches the claims from the start
        s.pipeline("A", "--pause-on-usr1", "--wait-for-plan", str(STEP_TIMEOUT))
        s.pipeline("B", "--wait-for-plan", str(STEP_TIMEOUT))
        g1 = s.plan("A,B")
        s.start_fencer()

        # the separation this run relies on: B may not fence A, A may not write B's claims
        with pytest.raises(NotAuthorizedError, match=re.escape(commit_id(STORE_NAME, "A"))):
            fence(bootstrap, commit_id(STORE_NAME, "A"), kafka.client_options("pipe-b"), 5000)
        forged_claim_refused(kafka)

        s.wait(lambda: s.reading("A", g1) and s.reading("B", g1), f"A and B read generation {g1}")
        producers.start()  # from now on: no backlog of the pipelines' start to drain later
        seeds = sampler.after(time.time())  # offset 0 everywhere
        s.wait(lambda: s.committed_beyond(sampler, seeds, [(ORDERS, 0), (ORDERS, 3)]), "A and B committed batches")

        # generation 2: A freezes just before a commit; the plan moves its partitions to B,
        # which asks the fencer to fence A once A's lease ran out, and reads them
        a = s.pipelines["A"]
        baseline = sampler.latest()
        os.kill(a.pid, signal.SIGUSR1)  # the driver only
        a.wait_stopped(STEP_TIMEOUT)
        stopped_line = s.lines(a, "SIGSTOP")[-1]
        s.note(f"A is SIGSTOPped (driver and JVM) {stopped_line['why']}")
        g2 = s.plan("B")
        s.wait(lambda: s.reading("B", g2), f"B reads generation {g2}, A's partitions included")
        s.wait(
            lambda: s.committed_beyond(sampler, baseline, [(ORDERS, 0), (ORDERS, 1)]),
            "B committed batches of A's former partitions",
        )
        # A resumes while B reads what A read
        pause = s.resume_beside("A", "B", stopped_line, LEASE)
        a_summary = s.ended_leaving(a, "A")  # generation 2 does not name A

        # the end: producers stop, B drains, SIGTERM
        time.sleep(2.0)
        sent = producers.stop()
        tps = sorted(sent)
        ends = end_offsets(bootstrap, tps, admin)
        assert ends == sent, "the broker's end offsets differ from what the producers had acknowledged"
        s.wait(lambda: all(sampler.latest().get(tp, -1) >= ends[tp] for tp in tps), "the group's commits reached the end offsets")
        b_status = s.pipelines["B"].terminate(90)
        assert s.fencer is not None
        fencer_status = s.fencer.terminate(30)
        s.note(f"B ended: exit {b_status}; the fencer: exit {fencer_status}")
        sampler.halt.set()
        sampler.join(10)
        assert (b_status, fencer_status) == (0, 0)

        v = judge(s, GROUP, SINK, ends, seeded, LEASE, [g1, g2], sampler, kafka_acl)
        staged, figures = pause_findings(v, s, pause, "B", a_summary)
        v.notes += figures
        fencer_log = s.fencer.log_text()
        with capsys.disabled():
            print(f"\nhandover proof with ACLs: {time.monotonic() - began:.0f}s; planner runs "
                  f"{', '.join(f'{x:.0f}s' for x in s.planner_seconds)}\n" + "\n".join(v.summary()), flush=True)  # fmt: skip

        problems = v.problems(ends)
        assert problems == [], "\n".join(problems[:30])
        assert staged == [], "\n".join(staged)
        assert readers(v.records, (ORDERS, 0)) == ["A", "B"]
        # the fence was the fencer's: B saw it done on its behalf, and the fencer says it fenced
        assert [e["detail"] for e in s.events("B") if e["kind"] == "fence"] == ["A (by the fencer)"]
        assert re.search(r"stopped after [1-9]\d* fence\(s\)", fencer_log), fencer_log
        assert s.refusals() == [], "\n".join(s.refusals()[:20])
    except BaseException:
        with capsys.disabled():
            print("\n" + s.dump(), flush=True)
        raise
    finally:
        producers.halt.set()
        sampler.halt.set()
        s.close()


def forged_claim_refused(kafka: LocalKafka) -> None:
    """pipe-a's plain producer may not write a claim into B's claims topic, and none shows."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    forged = ClaimRecord("B", "forged", 99, 1, frozenset({(ORDERS, 2)}), 60.0, "released").to_json().encode()
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, max_block_ms=5000, **kafka.client_options("pipe-a"))
    try:
        with pytest.raises(KafkaError, match="TopicAuthorizationFailed"):
            producer.send(claims_topic(STORE_NAME, "B"), key=b"B", value=forged, partition=0).get(timeout=10)
    finally:
        producer.close(timeout=2)
    with open_store(f"kafka://{kafka.bootstrap_servers}/{STORE_NAME}", client_options=kafka.client_options(), timeout=5) as store:
        claim = store.claims().get("B")
        assert not (isinstance(claim, ClaimRecord) and claim.incarnation == "forged"), claim
