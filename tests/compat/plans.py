"""Plan documents of one generation, compared across Spark versions byte for byte.

What a plan directory's generation holds (``generations/NNNNNN/``: ``plan.json``,
``assign/<consumer>.json``, ``starting-offsets/<consumer>.json``) must be the same bytes
whatever Spark line computed it, apart from ``plan.json``'s ``created`` (the wall clock of the
run). The manifest is left out: it carries ``plan.json``'s checksum, creation time included.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

#: ``plan.json``'s creation time, as the plan format writes it (ISO 8601, UTC)
CREATED = re.compile(rb'"created": ?"[0-9T:.\-]+Z"')


def documents(store: Path, generation: int = 1) -> dict[str, bytes]:
    """Every file of one generation by its path inside the generation, ``created`` blanked."""
    root = store / "generations" / f"{generation:06d}"
    if not (root / "plan.json").is_file():
        raise FileNotFoundError(f"no plan.json of generation {generation} under {store}")
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        name = path.relative_to(root).as_posix()
        if name == "plan.json":
            blanked, n = CREATED.subn(b'"created": ""', data)
            if n != 1:
                raise ValueError(f"{path}: expected one creation time, found {n}")
            data = blanked
        out[name] = data
    return out


def differences(reference: dict[str, bytes], other: dict[str, bytes]) -> list[str]:
    """One line per file that differs or exists on one side only; for ``plan.json`` the first key that differs."""
    out = []
    for name in sorted(set(reference) | set(other)):
        if name not in other:
            out.append(f"{name}: missing")
        elif name not in reference:
            out.append(f"{name}: not in the reference")
        elif reference[name] != other[name]:
            out.append(f"{name}: {_first_difference(reference[name], other[name])}")
    return out


def _first_difference(a: bytes, b: bytes) -> str:
    try:
        left, right = json.loads(a), json.loads(b)
    except ValueError:
        left = right = None
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(set(left) | set(right)):
            if left.get(key) != right.get(key):
                return f"key {key!r} differs ({str(left.get(key))[:60]} vs {str(right.get(key))[:60]})"
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"bytes differ from offset {at} ({len(a)} vs {len(b)} bytes)"
