"""The repository's promises: README examples run, the two set-up commands are what CI runs,
and the JVM side matches PySpark's version exactly."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pyspark

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def test_readme_python_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    pure = [b for b in blocks if "spark" not in b.replace("spark_lag_assign", "")]
    assert pure, "README lost its pure example"
    for block in pure:
        exec(compile(block, "README.md", "exec"), {})


def test_readme_gives_the_two_commands_and_ci_runs_the_test_one() -> None:
    commands = re.findall(r"^make (\w+)", README.split("## Two commands", 1)[1].split("##", 1)[0], flags=re.M)
    assert commands == ["demo", "test"]
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_the_spark_kafka_source_is_pinned_to_pysparks_version() -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.parse(REPO / "conf" / "pom.xml").getroot()
    assert pom.findtext("m:properties/m:spark.version", namespaces=ns) == pyspark.__version__
    assert pom.findtext("m:properties/m:scala.binary.version", namespaces=ns) == "2.13"
    assert f'"pyspark=={pyspark.__version__}"' in (REPO / "pyproject.toml").read_text()
