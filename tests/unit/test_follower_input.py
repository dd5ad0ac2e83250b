"""What a sink may hand ``PlanFollower.write_batch`` and the settings a follower takes: bad
ones are refused in one line before anything is sent or remembered (no Spark, no broker)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spark_lag_assign.consume import PlanFollower
from spark_lag_assign.consume.commits import kafka_wait_ms
from spark_lag_assign.errors import CommitFencedError, InputError


def follower(tmp_path: Path, **settings: Any) -> PlanFollower:
    """Consumer A of a directory store, without Spark (nothing here starts a query)."""
    return PlanFollower(
        None,  # type: ignore[arg-type]  # never reached: write_batch checks its input first
        str(tmp_path / "store"),
        "A",
        lambda stream, checkpoint: None,  # type: ignore[arg-type,return-value]
        checkpoint_root=str(tmp_path / "checkpoints"),
        kafka_options={"kafka.bootstrap.servers": "127.0.0.1:1"},
        **settings,
    )


@pytest.mark.parametrize("offset", [-1, -2, 1.5, "3", True, None])
def test_an_offset_that_is_no_next_offset_is_refused_in_one_line(tmp_path: Path, offset: object) -> None:
    f = follower(tmp_path)
    with pytest.raises(
        InputError, match=r"^write_batch: the offset of t-0 must be the next offset to read \(an integer, 0 or more\), not "
    ):
        f.write_batch({("t", 0): offset})  # type: ignore[dict-item]
    assert f.committer.commits == 0 and f.committer.failures == 0


@pytest.mark.parametrize("offset", [0, 7, np.int64(5)])
def test_a_next_offset_passes_the_check(tmp_path: Path, offset: int) -> None:
    with pytest.raises(CommitFencedError, match="reads nothing under a valid lease"):  # not reading: the next check
        follower(tmp_path).write_batch({("t", 0): offset})


def test_the_loops_kafka_waits_fit_in_a_quarter_of_the_lease(tmp_path: Path) -> None:
    """A Kafka call of the loop that waits longer than the time between renewals allows lets the
    lease lapse while only the broker is away (the store still takes renewals)."""
    assert kafka_wait_ms(30.0) == 7500  # the default: a quarter of the lease
    assert kafka_wait_ms(120.0) == 15000  # at most 15 s
    assert kafka_wait_ms(10.0, 2500) == 2500
    assert follower(tmp_path).kafka_timeout_ms == 7500  # the follower's default lease is 30 s
    for lease in (0.0, -1.0):
        with pytest.raises(ValueError, match=r"^lease must be positive"):
            kafka_wait_ms(lease)
    for given in (2501, 0, -1):
        with pytest.raises(ValueError, match=rf"^kafka_timeout_ms {given} must be above 0 and at most a quarter of the lease \(2500 ms for 10s\)"):
            kafka_wait_ms(10.0, given)
    with pytest.raises(ValueError, match="kafka_timeout_ms 8000 must be"):
        PlanFollower(
            None,  # type: ignore[arg-type]
            str(tmp_path / "store"),
            "A",
            lambda stream, checkpoint: None,  # type: ignore[arg-type,return-value]
            checkpoint_root=str(tmp_path / "checkpoints"),
            kafka_options={"kafka.bootstrap.servers": "127.0.0.1:1"},
            kafka_timeout_ms=8000,
        )


@pytest.mark.parametrize("name", ["plans.v1", "orders.commit.b"])
def test_a_store_whose_name_cannot_name_commit_ids_is_refused_before_anything_is_claimed(tmp_path: Path, name: str) -> None:
    """Commit ids are spark-lag-assign.NAME.commit.CONSUMER: with a "." in a directory's name,
    store "orders.commit.b" would commit as store "orders"'s consumer b's prefix ACL covers."""
    from spark_lag_assign.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"^store name '{name}' cannot name the pipelines' commit ids"):
        PlanFollower(
            None,  # type: ignore[arg-type]
            str(tmp_path / name),
            "A",
            lambda stream, checkpoint: None,  # type: ignore[arg-type,return-value]
            checkpoint_root=str(tmp_path / "checkpoints"),
            kafka_options={"kafka.bootstrap.servers": "127.0.0.1:1"},
        )
    assert not (tmp_path / name / "claims").exists()
    assert follower(tmp_path).store.name == "store"  # a plain name is one


def test_a_bad_setting_is_refused_before_the_store_is_opened(tmp_path: Path) -> None:
    """The settings are checked before ``as_store`` opens the store: a Kafka store on a port
    nobody listens on would otherwise be contacted first (its clients left open by the failed
    constructor, and the error about the store, not about the setting)."""
    with pytest.raises(InputError, match=r"^no Kafka bootstrap servers"):
        PlanFollower(
            None,  # type: ignore[arg-type]
            "kafka://127.0.0.1:1/orders",
            "A",
            lambda stream, checkpoint: None,  # type: ignore[arg-type,return-value]
            checkpoint_root=str(tmp_path / "checkpoints"),
            kafka_options={},
        )
