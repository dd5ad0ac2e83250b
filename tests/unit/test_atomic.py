"""The one whole-file write (spark_lag_assign.extract.atomic) and its users: a failed write leaves the
old file as it was and nothing else behind; a good one replaces it whole."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pandas as pd
import pytest

from spark_lag_assign.extract import atomic
from spark_lag_assign.extract.offsets import read_snapshot, write_snapshot
from spark_lag_assign.store.fs import LocalFileSystem


class Boom(Exception):
    pass


def test_a_good_write_replaces_the_file_whole_with_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(b"old")
    os.chmod(path, 0o600)
    atomic.write_atomically(path, b"new contents")
    assert path.read_bytes() == b"new contents"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]


def test_a_writer_function_fills_the_temp_file_beside_the_target(tmp_path: Path) -> None:
    seen: list[str] = []

    def write(tmp: str) -> None:
        seen.append(tmp)
        Path(tmp).write_text("written by pandas, say")

    atomic.write_atomically(tmp_path / "out.csv", write)
    assert (tmp_path / "out.csv").read_text() == "written by pandas, say"
    assert os.path.dirname(seen[0]) == str(tmp_path)  # same directory: the rename stays on one file system
    assert os.path.basename(seen[0]).startswith(".out.csv.") and seen[0].endswith(".tmp")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


@pytest.mark.parametrize("existed", [True, False])
def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path: Path, existed: bool) -> None:
    path = tmp_path / "offsets.parquet"
    if existed:
        path.write_bytes(b"the previous snapshot")

    def half_then_fail(tmp: str) -> None:
        Path(tmp).write_bytes(b"half a new sn")
        raise Boom()

    with pytest.raises(Boom):
        atomic.write_atomically(path, half_then_fail)
    assert sorted(p.name for p in tmp_path.iterdir()) == (["offsets.parquet"] if existed else [])
    if existed:
        assert path.read_bytes() == b"the previous snapshot"


def test_a_failed_rename_leaves_the_old_file_and_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b"old")

    def refuse(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        atomic.write_atomically(path, b"new")
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_temp_names_are_hidden_unique_and_swept_by_the_directory_store(tmp_path: Path) -> None:
    from spark_lag_assign.store.directory import _LEFTOVER

    names = {os.path.basename(atomic.temp_name(tmp_path / "000007.manifest.json")) for _ in range(50)}
    assert len(names) == 50
    assert all(n.startswith(".") and _LEFTOVER.match(n) for n in names)


def test_a_snapshot_that_fails_half_written_keeps_the_previous_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "offsets.csv"
    good = pd.DataFrame({"topic": ["t"], "partition": [0], "beginning_offset": [0], "end_offset": [10], "committed_offset": [4]})
    write_snapshot(good, path)
    before = path.read_bytes()

    def disk_full(self: pd.DataFrame, target: str, **options: object) -> None:
        Path(target).write_text("topic,partition,beginn")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", disk_full)
    with pytest.raises(OSError, match="No space"):
        write_snapshot(good.assign(end_offset=[20]), path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert read_snapshot(path)["end_offset"].tolist() == [10]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["offsets.csv"]


def test_the_local_store_file_system_leaves_no_temp_files(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    path = str(tmp_path / "claim.json")
    assert fs.create(path, b"first")
    assert not fs.create(path, b"second")  # exclusive: the first one stays
    assert Path(path).read_bytes() == b"first"
    assert fs.symlink("claim.json", str(tmp_path / "latest"))
    assert os.readlink(tmp_path / "latest") == "claim.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claim.json", "latest"]


@pytest.mark.parametrize("has_syncfs", [True, False])
def test_many_files_written_durably_at_once_hold_their_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, has_syncfs: bool
) -> None:
    synced: list[int] = []
    fsynced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        fsynced.append(fd)
        real_fsync(fd)

    def fake_syncfs(fd: int) -> int:
        synced.append(fd)
        return 0

    monkeypatch.setattr(atomic, "_syncfs", lambda: fake_syncfs if has_syncfs else None)
    monkeypatch.setattr(atomic.os, "fsync", counting_fsync)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "old.json").write_bytes(b"a much longer old content")
    files = [(str(tmp_path / "a" / f"{i}.json"), f'{{"i":{i}}}\n'.encode()) for i in range(5)]
    files.append((str(tmp_path / "a" / "old.json"), b"new"))
    atomic.write_all_durably(files)
    assert {p: Path(p).read_bytes() for p, _ in files} == dict(files)  # truncated, not appended to
    # one flush of the file system, or one fsync per file where there is no syncfs
    assert (len(synced), len(fsynced)) == ((1, 0) if has_syncfs else (0, len(files)))


def test_a_failed_syncfs_is_an_os_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(atomic, "_syncfs", lambda: lambda fd: -1)
    with pytest.raises(OSError, match="syncfs"):
        atomic.write_all_durably([(str(tmp_path / "x"), b"x")])


def test_the_real_syncfs_is_found_on_linux(tmp_path: Path) -> None:
    if sys.platform.startswith("linux"):
        assert atomic._syncfs() is not None
    atomic.write_all_durably([(str(tmp_path / "x"), b"x")])
    assert (tmp_path / "x").read_bytes() == b"x"


def test_many_files_are_written_whole_on_threads_and_a_failure_is_raised(tmp_path: Path) -> None:
    files = [(str(tmp_path / f"{i}.json"), f'{{"i":{i}}}\n'.encode() * (i + 1)) for i in range(4 * atomic.WRITERS)]
    atomic.write_all_durably(files)
    assert {p: Path(p).read_bytes() for p, _ in files} == dict(files)
    # the same path twice: written in order, the last content stays
    twice = [*files, (files[0][0], b"last")]
    atomic.write_all_durably(twice)
    assert Path(files[0][0]).read_bytes() == b"last"
    broken = [*files[1:], (str(tmp_path / "missing" / "x.json"), b"x")]
    with pytest.raises(FileNotFoundError):
        atomic.write_all_durably(broken)
