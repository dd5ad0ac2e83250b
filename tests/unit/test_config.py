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
    with pytest.raises(ConfigError, match="environment variable PW_VAR .*sasl_plain_password.* is not set"):
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
        (LIVE.replace('output = "out/x"', 'output = "kafka://h:9092/a b"'), ConfigError, "cannot name Kafka topics"),
        (LIVE.replace('output = "out/x"', 'output = "s3a://bucket/plans"'), ConfigError, "no atomic rename"),
        (LIVE.replace('consumers = ["c1", "c0"]', 'consumers = ["c1", "c1"]'), InputError, "'c1' is given twice"),
        (LIVE.replace('consumers = ["c1", "c0"]', "consumers = []"), InputError, "no consumers"),
        (LIVE.replace('consumers = ["c1", "c0"]', ""), ConfigError, "no consumers"),
        (LIVE.replace("[plan]", '[plan]\nstrategy = "fastest"'), StrategyError, "valid: range, roundrobin, lag"),
        (LIVE.replace("[plan]", '[plan]\nreset = "smallest"'), InputError, "unknown reset policy"),
        (LIVE.replace("[plan]", '[plan]\nstrategy = "range"') + "[plan.options]\ntolerance = 1\n", ConfigError,
         "strategy range takes no option tolerance"),
        (LIVE.replace("[plan]", '[plan]\noffsets = "s.csv"'), ConfigError, "choose one offsets source"),
    ],
)
def test_bad_config_gets_one_line_naming_the_problem(
    tmp_path: Path, text: str, error: type[Exception], message: str
) -> None:
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


def test_snapshot_honours_the_files_secrets_and_overrides_key_by_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pandas as pd

    from spark_lag_assign import cli, offsets

    seen: dict[str, object] = {}

    def read_offsets(bootstrap: str, group: str, **kwargs: object) -> pd.DataFrame:
        seen.update(kwargs)
        return pd.DataFrame({"topic": ["a"], "partition": [0], "beginning_offset": [0], "end_offset": [1], "committed_offset": [0]})

    monkeypatch.setenv("SLA_TEST_SECRET", "s3cret")
    monkeypatch.setattr(offsets, "read_offsets", read_offsets)
    argv = ["snapshot", "--config", str(write(tmp_path, SECURE)), "--kafka-option", "request_timeout_ms=5000",
            "--output", str(tmp_path / "snap.csv")]  # fmt: skip
    assert cli.main(argv) == 0
    assert seen["client_options"] == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "request_timeout_ms": 5000, "sasl_plain_password": "s3cret",
    }  # fmt: skip
