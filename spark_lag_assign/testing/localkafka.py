"""A real single-node Apache Kafka broker (KRaft) on loopback, for the demo and the tests.

The broker runs from the jars that ``make jvm`` fetched with Maven (``.jvm/broker``):
``kafka.tools.StorageTool`` formats a fresh data directory, then ``kafka.Kafka`` serves
on 127.0.0.1 at a free port. ``LocalKafka`` is a context manager: the broker is stopped
when the block ends, whatever ends it, and the kernel stops it if this process dies.

    with LocalKafka() as kafka:
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)

Run ``python -m spark_lag_assign.testing.localkafka`` to keep one up until Ctrl-C.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from spark_lag_assign import jvm
from spark_lag_assign.errors import BrokerError
from spark_lag_assign.testing.processes import die_with_parent, serve, stop_group

log = logging.getLogger(__name__)

def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cluster_id() -> str:
    # Kafka's own Uuid: 16 random bytes, URL-safe base64 without padding; it avoids a
    # leading '-' so that the id never reads as a command-line flag.
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class _NotReady(Exception):
    """The broker answers but is not ready for us yet."""


class LocalKafka:
    """A single-node KRaft broker on 127.0.0.1, stopped when the ``with`` block ends."""

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        heap: str = "512m",
        start_timeout: float = 90.0,
        sasl_users: Mapping[str, str] | None = None,
    ) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="sla-kafka-")).resolve()
        self.port = port or free_port()
        self.controller_port = free_port()
        self.heap = heap
        self.start_timeout = start_timeout
        self.log_path = self.workdir / "broker.log"
        #: user -> password of a second listener that requires SASL/PLAIN (to test authentication)
        self.sasl_users = dict(sasl_users or {})
        self.sasl_port = free_port() if self.sasl_users else None
        self._proc: subprocess.Popen[bytes] | None = None
        #: how the last stop ended the broker: "SIGTERM" (an orderly shutdown) or "SIGKILL" (it hung)
        self.stopped_by: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap_servers(self) -> str:
        """The SASL_PLAINTEXT listener (only with ``sasl_users``)."""
        if self.sasl_port is None:
            raise BrokerError("this broker has no SASL listener: pass sasl_users")
        return f"127.0.0.1:{self.sasl_port}"

    def _write_config(self) -> Path:
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(data),
            # one node: every internal topic has a single replica
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            "num.partitions": "1",
            "log.retention.check.interval.ms": "300000",
        }
        if self.sasl_users:
            props["listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
            props["advertised.listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
            props["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
            props["sasl.enabled.mechanisms"] = "PLAIN"
            users = " ".join(f'user_{u}="{pw}"' for u, pw in sorted(self.sasl_users.items()))
            props["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
            )
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log4j = self.workdir / "log4j2.properties"
        log4j.write_text(
            "status = warn\n"
            "appender.out.type = Console\n"
            "appender.out.name = out\n"
            "appender.out.layout.type = PatternLayout\n"
            "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.out.ref = out\n"
        )
        return config

    def _java(self, main: str, *args: str, heap: str = "256m") -> list[str]:
        return [
            jvm.java(),
            f"-Xmx{heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            "-cp",
            jvm.classpath("broker"),
            main,
            *args,
        ]

    def start(self) -> LocalKafka:
        if self._proc is not None:
            return self
        config = self._write_config()
        # a broker started again in the same work directory (after stop()) keeps its data,
        # as a restarted broker of a real cluster does; only an empty directory is formatted
        if not (self.workdir / "data" / "meta.properties").exists():
            fmt = subprocess.run(
                self._java("kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(config)),
                capture_output=True,
                text=True,
            )
            if fmt.returncode != 0:
                raise BrokerError(f"formatting KRaft storage failed: {fmt.stderr.strip() or fmt.stdout.strip()}")
        with open(self.log_path, "ab") as out:
            self._proc = subprocess.Popen(
                die_with_parent() + self._java("kafka.Kafka", str(config), heap=self.heap),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        log.info("Kafka broker up at %s (log: %s)", self.bootstrap_servers, self.log_path)
        return self

    def _wait_until_ready(self) -> None:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        from spark_lag_assign.retry import within

        def probe() -> None:
            assert self._proc is not None
            if self._proc.poll() is not None:  # not retried: it will not come up
                raise BrokerError(
                    f"Kafka broker exited with code {self._proc.returncode} while starting; see {self.log_path}"
                )
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                pass
            admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap_servers, request_timeout_ms=5000, client_id="sla-localkafka"
            )
            try:
                # a group lookup succeeds only once the offsets topic exists and its
                # coordinator is loaded: then the broker is ready for everything we do
                if not admin.describe_cluster().get("brokers"):
                    raise _NotReady("no broker registered yet")
                admin.list_group_offsets("sla-readiness-probe")
            finally:
                admin.close()

        policy = within(
            self.start_timeout, lambda exc: isinstance(exc, (OSError, KafkaError, _NotReady)),
            what="waiting for the local broker", first=0.5, most=0.5,
        )  # fmt: skip
        try:
            policy(probe)
        except (OSError, KafkaError, _NotReady) as last:
            raise BrokerError(
                f"Kafka broker did not answer on {self.bootstrap_servers} within {self.start_timeout:.0f}s "
                f"({last}); see {self.log_path}"
            ) from None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            self.stopped_by = stop_group(proc)
        if self._own_workdir:
            # the log stays (an error message may point to it); the data of a temporary broker goes
            shutil.rmtree(self.workdir / "data", ignore_errors=True)

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


# -- helpers for demos and tests on any broker --------------------------------------------


def create_topic(bootstrap_servers: str, topic: str, partitions: int) -> None:
    """Create a topic (replication 1) and wait until its partitions have leaders."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="sla-localkafka")
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        admin.wait_for_topics([topic], timeout_ms=30000)
    finally:
        admin.close()


def produce(bootstrap_servers: str, topic: str, counts: dict[int, int], start: dict[int, int] | None = None) -> int:
    """Append ``counts[p]`` records to each partition ``p``; values are ``b"<topic>:<p>:<seq>"``.

    ``start`` numbers the sequence from an earlier call, so that every record of a topic is
    unique and a reader can tell exactly which ones it got.
    """
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers, linger_ms=20, batch_size=256 * 1024, acks=1, client_id="sla-localkafka"
    )
    sent = 0
    try:
        for partition in sorted(counts):
            first = (start or {}).get(partition, 0)
            for seq in range(first, first + counts[partition]):
                producer.send(topic, value=f"{topic}:{partition}:{seq}".encode(), partition=partition)
                sent += 1
        producer.flush(timeout=120)
    finally:
        producer.close()
    return sent


def commit(bootstrap_servers: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets for a group that has no active members (as a pipeline's progress would)."""
    from kafka import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="sla-localkafka")
    try:
        result = admin.alter_group_offsets(
            group, {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in sorted(offsets.items())}
        )
    finally:
        admin.close()
    failed = {f"{tp.topic}-{tp.partition}": err.__name__ for tp, err in result.items() if err.__name__ != "NoError"}
    if failed:
        raise BrokerError(f"committing offsets for group {group} failed: {failed}")


def main() -> int:
    """Run a broker in the foreground until interrupted."""
    return serve(LocalKafka(), lambda kafka: f"bootstrap servers: {kafka.bootstrap_servers}  (log: {kafka.log_path})")


if __name__ == "__main__":
    raise SystemExit(main())
