"""Checkpoint roots, sink paths and store locations are URIs: never a ``pathlib.Path``.

``Path("s3a://bucket/x")`` collapses the double slash into ``s3a:/bucket/x``, which Spark
reads as a local path. These helpers keep a scheme's ``//`` and only treat a string as a
local path when it has no scheme.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def has_scheme(uri: str) -> bool:
    """True for ``hdfs://nn/x``, ``s3a://b/x``, ``file:/x``; False for a plain path (or ``C:\\x``)."""
    return bool(_SCHEME.match(uri)) and not re.match(r"^[A-Za-z]:[\\/]", uri)


def join_uri(root: str, *parts: str) -> str:
    """``root`` with ``parts`` appended as path elements, keeping its scheme and authority."""
    root = str(root)
    clean = [p.strip("/") for p in parts if p and p.strip("/")]
    for part in clean:
        if ".." in part.split("/"):
            raise ValueError(f"path element {part!r} may not climb out of {root}")
    if not has_scheme(root):
        return os.path.join(root, *clean)
    return "/".join([root.rstrip("/"), *clean]) if clean else root


def local_path(uri: str) -> str | None:
    """The local path a ``file:`` URI or a plain path names; None for any other scheme."""
    if not has_scheme(uri):
        return uri
    parts = urlsplit(uri)
    if parts.scheme.lower() == "file" and parts.netloc in ("", "localhost"):
        return parts.path or "/"
    return None


__all__ = ["has_scheme", "join_uri", "local_path"]
