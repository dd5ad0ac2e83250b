"""What the Spark side does only for speed, in one place, each with the figure it buys.

Nothing here changes a plan: take any of it away and the same plans come out, slower.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

#: the planner's driver JVM (in local mode the executor too) compiles with C1 alone: a run of
#: seconds, where C2's slower warm-up does not pay back. In paired runs at a million
#: partitions the planner took 2-2.5 s less (of 18-19 s) with it, the bare floor script 0.5 s
#: less (of 11 s). Sessions that stream for minutes keep C2 (``session.local_conf(c1_only=...)``).
C1_ONLY_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1",)


def to_spark(spark: Any, frame: pd.DataFrame, schema: Any, scratch: Path) -> Any:
    """``frame`` as a Spark DataFrame of ``schema``.

    Where the executors share this machine's files (local Spark): through Parquet files in
    ``scratch``, which Spark's vectorized reader takes in parallel; at a million rows 0.8 s
    against 6.6 s for ``createDataFrame`` of the same Arrow table. Elsewhere the driver's
    files are not the executors', so the table goes through ``createDataFrame``.
    """
    table = _arrow(frame, schema)
    if not _executors_share_driver_files(spark):
        return spark.createDataFrame(table, schema=schema)
    import pyarrow.parquet as pq

    pieces = max(1, int(spark.sparkContext.defaultParallelism))
    size = -(-len(frame) // pieces)
    for i in range(pieces):
        pq.write_table(table.slice(i * size, size), scratch / f"part-{i:03d}.parquet", compression="none")
    return spark.read.schema(schema).parquet(str(scratch))


def _executors_share_driver_files(spark: Any) -> bool:
    """Local Spark: the driver and its executors are one process, on one file system."""
    return str(spark.sparkContext.master).startswith("local")


def _arrow(frame: pd.DataFrame, schema: Any) -> Any:
    """A pyarrow Table of ``frame`` in ``schema``'s columns: Spark takes it as it is, nulls and all,
    whatever ``spark.sql.execution.arrow.pyspark.enabled`` says."""
    import pyarrow as pa

    types = {"string": pa.string(), "integer": pa.int32(), "long": pa.int64()}
    fields = [pa.field(f.name, types[f.dataType.typeName()], f.nullable) for f in schema.fields]
    return pa.Table.from_pandas(frame[[f.name for f in schema.fields]], schema=pa.schema(fields), preserve_index=False)


__all__ = ["C1_ONLY_JVM_OPTIONS", "to_spark"]
