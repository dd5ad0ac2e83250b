"""Bad input to ``spark-lag-assign plan``, all in one table: every case exits 1 with
exactly one line on stderr, no traceback, and leaves the store's plan directory byte for byte
as it was.

Every case runs the console script's ``main`` in a process of its own, and its real stderr
is what is checked. Cases refused before planning prove that it never imported PySpark (so
no SparkSession, no JVM: they fail fast); the few that can only be refused after planning (a
plan that drops most partitions, a generation taken by another planner) start their own
local Spark. Cases against the live cluster use the real local broker. The store compared
before and after is the whole directory tree, empty directories included, and a store that
did not exist must still not exist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from spark_lag_assign import cli
from spark_lag_assign.extract import offsets as offsets_io
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.store import open_store
from spark_lag_assign.testing.localkafka import free_port
from tests.spark.test_cli import SNAPSHOT  # the happy path's snapshot: each bad input varies it
from tests.unit.test_plan import tree

HEADER = "topic,partition,beginning_offset,end_offset,committed_offset\n"
REPO = Path(__file__).resolve().parents[2]
LIVE_TOPIC, LIVE_GROUP = "bad-input", "bad-input-pipelines"

# runs the console script's main() and then says whether PySpark was ever imported
CHILD = (
    "import sys\n"
    "from spark_lag_assign import cli\n"
    "{meanwhile}"
    "code = cli.main(sys.argv[1:])\n"
    "print('pyspark imported:', any(m.split('.')[0] in ('pyspark', 'py4j') for m in sys.modules))\n"
    "sys.exit(code)\n"
)
# the "meanwhile" cases: another planner publishes while this one reads its offsets
MEANWHILE = (
    "import json\n"
    "from pathlib import Path\n"
    "from spark_lag_assign.spark import job\n"
    "from tests.spark.test_cli_bad_input import another_planner_publishes\n"
    "from tests.unit.test_plan import tree\n"
    "_extract = job.extract_offsets\n"
    "def _meanwhile(settings, *more):\n"
    "    another_planner_publishes(Path(settings.output))\n"
    "    print('TREE', json.dumps(tree(Path(settings.output))), flush=True)  # ours must add nothing to this\n"
    "    return _extract(settings, *more)\n"
    "job.extract_offsets = _meanwhile\n"
)


def conf(*lines: str) -> str:
    """A config file for the snapshot {snap}, publishing to {out}, with ``lines`` added to [plan]."""
    return '[plan]\noffsets = "{snap}"\noutput = "{out}"\nconsumers = ["a", "b"]\n' + "".join(f"{line}\n" for line in lines)


def kafka_conf(*lines: str) -> str:
    """A config file for the live group, with ``lines`` added to [kafka]."""
    return (
        '[kafka]\nbootstrap_servers = "{bootstrap}"\ngroup = "'
        + LIVE_GROUP
        + '"\n'
        + "".join(f"{line}\n" for line in lines)
        + '[plan]\noutput = "{out}"\nconsumers = ["a", "b"]\n'
    )


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]  # after "plan"; {snap} {out} {tmp} {bootstrap} {sasl} {nowhere} {file:NAME} are filled in
    message: str  # a part of the one line on stderr
    files: dict[str, str] = field(default_factory=dict)  # NAME -> content (formatted like args)
    env: dict[str, str] = field(default_factory=dict)
    spark: bool = False  # refused only after planning: the command starts its local Spark
    broker: bool = False  # needs the real broker ({bootstrap}, {sasl})
    meanwhile: bool = False  # another planner publishes while this one reads its offsets (spark cases)
    store: str = "{out}"  # the store directory that must be left as it was


def another_planner_publishes(out: Path) -> None:
    with open_store(str(out)) as store, store.publisher() as other:
        doc = store.latest()
        assert doc is not None
        other.publish({**doc, "generation": other.next_generation(), "strategy": "range"})


SNAP = ("--offsets", "{snap}", "--output", "{out}")
LIVE = ("--bootstrap-servers", "{bootstrap}", "--group", LIVE_GROUP, "--topics", LIVE_TOPIC, "--timeout-ms", "3000",
        "--consumers", "a", "--output", "{out}")  # fmt: skip
SASL = ("--kafka-option", "security_protocol=SASL_PLAINTEXT", "--kafka-option", "sasl_mechanism=PLAIN",
        "--kafka-option", "sasl_plain_username=planner", "--kafka-option", "sasl_plain_password=wrong")  # fmt: skip

CASES = [
    # -- the configuration: wrong types in the file, the environment or on the command line
    pytest.param(
        Case(
            ("--config", "{file:c.toml}"),
            "[kafka] timeout_ms: input should be a valid integer, not 'soon'",
            files={"c.toml": kafka_conf('timeout_ms = "soon"')},
        ),
        id="conf-timeout-soon",
    ),
    pytest.param(
        Case(
            ("--config", "{file:c.toml}"),
            "[plan] seed: input should be a valid integer, not 2.9",
            files={"c.toml": conf("seed = 2.9")},
        ),
        id="conf-seed-float",
    ),
    pytest.param(
        Case(
            ("--config", "{file:c.toml}"),
            "[plan] seed: input should be a valid integer, not True",
            files={"c.toml": conf("seed = true")},
        ),
        id="conf-seed-bool",
    ),
    pytest.param(
        Case(
            ("--config", "{file:c.toml}"),
            "[plan] seed: input should be a valid integer, not '2'",
            files={"c.toml": conf('seed = "2"')},
        ),
        id="conf-seed-string",
    ),
    pytest.param(
        Case(("--config", "{file:c.toml}"), "unknown key(s) in [plan]: sead", files={"c.toml": conf("sead = 2")}),
        id="conf-unknown-key",
    ),
    pytest.param(Case(("--config", "{file:c.toml}"), "not valid TOML", files={"c.toml": "[plan\n"}), id="conf-not-toml"),
    pytest.param(
        Case(
            (*SNAP, "--consumers", "a"),
            "SPARK_LAG_ASSIGN_HISTORY: input should be a valid integer",
            env={"SPARK_LAG_ASSIGN_HISTORY": "many"},
        ),
        id="env-history",
    ),
    pytest.param(Case((*SNAP, "--consumers", "a", "--seed", "2.9"), "--seed: input should be a valid integer"), id="flag-seed"),
    pytest.param(
        Case(
            (*SNAP, "--consumers", "a", "--option", "tolerance=-1"),
            "--option tolerance=-1: lag-sticky: tolerance must be a number >= 0, not -1",
        ),
        id="option-tolerance",
    ),
    pytest.param(
        Case(
            (*SNAP, "--consumers", "a", "--option", "max_swaps=abc"), "lag-sticky: max_swaps must be an integer >= 0, not 'abc'"
        ),
        id="option-max-swaps",
    ),
    pytest.param(
        Case((*SNAP, "--consumers", "a", "--option", "speed=2"), "strategy lag-sticky takes no option speed"), id="unknown-option"
    ),
    pytest.param(
        Case((*SNAP, "--consumers", "a", "--strategy", "best"), "--strategy: unknown strategy 'best'"), id="unknown-strategy"
    ),
    # -- sizing for a deadline
    pytest.param(
        Case((*SNAP, "--consumers", "a", "--rate", "10", "--drain-within=-5m"), "--drain-within: '-5m' is negative"),
        id="drain-within-negative",
    ),
    pytest.param(
        Case(
            ("--config", "{file:c.toml}"),
            "[plan] pinned: pinned pipeline(s) not in the group: z",
            files={"c.toml": conf('drain_within = "45m"', 'pinned = ["z"]')},
        ),
        id="conf-pinned-unknown",
    ),
    pytest.param(
        Case(
            (*SNAP, "--consumers", "a", "--drain-within", "45m", "--size-to-deadline"),
            "--size-to-deadline: the sized plan is drain's: use strategy drain (not lag-sticky)",
        ),
        id="size-to-deadline-without-drain",
    ),
    # -- the group
    pytest.param(Case((*SNAP, "--consumers", ","), "--consumers: no consumers"), id="zero-consumers"),
    pytest.param(Case((*SNAP, "--consumers", "a,b,a"), "consumer id 'a' is given twice"), id="duplicate-consumer"),
    pytest.param(Case((*SNAP, "--consumers", "a,-b"), "invalid consumer id '-b'"), id="invalid-consumer"),
    pytest.param(
        Case(
            (*SNAP, "--subscriptions", "{file:subs.json}"),
            "consumer id 'a' is given twice",
            files={"subs.json": '{"a": ["t0"], "a": ["t1"]}'},
        ),
        id="subscriptions-duplicate",
    ),
    pytest.param(
        Case((*SNAP, "--subscriptions", "{file:subs.json}"), "not valid JSON", files={"subs.json": '{"a": ['}),
        id="subscriptions-not-json",
    ),
    pytest.param(
        Case(
            (*SNAP, "--subscriptions", "{file:subs.json}"),
            "consumer 'a' must map to a list of topic names",
            files={"subs.json": '{"a": "t0"}'},
        ),
        id="subscriptions-malformed",
    ),
    # -- the snapshot
    pytest.param(
        Case(
            ("--offsets", "{file:s.csv}", "--consumers", "a", "--output", "{out}"),
            "missing column(s) end_offset",
            files={"s.csv": "topic,partition,beginning_offset,committed_offset\nt0,0,0,1\n"},
        ),
        id="snapshot-column",
    ),
    pytest.param(
        Case(
            ("--offsets", "{file:s.csv}", "--consumers", "a", "--output", "{out}"),
            "column end_offset must hold integers",
            files={"s.csv": HEADER + "t0,0,0,x,1\n"},
        ),
        id="snapshot-value",
    ),
    pytest.param(
        Case(
            ("--offsets", "{file:s.parquet}", "--consumers", "a", "--output", "{out}"),
            "not a readable parquet snapshot",
            files={"s.parquet": "this is not parquet"},
        ),
        id="snapshot-garbage",
    ),
    pytest.param(
        Case(
            ("--offsets", "{file:s.csv}", "--consumers", "a", "--output", "{out}"),
            "negative beginning_offset -5",
            files={"s.csv": HEADER + "t0,0,-5,10,1\n"},
        ),
        id="snapshot-negative",
    ),
    pytest.param(
        Case(
            ("--offsets", "{file:s.csv}", "--consumers", "a", "--output", "{out}"),
            "partition t0-1 appears more than once",
            files={"s.csv": HEADER + "t0,1,0,10,1\nt0,1,0,10,1\n"},
        ),
        id="snapshot-duplicate",
    ),
    pytest.param(
        Case(("--offsets", "{tmp}/offsets.xlsx", "--consumers", "a", "--output", "{out}"), "unknown snapshot format"),
        id="snapshot-format",
    ),
    pytest.param(
        Case(
            ("--offsets", "{file:s.csv}", "--consumers", "a", "--output", "{out}"),
            "column end_offset must hold integers (row 0: inf)",
            files={"s.csv": HEADER + "t0,0,0,inf,1\n"},
        ),
        id="snapshot-inf-end",
    ),
    pytest.param(
        Case(
            ("--offsets", "{file:s.csv}", "--consumers", "a", "--output", "{out}"),
            "column committed_offset must hold integers (row 0: inf)",
            files={"s.csv": HEADER + "t0,0,0,10,inf\n"},
        ),
        id="snapshot-inf-committed",
    ),
    pytest.param(
        Case(
            ("--offsets", "{file:s.csv}", "--consumers", "a", "--output", "{out}"),
            "end_offset 9223372036854775808 at row 0 is not below 2**63",
            files={"s.csv": HEADER + "t0,0,0,9223372036854775808,1\n"},
        ),
        id="snapshot-offset-2-63",
    ),
    pytest.param(
        Case(
            ("--offsets", "{file:s.csv}", "--consumers", "a", "--output", "{out}"),
            "end_offset 18446744073709551615 at row 0 is not below 2**63",
            files={"s.csv": HEADER + "t0,0,0,18446744073709551615,1\n"},
        ),
        id="snapshot-offset-2-64",
    ),
    pytest.param(
        Case(
            ("--offsets", "{file:s.csv}", "--consumers", "a", "--output", "{out}"),
            "partition 2147483649 at row 0 is not below 2**31",
            files={"s.csv": HEADER + "t0,2147483649,0,10,1\n"},
        ),
        id="snapshot-partition-2-31",
    ),
    pytest.param(
        Case(("--offsets", "{tmp}/absent.csv", "--consumers", "a", "--output", "{out}"), "does not exist"), id="snapshot-absent"
    ),
    pytest.param(Case((*SNAP, "--consumers", "a", "--topics", "t0,t9"), "not in the snapshot"), id="snapshot-topic"),
    # -- the store
    pytest.param(
        Case(
            ("--offsets", "{snap}", "--consumers", "a", "--output", "{file:blocker}"),
            "cannot open the generations for writing",
            files={"blocker": "x"},
        ),
        id="unwritable-output",
    ),
    pytest.param(
        Case((*SNAP, "--consumers", "a"), "generation 2 was taken by another planner", spark=True, meanwhile=True),
        id="locked-output",
    ),
    pytest.param(
        Case(
            ("--offsets", "{snap}", "--consumers", "a", "--topics", "t0,t9", "--output", "{tmp}/fresh/plans"),
            "not in the snapshot",
            store="{tmp}/fresh",
        ),
        id="fresh-output-left-absent",
    ),
    # -- a plan that drops most of the previous generation's partitions
    pytest.param(
        Case(
            ("--offsets", "{file:empty.csv}", "--consumers", "a,b", "--output", "{out}"),
            "the new plan drops all 5 partitions of generation 1 (0 planned now); nothing published: "
            "if that is meant, run again with --allow-shrink",
            files={"empty.csv": HEADER},
            spark=True,
        ),
        id="empty-snapshot",
    ),
    pytest.param(
        Case((*SNAP, "--consumers", "a,b", "--topics", "t1"), "drops 3 of the 5 partitions of generation 1", spark=True),
        id="most-partitions-dropped",
    ),
    # -- the live cluster
    pytest.param(Case(tuple(a.replace("{bootstrap}", "{nowhere}") for a in LIVE), "cannot reach Kafka"), id="unreachable"),
    pytest.param(
        Case(tuple(a.replace("{bootstrap}", "{sasl}") for a in LIVE) + SASL, "authentication failed", broker=True),
        id="auth-refused",
        marks=pytest.mark.broker,
    ),
    pytest.param(
        Case(tuple(a.replace(LIVE_GROUP, "nobody-home") for a in LIVE), "unknown consumer group 'nobody-home'", broker=True),
        id="unknown-group",
        marks=pytest.mark.broker,
    ),
    pytest.param(
        Case(
            tuple(a.replace(LIVE_TOPIC, f"{LIVE_TOPIC},missing") for a in LIVE),
            "topic(s) not found in the cluster: missing",
            broker=True,
        ),
        id="missing-topic",
        marks=pytest.mark.broker,
    ),
]
for i, p in enumerate(CASES):  # the spark cases carry the marker the spark fixture would add
    if p.values[0].spark:
        CASES[i] = pytest.param(*p.values, id=p.id, marks=(*p.marks, pytest.mark.spark))


def publish_previous(out: Path) -> plan_io.Plan:
    """Generation 1 of SNAPSHOT's five partitions, published without Spark."""
    rows = SNAPSHOT.loc[:, ["topic", "partition"]].assign(
        consumer=["a", "a", "b", "a", "b"], lag=[100_000, 50_000, 60_000, 500, 10], starting_offset=[1_000, 1_000, 1_000, -2, 20]
    )
    doc = plan_io.build_plan(rows, {"a": ["t0", "t1"], "b": ["t0", "t1"]}, generation=1, strategy="range", reset="earliest")
    with open_store(str(out)) as store, store.publisher() as publisher:
        publisher.publish(doc)
    return doc


