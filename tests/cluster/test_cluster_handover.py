"""Proof on a real multi-node Spark cluster, on loopback.

A Spark standalone master and two workers (``StandaloneCluster``, the pip package's own
daemons) whose Python has nothing installed, the local broker, and a real HDFS. Every
application ships ``make dist``'s packed environment (``spark.archives``): the executors'
Python and packages come from it, and the drivers run the same archive unpacked on this host
(tests/cluster/conftest.py). The planner (``spark-submit
jobs/plan_assignments.py``) and three pipelines (``spark_lag_assign.testing.pipeline_app``
with ``--master spark://...``) are each their own Spark application in client mode, with
``spark.cores.max=1``, whose executors run on the workers; each driver runs in its own
mount namespace with a private tmpfs /tmp (``NamespacedProcess``), so the drivers share no
local file: only the store, Kafka and HDFS, where every pipeline keeps its checkpoints.
Producers write throughout. Run once with the ``kafka://`` store and once with the
``hdfs://`` store.

The plan changes four times: A and B (g1), C joins (g2), A leaves (g3), A comes back while
a topic grows (g4). A writes with a plain producer (``--sink plain``, its offsets committed by
the follower's listener), B and C transactionally (``write_batch``). Faults, each on a whole
process group (driver and its Spark JVM), staged as in the local proof
(tests/integration/test_handover_processes.py):

- A freezes itself just before committing a batch, far past its lease, while the plan moves
  its partitions to B, which fences it and reads them; A is resumed *while B reads them*,
  stops and leaves; a new A process reads them again under g4 (A -> B -> A);
- a planner run is frozen in the middle of writing a generation (``planner_midwrite.py``:
  Kafka store: the records but the manifest in an open transaction; directory store: the
  manifest created, the generation not moved into place) and SIGKILLed there; the previous
  generation must still be served and the next run must publish;
- the broker is stopped, just after one of A's batches, for longer than the lease, and
  started again (same port, same data) while everyone reads;
- B is SIGKILLed while reading and restarted under the same consumer id.

The verdict is the local proof's (``judge``), from the sinks' records and the broker's log
of every commit: nothing lost; no two live queries on one partition (I1) nor two readers'
batches at once but for at most one batch after a lapse (I2); every commit forward (I3),
from the newest query on its partition (I6), none of a fenced pipeline's earlier queries
after its fence; duplicates only past the earlier reader's last accepted commit and within
the batches the protocol lets through (D); the group's commits at the end offsets; and the
pipelines' executors ran on both workers.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from spark_lag_assign import jvm
from spark_lag_assign.testing import pipeline_app as app
from spark_lag_assign.testing.localkafka import LocalKafka, create_topic
from spark_lag_assign.testing.minihdfs import MiniHDFS
from spark_lag_assign.testing.namespaces import NamespacedProcess, require_namespaces
from spark_lag_assign.testing.standalone import StandaloneCluster
from tests.integration.test_handover_processes import (
    CLAIM_TRANSACTION_TIMEOUT_MS,
    SINKS,
    CommitSampler,
    MarkerWatch,
    Pause,
    ProcessScenario,
    Producers,
    end_offsets,
    follower_figures,
    judge,
    pause_findings,
    readers,
    seed_group,
)

HERE = Path(__file__).resolve().parent
LEASE = 10.0
POLL = 0.5
MAX_PER_TRIGGER = 200  # the duplicate bound: one micro-batch per moved partition per handover
GROWN = 4
STEP_TIMEOUT = 240.0
PLANNER_TIMEOUT = 300.0
#: closing an HDFS file polls the NameNode from 400 ms by default: every checkpoint file would cost that
HDFS_CLIENT = {f"spark.hadoop.{k}": v for k, v in MiniHDFS.client_conf.items()}


# -- a small proof that the cluster is one: an application's executors on both workers ----------


#: an application that says, from each Python worker on the executors and from its driver,
#: which interpreter runs it and where pandas, pyarrow and this package come from
WHERE_FROM = (
    "import os, sys\n"
    "from pyspark.sql import SparkSession\n"
    "def where(_):\n"
    "    import pandas, pyarrow, spark_lag_assign\n"
    "    return (os.getpid(), sys.prefix, pandas.__file__, pyarrow.__file__, spark_lag_assign.__file__)\n"
    "spark = SparkSession.builder.appName('sla-two-workers').getOrCreate()\n"
    "found = spark.sparkContext.parallelize(range(16), 16).map(where).distinct().collect()\n"
    "print('APP', spark.sparkContext.applicationId, 'PYTHON-WORKER-PIDS', len({f[0] for f in found}), flush=True)\n"
    "for f in sorted(set(found)):\n"
    "    print('EXECUTOR', *f[1:], flush=True)\n"
    "import pandas, spark_lag_assign\n"
    "print('DRIVER', sys.prefix, pandas.__file__, spark_lag_assign.__file__, flush=True)\n"
    "spark.stop()\n"
)


def test_an_application_runs_executors_on_both_workers_with_python_from_the_archive(
    cluster: StandaloneCluster, tmp_path: Path
) -> None:
    script = tmp_path / "two_workers.py"
    script.write_text(WHERE_FROM)
    # two cores for this one: spread out, one executor on each worker
    argv = cluster.submit_command(script, conf={"spark.cores.max": "2", "spark.executor.cores": "1"})
    done = subprocess.run(argv, env={**os.environ, **cluster.submit_env()}, capture_output=True, text=True,
                          timeout=PLANNER_TIMEOUT, cwd=tmp_path)  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    app_id = re.search(r"APP (\S+) PYTHON-WORKER-PIDS (\d+)", out)
    assert app_id, out[-4000:]
    executors = cluster.executors(app_id.group(1))
    assert sorted(executors) == ["worker-0", "worker-1"], executors
    assert app_id.group(1) in {a["id"] for a in cluster.applications()}
    # every executor's Python is the archive unpacked in its own working directory
    # (<worker dir>/<app id>/<executor id>/environment), and so are the packages it imports
    seen = [line.split()[1:] for line in out.splitlines() if line.startswith("EXECUTOR ")]
    assert seen, out[-4000:]
    workers = {str(cluster.worker_dir(i).resolve()) for i in range(cluster.workers)}
    for prefix, *modules in seen:
        where = Path(prefix).resolve()
        assert where.name == "environment" and where.parent.parent.name == app_id.group(1), prefix
        assert str(where.parent.parent.parent) in workers, (prefix, workers)
        assert all(Path(m).resolve().is_relative_to(where) for m in modules), (prefix, modules)
    # and the driver's is the archive unpacked on the submitting host
    driver = next(line.split()[1:] for line in out.splitlines() if line.startswith("DRIVER "))
    assert cluster.shipped is not None
    env_root = cluster.shipped.driver_python.parent.parent
    assert Path(driver[0]) == env_root, driver
    assert all(Path(m).resolve().is_relative_to(env_root) for m in driver[1:]), driver


def test_without_the_archive_the_workers_python_has_no_pandas(cluster: StandaloneCluster, tmp_path: Path) -> None:
    """The control: the same application with the workers' own Python fails on the executors."""
    script = tmp_path / "two_workers.py"
    script.write_text(WHERE_FROM)
    conf = {"spark.archives": "", "spark.pyspark.python": cluster.python, "spark.executorEnv.PYSPARK_PYTHON": cluster.python,
            "spark.task.maxFailures": "1"}  # fmt: skip
    env = {**os.environ, **cluster.submit_env(), "PYSPARK_PYTHON": cluster.python}
    done = subprocess.run(cluster.submit_command(script, conf=conf), env=env, capture_output=True, text=True,
                          timeout=PLANNER_TIMEOUT, cwd=tmp_path)  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-4000:]
    assert "No module named 'pandas'" in out, out[-4000:]
    assert "EXECUTOR " not in out


