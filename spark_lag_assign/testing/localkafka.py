"""A real single-node Apache Kafka broker (KRaft) on loopback, for the demo and the tests.

The broker runs from the jars that ``make jvm`` fetched with Maven (``.jvm/broker``):
``kafka.tools.StorageTool`` formats a fresh data directory, then ``kafka.Kafka`` serves
on 127.0.0.1 at a free port. ``LocalKafka`` is a context manager: the broker is stopped
when the block ends, whatever ends it, and the kernel stops it if this process dies.

    with LocalKafka() as kafka:
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)

With ``acl_users`` the broker authorizes every request (``StandardAuthorizer``,
``allow.everyone.if.no.acl.found=false``) and its one client listener takes SASL/SCRAM-SHA-512
logins of those users; ``super_users`` (``admin`` by default) bypass ACLs, everyone else needs
ACLs (``grant``)::

    with LocalKafka(acl_users={"admin": "a-secret", "pipe-a": "p-secret"}) as kafka:
        kafka.grant("pipe-a", [Acl("READ", "Topic", "orders")])
        consumer = KafkaConsumer(**kafka.client_options("pipe-a"), bootstrap_servers=kafka.bootstrap_servers)

Run ``python -m spark_lag_assign.testing.localkafka`` to keep one up until Ctrl-C.
"""

from __future__ import annotations

import base64
import logging
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from spark_lag_assign import jvm
from spark_lag_assign.errors import BrokerError
from spark_lag_assign.extract.acls import Acl
from spark_lag_assign.testing.processes import die_with_parent, serve, stop_group

log = logging.getLogger(__name__)

