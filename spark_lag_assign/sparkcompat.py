"""What differs between the Spark lines this package supports, PySpark 3.5 (LTS) to 4.3, in one place.

Every other module is written once for all of them; where the lines differ, the difference
is decided here, with the versions named:

- Scala: PySpark 3.5.x from PyPI is built for Scala 2.12, 4.x for 2.13. The artifacts of the
  JVM side carry that suffix (``spark-sql-kafka-0-10_2.12:3.5.7``); the suffix is read from
  the installed Spark's own ``jars/scala-library-*.jar`` where there is one
  (``bundled_scala_binary``), and only otherwise taken from the line (``scala_binary_for``).
- Hadoop: each PySpark bundles its own client (3.5.7: 3.3.4, 4.0.0: 3.4.1, 4.3.0: 3.5.0);
  the test HDFS runs exactly that version (``bundled_hadoop_version``).
- Spark's Kafka source must be the same Spark version as Spark itself: on 3.5.7 the 4.0.0
  source fails at ``load()`` with a ``java.util.ServiceConfigurationError`` (its provider
  class cannot be linked against Scala 2.12) in a Java stack of some fifty lines.
  ``check_kafka_source`` names both versions in one line before that.
- ``StreamingQuery.lastProgress``: a plain dict in 3.5 (its sources' ``endOffset`` already
  parsed), a ``StreamingQueryProgress`` from 4.0 (``endOffset`` as JSON text):
  ``source_end_offsets`` reads both.
- Column functions: from 4.0 ``F.array_position`` takes a Column as the value, 3.5 only a
  literal; nothing in the package relies on the 4.0 form.
- The same on every supported line, checked by ``make test-compat`` rather than assumed:
  ``groupBy().applyInPandas`` with a declared schema, the Arrow settings
  (``spark.sql.execution.arrow.pyspark.enabled``, ``...maxRecordsPerBatch``) and the
  planner's session settings. The consuming side (the ``StreamingQueryListener`` events,
  ``onQueryIdle`` from 3.5.0, their progress objects, and the Kafka source's options
  ``assign``, ``startingOffsets``, ``maxOffsetsPerTrigger``, ``kafka.*``) runs only where
  Maven Central serves the whole Kafka source, 3.5.7 and 4.0.0 (README, "Versions"); on the
  other lines it is expected to hold by Spark's compatibility promises, not tested here.

This module imports no pyspark: it works on version strings, directories and the session
object its callers hand it, so that it can be used before Spark starts and by the pure
consuming side.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from spark_lag_assign.errors import SparkVersionError

#: the PySpark versions this package supports and tests (pyproject.toml declares the same range)
SUPPORTED_FROM = (3, 5)
SUPPORTED_BELOW = (4, 4)
SUPPORTED = ">=3.5,<4.4"

#: the Scala suffix of each Spark line as PyPI's pyspark builds it (3.5: 2.12; 4.x: 2.13 only)
SCALA_BY_LINE = {3: "2.12", 4: "2.13"}

#: Spark's Kafka source for Structured Streaming (Maven coordinates without the Scala suffix)
KAFKA_SOURCE_GROUP = "org.apache.spark"
KAFKA_SOURCE_ARTIFACT = "spark-sql-kafka-0-10"

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)")
_KAFKA_JAR = re.compile(rf"{KAFKA_SOURCE_ARTIFACT}_(2\.1[0-9])-(\d+\.\d+\.\d+[^/]*?)\.jar$")
_KAFKA_PACKAGE = re.compile(rf"{re.escape(KAFKA_SOURCE_GROUP)}:{KAFKA_SOURCE_ARTIFACT}_(2\.1[0-9]):([^,\s]+)")


def parse_version(version: str) -> tuple[int, int, int]:
    """``"4.0.0"`` (or ``"4.1.0.dev0"``) as (4, 0, 0); one clear line if it is not a version."""
    found = _VERSION.match(version.strip())
    if not found:
        raise SparkVersionError(f"not a Spark version: {version!r}")
    return int(found.group(1)), int(found.group(2)), int(found.group(3))


def is_supported(version: str) -> bool:
    return SUPPORTED_FROM <= parse_version(version)[:2] < SUPPORTED_BELOW


def check_supported(version: str, what: str = "PySpark") -> None:
    """One line naming the version and the supported range if ``version`` is outside it."""
    if not is_supported(version):
        raise SparkVersionError(
            f"{what} {version} is not supported: spark-lag-assign supports PySpark {SUPPORTED} (3.5 to 4.3)"
        )


def scala_binary_for(version: str) -> str:
    """The Scala suffix PyPI's pyspark of this line is built for (when no jars say otherwise)."""
    major = parse_version(version)[0]
    if major not in SCALA_BY_LINE:
        check_supported(version)
    return SCALA_BY_LINE[major]


