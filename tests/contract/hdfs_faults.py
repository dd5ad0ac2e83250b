"""Faults in a directory store on HDFS, for the contract suite: garbage written through the
same Hadoop client the store uses, knowing the layout of ``spark_lag_assign.store.directory``."""

from __future__ import annotations

import json
import re

from spark_lag_assign.store.hadoop import HadoopFileSystem
from spark_lag_assign.testing.minihdfs import CLIENT_CONF


def _scramble(data: bytes) -> bytes:
    """Zeros over the middle of a file: the size stays, the content is garbage."""
    out = bytearray(data) or bytearray(b"\0")
    middle = len(out) // 2
    start, end = max(0, middle - 32), min(len(out), middle + 32)
    out[start:end] = b"\0" * (end - start)
    return bytes(out)


def _rewrite(root: str, relative: str) -> None:
    fs = HadoopFileSystem(root, CLIENT_CONF)
    try:
        path = f"{root}/{relative}"
        data = fs.read(path)
        assert data is not None, f"{path} does not exist"
        fs.write(path, _scramble(data))
    finally:
        fs.close()


def damage_generation(root: str, generation: int) -> None:
    """Make that generation's plan.json undecodable and unlike its checksum."""
    fs = HadoopFileSystem(root, CLIENT_CONF)
    try:
        manifest = fs.read(f"{root}/generations/{generation:06d}.manifest.json")
        assert manifest is not None, f"generation {generation} has no manifest"
        directory = json.loads(manifest)["dir"]
    finally:
        fs.close()
    _rewrite(root, f"generations/{directory}/plan.json")


def damage_claim(root: str, consumer: str) -> None:
    """Make that consumer's newest claim file undecodable."""
    fs = HadoopFileSystem(root, CLIENT_CONF)
    try:
        names = [e.name for e in fs.list(f"{root}/claims/{consumer}") if re.fullmatch(r"\d{10,}\.json", e.name)]
    finally:
        fs.close()
    assert names, f"{consumer} has no claim files"
    _rewrite(root, f"claims/{consumer}/{max(names, key=lambda n: int(n.split('.')[0]))}")
