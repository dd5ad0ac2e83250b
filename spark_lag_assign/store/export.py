"""Export a plan's files to any URI the cluster can write, for teams that pass ``assign`` by hand.

    export_plan(plan, "hdfs://namenode:8020/exports/orders")
    export_plan(plan, "s3a://bucket/exports/orders")      # through the cluster's Hadoop connectors
    export_plan(plan, "/data/exports/orders")             # a local path or file: URI

writes, below the URI::

    assign/<consumer>.json             the exact string for .option("assign", ...)
    starting-offsets/<consumer>.json   the exact string for .option("startingOffsets", ...)
    plan.json                          the whole plan, written last

Each file is replaced whole (a closed temp file renamed over it where the file system has an
atomic rename; one plain write on object stores, which publish an object whole when it is
closed), and files of consumers the plan no longer names are removed afterwards. An export
is a copy for people and hand-written jobs, not the control plane: readers of one export may
see some consumers' files of the new plan and some of the old one while it is written;
pipelines that follow plans read the store (``spark_lag_assign.store``) instead.

Hadoop URIs go through ``spark_lag_assign.store.hadoop.HadoopFileSystem`` (Hadoop's Java
client in PySpark's JVM), so the cluster's own configuration and credentials apply.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from spark_lag_assign.errors import PlanError
from spark_lag_assign.extract.atomic import write_atomically
from spark_lag_assign.store import NO_ATOMIC_RENAME

if TYPE_CHECKING:
    from spark_lag_assign.plan.build import Plan

_JSON = re.compile(r"^[^.].*\.json$")


def _files(plan: Plan) -> dict[str, bytes]:
    from spark_lag_assign.plan.build import assign_json, check_plan, plan_json, starting_offsets_json

    check_plan(plan, "export")
    parts = {c: (assign_json(e), starting_offsets_json(e)) for c, e in plan["consumers"].items()}
    files: dict[str, bytes] = {}
    for consumer, (assign, starting) in parts.items():
        files[f"assign/{consumer}.json"] = (assign + "\n").encode()
        files[f"starting-offsets/{consumer}.json"] = (starting + "\n").encode()
    files["plan.json"] = plan_json(plan, parts).encode()  # last: dicts keep insertion order
    return files


def export_plan(plan: Plan, uri: str, *, hadoop_conf: Mapping[str, str] | None = None) -> list[str]:
    """Write the plan's files below ``uri`` (see the module docstring); returns their paths.
    ``PlanError`` (one line, naming the URI) if the destination cannot be written."""
    if not isinstance(uri, str) or not uri.strip():
        raise PlanError("export: give a destination URI or directory")
    text = uri.strip().rstrip("/") or "/"
    files = _files(plan)
    if "://" not in text and not text.startswith("file:"):
        return _export_local(os.path.abspath(os.path.expanduser(text)), files, uri)
    scheme = urlsplit(text).scheme.lower()
    if scheme == "file":
        return _export_local(urlsplit(text).path or "/", files, uri)
    return _export_hadoop(text, scheme, files, uri, hadoop_conf)


def _export_local(root: str, files: dict[str, bytes], uri: str) -> list[str]:
    written: list[str] = []
    try:
        for relative, data in files.items():
            path = os.path.join(root, relative)
            directory = os.path.dirname(path)
            os.makedirs(directory, exist_ok=True)
            write_atomically(path, data)
            written.append(path)
        for sub in ("assign", "starting-offsets"):
            for name in os.listdir(os.path.join(root, sub)):
                if _JSON.match(name) and f"{sub}/{name}" not in files:
                    os.unlink(os.path.join(root, sub, name))
    except OSError as exc:
        detail = exc.strerror or str(exc)
        where = f" ({exc.filename})" if exc.filename else ""
        raise PlanError(f"export {uri}: cannot write the plan: {detail}{where}") from None
    return written


def _export_hadoop(root: str, scheme: str, files: dict[str, bytes], uri: str, hadoop_conf: Mapping[str, str] | None) -> list[str]:
    from spark_lag_assign.store.hadoop import HadoopFileSystem

    atomic = scheme not in NO_ATOMIC_RENAME
    written: list[str] = []
    try:
        fs = HadoopFileSystem(root, hadoop_conf)
    except OSError as exc:
        raise PlanError(f"export {uri}: cannot open the file system: {exc.strerror or exc}") from None
    try:
        for sub in ("assign", "starting-offsets"):
            fs.mkdirs(f"{root}/{sub}")
        for relative, data in files.items():
            path = f"{root}/{relative}"
            fs.replace(path, data, atomic=atomic)
            written.append(path)
        for sub in ("assign", "starting-offsets"):
            for entry in fs.list(f"{root}/{sub}"):
                if not entry.is_dir and _JSON.match(entry.name) and f"{sub}/{entry.name}" not in files:
                    fs.delete(f"{root}/{sub}/{entry.name}")
    except OSError as exc:
        detail = exc.strerror or str(exc)
        where = f" ({exc.filename})" if exc.filename else ""
        raise PlanError(f"export {uri}: cannot write the plan: {detail}{where}") from None
    finally:
        fs.close()
    return written


__all__ = ["export_plan"]
