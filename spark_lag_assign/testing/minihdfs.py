"""A real HDFS (one NameNode, one DataNode) on loopback, for tests of the ``hdfs://`` store.

It runs Hadoop's own ``org.apache.hadoop.test.MiniDFSClusterManager`` from the jars that
``make jvm`` fetched with Maven (``.jvm/hdfs-<version>``: ``hadoop-client-minicluster`` at
the Hadoop version PySpark bundles). The NameNode's RPC port is chosen by the kernel (port 0) unless
one is given, and read back from the details file the manager writes once the cluster is
up, so two clusters never race for a port. Data lives under a work directory (a fresh
temporary one by default, removed on stop). ``MiniHDFS`` is a context manager: the cluster
stops when the block ends, whatever ends it, and the kernel stops it if this process dies.

    with MiniHDFS() as hdfs:
        store = open_store(f"{hdfs.uri}/plans/orders")

The cluster runs as the user who starts it, which is therefore HDFS's superuser: permission
checks apply to every other user (``HADOOP_USER_NAME=someone`` in a client's environment).

Run ``python -m spark_lag_assign.testing.minihdfs`` to keep one up until Ctrl-C.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from spark_lag_assign import jvm
from spark_lag_assign.errors import JvmError, SparkLagAssignError
from spark_lag_assign.testing.processes import die_with_parent, serve, stop_group

log = logging.getLogger(__name__)

MAIN = "org.apache.hadoop.test.MiniDFSClusterManager"


class HDFSError(SparkLagAssignError):
    """The local HDFS could not be started."""


def _jars() -> str:
    """The classpath of the minicluster: a clear error if ``make jvm`` never fetched it."""
    where = jvm.set_dir("hdfs")
    found = sorted(where.glob("*.jar"))
    if not any(p.name.startswith("hadoop-client-minicluster-") for p in found):
        raise JvmError(f"no hadoop-client-minicluster jar in {where}: run `make jvm` (fetches it with Maven)")
    return os.pathsep.join(str(p) for p in found)


#: Hadoop client settings for this cluster (``hadoop_store(..., hadoop_conf=...)``): closing a
#: file waits for the NameNode to hear from the DataNode, polling from 400 ms by default,
#: which would make every small file cost ~0.4 s on a single idle DataNode. The poll doubles
#: its wait each retry: from 10 ms, Hadoop's 5 retries give up after 0.3 s (a busy machine's
#: DataNode took longer: "Unable to close file because the last block ... does not have enough
#: number of replicas"), 10 retries after about 10 s, near the default's 12 s
CLIENT_CONF = {
    "dfs.client.block.write.locateFollowingBlock.initial.delay.ms": "10",
    "dfs.client.block.write.locateFollowingBlock.retries": "10",
}


class MiniHDFS:
    """A one-DataNode HDFS on 127.0.0.1, started on entering ``with`` and stopped on leaving it."""

    #: what a client of this cluster should set (see ``CLIENT_CONF``)
    client_conf = CLIENT_CONF

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        port: int = 0,
        heap: str = "384m",
        start_timeout: float = 90.0,
        conf: Mapping[str, str] | None = None,
    ) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="sla-hdfs-")).resolve()
        self.requested_port = port
        self.port: int | None = None
        self.heap = heap
        self.start_timeout = start_timeout
        #: extra Hadoop settings for the cluster (``-D key=value``)
        self.conf = dict(conf or {})
        self.log_path = self.workdir / "hdfs.log"
        self._details = self.workdir / "details.json"
        self._proc: subprocess.Popen[bytes] | None = None
        #: how the last stop ended the cluster: "SIGTERM" (orderly) or "SIGKILL" (it hung)
        self.stopped_by: str | None = None
        #: seconds from launch to a cluster that answers
        self.startup_seconds: float | None = None

    @property
    def uri(self) -> str:
        """``hdfs://127.0.0.1:PORT``: the file system's root, without a trailing slash."""
        if self.port is None:
            raise HDFSError("the local HDFS is not running: use it inside `with MiniHDFS() as hdfs:`")
        return f"hdfs://127.0.0.1:{self.port}"

    def _command(self) -> list[str]:
        settings = {
            # everything on loopback, nothing on a fixed port
            "dfs.namenode.rpc-bind-host": "127.0.0.1",
            "dfs.namenode.http-address": "127.0.0.1:0",
            "dfs.datanode.address": "127.0.0.1:0",
            "dfs.datanode.http.address": "127.0.0.1:0",
            "dfs.datanode.ipc.address": "127.0.0.1:0",
            # one DataNode: a block is complete with one replica
            "dfs.replication": "1",
            "dfs.namenode.safemode.extension": "0",
            **self.conf,
        }
        args = [
            jvm.java(),
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            # MiniDFSCluster keeps its name and data directories under test.build.data
            f"-Dtest.build.data={self.workdir / 'data'}",
            "-cp",
            _jars(),
            MAIN,
            "-format",
            "-datanodes",
            "1",
            "-nnport",
            str(self.requested_port),
            "-writeDetails",
            str(self._details),
        ]
        for key, value in settings.items():
            args += ["-D", f"{key}={value}"]
        return args

    def start(self) -> MiniHDFS:
        if self._proc is not None:
            return self
        self.workdir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.workdir / "data", ignore_errors=True)  # -format starts empty anyway
        self._details.unlink(missing_ok=True)
        (self.workdir / "log4j2.properties").write_text(
            "status = warn\n"
            "appender.out.type = Console\n"
            "appender.out.name = out\n"
            "appender.out.layout.type = PatternLayout\n"
            "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = WARN\n"
            "rootLogger.appenderRef.out.ref = out\n"
            "logger.hdfs.name = org.apache.hadoop.hdfs.StateChange\n"
            "logger.hdfs.level = INFO\n"
        )
        began = time.monotonic()
        with open(self.log_path, "ab") as out:
            self._proc = subprocess.Popen(
                die_with_parent() + self._command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                start_new_session=True,
            )
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        log.info("HDFS up at %s in %.1fs (log: %s)", self.uri, self.startup_seconds, self.log_path)
        return self

    def _wait_until_ready(self) -> None:
        """The manager writes its details file after the cluster is active (the DataNode has
        registered, safe mode is off); then the NameNode must accept a connection."""
        from spark_lag_assign.extract.retry import within

        def probe() -> None:
            assert self._proc is not None
            if self._proc.poll() is not None:  # not retried: it will not come up
                raise HDFSError(f"HDFS exited with code {self._proc.returncode} while starting; see {self.log_path}")
            port = int(json.loads(self._details.read_text())["namenode_port"])
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                self.port = port

        # the details file not written yet, written partly, or the NameNode not listening yet
        not_yet = (OSError, ValueError, KeyError, TypeError)
        policy = within(self.start_timeout, lambda exc: isinstance(exc, not_yet), what="waiting for HDFS", first=0.2, most=0.2)
        try:
            policy(probe)
        except not_yet:
            raise HDFSError(f"HDFS did not come up within {self.start_timeout:.0f}s; see {self.log_path}") from None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        self.port = None
        if proc is not None and proc.poll() is None:
            self.stopped_by = stop_group(proc)
        if self._own_workdir:
            # the log stays (an error message may point to it); the data goes
            shutil.rmtree(self.workdir / "data", ignore_errors=True)

    def __enter__(self) -> MiniHDFS:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def main() -> int:
    """Run an HDFS in the foreground until interrupted."""
    return serve(MiniHDFS(), lambda hdfs: f"HDFS at {hdfs.uri}  (log: {hdfs.log_path})")


if __name__ == "__main__":
    raise SystemExit(main())
