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


def test_the_jvm_side_follows_the_installed_pyspark_not_a_pin() -> None:
    """The pom names no Spark, Scala or Hadoop version (``make jvm`` passes the installed
    PySpark's); pyproject.toml declares a range, and the dev default lies in it."""
    from spark_lag_assign import sparkcompat

    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.parse(REPO / "conf" / "pom.xml").getroot()
    for pinned in ("spark.version", "scala.binary.version", "hadoop.version"):
        assert pom.findtext(f"m:properties/m:{pinned}", namespaces=ns) is None, pinned
    assert '"pyspark>=3.5,<4.4"' in (REPO / "pyproject.toml").read_text()
    default = re.search(r"^PYSPARK_VERSION \?= (\S+)$", (REPO / "Makefile").read_text(), flags=re.M)
    assert default and sparkcompat.is_supported(default.group(1))
    assert sparkcompat.is_supported(pyspark.__version__)


def test_ci_runs_the_compatibility_matrix_after_make_test() -> None:
    lines = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines() if ln.startswith("make ")]
    assert lines == ["make test", "make test-compat"]


def test_readmes_cluster_lines_ship_the_archive_as_the_cluster_proof_does() -> None:
    """The spark-submit lines under "On a cluster" set what StandaloneCluster.shipped_conf sets."""
    from spark_lag_assign.testing.standalone import ENVIRONMENT, Shipped, StandaloneCluster

    section = README.split("## On a cluster", 1)[1].split("\n## ", 1)[0]
    blocks = [b for b in re.findall(r"```sh\n(.*?)```", section, flags=re.S) if "spark-submit" in b]
    assert len(blocks) == 2, "the planner's line and a pipeline's"
    cluster = StandaloneCluster(shipped=Shipped(Path("/x/dist/spark_lag_assign-env.tar.gz"), Path("/x/sla-env/bin/python")))
    proof = cluster.shipped_conf()
    for block in blocks:
        words = block.replace("\\\n", " ").split()
        assert f"dist/spark_lag_assign-env.tar.gz#{ENVIRONMENT}" in words[words.index("--archives") + 1]
        confs = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--conf")
        assert set(proof) - {"spark.archives"} <= set(confs), block
        for key in ("spark.pyspark.python", "spark.executorEnv.PYSPARK_PYTHON"):
            assert confs[key] == proof[key], key
        assert confs["spark.pyspark.driver.python"].strip('"').endswith("sla-env/bin/python")
