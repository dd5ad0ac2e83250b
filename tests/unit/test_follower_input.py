"""What a sink may hand ``PlanFollower.write_batch``: refused in one line before anything is
sent or remembered (no Spark, no broker: the check comes first)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from spark_lag_assign.consume import PlanFollower
from spark_lag_assign.errors import CommitFencedError, InputError


def follower(tmp_path: Path) -> PlanFollower:
    return PlanFollower(
        None,  # type: ignore[arg-type]  # never reached: write_batch checks its input first
        str(tmp_path / "store"),
        "A",
        lambda stream, checkpoint: None,  # type: ignore[arg-type,return-value]
        checkpoint_root=str(tmp_path / "checkpoints"),
        kafka_options={"kafka.bootstrap.servers": "127.0.0.1:1"},
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