@pytest.fixture
def workspace(tmp_path: Path) -> dict[str, str]:
    out = tmp_path / "plans"
    publish_previous(out)
    snap = offsets_io.write_snapshot(SNAPSHOT, tmp_path / "offsets.csv")
    return {"tmp": str(tmp_path), "out": str(out), "snap": str(snap), "nowhere": f"127.0.0.1:{free_port()}"}


@pytest.fixture(scope="module")
def live_group(request: pytest.FixtureRequest) -> dict[str, str]:
    """The real broker's addresses, with a topic and a group that has committed offsets."""
    from spark_lag_assign.testing.localkafka import commit, create_topic, produce

    kafka = request.getfixturevalue("kafka")
    create_topic(kafka.bootstrap_servers, LIVE_TOPIC, 2)
    produce(kafka.bootstrap_servers, LIVE_TOPIC, {0: 20, 1: 10})
    commit(kafka.bootstrap_servers, LIVE_GROUP, {(LIVE_TOPIC, 0): 5, (LIVE_TOPIC, 1): 5})
    return {"bootstrap": kafka.bootstrap_servers, "sasl": kafka.sasl_bootstrap_servers}


def fill(text: str, names: dict[str, str]) -> str:
    for key, value in names.items():
        text = text.replace("{" + key + "}", value)
    return text


