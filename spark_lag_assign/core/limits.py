"""What Kafka's numbers can hold: one definition for every check of them.

Offsets are int64, so every offset lies in ``[0, INT64_LIMIT)``; partitions are int32, so
every partition id lies in ``[0, PARTITION_LIMIT)``. A lag is a difference of offsets and so
below ``INT64_LIMIT`` too; a total of lags is not, and is summed exactly (``metrics``).
"""

from __future__ import annotations

from typing import Final

INT64_LIMIT: Final = 2**63  # Kafka offsets are int64: every offset is below this
PARTITION_LIMIT: Final = 2**31  # Kafka partitions are int32
#: the lag-balancing engine (lag-sticky, drain) keeps loads as int64 and adds a partition's lag
#: to a consumer's load before it compares: a total below this keeps every such sum exact
ENGINE_LOAD_LIMIT: Final = 2**62

__all__ = ["ENGINE_LOAD_LIMIT", "INT64_LIMIT", "PARTITION_LIMIT"]
