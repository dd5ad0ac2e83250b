"""Checkpoint roots, sink paths and stores are URIs: a scheme's ``//`` survives every join."""

from __future__ import annotations

import pytest

from spark_lag_assign.consume.kafka_commit import commit_id, metadata, parse_metadata
from spark_lag_assign.extract.uris import has_scheme, join_uri, local_path


@pytest.mark.parametrize(
    ("root", "parts", "joined"),
    [
        ("s3a://bucket/x", ("A", "gen-000001"), "s3a://bucket/x/A/gen-000001"),
        ("s3a://bucket/x/", ("A",), "s3a://bucket/x/A"),
        ("hdfs://nn:8020/chk", ("A", "/gen-2/"), "hdfs://nn:8020/chk/A/gen-2"),
        ("file:///tmp/chk", ("A",), "file:///tmp/chk/A"),
        ("/tmp/chk", ("A", "gen-1"), "/tmp/chk/A/gen-1"),
        ("relative/chk", ("A",), "relative/chk/A"),
        ("gs://b", (), "gs://b"),
    ],
)
def test_join_keeps_the_scheme_and_authority(root: str, parts: tuple[str, ...], joined: str) -> None:
    assert join_uri(root, *parts) == joined


def test_a_path_element_cannot_climb_out_of_the_root() -> None:
    with pytest.raises(ValueError, match="may not climb out"):
        join_uri("hdfs://nn/chk", "../other")


def test_which_strings_are_uris_and_which_are_local() -> None:
    assert has_scheme("s3a://b/x") and has_scheme("file:/x") and not has_scheme("/x") and not has_scheme("x/y")
    assert local_path("file:///data/p") == "/data/p" and local_path("/data/p") == "/data/p"
    assert local_path("hdfs://nn/p") is None and local_path("file://otherhost/p") is None


def test_commit_metadata_names_the_consumer_and_generation() -> None:
    text = metadata("pipeline-a", 17)
    assert parse_metadata(text) == ("pipeline-a", 17)
    assert parse_metadata("") is None and parse_metadata("someone else's note") is None
    assert parse_metadata("spark-lag-assign consumer=a generation=x") is None
    assert commit_id("orders", "pipeline-a") == "spark-lag-assign.orders.commit.pipeline-a"
