"""A real multi-node Spark standalone cluster (one master, N workers) on loopback, for tests.

The master and the workers are the pip package's own daemons, started with its
``bin/spark-class``::

    spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port P --webui-port W
    spark-class org.apache.spark.deploy.worker.Worker spark://127.0.0.1:P --cores C --memory M \\
        --host 127.0.0.1 --webui-port W2 --work-dir <tmp>/worker-N

on free ports, each with its log (and each worker with its work directory, where every
executor it runs leaves ``<app-id>/<executor-id>/stdout|stderr``) under a work directory.
``StandaloneCluster`` is a context manager: it returns once every worker has registered with
the master (polled from the master's ``/json/``), stops the workers (which end their
executors) and then the master when the block ends, whatever ends it, and the kernel
SIGTERMs every daemon if this process dies (``setpriv --pdeathsig``).

A worker's ``--cores`` are scheduling slots, not CPUs: the standalone master gives each
application the cores it asks for (``spark.cores.max``, else every free core, which is why
``app_conf`` sets ``spark.cores.max``) as long as some worker has them free. Several
applications at once therefore need ``cores`` x ``workers`` >= the number of applications,
whatever the machine has.

Applications run in client mode: the driver is the submitting process, which must advertise
an address the executors reach (``spark.driver.host``/``spark.driver.bindAddress`` =
127.0.0.1). Executors run ``PYSPARK_PYTHON``: this interpreter by default; with ``shipped``
(a ``Shipped``: the packed environment of ``make dist`` and a copy of it unpacked for the
drivers), every application gets the archive with ``spark.archives`` and runs its Python
from it, executors (``./environment/bin/python`` in their working directory) and drivers
alike, as on a cluster whose hosts have nothing installed: then ``python`` (the workers'
own interpreter) is one that cannot import pandas, pyarrow or this package (``bare_python``).

    with StandaloneCluster() as cluster:
        argv = cluster.submit_command("jobs/plan_assignments.py", "--store", ...)
        spark = local_session("app", master=cluster.master_url, extra=cluster.app_conf())

Run ``python -m spark_lag_assign.testing.standalone`` to keep one up until Ctrl-C.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from spark_lag_assign import jvm
from spark_lag_assign.errors import SparkLagAssignError
from spark_lag_assign.testing.localkafka import free_port
from spark_lag_assign.testing.processes import die_with_parent, serve, stop_group

log = logging.getLogger(__name__)

#: JVM options for small machines: the client compiler only and the serial collector spend far
#: less CPU starting and idling, which is most of what the daemons, drivers and executors here do
LIGHT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


class ClusterError(SparkLagAssignError):
    """The standalone cluster could not be started (or lost a daemon)."""


#: where spark.archives unpacks the packed environment in each executor's working directory
ENVIRONMENT = "environment"


@dataclass(frozen=True)
class Shipped:
    """A packed environment for ``--archives`` (``make dist``) and its copy unpacked for drivers."""

    archive: Path
    driver_python: Path

    @property
    def executor_python(self) -> str:
        return f"./{ENVIRONMENT}/bin/python"


def bare_python(directory: Path) -> Path:
    """A virtualenv of this interpreter's base Python with nothing installed: a worker host's Python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(directory)], check=True)
    return directory / "bin" / "python"


def missing_modules(python: str | os.PathLike[str], names: Sequence[str]) -> list[str]:
    """Which of ``names`` the interpreter ``python`` cannot import."""
    code = (
        "import importlib.util, sys\n"
        "print(','.join(n for n in sys.argv[1:] if importlib.util.find_spec(n) is None))"
    )
    # from a neutral directory (not this checkout), in the environment a worker inherits
    # (``StandaloneCluster._env`` passes this process's on): a PYTHONPATH there would reach it too
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    done = subprocess.run([str(python), "-c", code, *names], capture_output=True, text=True, check=True,
                          env=env, cwd=Path(python).parent)  # fmt: skip
    return [n for n in done.stdout.strip().split(",") if n]