# -- the scenario's parts ------------------------------------------------------------------------


def python_driver(proc: NamespacedProcess) -> int | None:
    """The pid of a submitted pipeline's Python driver (``<python> .../pipeline_app.py ...``)."""
    for pid in proc.members():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and Path(argv[0].decode()).name.startswith("python") and argv[1].endswith(b"pipeline_app.py"):
            return pid
    return None


class ClusterScenario(ProcessScenario):
    """The cluster proof: apps submitted to the standalone master, the store kafka:// or hdfs://."""

    def __init__(self, kind: str, cluster: StandaloneCluster, kafka: LocalKafka, hdfs: MiniHDFS, logs: Path) -> None:
        prefix = f"cl-{kind}"
        base = f"{hdfs.uri}/sla-cluster/{kind}"
        store = f"kafka://{kafka.bootstrap_servers}/{prefix}-plans" if kind == "kafka" else f"{base}/plans"
        super().__init__(kafka.bootstrap_servers, store, logs, label=f"[{kind}] ", step_timeout=STEP_TIMEOUT)
        self.kind = kind
        self.cluster = cluster
        self.orders, self.payments = f"{prefix}-orders", f"{prefix}-payments"
        self.partitions = {self.orders: 4, self.payments: 2}
        self.group, self.sink = f"{prefix}-group", f"{prefix}-sink"
        self.checkpoints = f"{base}/checkpoints"
        self.pipeline_start_seconds: list[float] = []
        # the drivers' environment: the packed environment's Python, loopback, and an HDFS user
        self.env = {**cluster.submit_env(), "HADOOP_USER_NAME": "root"}
        assert cluster.shipped is not None
        # inside its namespace a driver sees the checkout and the unpacked environment, read-only
        self.read_only = [jvm.REPO_ROOT, cluster.shipped.driver_python.parent.parent]

    def planner_argv(self, consumers: str, script: Path) -> list[str]:
        conf = {"spark.driver.memory": "512m", "spark.sql.shuffle.partitions": "2", **HDFS_CLIENT}
        args = [
            "--store", self.store, "--bootstrap-servers", self.bootstrap, "--group", self.group,
            "--topics", f"{self.orders},{self.payments}", "--consumers", consumers, "--strategy", "range", "--reset", "earliest",
        ]  # fmt: skip
        return self.cluster.submit_command(script, *args, conf=conf)

    def plan(self, consumers: str) -> int:
        """One planner run, submitted to the cluster from its own namespace; the generation it published."""
        n = len(self.planner_seconds) + 1
        began = time.monotonic()
        proc = NamespacedProcess(f"planner-{n}", self.planner_argv(consumers, jvm.REPO_ROOT / "jobs" / "plan_assignments.py"),
                                 self.logs / f"planner-{n}.log", env=self.env, read_only=self.read_only).start()  # fmt: skip
        self.processes.append(proc)
        status = proc.wait(PLANNER_TIMEOUT)
        self.planner_seconds.append(time.monotonic() - began)
        out = proc.log_text()
        assert status == 0, f"planner run {n} failed ({status}):\n{out[-6000:]}"
        found = re.findall(r"published generation (\d+) to", out)
        assert found, out[-6000:]
        generation = int(found[-1])
        self.note(f"planner published generation {generation}: {consumers} ({self.planner_seconds[-1]:.1f}s)")
        return generation

    def plan_killed_mid_write(self, consumers: str) -> str:
        """A planner run frozen while it writes a generation, then SIGKILLed; what it had written."""
        n = len(self.planner_seconds) + 1
        began = time.monotonic()
        proc = NamespacedProcess(f"planner-{n}-killed", self.planner_argv(consumers, HERE / "planner_midwrite.py"),
                                 self.logs / f"planner-{n}-killed.log", env=self.env, read_only=self.read_only).start()  # fmt: skip
        self.processes.append(proc)
        deadline = time.monotonic() + PLANNER_TIMEOUT
        while "MIDWRITE " not in proc.log_text() or not proc.stopped():
            assert proc.alive, f"the planner exited ({proc.poll()}) before it stopped mid-write:\n{proc.tail(80)}"
            assert time.monotonic() < deadline, proc.tail(80)
            time.sleep(0.2)
        status = proc.kill()
        self.planner_seconds.append(time.monotonic() - began)
        what = next(ln for ln in proc.log_text().splitlines() if ln.startswith("MIDWRITE ")).removeprefix("MIDWRITE ")
        self.note(f"planner run {n} SIGKILLed mid-write (exit {status}): {what}")
        return what

    def pipeline(self, consumer: str, *extra: str, run: int = 1) -> NamespacedProcess:
        """One pipeline, submitted (client mode) with the packed environment: its driver runs the
        unpacked archive's Python, its executors the archive's copy on their worker."""
        conf = {
            **{k: v for k, v in self.cluster.app_conf().items() if k != "spark.master"},
            **HDFS_CLIENT,
            # a driver SIGSTOPped for minutes keeps its executor: no heartbeat expiry on resuming
            "spark.network.timeout": "600s",
        }
        app = [
            str(jvm.REPO_ROOT / "spark_lag_assign" / "testing" / "pipeline_app.py"), "--master", self.cluster.master_url,
            # also as the app's own settings: they come after its defaults, which name this host's interpreter
            *[a for k, v in conf.items() for a in ("--conf", f"{k}={v}")],
            "--store", self.store, "--consumer", consumer, "--bootstrap-servers", self.bootstrap,
            "--sink-topic", self.sink, "--sink", SINKS[consumer], "--lease", str(LEASE), "--poll-interval", str(POLL),
            "--max-offsets-per-trigger", str(MAX_PER_TRIGGER), "--trigger", "1 second",
            "--checkpoint-root", self.checkpoints, *extra,
        ]  # fmt: skip
        if self.kind == "kafka":  # longer than the staged broker outage (CLAIM_TRANSACTION_TIMEOUT_MS says why)
            app += ["--claim-transaction-timeout-ms", str(CLAIM_TRANSACTION_TIMEOUT_MS)]
        argv = self.cluster.submit_command(*app, conf=conf, with_kafka=True)
        proc = NamespacedProcess(f"pipeline-{consumer}-{run}", argv, self.logs / f"pipeline-{consumer}-{run}.log",
                                 env=self.env, read_only=self.read_only).start()  # fmt: skip
        self.started(consumer, proc)
        self.note(f"started pipeline {consumer} (run {run}, pid {proc.pid}, {SINKS[consumer]} sink) {' '.join(extra)}")
        return proc

    def end_pipeline(self, consumer: str, timeout: float) -> int:
        """SIGTERM to the pipeline's Python driver, as step 9 ends a run; its exit status.

        Under spark-submit the driver is a child of SparkSubmit's JVM, which would end the
        application at once on a SIGTERM of its own (exit 143): the driver is signalled, and
        stops between batches, commits, releases and exits; spark-submit exits with its status."""
        proc = self.pipelines[consumer]
        proc.signal(signal.SIGCONT)
        driver = python_driver(proc)
        assert driver is not None, f"no Python driver in {proc.name}'s process group"
        os.kill(driver, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            assert proc.proc is not None
            proc.proc.wait(timeout)
        return proc.terminate(10)

    def sample_after(self, sampler: CommitSampler, wall: float) -> dict[tuple[str, int], int]:
        """The first commit sample taken after ``wall`` (time.time())."""
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            found = [offsets for at, offsets in list(sampler.samples) if at > wall]
            if found:
                return dict(found[0])
            assert time.monotonic() < deadline, f"no commit sample after {wall:.3f}"
            time.sleep(0.2)

    def served_generation(self) -> int | None:
        """The generation the store serves now, read by this process as any reader would."""
        from spark_lag_assign.store import open_store

        settings: dict[str, Any] = {} if self.kind == "kafka" else {"hadoop_conf": MiniHDFS.client_conf}
        with open_store(self.store, **settings) as store:
            plan = store.latest()
            return None if plan is None else int(plan["generation"])


# -- the proof -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["kafka", "hdfs"], ids=["kafka-store", "hdfs-store"])
def test_three_pipelines_on_a_standalone_cluster_hand_partitions_over_safely(
    kind: str, cluster: StandaloneCluster, kafka: LocalKafka, hdfs: MiniHDFS, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_namespaces()  # a NamespaceError fails the test: never a skip that turns it green
    began, began_wall = time.monotonic(), time.time()
    s = ClusterScenario(kind, cluster, kafka, hdfs, tmp_path / "logs")
    bootstrap = s.bootstrap
    orders, payments = s.orders, s.payments
    for topic, n in s.partitions.items():
        create_topic(bootstrap, topic, n)
    create_topic(bootstrap, s.sink, 1)
    create_topic(bootstrap, app.markers_topic(s.sink), 1)
    seeded = seed_group(bootstrap, s.group, s.partitions)

    producers = Producers(bootstrap, s.partitions)
    sampler = CommitSampler(bootstrap, s.group)
    producers.start()
    sampler.start()
    outage = down_total = outage_from = 0.0
    midwrite = ""
    pause: Pause | None = None
    try:
        # g1: A and B
        g1 = s.plan("A,B")
        s.pipeline("A", "--pause-on-usr1")
        s.pipeline("B")
        s.wait(lambda: s.reading("A", g1) and s.reading("B", g1), f"A and B read generation {g1}")
        s.wait(lambda: s.committed_beyond(sampler, {}, [(orders, 0), (orders, 3)]), "A and B committed batches")

        # g2: C joins
        g2 = s.plan("A,B,C")
        s.pipeline("C")
        s.wait(lambda: s.reading("C", g2) and s.reading("B", g2), f"C and B read generation {g2} (orders-3 moved B -> C)")

        # g3: A freezes itself just before committing a batch; the plan moves its partitions to
        # B, which fences A once A's lease ran out and reads them
        a = s.pipelines["A"]
        baseline = sampler.after(time.time())
        # the Python driver only, by the pid it reported: a's own process is spark-submit's
        # JVM, which SIGUSR1 would end, and the JVM keeps its default for SIGUSR1
        os.kill(int(s.lines(a, "READY")[-1]["pid"]), signal.SIGUSR1)
        a.wait_stopped(STEP_TIMEOUT)
        # its SIGSTOP report may still sit in the pipe the stopped JVM forwards: read on resuming
        s.note("A is SIGSTOPped (driver and JVM)")
        g3 = s.plan("B,C")
        s.wait(lambda: s.reading("B", g3), f"B reads generation {g3}, A's partitions included")
        s.wait(
            lambda: s.committed_beyond(sampler, baseline, [(orders, 0), (orders, 1), (payments, 0)]),
            "B committed batches of A's former partitions",
        )
        # the dangerous moment: A resumes while B reads what A read; g3 does not name A: it leaves
        pause = s.resume_beside("A", "B", None, LEASE)
        s.note(f"A had stopped itself {pause.why}")
        a_summary = s.ended_leaving(a, "A (run 1)")

        # the topic grows; a planner dies in the middle of writing the next generation
        from kafka import KafkaAdminClient
        from kafka.admin import NewPartitions

        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="cl-admin")
        try:
            admin.create_partitions({payments: NewPartitions(GROWN)})
        finally:
            admin.close()
        producers.grow(payments, GROWN)
        s.note(f"{payments} grew to {GROWN} partitions")
        midwrite = s.plan_killed_mid_write("A,B,C")
        served = s.served_generation()
        s.note(f"after the killed planner the store serves generation {served}")
        assert served == g3, f"the store serves {served} after a planner died mid-write, not {g3}"
        assert all(p.alive for p in s.pipelines.values())

        # g4: A is back in the plan (a new process), the grown topic planned; B gives A's partitions back
        g4 = s.plan("A,B,C")
        assert g4 > g3
        s.pipeline("A", run=2)
        s.wait(lambda: s.reading("B", g4), f"B reads generation {g4} without A's partitions")
        s.wait(lambda: s.reading("A", g4), f"A reads generation {g4} again")
        s.wait(lambda: s.reading("C", g4), f"C reads generation {g4}")
        baseline = sampler.latest()
        s.wait(lambda: s.committed_beyond(sampler, baseline, [(payments, p) for p in range(GROWN)]), "every partition of the grown topic committed")

        # the broker goes away for longer than the lease, just after one of A's batches (its
        # commit follows), while everyone reads; it comes back on the same port and data
        watch = MarkerWatch(bootstrap, s.sink)
        try:
            marker = watch.next_of("A")
        finally:
            watch.close()
        outage_from = time.time()
        down = time.monotonic()
        kafka.stop()
        stopped_at = time.monotonic()
        s.note(f"broker stopped ({kafka.stopped_by}) {outage_from - float(marker['ended']):.2f}s after A's batch {marker['batch_id']} ended")
        time.sleep(LEASE + 1.0)
        restart = time.monotonic()
        kafka.start()
        outage, down_total = restart - stopped_at, time.monotonic() - down
        s.note(f"broker started again: down at least {outage:.1f}s (lease {LEASE:g}s), {down_total:.1f}s in all")
        baseline = sampler.after(time.time())
        every = sorted(producers.sent)
        s.wait(lambda: s.committed_beyond(sampler, baseline, every), "every partition committed again after the broker restart")

        # B is SIGKILLed while reading and restarted under the same consumer id
        status = s.kill("B")
        s.note(f"B SIGKILLed (exit {status})")
        s.pipeline("B", run=2)
        s.wait(lambda: s.reading("B", g4), f"the new B reads generation {g4}")

        # the end: producers stop, pipelines drain, SIGTERM
        time.sleep(3.0)
        sent = producers.stop()
        s.note(f"producers stopped: {sum(sent.values())} records")
        tps = sorted(sent)
        ends = end_offsets(bootstrap, tps)
        assert ends == sent, "the broker's end offsets differ from what the producers had acknowledged"
        s.wait(lambda: all(sampler.latest().get(tp, -1) >= ends[tp] for tp in tps), "the group's commits reached the end offsets")
        statuses = {consumer: s.end_pipeline(consumer, 90) for consumer in "ABC"}
        s.note(f"pipelines ended: {statuses}")
        sampler.halt.set()
        sampler.join(10)
        assert statuses == {"A": 0, "B": 0, "C": 0}, statuses

        # -- the verdict: the sinks' records and the broker's log of commits
        v = judge(s, s.group, s.sink, ends, seeded, LEASE, [g1, g2, g3, g4], sampler, kafka)
        staged, figures = pause_findings(v, s, pause, "B", a_summary)
        during = [q for q in v.queries if q.ended == "lapse" and outage_from <= q.live_end <= outage_from + down_total + LEASE]
        apps = [a for a in cluster.applications()
                if a.get("name", "").startswith("sla-pipeline-") and a.get("starttime", 0) / 1000 >= began_wall]  # fmt: skip
        on_workers = sorted({w for a in apps for w in cluster.executors(a["id"])})
        v.notes += figures
        v.notes.append(f"  broker down {outage:.1f}s+ ({down_total:.1f}s in all): queries lapsed {len(during)}, commits that "
                       f"failed or waited since {s.log_count('commit of', outage_from)}; producers waited {producers.waited:.1f}s")  # fmt: skip
        v.notes += follower_figures(v, s, pause)
        v.notes.append(f"  readers of {orders}-0: {' -> '.join(readers(v.records, (orders, 0)))}; pipeline applications "
                       f"{len(apps)}, executors on {on_workers}; killed planner: {midwrite}")  # fmt: skip
        with capsys.disabled():
            print(
                f"\ncluster handover proof [{kind} store {s.store}]: {time.monotonic() - began:.0f}s; "
                f"planner runs {len(s.planner_seconds)} ({', '.join(f'{x:.0f}s' for x in s.planner_seconds)}, one killed mid-write)\n"
                + "\n".join(v.summary()),
                flush=True,
            )

        problems = v.problems(ends)
        assert problems == [], "\n".join(problems[:30])
        assert staged == [], "\n".join(staged)
        # -- and the faults happened as staged
        assert outage > LEASE
        if kind == "kafka":  # the claims live in the broker: no renewal gets through an outage longer than the lease
            assert during, "the outage did not outlast the leases of the queries reading then"
        else:  # HDFS takes the renewals all along: no query needs to stop for a broker outage
            assert not during, f"queries lapsed through a broker outage that left HDFS up: {during}"
        assert readers(v.records, (orders, 0)) == ["A", "B", "A"], readers(v.records, (orders, 0))
        assert {r.partition for r in v.records if r.topic == payments} == set(range(GROWN))
        assert len({r.incarnation for r in v.records if r.consumer == "B"}) >= 2, "the restarted B wrote nothing under a new incarnation"
        assert on_workers == ["worker-0", "worker-1"], on_workers
    except BaseException:
        with capsys.disabled():
            print("\n" + s.dump(), flush=True)
        raise
    finally:
        producers.halt.set()
        sampler.halt.set()
        s.close()