@pytest.mark.parametrize("case", CASES)
def test_bad_input_exits_1_with_one_line_and_the_plan_untouched(
    case: Case, workspace: dict[str, str], request: pytest.FixtureRequest
) -> None:
    names = dict(workspace)
    if case.broker:
        names.update(request.getfixturevalue("live_group"))
    for name, content in case.files.items():
        path = Path(names["tmp"]) / name
        path.write_text(fill(content, names))
        names[f"file:{name}"] = str(path)
    argv = ["plan", *(fill(a, names) for a in case.args)]
    store = Path(fill(case.store, names))
    before = tree(store)
    env = {**os.environ, **case.env, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO)}
    child = CHILD.replace("{meanwhile}", MEANWHILE if case.meanwhile else "")
    done = subprocess.run(
        [sys.executable, "-c", child, *argv], capture_output=True, text=True, env=env, timeout=600, check=False, cwd=REPO
    )
    code, err = done.returncode, done.stderr
    assert done.stdout.strip().splitlines()[-1] == f"pyspark imported: {case.spark}", done.stdout
    after = tree(store)
    if case.meanwhile:  # the other planner's generation is there; ours must add nothing to it
        (published,) = [json.loads(line[5:]) for line in done.stdout.splitlines() if line.startswith("TREE ")]
        before = published

    # Spark 4's launcher gives every JVM it starts the incubator module jdk.incubator.vector, and
    # the JDK announces that on stderr when the JVM starts; no switch of either turns it off
    lines = [line for line in err.strip().splitlines() if not line.startswith("WARNING: Using incubator modules:")]
    assert code == 1, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("spark-lag-assign: error: ") and case.message in lines[0], lines[0]
    assert after == before


