"""Where the JVM artifacts live: the jars ``make jvm`` fetched with Maven from conf/pom.xml."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from spark_lag_assign.errors import JvmError

#: the checkout this package was installed from (editable install); ``.jvm`` sits in it
REPO_ROOT = Path(__file__).resolve().parent.parent
JVM_DIR = REPO_ROOT / ".jvm"
KINDS = ("broker", "spark-kafka")


def java() -> str:
    """The java executable: $JAVA_HOME/bin/java, else the one on PATH."""
    return jdk_tool("java", "install a JDK 17 or set JAVA_HOME")


def jdk_tool(name: str, hint: str) -> str:
    """A JDK executable (java, javac): $JAVA_HOME/bin/NAME, else the one on PATH; ``hint`` says
    what to do when there is none."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).exists():
        return str(Path(home) / "bin" / name)
    found = shutil.which(name)
    if not found:
        raise JvmError(f"{name} not found: {hint}")
    return found


def jars(kind: str) -> list[Path]:
    """The jar files of one artifact set, sorted; a clear error if they were never fetched."""
    if kind not in KINDS:
        raise JvmError(f"unknown jar set {kind!r}; known: {', '.join(KINDS)}")
    found = sorted((JVM_DIR / kind).glob("*.jar"))
    if not found:
        raise JvmError(f"no jars in {JVM_DIR / kind}: run `make jvm` (fetches them with Maven)")
    return found


def classpath(kind: str) -> str:
    return os.pathsep.join(str(p) for p in jars(kind))


def spark_kafka_jars() -> str:
    """Comma-separated jars of Spark's Kafka source, for ``spark.jars`` or ``--jars``."""
    return ",".join(str(p) for p in jars("spark-kafka"))
