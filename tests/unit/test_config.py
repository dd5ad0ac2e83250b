"""Configuration: one validated object from a TOML file and command-line overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_lag_assign import config
from spark_lag_assign.errors import ConfigError, InputError, StrategyError

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


LIVE = """
[kafka]
bootstrap_servers = "k:9092"
group = "g"
topics = ["a", "b"]
[plan]
output = "out/x"
consumers = ["c1", "c0"]
"""


def test_the_shipped_configs_load(monkeypatch: pytest.MonkeyPatch) -> None:
    demo = config.settings(REPO / "conf" / "demo.toml")
    assert (demo.group, demo.topics, demo.consumers, demo.strategy) == ("demo", ("t0",), ("C0", "C1"), "lag")
    monkeypatch.setenv("PLANNER_KAFKA_PASSWORD", "from-env")
    cluster = config.settings(REPO / "conf" / "cluster.example.toml")
    assert cluster.client["sasl_plain_password"] == "from-env"
    assert cluster.client["security_protocol"] == "SASL_SSL"


def test_a_file_and_its_defaults(tmp_path: Path) -> None:
    s = config.settings(write(tmp_path, LIVE))
    assert (s.bootstrap_servers, s.group, s.topics, s.output) == ("k:9092", "g", ("a", "b"), "out/x")
    assert s.consumers == ("c0", "c1") and s.subscriptions == {"c1": ["*"], "c0": ["*"]}
    assert (s.strategy, s.reset, s.seed, s.live) == ("lag-sticky", "latest", 0, True)
    assert s.resolved_subscriptions(["b", "a"]) == {"c1": ["a", "b"], "c0": ["a", "b"]}


def test_command_line_overrides_win_and_replace_the_files_alternative(tmp_path: Path) -> None:
    path = write(tmp_path, LIVE)
    s = config.settings(path, offsets="snap.csv", strategy="range", seed=4, consumers="x,y")
    assert (s.offsets, s.bootstrap_servers, s.live) == (Path("snap.csv"), None, False)
    assert (s.strategy, s.seed, s.consumers) == ("range", 4, ("x", "y"))
    subs = write(tmp_path, json.dumps({"x": ["a"], "y": ["a", "b"]}), "subs.json")
    s = config.settings(path, subscriptions=str(subs))
    assert s.subscriptions == {"x": ["a"], "y": ["a", "b"]}


def test_secrets_come_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = LIVE.replace("[plan]", '[kafka.client_env]\nsasl_plain_password = "PW_VAR"\n[plan]')
    path = write(tmp_path, text)
    monkeypatch.delenv("PW_VAR", raising=False)
    with pytest.raises(ConfigError, match=r"environment variable PW_VAR .*sasl_plain_password.* is not set"):
        config.settings(path)
    monkeypatch.setenv("PW_VAR", "s3cret")
    assert config.settings(path).client == {"sasl_plain_password": "s3cret"}


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("[kafka\n", ConfigError, "not valid TOML"),
        ("[kafk]\nx=1\n", ConfigError, "unknown section [kafk]"),
        ('[kafka]\nbootstrap_server = "k"\n', ConfigError, "unknown key(s) in [kafka]: bootstrap_server"),
        ('[plan]\noutput = "o"\nconsumers = ["a"]\n', ConfigError, "no offsets source"),
        (LIVE.replace('output = "out/x"\n', ""), ConfigError, "no store to publish to"),
        (LIVE.replace('output = "out/x"', 'output = "zk://h:1/p"'), ConfigError, "unknown scheme zk://"),
        (LIVE.replace('output = "out/x"', 'output = "kafka://h:9092/a b"'), ConfigError, "cannot start Kafka topic names"),
        (LIVE.replace('output = "out/x"', 'output = "s3a://bucket/plans"'), ConfigError, "no atomic rename"),
        (LIVE.replace('consumers = ["c1", "c0"]', 'consumers = ["c1", "c1"]'), InputError, "'c1' is given twice"),
        (LIVE.replace('consumers = ["c1", "c0"]', "consumers = []"), InputError, "no consumers"),
        (LIVE.replace('consumers = ["c1", "c0"]', ""), ConfigError, "no consumers"),
        (LIVE.replace("[plan]", '[plan]\nstrategy = "fastest"'), StrategyError, "valid: range, roundrobin, lag"),
        (LIVE.replace("[plan]", '[plan]\nreset = "smallest"'), InputError, "unknown reset policy"),
        (
            LIVE.replace("[plan]", '[plan]\nstrategy = "range"') + "[plan.options]\ntolerance = 1\n",
            ConfigError,
            "strategy range takes no option tolerance",
        ),
        (LIVE.replace("[plan]", '[plan]\noffsets = "s.csv"'), ConfigError, "choose one offsets source"),
    ],
)
def test_bad_config_gets_one_line_naming_the_problem(tmp_path: Path, text: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error) as err:
        config.settings(write(tmp_path, text))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        config.settings(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "must be a non-empty object"),
        ("{}", "must be a non-empty object"),
        ('{"c0": "t0"}', "consumer 'c0' must map to a list of topic names"),
        ('{"c0": [1]}', "consumer 'c0' must map to a list of topic names"),
        ('{"c0": ["t"], "c0": ["u"]}', "consumer id 'c0' is given twice"),
        ('{"bad/id": ["t"]}', "invalid consumer id 'bad/id'"),
    ],
)
def test_malformed_subscriptions_files(tmp_path: Path, content: str, message: str) -> None:
    path = write(tmp_path, content, "subs.json")
    with pytest.raises(InputError) as err:
        config.read_subscriptions_file(path)
    assert message in str(err.value) and "\n" not in str(err.value)


SECURE = LIVE.replace(
    "[plan]",
    '[kafka.client]\nsecurity_protocol = "SASL_SSL"\nsasl_mechanism = "PLAIN"\nrequest_timeout_ms = 1000\n'
    '[kafka.client_env]\nsasl_plain_password = "SLA_TEST_SECRET"\n[plan]',
)


def test_a_kafka_option_overrides_one_key_and_keeps_the_files_security(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLA_TEST_SECRET", "s3cret")
    s = config.settings(write(tmp_path, SECURE), client={"request_timeout_ms": 5000})
    assert s.client == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "request_timeout_ms": 5000, "sasl_plain_password": "s3cret",
    }  # fmt: skip


def test_snapshot_honours_the_files_secrets_and_overrides_key_by_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pandas as pd

    from spark_lag_assign import cli
    from spark_lag_assign.extract import offsets

    seen: dict[str, object] = {}

    def read_offsets(bootstrap: str, group: str, **kwargs: object) -> pd.DataFrame:
        seen.update(kwargs)
        return pd.DataFrame(
            {"topic": ["a"], "partition": [0], "beginning_offset": [0], "end_offset": [1], "committed_offset": [0]}
        )

    monkeypatch.setenv("SLA_TEST_SECRET", "s3cret")
    monkeypatch.setattr(offsets, "read_offsets", read_offsets)
    argv = ["snapshot", "--config", str(write(tmp_path, SECURE)), "--kafka-option", "request_timeout_ms=5000",
            "--output", str(tmp_path / "snap.csv")]  # fmt: skip
    assert cli.main(argv) == 0
    assert seen["client_options"] == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "request_timeout_ms": 5000, "sasl_plain_password": "s3cret",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("section", "line", "message"),
    [
        ("kafka", 'timeout_ms = "soon"', "[kafka] timeout_ms: input should be a valid integer, not 'soon'"),
        ("kafka", "timeout_ms = 0", "[kafka] timeout_ms: input should be greater than 0, not 0"),
        ("kafka", "topic_pattern = 7", "[kafka] topic_pattern: input should be a valid string, not 7"),
        (
            "kafka.client_env",
            "sasl_plain_password = 7",
            "[kafka.client_env] sasl_plain_password: input should be a valid string, not 7",
        ),
        ("plan", "seed = 2.9", "[plan] seed: input should be a valid integer, not 2.9"),
        ("plan", "seed = true", "[plan] seed: input should be a valid integer, not True"),
        ("plan", 'seed = "2"', "[plan] seed: input should be a valid integer, not '2'"),
        ("plan", "history = 0", "[plan] history: input should be greater than or equal to 1, not 0"),
        ("plan", 'allow_shrink = "yes"', "[plan] allow_shrink: input should be a valid boolean, not 'yes'"),
        ("plan", 'rate = "fast"', "[plan] rate: input should be a valid number, not 'fast'"),
        ("plan", "rate = -1", "[plan] rate must be a positive number of records per second, not -1.0"),
        ("plan", "subscriptions = 3", "[plan] subscriptions must name a JSON file or be a table"),
        ("plan", "options = 3", "[plan] options: input should be a valid dictionary, not 3"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_not_coerced(tmp_path: Path, section: str, line: str, message: str) -> None:
    text = LIVE + f"[{section}]\n{line}\n" if "." in section else LIVE.replace(f"[{section}]", f"[{section}]\n{line}")
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        config.settings(path)
    assert str(err.value) == f"{path}: {message}" or str(err.value).startswith(f"{path}: {message}"), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tolerance": -1}, "--option tolerance=-1: lag-sticky: tolerance must be a number >= 0, not -1"),
        ({"max_swaps": "abc"}, "--option max_swaps=abc: lag-sticky: max_swaps must be an integer >= 0, not 'abc'"),
        ({"max_swaps": 2.5}, "--option max_swaps=2.5: lag-sticky: max_swaps must be an integer >= 0, not 2.5"),
        ({"speed": 2}, "--option speed=2: strategy lag-sticky takes no option speed; it takes: tolerance, max_swaps"),
    ],
)
def test_strategy_options_are_checked_by_the_strategys_parser_before_any_work(options: dict[str, object], message: str) -> None:
    with pytest.raises((ConfigError, StrategyError)) as err:
        config.settings(offsets="s.csv", consumers="a", output="out", options=options)
    assert str(err.value) == message


def test_strategy_options_from_the_file_and_the_command_line_merge_key_by_key(tmp_path: Path) -> None:
    path = write(tmp_path, LIVE + "[plan.options]\ntolerance = 0.1\nmax_swaps = 5\n")
    assert config.settings(path).options == {"tolerance": 0.1, "max_swaps": 5}
    assert config.settings(path, options={"max_swaps": 9}).options == {"tolerance": 0.1, "max_swaps": 9}
    with pytest.raises(StrategyError, match=r"\[plan.options\] tolerance: lag-sticky: tolerance must be"):
        config.settings(write(tmp_path, LIVE + "[plan.options]\ntolerance = -0.5\n"))


def test_file_then_environment_then_command_line(tmp_path: Path) -> None:
    path = write(tmp_path, LIVE.replace("[plan]", "[plan]\nseed = 1\nhistory = 5"))
    env = {"SPARK_LAG_ASSIGN_SEED": "2", "SPARK_LAG_ASSIGN_TOPICS": "x, y", "SPARK_LAG_ASSIGN_ALLOW_SHRINK": "true",
           "SPARK_LAG_ASSIGN_GROUP": "", "UNRELATED": "1"}  # fmt: skip
    s = config.settings(path, environ=env)
    assert (s.seed, s.history, s.topics, s.allow_shrink, s.group) == (2, 5, ("x", "y"), True, "g")
    s = config.settings(path, environ=env, seed="3", topics="z")
    assert (s.seed, s.topics) == (3, ("z",))
    # the environment's snapshot replaces the file's live cluster, as a flag would
    s = config.settings(path, environ={"SPARK_LAG_ASSIGN_OFFSETS": "snap.csv"})
    assert (s.offsets, s.bootstrap_servers) == (Path("snap.csv"), None)


@pytest.mark.parametrize(
    ("env", "overrides", "message"),
    [
        ({"SPARK_LAG_ASSIGN_TIMEOUT_MS": "soon"}, {}, "SPARK_LAG_ASSIGN_TIMEOUT_MS: input should be a valid integer"),
        ({"SPARK_LAG_ASSIGN_SEED": "2.9"}, {}, "SPARK_LAG_ASSIGN_SEED: input should be a valid integer"),
        ({}, {"seed": "2.9"}, "--seed: input should be a valid integer"),
        ({}, {"timeout_ms": "-5"}, "--timeout-ms: input should be greater than 0"),
        ({}, {"history": "0"}, "--history: input should be greater than or equal to 1"),
        ({}, {"interval": "soon", "offsets_later": "l.csv"}, "--interval: input should be a valid number"),
        ({}, {"interval": "0", "offsets_later": "l.csv"}, "--interval: the interval between two observations must be > 0"),
        ({}, {"strategy": "best"}, "--strategy: unknown strategy 'best'"),
        ({}, {"consumers": "a,-b"}, "--consumers: invalid consumer id '-b'"),
        ({}, {"reset": "smallest"}, "--reset: unknown reset policy 'smallest'"),
        ({}, {"output": "zk://h:1/p"}, "--output: "),
    ],
)
def test_the_environment_and_flags_are_named_in_their_errors(
    env: dict[str, str], overrides: dict[str, str], message: str
) -> None:
    with pytest.raises((ConfigError, InputError, StrategyError)) as err:
        config.settings(environ=env, **{"offsets": "s.csv", "consumers": "a", "output": "out", **overrides})
    assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)


@pytest.mark.parametrize(
    ("given", "parsed"),
    [("a,b", ["a", "b"]), (" a , b ,", ["a", "b"]), (",", []), ("", []), (["a ", " ", "b"], ["a", "b"]), ("a", ["a"])],
)
def test_one_comma_list_parser(given: str | list[str], parsed: list[str]) -> None:
    assert config.comma_list(given) == parsed


def test_snapshot_and_show_are_validated_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from spark_lag_assign import cli

    bad = write(tmp_path, '[kafka]\nbootstrap_servers = "k:9092"\ngroup = "g"\ntimeout_ms = "soon"\n')
    cases = [
        (["snapshot", "--config", str(bad), "--output", str(tmp_path / "s.csv")], 1,
         f"{bad}: [kafka] timeout_ms: input should be a valid integer, not 'soon'"),
        (["snapshot", "--bootstrap-servers", "k:9092", "--output", str(tmp_path / "s.csv")], 1, "snapshot needs bootstrap_servers and group"),
        (["snapshot", "--bootstrap-servers", "k:9092", "--group", "g", "--timeout-ms", "0", "--output", "s.csv"], 1,
         "--timeout-ms: input should be greater than 0"),
        (["show", "zk://h:1/p"], 1, "unknown scheme zk://"),
        (["show", str(tmp_path), "--generation", "0"], 2, "argument --generation: '0' must be at least 1"),
    ]  # fmt: skip
    for argv, status, message in cases:
        try:
            code = cli.main(argv)
        except SystemExit as exited:  # argparse's own usage errors
            code = exited.code
        err = capsys.readouterr().err.strip()
        assert code == status and message in err and len(err.splitlines()) == 1, (argv, err)
    assert not (tmp_path / "s.csv").exists()


SIZED = LIVE.replace(
    "[plan]",
    '[plan]\nstrategy = "drain"\nmetrics_file = "/var/lib/node_exporter/planner.prom"\npushgateway = "http://pg:9091"\n'
    'drain_within = "45m"\nsize_to_deadline = true\npinned = ["c1"]',
)


def test_the_metrics_and_sizing_keys_from_the_file_then_the_environment_then_flags(tmp_path: Path) -> None:
    path = write(tmp_path, SIZED)
    s = config.settings(path)
    assert (s.metrics_file, s.pushgateway, s.drain_within, s.size_to_deadline, s.pinned) == (
        "/var/lib/node_exporter/planner.prom", "http://pg:9091", 2700.0, True, ("c1",)
    )  # fmt: skip
    assert config.settings(write(tmp_path, LIVE)).drain_within is None  # absent: not sized
    env = {"SPARK_LAG_ASSIGN_METRICS_FILE": "m.prom", "SPARK_LAG_ASSIGN_PUSHGATEWAY": "http://other:9091",
           "SPARK_LAG_ASSIGN_DRAIN_WITHIN": "1h30m", "SPARK_LAG_ASSIGN_SIZE_TO_DEADLINE": "false",
           "SPARK_LAG_ASSIGN_PINNED": "c0, c1"}  # fmt: skip
    s = config.settings(path, environ=env)
    assert (s.metrics_file, s.pushgateway, s.drain_within, s.size_to_deadline, s.pinned) == (
        "m.prom", "http://other:9091", 5400.0, False, ("c0", "c1")
    )  # fmt: skip
    s = config.settings(path, environ=env, drain_within="90", pinned="c1", metrics_file="f.prom")
    assert (s.drain_within, s.pinned, s.metrics_file) == (90.0, ("c1",), "f.prom")
    assert config.settings(write(tmp_path, SIZED.replace('"45m"', "600"))).drain_within == 600.0  # a number: seconds


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ('drain_within = "-5m"', "[plan] drain_within: '-5m' is negative: a deadline is a time from now (e.g. 45m)"),
        ('drain_within = "soon"', "[plan] drain_within: 'soon' is not a duration (e.g. 45m, 1h30m, 90s)"),
        ("drain_within = 0", "[plan] drain_within: 0.0 must be a time of more than zero seconds (e.g. 45m)"),
        ("drain_within = true", "[plan] drain_within: input should be a valid string, not True"),
        ('drain_within = "45m"\npinned = ["c9"]', "[plan] pinned: pinned pipeline(s) not in the group: c9"),
        ('pinned = ["c0"]', "[plan] pinned: pinned pipelines are for sizing: give drain_within too"),
        ("size_to_deadline = true", "[plan] size_to_deadline: size_to_deadline needs drain_within (the deadline)"),
        (
            'drain_within = "45m"\nsize_to_deadline = true',
            "[plan] size_to_deadline: the sized plan is drain's: use strategy drain (not lag-sticky)",
        ),
        ('size_to_deadline = "yes"', "[plan] size_to_deadline: input should be a valid boolean, not 'yes'"),
        ("metrics_file = 7", "[plan] metrics_file: input should be a valid string, not 7"),
        ("pushgateway = 7", "[plan] pushgateway: input should be a valid string, not 7"),
    ],
)
def test_bad_metrics_and_sizing_keys_are_one_line_naming_the_key(tmp_path: Path, lines: str, message: str) -> None:
    path = write(tmp_path, LIVE.replace("[plan]", f"[plan]\n{lines}"))
    with pytest.raises(ConfigError) as err:
        config.settings(path)
    assert str(err.value) == f"{path}: {message}"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SPARK_LAG_ASSIGN_DRAIN_WITHIN": "-1h"}, "SPARK_LAG_ASSIGN_DRAIN_WITHIN: '-1h' is negative"),
        ({"SPARK_LAG_ASSIGN_DRAIN_WITHIN": "1h30"}, "SPARK_LAG_ASSIGN_DRAIN_WITHIN: '1h30' is not a duration"),
        ({"SPARK_LAG_ASSIGN_SIZE_TO_DEADLINE": "maybe"}, "SPARK_LAG_ASSIGN_SIZE_TO_DEADLINE: input should be a valid boolean"),
        (
            {"SPARK_LAG_ASSIGN_DRAIN_WITHIN": "1h", "SPARK_LAG_ASSIGN_PINNED": "c0,zz"},
            "SPARK_LAG_ASSIGN_PINNED: pinned pipeline(s) not in the group: zz",
        ),
    ],
)
def test_bad_metrics_and_sizing_variables_are_one_line_naming_the_variable(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        config.settings(write(tmp_path, LIVE), environ=env)
    assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)


def test_the_files_deadline_and_pinned_pipelines_size_simulate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read from the file, they take effect: ``simulate`` answers for the file's deadline, the
    pinned pipeline first (test_sizing.py's worked example, C pinned), and the environment's wins."""
    from spark_lag_assign import cli

    offsets = write(tmp_path, "topic,partition,beginning_offset,end_offset,committed_offset\nt0,0,0,600,0\nt0,1,0,300,0\nt0,2,0,300,0\n",
                    "now.csv")  # fmt: skip
    rates = write(tmp_path, "consumer,records_per_second\nA,100\nB,200\nC,100\n", "rates.csv")
    path = write(tmp_path, '[plan]\ndrain_within = "5s"\npinned = ["C"]\n')
    args = ["simulate", "--config", str(path), "--offsets", str(offsets), "--consumers", "A,B,C", "--rates", str(rates),
            "--strategies", "drain"]  # fmt: skip
    assert cli.main(args) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == (
        "drain within 5.0 s: 2 pipeline(s) needed (C, B), draining in 4.5 s; 3 configured pipeline(s) drain in 3.0 s"
    )
    monkeypatch.setenv("SPARK_LAG_ASSIGN_DRAIN_WITHIN", "2s")
    assert cli.main(args) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-1].startswith("drain within 2.0 s: no number of the 3")