def test_allow_shrink_publishes_what_the_guard_refused(  # type: ignore[no-untyped-def]
    spark, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    out = tmp_path / "plans"
    publish_previous(out)
    only_t1 = offsets_io.write_snapshot(SNAPSHOT[SNAPSHOT["topic"] == "t1"], tmp_path / "t1.csv")
    base = ["plan", "--offsets", str(only_t1), "--consumers", "a,b", "--strategy", "range", "--output", str(out)]
    assert cli.main(base, session_factory=lambda conf, master: spark) == 1
    assert "--allow-shrink" in capsys.readouterr().err
    assert cli.main([*base, "--allow-shrink"], session_factory=lambda conf, master: spark) == 0
    doc = plan_io.read_plan(out)
    assert (doc["generation"], doc["topics"]) == (2, ["t1"])
    # the config file's key does the same; the snapshot that keeps every partition needs neither
    config = tmp_path / "c.toml"
    config.write_text(f'[plan]\noffsets = "{only_t1}"\nconsumers = ["a"]\noutput = "{out}"\nallow_shrink = true\n')
    full = offsets_io.write_snapshot(SNAPSHOT, tmp_path / "full.csv")
    assert (
        cli.main(
            ["plan", "--offsets", str(full), "--consumers", "a", "--output", str(out)], session_factory=lambda conf, master: spark
        )
        == 0
    )
    caplog.clear()
    assert cli.main(["plan", "--config", str(config)], session_factory=lambda conf, master: spark) == 0
    assert plan_io.read_plan(out)["generation"] == 4
    assert "drops 3 of the 5 partitions of generation 3" in caplog.text  # allowed, it is still a warning


def test_the_table_covers_the_issues_list() -> None:
    ids = {p.id for p in CASES}
    assert {
        "conf-timeout-soon", "conf-seed-float", "conf-seed-bool", "conf-seed-string", "option-tolerance",
        "option-max-swaps", "empty-snapshot", "most-partitions-dropped", "unreachable", "auth-refused", "unknown-group",
        "missing-topic", "snapshot-value", "subscriptions-duplicate", "zero-consumers", "duplicate-consumer",
        "unknown-strategy", "unknown-option", "unwritable-output", "locked-output",
        "drain-within-negative", "conf-pinned-unknown", "size-to-deadline-without-drain",
    } <= ids  # fmt: skip