#: how the users of an authorizing broker log in (KRaft stores SCRAM credentials in its metadata log)
SCRAM_MECHANISM = "SCRAM-SHA-512"
#: the broker's own principal on its inter-broker and controller listeners: a super user
BROKER_USER = "broker"


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
        acl_users: Mapping[str, str] | None = None,
        super_users: Iterable[str] = ("admin",),
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
        #: user -> password: with any, the broker authorizes every request (StandardAuthorizer, no
        #: ACL means no access) and its one client listener takes only SASL/SCRAM logins of these users
        self.acl_users = dict(acl_users or {})
        self.super_users = tuple(sorted(set(super_users))) if self.acl_users else ()
        if self.acl_users:
            for user, password in self.acl_users.items():
                _check_credential(user, password)
            if self.sasl_users:
                raise BrokerError("sasl_users (a PLAIN listener without ACLs) and acl_users exclude each other")
            unknown = [u for u in self.super_users if u not in self.acl_users]
            if unknown or not self.super_users:
                raise BrokerError(f"super users must be among acl_users (at least one, to grant ACLs): {unknown or 'none given'}")
            if BROKER_USER in self.acl_users:
                raise BrokerError(f"{BROKER_USER!r} is the broker's own principal: choose another user name")
        self._broker_password = secrets.token_hex(16)
        self.internal_port = free_port() if self.acl_users else None
        self._proc: subprocess.Popen[bytes] | None = None
        #: how the last stop ended the broker: "SIGTERM" (an orderly shutdown) or "SIGKILL" (it hung)
        self.stopped_by: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        """The client listener: PLAINTEXT, or SASL_PLAINTEXT (SCRAM) on an authorizing broker."""
        return f"127.0.0.1:{self.port}"

    def client_options(self, user: str | None = None) -> dict[str, Any]:
        """kafka-python settings that log in as ``user`` (default: the first super user);
        empty on a broker that does not authorize."""
        if not self.acl_users:
            return {}
        user = user or self.super_users[0]
        if user not in self.acl_users:
            raise BrokerError(f"no user {user!r} on this broker: pass it in acl_users or add_user() it")
        return {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": SCRAM_MECHANISM,
            "sasl_plain_username": user,
            "sasl_plain_password": self.acl_users[user],
        }

    def java_options(self, user: str | None = None) -> dict[str, str]:
        """The same login for a Java client (Spark's Kafka source takes them ``kafka.``-prefixed)."""
        options = self.client_options(user)
        if not options:
            return {}
        return {
            "security.protocol": options["security_protocol"],
            "sasl.mechanism": options["sasl_mechanism"],
            "sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{options["sasl_plain_username"]}" password="{options["sasl_plain_password"]}";'
            ),
        }

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
        if self.acl_users:
            props.update(self._authorizing_props())
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

    def _authorizing_props(self) -> dict[str, str]:
        """Listeners and authorizer of an authorizing broker.

        CLIENT takes SCRAM logins of ``acl_users``. The broker's own traffic runs as the super
        user ``broker`` with PLAIN (its password lives only in this config): on CONTROLLER,
        because a KRaft controller cannot check SCRAM credentials it would first have to read
        from its own metadata log, and on INTERNAL, through which the transaction coordinator
        sends commit markers to partition leaders (itself, here) and which clients never see.
        """
        plain = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{BROKER_USER}" password="{self._broker_password}" user_{BROKER_USER}="{self._broker_password}";'
        )
        return {
            "listeners": (
                f"CLIENT://127.0.0.1:{self.port},INTERNAL://127.0.0.1:{self.internal_port},"
                f"CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"CLIENT://127.0.0.1:{self.port},INTERNAL://127.0.0.1:{self.internal_port}",
            "inter.broker.listener.name": "INTERNAL",
            "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.client.sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            # the server side of SCRAM checks logins against the metadata log: an empty login module
            f"listener.name.client.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "listener.name.internal.plain.sasl.jaas.config": plain,
            "listener.name.controller.plain.sasl.jaas.config": plain,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": ";".join(f"User:{u}" for u in (BROKER_USER, *self.super_users)),
        }

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
            # SCRAM credentials go into the metadata log as it is formatted: the users can log
            # in from the first moment, before any client could have created them
            scram = [
                arg
                for user, password in sorted(self.acl_users.items())
                for arg in ("--add-scram", f"{SCRAM_MECHANISM}=[name={user},password={password}]")
            ]
            fmt = subprocess.run(
                self._java("kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(config), *scram),
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

        from spark_lag_assign.extract.retry import within

        def probe() -> None:
            assert self._proc is not None
            if self._proc.poll() is not None:  # not retried: it will not come up
                raise BrokerError(f"Kafka broker exited with code {self._proc.returncode} while starting; see {self.log_path}")
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                pass
            admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap_servers, request_timeout_ms=5000, client_id="sla-localkafka",
                **self.client_options(),
            )  # fmt: skip
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

    def add_user(self, user: str, password: str | None = None) -> str:
        """Create a SCRAM user on a running authorizing broker (no ACLs yet); returns its password."""
        from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

        if not self.acl_users:
            raise BrokerError("this broker does not authorize: pass acl_users")
        _check_credential(user, password := password or secrets.token_hex(12))
        with self._admin() as admin:
            mechanism = ScramMechanism[SCRAM_MECHANISM.replace("-", "_")]
            failed = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, mechanism, password)])
        if failed.get(user):
            raise BrokerError(f"creating the SCRAM user {user} failed: {failed[user]}")
        self.acl_users[user] = password
        self._wait_for_login(user)
        return password

    def _wait_for_login(self, user: str, timeout: float = 30.0) -> None:
        """A new credential reaches the broker's cache through its metadata log a moment after
        the controller accepted it; until then a login is refused."""
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        deadline = time.monotonic() + timeout
        while True:
            try:
                KafkaAdminClient(
                    bootstrap_servers=self.bootstrap_servers, client_id="sla-localkafka", bootstrap_timeout_ms=2000,
                    **self.client_options(user),
                ).close()  # fmt: skip
                return
            except KafkaError:
                if time.monotonic() >= deadline:
                    raise BrokerError(f"the new SCRAM user {user} could not log in within {timeout:g}s") from None
                time.sleep(0.1)

    def grant(self, user: str, acls: Iterable[Acl]) -> None:
        """ALLOW ``acls`` to ``User:<user>``, created by the super user."""
        create_acls(self.bootstrap_servers, f"User:{user}", acls, self.client_options())

    def revoke(self, user: str, acls: Iterable[Acl]) -> None:
        """Delete ALLOW ``acls`` of ``User:<user>``, as the super user, and wait until they are out of force."""
        from kafka.admin import ACLPermissionType

        principal = f"User:{user}"
        gone = [acl.to_kafka(principal) for acl in acls]
        with self._admin() as admin:
            admin.delete_acls([acl for acl in gone if acl.permission_type == ACLPermissionType.ALLOW])
            _wait_for_acls(admin, principal, gone, present=False)

    def _admin(self) -> Any:
        from kafka import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, client_id="sla-localkafka", **self.client_options())

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            self.stopped_by = stop_group(proc)
        if self._own_workdir:
            # the log stays (an error message may point to it); the data of a temporary broker goes
            shutil.rmtree(self.workdir / "data", ignore_errors=True)

    def __enter__(self) -> LocalKafka:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