def _bundled(jars: Path, prefix: str) -> str | None:
    names = sorted(p.name for p in jars.glob(f"{prefix}-*.jar"))
    for name in names:
        found = re.fullmatch(rf"{prefix}-(\d+\.\d+\.\d+)\.jar", name)
        if found:
            return found.group(1)
    return None


def bundled_scala_binary(spark_home: Path) -> str | None:
    """The Scala suffix of a Spark installation, from its ``jars/scala-library-X.Y.Z.jar``."""
    full = _bundled(spark_home / "jars", "scala-library")
    return None if full is None else ".".join(full.split(".")[:2])


def bundled_hadoop_version(spark_home: Path) -> str | None:
    """The Hadoop client a Spark installation bundles, from its ``jars/hadoop-client-api-X.Y.Z.jar``."""
    return _bundled(spark_home / "jars", "hadoop-client-api")


def source_end_offsets(progress: Any) -> list[str | None]:
    """Each source's ``endOffset`` JSON text in a streaming progress report, on every line.

    ``StreamingQuery.lastProgress`` is a plain dict in 3.5, parsed from the progress JSON, so
    its ``endOffset`` is already a dict; from 4.0 it is a ``StreamingQueryProgress`` (a dict
    subclass) whose sources carry ``endOffset`` as JSON text, as listener events do on every
    line. Both become the text the Kafka source wrote."""
    if progress is None:
        return []
    sources = progress.sources if hasattr(progress, "sources") else progress["sources"]
    out: list[str | None] = []
    for source in sources:
        end = source.endOffset if hasattr(source, "endOffset") else source["endOffset"]
        out.append(end if end is None or isinstance(end, str) else json.dumps(end, separators=(",", ":")))
    return out


def kafka_source_coordinate(version: str, scala: str | None = None) -> str:
    """Maven coordinates of Spark's Kafka source for this Spark (``--packages`` takes them)."""
    return f"{KAFKA_SOURCE_GROUP}:{KAFKA_SOURCE_ARTIFACT}_{scala or scala_binary_for(version)}:{version}"


def kafka_sources_named(settings: Iterable[str]) -> list[tuple[str, str]]:
    """(Scala suffix, Spark version) of every Kafka source jar or package named in these values
    (``spark.jars``, ``spark.jars.packages``, class paths), in order, without repeats."""
    found: list[tuple[str, str]] = []
    for value in settings:
        for entry in re.split(r"[,:;\s]+", value or ""):
            jar = _KAFKA_JAR.search(entry)
            if jar and (jar.group(1), jar.group(2)) not in found:
                found.append((jar.group(1), jar.group(2)))
        for package in _KAFKA_PACKAGE.finditer(value or ""):
            if (package.group(1), package.group(2)) not in found:
                found.append((package.group(1), package.group(2)))
    return found


#: the settings through which a Kafka source reaches a session's class path
KAFKA_SOURCE_SETTINGS = ("spark.jars", "spark.jars.packages", "spark.driver.extraClassPath", "spark.executor.extraClassPath")


def check_kafka_source(spark: Any) -> None:
    """Before ``readStream.format("kafka")``: Spark must be a supported version, and every Kafka
    source jar or package the session names must be that version, with its Scala suffix.

    One line naming both versions instead of the JVM's error (a 2.13 source on a 2.12 Spark:
    a ServiceConfigurationError at ``load()``). The Scala suffix expected is that of
    ``$SPARK_HOME/jars`` when spark-submit set SPARK_HOME, else the line's (PyPI's builds). A
    source that reached the class path some other way (copied into ``$SPARK_HOME/jars``) is
    not seen here."""
    version = str(spark.version)
    check_supported(version, "Spark")
    conf = spark.sparkContext.getConf()
    values = [str(conf.get(key, "") or "") for key in KAFKA_SOURCE_SETTINGS]
    home = os.environ.get("SPARK_HOME")
    expected = (bundled_scala_binary(Path(home)) if home else None) or scala_binary_for(version)
    for scala, source in kafka_sources_named(values):
        if source != version or scala != expected:
            raise SparkVersionError(
                f"Spark's Kafka source {KAFKA_SOURCE_ARTIFACT}_{scala} {source} does not match Spark {version}: "
                f"use {kafka_source_coordinate(version, expected)}"
            )


__all__ = [
    "KAFKA_SOURCE_SETTINGS",
    "SUPPORTED",
    "bundled_hadoop_version",
    "bundled_scala_binary",
    "check_kafka_source",
    "check_supported",
    "is_supported",
    "kafka_source_coordinate",
    "kafka_sources_named",
    "parse_version",
    "scala_binary_for",
]