def unpack(archive: Path, directory: Path) -> Shipped:
    """The archive unpacked where a submitting host keeps it for its drivers (``tar -xzf``, as a user would)."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(directory)], check=True)
    return Shipped(archive=archive.resolve(), driver_python=directory.resolve() / "bin" / "python")


def spark_home() -> Path:
    """The pip package's Spark home (its ``bin/spark-class``, ``bin/spark-submit``, ``jars``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class _Daemon:
    def __init__(self, name: str, argv: list[str], log_path: Path, env: Mapping[str, str], cwd: Path) -> None:
        self.name = name
        self.log_path = log_path
        with open(log_path, "ab") as out:
            out.write(f"=== {name}: {' '.join(argv)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                die_with_parent() + argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
            )

    def stop(self, timeout: float = 20.0) -> str:
        return stop_group(self.proc, timeout)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers on 127.0.0.1 (module docstring)."""

    def __init__(
        self,
        workdir: str | os.PathLike[str] | None = None,
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        daemon_memory: str = "384m",
        python: str | None = None,
        shipped: Shipped | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="sla-standalone-")).resolve()
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.python = python or sys.executable
        self.shipped = shipped
        self.start_timeout = start_timeout
        self.port: int | None = None
        self.webui_port: int | None = None
        self._master: _Daemon | None = None
        self._workers: list[_Daemon] = []
        #: seconds from launch to every worker registered
        self.startup_seconds: float | None = None
        #: how each daemon ended at the last stop (name -> "SIGTERM", "SIGKILL", "exited")
        self.stopped_by: dict[str, str] = {}

    # -- addresses

    @property
    def master_url(self) -> str:
        if self.port is None:
            raise ClusterError("the standalone cluster is not running: use it inside `with StandaloneCluster() as cluster:`")
        return f"spark://127.0.0.1:{self.port}"

    @property
    def web_url(self) -> str:
        if self.webui_port is None:
            raise ClusterError("the standalone cluster is not running")
        return f"http://127.0.0.1:{self.webui_port}"

    @property
    def log_dir(self) -> Path:
        return self.workdir / "logs"

    def worker_dir(self, index: int) -> Path:
        return self.workdir / f"worker-{index}"

    # -- life cycle

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_DAEMON_JAVA_OPTS": LIGHT_JVM,
            "SPARK_LOG_DIR": str(self.log_dir),
            "SPARK_PID_DIR": str(self.workdir),
            # the workers' own Python: what an executor runs unless its application says otherwise
            "PYSPARK_PYTHON": self.python,
            "JAVA_HOME": os.environ.get("JAVA_HOME") or str(Path(jvm.java()).resolve().parent.parent),
        }

    def start(self) -> StandaloneCluster:
        if self._master is not None:
            return self
        spark_class = str(spark_home() / "bin" / "spark-class")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = self._env()
        began = time.monotonic()
        self.port, self.webui_port = free_port(), free_port()
        self._master = _Daemon(
            "master",
            [spark_class, MASTER, "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.webui_port)],
            self.log_dir / "master.log",
            env,
            self.workdir,
        )
        try:
            self._wait(lambda s: s is not None, "the master answers")
            for i in range(self.workers):
                work = self.worker_dir(i)
                work.mkdir(parents=True, exist_ok=True)
                argv = [
                    spark_class, WORKER, self.master_url,
                    "--cores", str(self.cores), "--memory", self.memory,
                    "--host", "127.0.0.1", "--webui-port", str(free_port()), "--work-dir", str(work),
                ]  # fmt: skip
                self._workers.append(_Daemon(f"worker-{i}", argv, self.log_dir / f"worker-{i}.log", env, work))
            self._wait(lambda s: s is not None and len(self.alive_workers(s)) >= self.workers, f"{self.workers} workers registered")
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        log.info("Spark standalone cluster up at %s (%d workers) in %.1fs", self.master_url, self.workers, self.startup_seconds)
        return self

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            for d in [self._master, *self._workers]:
                if d is not None and d.proc.poll() is not None:
                    raise ClusterError(f"{d.name} exited ({d.proc.returncode}) before {what}; see {d.log_path}:\n{d.tail()}")
            if ready(self.state(quiet=True)):
                return
            time.sleep(0.5)
        raise ClusterError(f"timed out after {self.start_timeout:.0f}s waiting until {what}; logs in {self.log_dir}")

    def stop(self) -> None:
        workers, self._workers = self._workers, []
        master, self._master = self._master, None
        for d in workers:
            self.stopped_by[d.name] = d.stop()
        if master is not None:
            self.stopped_by[master.name] = master.stop()
        self.port = self.webui_port = None
        if self._own_workdir:
            # logs stay (an error message may point to them); executors' work directories go
            for i in range(len(workers)):
                shutil.rmtree(self.worker_dir(i), ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- what the master says

    def state(self, *, quiet: bool = False) -> dict[str, Any] | None:
        """The master's JSON (workers, active and completed applications); None if it does
        not answer and ``quiet``."""
        try:
            with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as response:
                return json.loads(response.read().decode())
        except (OSError, ValueError, urllib.error.URLError) as exc:
            if quiet:
                return None
            raise ClusterError(f"the master's web UI at {self.web_url} does not answer: {exc}") from None

    @staticmethod
    def alive_workers(state: Mapping[str, Any]) -> list[dict[str, Any]]:
        return [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]

    def applications(self) -> list[dict[str, Any]]:
        """Every application the master knows, active and completed."""
        state = self.state() or {}
        return [*state.get("activeapps", []), *state.get("completedapps", [])]

    def app_ids(self, name: str) -> list[str]:
        return sorted(a["id"] for a in self.applications() if a.get("name") == name)

    def executors(self, app_id: str) -> dict[str, list[str]]:
        """Per worker (``worker-N``), the executor ids it launched for ``app_id`` (from the
        directories the worker made for them: ``<work-dir>/<app-id>/<executor-id>``)."""
        found: dict[str, list[str]] = {}
        for i in range(self.workers):
            app_dir = self.worker_dir(i) / app_id
            if app_dir.is_dir():
                found[f"worker-{i}"] = sorted(p.name for p in app_dir.iterdir() if p.is_dir())
        return found

    # -- applications

    def app_conf(
        self, *, cores_max: int = 1, executor_memory: str = "512m", with_kafka: bool = True
    ) -> dict[str, str]:
        """Spark settings of a client-mode application on this cluster: ``spark.cores.max``
        (else the first application takes every core), small executors, a driver that
        advertises 127.0.0.1, executors that run this interpreter or, with ``shipped``, the
        packed environment's (``spark.archives``), Spark's Kafka source jars (``spark.jars``:
        the driver serves them to the executors)."""
        conf = {
            "spark.master": self.master_url,
            "spark.submit.deployMode": "client",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.cores.max": str(cores_max),
            "spark.executor.cores": "1",
            "spark.executor.memory": executor_memory,
            "spark.executorEnv.PYSPARK_PYTHON": self.python,
            "spark.pyspark.python": self.python,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.session.timeZone": "UTC",
        }
        log4j = jvm.REPO_ROOT / "conf" / "log4j2-spark.properties"
        opt = LIGHT_JVM + (f" -Dlog4j2.configurationFile=file:{log4j}" if log4j.exists() else "")
        conf["spark.driver.extraJavaOptions"] = opt
        conf["spark.executor.extraJavaOptions"] = opt
        if self.shipped is not None:
            conf.update(self.shipped_conf())
        if with_kafka:
            conf["spark.jars"] = jvm.spark_kafka_jars()
        return conf

    def shipped_conf(self) -> dict[str, str]:
        """What an application sets to run its Python from the packed environment (README, "On a cluster")."""
        if self.shipped is None:
            raise ClusterError("this cluster was started without a packed environment (shipped=)")
        return {
            "spark.archives": f"{self.shipped.archive}#{ENVIRONMENT}",
            "spark.pyspark.python": self.shipped.executor_python,
            "spark.executorEnv.PYSPARK_PYTHON": self.shipped.executor_python,
            "spark.pyspark.driver.python": str(self.shipped.driver_python),
        }

    def submit_command(
        self, script: str | os.PathLike[str], *args: str, conf: Mapping[str, str] | None = None, with_kafka: bool = False
    ) -> list[str]:
        """``spark-submit`` of a Python script to this cluster in client mode."""
        settings = {**self.app_conf(with_kafka=with_kafka), **(conf or {})}
        cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", settings.pop("spark.master")]
        for key, value in settings.items():
            cmd += ["--conf", f"{key}={value}"]
        return [*cmd, str(script), *args]

    def submit_env(self) -> dict[str, str]:
        """What a submitting process needs in its environment here."""
        executors = self.shipped.executor_python if self.shipped is not None else self.python
        driver = str(self.shipped.driver_python) if self.shipped is not None else self.python
        return {
            "SPARK_HOME": str(spark_home()),
            "PYSPARK_PYTHON": executors,
            "PYSPARK_DRIVER_PYTHON": driver,
            "SPARK_LOCAL_IP": "127.0.0.1",
        }

    def dump(self, lines: int = 40) -> str:
        parts = []
        for d in [self._master, *self._workers]:
            if d is not None:
                parts += [f"---- {d.name} ({d.log_path}) ----", d.tail(lines)]
        return "\n".join(parts)

    def __repr__(self) -> str:
        where = self.master_url if self.port is not None else "not running"
        return f"StandaloneCluster({where}, {self.workers} workers x {self.cores} cores)"


def main() -> int:
    """Run a cluster in the foreground until interrupted."""
    return serve(
        StandaloneCluster(),
        lambda cluster: f"Spark master at {cluster.master_url} (web UI {cluster.web_url}, logs {cluster.log_dir})",
    )


if __name__ == "__main__":
    raise SystemExit(main())