# -- helpers for demos and tests on any broker --------------------------------------------


def _check_credential(user: str, password: str) -> None:
    # StorageTool's --add-scram syntax ends a value at ',' or ']'; keep names and passwords plain
    for what, text in (("user name", user), ("password", password)):
        if not text or not all(c.isascii() and (c.isalnum() or c in "._-") for c in text):
            raise BrokerError(f"a SCRAM {what} of the local broker may hold only letters, digits, '.', '_' and '-': {text!r}")


def create_acls(
    bootstrap_servers: str, principal: str, acls: Iterable[Acl], client_options: Mapping[str, Any] | None = None
) -> None:
    """ALLOW ``acls`` to ``principal`` (``User:pipe-a``) with kafka-python's ``create_acls``,
    logged in with ``client_options`` (a principal that may alter ACLs: a super user)."""
    from kafka import KafkaAdminClient

    wanted = [acl.to_kafka(principal) for acl in acls]
    if not wanted:
        return
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="sla-localkafka", **dict(client_options or {}))
    try:
        result = admin.create_acls(wanted)
        if result["failed"]:
            raise BrokerError(f"creating ACLs for {principal} failed: {', '.join(e.__name__ for e in result['failed'])}")
        _wait_for_acls(admin, principal, wanted)
    finally:
        admin.close()


def _wait_for_acls(admin: Any, principal: str, wanted: list[Any], timeout: float = 30.0, *, present: bool = True) -> None:
    """The controller accepts ACL changes before the brokers' authorizers have them (they follow
    the metadata log): wait until the broker lists them (or, ``present=False``, none of them),
    so that the next request sees the change."""
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
        ResourceType,
    )

    every = ACLFilter(
        principal, None, ACLOperation.ANY, ACLPermissionType.ANY,
        ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
    )  # fmt: skip
    deadline = time.monotonic() + timeout
    while True:
        listed, _ = admin.describe_acls(every)
        if (set(wanted) <= set(listed)) if present else not (set(wanted) & set(listed)):
            return
        if time.monotonic() >= deadline:
            raise BrokerError(f"ACLs changed for {principal} were not in force within {timeout:g}s")
        time.sleep(0.05)


def create_topic(bootstrap_servers: str, topic: str, partitions: int, *, client_options: Mapping[str, Any] | None = None) -> None:
    """Create a topic (replication 1) and wait until its partitions have leaders."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="sla-localkafka", **dict(client_options or {}))
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        admin.wait_for_topics([topic], timeout_ms=30000)
    finally:
        admin.close()


def produce(
    bootstrap_servers: str,
    topic: str,
    counts: dict[int, int],
    start: dict[int, int] | None = None,
    *,
    client_options: Mapping[str, Any] | None = None,
) -> int:
    """Append ``counts[p]`` records to each partition ``p``; values are ``b"<topic>:<p>:<seq>"``.

    ``start`` numbers the sequence from an earlier call, so that every record of a topic is
    unique and a reader can tell exactly which ones it got.
    """
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers, linger_ms=20, batch_size=256 * 1024, acks=1, client_id="sla-localkafka",
        **dict(client_options or {}),
    )  # fmt: skip
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


def commit(
    bootstrap_servers: str,
    group: str,
    offsets: dict[tuple[str, int], int],
    *,
    client_options: Mapping[str, Any] | None = None,
) -> None:
    """Commit offsets for a group that has no active members (as a pipeline's progress would)."""
    from kafka import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, client_id="sla-localkafka", **dict(client_options or {}))
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
