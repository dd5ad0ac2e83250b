"""Where the JVM artifacts live: the jars ``make jvm`` fetched with Maven from conf/pom.xml.

Spark's Kafka source and the test HDFS follow the installed PySpark, so their directories
carry its versions (``.jvm/spark-kafka-4.0.0/``, ``.jvm/hdfs-3.4.1/``): virtualenvs with
different PySparks share one ``.jvm``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from spark_lag_assign import sparkcompat
from spark_lag_assign.errors import JvmError

#: the checkout this package was installed from (editable install); ``.jvm`` sits in it
REPO_ROOT = Path(__file__).resolve().parent.parent
JVM_DIR = REPO_ROOT / ".jvm"
KINDS = ("broker", "spark-kafka", "hdfs")


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


def pyspark_home() -> Path:
    """The installed PySpark's directory (its ``jars/``, ``bin/``): the Spark home of local runs."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def installed_spark_version() -> str:
    """The installed PySpark's version; one line if this package does not support it."""
    import pyspark

    sparkcompat.check_supported(pyspark.__version__)
    return pyspark.__version__


def spark_kafka_dir(version: str) -> Path:
    return JVM_DIR / f"spark-kafka-{version}"


def hdfs_dir(hadoop: str) -> Path:
    return JVM_DIR / f"hdfs-{hadoop}"


def set_dir(kind: str) -> Path:
    """The directory of one artifact set for the installed PySpark."""
    if kind not in KINDS:
        raise JvmError(f"unknown jar set {kind!r}; known: {', '.join(KINDS)}")
    if kind == "spark-kafka":
        return spark_kafka_dir(installed_spark_version())
    if kind == "hdfs":
        hadoop = sparkcompat.bundled_hadoop_version(pyspark_home())
        if hadoop is None:
            raise JvmError(f"PySpark at {pyspark_home()} bundles no hadoop-client-api jar")
        return hdfs_dir(hadoop)
    return JVM_DIR / kind


def jars(kind: str) -> list[Path]:
    """The jar files of one artifact set, sorted; a clear error if they were never fetched."""
    where = set_dir(kind)
    found = sorted(where.glob("*.jar"))
    if not found:
        raise JvmError(f"no jars in {where}: run `make jvm` (fetches them with Maven for the installed PySpark)")
    return found


def classpath(kind: str) -> str:
    return os.pathsep.join(str(p) for p in jars(kind))


def spark_kafka_jars() -> str:
    """Comma-separated jars of Spark's Kafka source, for ``spark.jars`` or ``--jars``."""
    return ",".join(str(p) for p in jars("spark-kafka"))
