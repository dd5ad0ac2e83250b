"""Disk faults in a directory store, for the contract suite: damage files the way a bad
sector or a torn write would, knowing the layout of ``spark_lag_assign.store.directory``."""

from __future__ import annotations

import json
import re
from pathlib import Path


def _scramble(path: Path) -> None:
    """Overwrite the middle of a file with zeros: the size stays, the content is garbage."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[max(0, middle - 32) : middle + 32] = b"\0" * len(data[max(0, middle - 32) : middle + 32])
    if not data:
        data = bytearray(b"\0")
    path.write_bytes(bytes(data))


def damage_generation(root: Path, generation: int) -> None:
    """Make that generation's plan.json undecodable and unlike its checksum."""
    generations = Path(root) / "generations"
    manifest = generations / f"{generation:06d}.manifest.json"
    directory = json.loads(manifest.read_text())["dir"]
    _scramble(generations / directory / "plan.json")


def damage_claim(root: Path, consumer: str) -> None:
    """Make that consumer's newest claim file undecodable."""
    files = [p for p in (Path(root) / "claims" / consumer).iterdir() if re.fullmatch(r"\d{10,}\.json", p.name)]
    _scramble(max(files, key=lambda p: int(p.name.split(".")[0])))
