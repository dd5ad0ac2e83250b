"""``make jvm``: fetch the JVM side (conf/pom.xml) with Maven for the PySpark installed here.

    python -m spark_lag_assign.testing.jvmfetch                      # every set
    python -m spark_lag_assign.testing.jvmfetch --sets broker,hdfs   # some of them

Four sets, each in a directory of its own under ``.jvm/``:

- ``broker``: Apache Kafka's broker (its own version, Scala 2.13), ``.jvm/broker/``;
- ``assignors``: Kafka's Java assignors for the exactness tests and benchmarks, ``.jvm/assignors/``;
- ``spark-kafka``: Spark's Kafka source at exactly the installed PySpark's version and Scala
  suffix, ``.jvm/spark-kafka-<version>/``;
- ``hdfs``: the test HDFS at exactly the Hadoop version PySpark bundles, ``.jvm/hdfs-<hadoop>/``.

The versions are read from the installed PySpark (``sparkcompat``), so virtualenvs with
different PySparks (``make test-compat``) share one ``.jvm`` without overwriting each
other's jars. A set already fetched for the same pom and versions is left as it is (a stamp
file records them); a new fetch goes to a temporary directory first, so an interrupted one
never leaves a half set. When Maven Central does not serve a set completely, this says so
in one line (which set, for which PySpark, and Maven's reason) and exits 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spark_lag_assign import jvm, sparkcompat
from spark_lag_assign.errors import JvmError

POM = jvm.REPO_ROOT / "conf" / "pom.xml"
SETS = ("broker", "assignors", "spark-kafka", "hdfs")
STAMP = ".fetched"


@dataclass(frozen=True)
class JarSet:
    name: str
    directory: Path
    properties: dict[str, str]
    #: what the set is, for people: the artifact and the versions it follows
    what: str


def plan_sets(names: Sequence[str]) -> list[JarSet]:
    """The sets to fetch for the installed PySpark, with the Maven properties each needs."""
    spark = jvm.installed_spark_version()
    home = jvm.pyspark_home()
    out = []
    for name in names:
        if name == "spark-kafka":
            scala = sparkcompat.bundled_scala_binary(home) or sparkcompat.scala_binary_for(spark)
            out.append(JarSet(name, jvm.spark_kafka_dir(spark), {"spark.version": spark, "scala.binary.version": scala},
                              f"Spark's Kafka source for PySpark {spark} ({sparkcompat.kafka_source_coordinate(spark, scala)})"))  # fmt: skip
        elif name == "hdfs":
            hadoop = sparkcompat.bundled_hadoop_version(home)
            if hadoop is None:
                raise JvmError(f"PySpark {spark} at {home} bundles no hadoop-client-api jar: no Hadoop version for the test HDFS")
            out.append(JarSet(name, jvm.hdfs_dir(hadoop), {"hadoop.version": hadoop},
                              f"the test HDFS for PySpark {spark} (org.apache.hadoop:hadoop-client-minicluster:{hadoop})"))  # fmt: skip
        elif name in ("broker", "assignors"):
            out.append(JarSet(name, jvm.JVM_DIR / name, {}, f"the {name} jars"))
        else:
            raise JvmError(f"unknown jar set {name!r}; known: {', '.join(SETS)}")
    return out


def stamp_of(jar_set: JarSet) -> str:
    """What a fetched set was fetched from: the pom's digest and the versions passed to it."""
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()
    return json.dumps({"pom": digest, "profile": jar_set.name, "properties": jar_set.properties}, sort_keys=True)


def is_fresh(jar_set: JarSet) -> bool:
    stamp = jar_set.directory / STAMP
    return stamp.is_file() and stamp.read_text() == stamp_of(jar_set) and any(jar_set.directory.glob("*.jar"))


def maven_reason(output: str) -> str:
    """Maven's reason for a failed resolution, as one line (the artifact it could not get)."""
    for pattern, says in (
        (r"Could not find artifact (\S+)", "{} is not there"),
        (r"(\S+) was not found in", "{} is not there"),
        (r"The POM for (\S+) is missing", "the POM of {} is missing"),
        (r"Failed to read artifact descriptor for (\S+)", "the POM of {} cannot be read"),
        (r"Could not transfer artifact (\S+)", "{} could not be downloaded"),
    ):
        found = re.search(pattern, output)
        if found:
            return says.format(found.group(1))
    errors = [line.removeprefix("[ERROR]").strip() for line in output.splitlines() if line.startswith("[ERROR]")]
    return next((e for e in errors if e), "Maven failed without saying why")


def fetch(jar_set: JarSet, mvn: str) -> None:
    """One set into its directory, through a temporary one; a JvmError of one line if Maven cannot."""
    temporary = jar_set.directory.with_name(jar_set.directory.name + ".partial")
    shutil.rmtree(temporary, ignore_errors=True)
    argv = [
        mvn, "-B", "-q", "-f", str(POM), "-P", jar_set.name, "dependency:copy-dependencies",
        "-DincludeScope=runtime", f"-DoutputDirectory={temporary}",
        *[f"-D{key}={value}" for key, value in sorted(jar_set.properties.items())],
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        shutil.rmtree(temporary, ignore_errors=True)
        raise JvmError(f"{jar_set.what} cannot be had from Maven Central: {maven_reason(done.stdout + done.stderr)}")
    (temporary / STAMP).write_text(stamp_of(jar_set))
    shutil.rmtree(jar_set.directory, ignore_errors=True)
    os.replace(temporary, jar_set.directory)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {', '.join(SETS)} (default: all)")
    args = parser.parse_args(argv)
    mvn = os.environ.get("MVN", "mvn")
    try:
        if shutil.which(mvn) is None:
            raise JvmError("Maven (mvn) is needed to fetch the Kafka, Spark and Hadoop jars: install it (apt-get install maven)")
        jvm.JVM_DIR.mkdir(exist_ok=True)
        for jar_set in plan_sets([s.strip() for s in args.sets.split(",") if s.strip()]):
            if is_fresh(jar_set):
                continue
            print(f"make jvm: fetching {jar_set.what} into {jar_set.directory.relative_to(jvm.REPO_ROOT)}/", flush=True)
            fetch(jar_set, mvn)
    except JvmError as exc:
        print(f"make jvm: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
