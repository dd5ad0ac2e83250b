"""The directory store on a real HDFS: races, a planner killed mid-write, bad input, export.

The contract suite (tests/contract, backend ``hdfs``) covers the Store interface; these are
the faults a cluster adds. Processes that must die or run as another user are subprocesses
with a JVM of their own, as separate hosts would be.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

from spark_lag_assign.errors import ConfigError
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.store import PublishFencedError, StoreError, open_store, parse_uri
from spark_lag_assign.store.directory import DirectoryStore
from spark_lag_assign.store.export import export_plan
from spark_lag_assign.store.hadoop import HadoopFileSystem
from spark_lag_assign.testing.localkafka import free_port
from spark_lag_assign.testing.minihdfs import MiniHDFS
from tests.contract.test_store_contract import make_plan, publish

_count = iter(range(1, 10_000))


def _root(hdfs: MiniHDFS, what: str) -> str:
    return f"{hdfs.uri}/it/{what}-{next(_count)}"


def _open(hdfs: MiniHDFS, root: str, **settings: Any):  # -> Store
    return open_store(root, hadoop_conf=hdfs.client_conf, **settings)


def _python(script: str, *args: str, env: dict[str, str] | None = None, **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def test_of_two_racing_publishers_exactly_one_wins(hdfs: MiniHDFS) -> None:
    root = _root(hdfs, "race")
    with _open(hdfs, root) as a_store, _open(hdfs, root) as b_store:  # two clients, two leases
        for _ in range(3):
            a, b = a_store.publisher(), b_store.publisher()
            assert a.next_generation() == b.next_generation()
            plans = {"a": make_plan(a.next_generation(), tag=1), "b": make_plan(b.next_generation(), tag=2)}
            start = threading.Barrier(2)
            outcome: dict[str, str] = {}

            def run(name: str, publisher: Any) -> None:
                start.wait()
                try:
                    publisher.publish(plans[name])
                    outcome[name] = "published"
                except PublishFencedError:
                    outcome[name] = "fenced"

            threads = [threading.Thread(target=run, args=(n, p)) for n, p in (("a", a), ("b", b))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert sorted(outcome.values()) == ["fenced", "published"], outcome
            winner = next(n for n, o in outcome.items() if o == "published")
            assert a_store.latest() == b_store.latest() == plans[winner]
        assert a_store.generations() == [1, 2, 3]


# a planner that stages a whole generation, then dies while the manifest's bytes are half
# written (the file open, its lease held by a client that no longer exists)
_KILLED_PLANNER = """
    import json, sys, time
    from spark_lag_assign.store import open_store
    from spark_lag_assign.store.hadoop import HadoopFileSystem
    from tests.contract.test_store_contract import make_plan

    root, conf = sys.argv[1], json.loads(sys.argv[2])
    original = HadoopFileSystem._write

    def dying_write(self, path, data, overwrite):
        if ".manifest.json." not in path:
            return original(self, path, data, overwrite)
        out = self._fs.create(self._path(path), overwrite)
        out.write(bytearray(data[: len(data) // 2]))
        out.hflush()
        print("MID-WRITE", path, flush=True)
        time.sleep(600)

    HadoopFileSystem._write = dying_write
    with open_store(root, hadoop_conf=conf) as store, store.publisher() as publisher:
        publisher.publish(make_plan(publisher.next_generation(), tag=99))
"""


def test_a_planner_killed_mid_write_leaves_the_previous_generation_served(hdfs: MiniHDFS) -> None:
    root = _root(hdfs, "killed")
    with _open(hdfs, root) as store:
        first = publish(store, tag=1)
        planner = _python(_KILLED_PLANNER, root, json.dumps(hdfs.client_conf), start_new_session=True)
        try:
            assert planner.stdout is not None
            line = planner.stdout.readline()
            assert line.startswith("MID-WRITE"), planner.stderr.read() if planner.stderr else line
            os.killpg(planner.pid, signal.SIGKILL)
            planner.wait(30)
        finally:
            if planner.poll() is None:
                os.killpg(planner.pid, signal.SIGKILL)
                planner.wait(30)
        # the staged generation and the open manifest temp file are there; readers skip them
        fs = HadoopFileSystem(root, hdfs.client_conf)
        try:
            names = {e.name for e in fs.list(f"{root}/generations")}
        finally:
            fs.close()
        assert any(n.startswith(".000002.") for n in names), names  # staging dir, temp manifest
        assert "000002.manifest.json" not in names
        assert store.latest() == first
        assert store.generations() == [1]
        # the next planner takes number 2 without waiting for the dead writer's lease
        began = time.monotonic()
        second = publish(store, tag=2)
        assert second["generation"] == 2 and store.latest() == second
        assert time.monotonic() - began < 20
    with _open(hdfs, root) as other:
        assert other.latest() == second


def _attempt(action: Any) -> str:
    try:
        action()
        return "ok"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"


def test_permission_denied_is_one_line_and_publishes_nothing(hdfs: MiniHDFS) -> None:
    # the cluster runs as this user, HDFS's superuser; another user (a client of its own, as
    # HADOOP_USER_NAME=intruder would give) is checked
    readable, locked = _root(hdfs, "perm"), _root(hdfs, "perm-000")
    with _open(hdfs, readable) as store, _open(hdfs, locked) as other:
        first = publish(store)
        publish(other)
    fs = HadoopFileSystem(locked, hdfs.client_conf)
    try:
        permission = fs._gateway.jvm.org.apache.hadoop.fs.permission.FsPermission.valueOf("d---------")
        fs._fs.setPermission(fs._path(locked), permission)
    finally:
        fs.close()

    def as_intruder(root: str) -> DirectoryStore:
        return DirectoryStore(parse_uri(root), fs=HadoopFileSystem(root, hdfs.client_conf, user="intruder"))

    with as_intruder(readable) as store, as_intruder(locked) as locked_store:

        def publish_one() -> None:
            with store.publisher() as publisher:
                publisher.publish(make_plan(publisher.next_generation()))

        results = {
            "read": _attempt(store.latest),
            "publish": _attempt(publish_one),
            "claim": _attempt(lambda: store.claim_writer("intruder")),
            "read-locked": _attempt(locked_store.latest),
        }
    assert results["read"] == "ok"  # drwxr-xr-x: others may read plans
    for what in ("publish", "claim", "read-locked"):
        assert results[what].startswith("StoreError: store hdfs://"), results[what]
        assert "permission denied: user=intruder" in results[what]
        assert "\n" not in results[what]
    with _open(hdfs, readable) as store:
        assert store.generations() == [1] and store.latest() == first


def test_an_unreachable_namenode_is_one_line(hdfs: MiniHDFS) -> None:
    port = free_port()
    uri = f"hdfs://127.0.0.1:{port}/plans/orders"
    began = time.monotonic()
    with open_store(uri, hadoop_conf={"ipc.client.connect.max.retries": "0"}) as store:
        for action in (store.latest, store.publisher, store.claims):
            with pytest.raises(StoreError) as failed:
                action()
            message = str(failed.value)
            assert message.startswith(f"store {uri}: cannot ")
            assert f"NameNode at 127.0.0.1:{port} unreachable (Connection refused)" in message
            assert "\n" not in message
    assert time.monotonic() - began < 30


def test_a_claim_file_of_another_format_is_reported_as_unreadable(hdfs: MiniHDFS) -> None:
    root = _root(hdfs, "claims")
    with _open(hdfs, root) as store:
        with store.claim_writer("A") as writer:
            writer.write(1, [("t", 0)], 30.0)
        fs = HadoopFileSystem(root, hdfs.client_conf)
        try:
            fs.mkdirs(f"{root}/claims/B")
            fs.write(f"{root}/claims/B/0000000001.json", b'{"owner": "B", "partitions": [1, 2], "v": 2}\n')
            fs.mkdirs(f"{root}/claims/C")
            fs.write(f"{root}/claims/C/0000000001.json", b"PAR1\x00\x01binary")
        finally:
            fs.close()
        claims = store.claims()
        assert claims["A"].holds == frozenset({("t", 0)})  # type: ignore[union-attr]
        assert isinstance(claims["B"], str) and claims["B"].startswith("claims/B/0000000001.json: not a claim (no ")
        assert isinstance(claims["C"], str) and claims["C"].startswith("claims/C/0000000001.json: not JSON")
        with pytest.raises(StoreError, match=r"cannot take B over: its newest claim cannot be read") as failed:
            store.claim_writer("B")
        assert "\n" not in str(failed.value)


def test_an_object_store_is_refused_as_the_store_in_one_line() -> None:
    for uri in ("s3a://bucket/plans/orders", "gs://bucket/plans", "abfss://c@acct.dfs.core.windows.net/plans"):
        with pytest.raises(ConfigError) as refused:
            open_store(uri)
        message = str(refused.value)
        assert message.startswith(f"store {uri}: ") and "no atomic rename" in message and "\n" not in message


def _read_export(fs: HadoopFileSystem, root: str, relative: str) -> bytes:
    data = fs.read(f"{root}/{relative}")
    assert data is not None, relative
    return data


def test_export_to_hdfs_reads_back(hdfs: MiniHDFS) -> None:
    root = _root(hdfs, "export")
    doc = make_plan(4, consumers=3, tag=7)
    written = export_plan(doc, root, hadoop_conf=hdfs.client_conf)
    assert written[-1] == f"{root}/plan.json" and len(written) == 7
    fs = HadoopFileSystem(root, hdfs.client_conf)
    try:
        assert json.loads(_read_export(fs, root, "plan.json")) == doc
        for consumer, entry in doc["consumers"].items():
            assert _read_export(fs, root, f"assign/{consumer}.json").decode() == plan_io.assign_json(entry) + "\n"
            starting = _read_export(fs, root, f"starting-offsets/{consumer}.json").decode()
            assert starting == plan_io.starting_offsets_json(entry) + "\n"
        # a later plan with fewer consumers replaces the files and removes the departed one's
        smaller = make_plan(5, consumers=2, tag=8)
        export_plan(smaller, root + "/", hadoop_conf=hdfs.client_conf)
        assert json.loads(_read_export(fs, root, "plan.json")) == smaller
        assert sorted(e.name for e in fs.list(f"{root}/assign")) == ["c0.json", "c1.json"]
        assert sorted(e.name for e in fs.list(f"{root}/starting-offsets")) == ["c0.json", "c1.json"]
    finally:
        fs.close()


def test_export_to_a_local_directory(tmp_path: Any) -> None:
    doc = make_plan(1, consumers=2)
    export_plan(doc, str(tmp_path / "out"))
    assert json.loads((tmp_path / "out" / "plan.json").read_text()) == doc
    assert (tmp_path / "out" / "assign" / "c1.json").read_text() == plan_io.assign_json(doc["consumers"]["c1"]) + "\n"
    export_plan(make_plan(2, consumers=1), f"file://{tmp_path / 'out'}")
    assert sorted(p.name for p in (tmp_path / "out" / "assign").iterdir()) == ["c0.json"]
    assert not list((tmp_path / "out").rglob(".*"))  # no temp files left
