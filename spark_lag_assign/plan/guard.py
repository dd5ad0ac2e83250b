"""The last checks before a plan is published. A plan that covers far fewer partitions than the
previous generation is usually a broken input (an empty or truncated snapshot, a topic list
with a typo), not a decision, so it is refused unless the operator says it is meant; so is a
plan that changes who fences (``check_fencing``).

"Far fewer": more than half of the previous generation's partitions (assigned or not) are
absent from the new plan. Partitions the new plan adds do not make up for them: a renamed
topic drops every partition of the old name. A previous plan with no partitions drops none.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from spark_lag_assign.core.limits import PARTITION_LIMIT  # a plan naming others is refused when read
from spark_lag_assign.core.subscriptions import partition_keys
from spark_lag_assign.errors import FencingChangeRefusedError, ShrinkRefusedError

log = logging.getLogger(__name__)

#: the share of the previous generation's partitions a plan may drop without --allow-shrink
SHRINK_LIMIT = 0.5


@dataclass(frozen=True)
class Shrink:
    """How the new plan's partitions compare with the previous generation's."""

    generation: int  # of the previous plan
    previous: int  # partitions of the previous plan
    planned: int  # partitions of the new plan
    dropped: int  # partitions of the previous plan that the new one does not name

    @property
    def too_far(self) -> bool:
        return self.dropped > SHRINK_LIMIT * self.previous

    def describe(self) -> str:
        share = "all" if self.dropped == self.previous else f"{self.dropped:,} of the"
        return (
            f"the new plan drops {share} {self.previous:,} partitions of generation {self.generation} "
            f"({self.planned:,} planned now)"
        )


def plan_partitions(plan: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """topic -> every partition a plan names, assigned or unassigned (sorted, distinct)."""
    # one Python list per topic, one array per topic: a million-partition plan holds about a
    # million small (consumer, topic) lists, too many to turn into arrays one by one
    lists: dict[str, list[int]] = {}
    for entry in plan.get("consumers", {}).values():
        for topic, parts in entry.get("assign", {}).items():
            lists.setdefault(topic, []).extend(parts)
    for topic, parts in plan.get("unassigned", {}).items():
        lists.setdefault(topic, []).extend(parts)
    return {t: np.unique(np.asarray(parts, dtype=np.int64)) for t, parts in lists.items()}


def _runs(plan: Mapping[str, Any]) -> tuple[list[str], list[list[int]]]:
    """Every (topic, partition list) of a plan, assigned or not, as two parallel lists."""
    topics: list[str] = []
    lists: list[list[int]] = []
    for entry in plan.get("consumers", {}).values():
        assign = entry.get("assign", {})
        topics.extend(assign)
        lists.extend(assign.values())
    unassigned = plan.get("unassigned", {})
    topics.extend(unassigned)
    lists.extend(unassigned.values())
    return topics, lists


def shrink(previous: Mapping[str, Any], new: Mapping[str, Any]) -> Shrink:
    """What the new plan keeps of the previous one's partitions."""
    # each plan's partitions as one sorted int64 key per (topic, partition), topics numbered
    # over both plans: a million partitions in about a million short lists, read by C loops
    runs = [_runs(previous), _runs(new)]
    number = {t: i for i, t in enumerate(sorted({t for topics, _ in runs for t in topics}))}
    keys = []
    for topics, lists in runs:
        code = np.fromiter(map(number.__getitem__, topics), dtype=np.int64, count=len(topics))
        sizes = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        parts = np.fromiter(chain.from_iterable(lists), dtype=np.int64, count=int(sizes.sum()))
        key = np.sort(partition_keys(np.repeat(code, sizes), parts, PARTITION_LIMIT))  # (np.unique hashes: ten times slower here)
        keys.append(key[np.r_[True, key[1:] != key[:-1]]] if len(key) else key)
    before, after = keys
    return Shrink(
        generation=int(previous.get("generation", 0)),
        previous=len(before),
        planned=len(after),
        dropped=int((~np.isin(before, after, assume_unique=True)).sum()),
    )


def check_shrink(previous: Mapping[str, Any] | None, new: Mapping[str, Any], *, allow: bool) -> Shrink | None:
    """Refuse (``ShrinkRefusedError``, one line naming the counts and the flag) a plan that drops
    more than half of the previous generation's partitions, unless ``allow``; then it is a warning."""
    if previous is None:
        return None
    found = shrink(previous, new)
    if not found.too_far:
        return found
    if not allow:
        raise ShrinkRefusedError(
            f"{found.describe()}; nothing published: if that is meant, run again with --allow-shrink "
            "(or plan.allow_shrink = true)"
        )
    log.warning("%s; published as --allow-shrink permits", found.describe())
    return found


def check_fencing(previous: Mapping[str, Any] | None, fencing: str, *, allow: bool) -> None:
    """Refuse (``FencingChangeRefusedError``, one line) a new plan that fences by ``fencing``
    ("self" or "service") otherwise than the previous generation, unless ``allow``: then it
    is a warning. Checked before any work: the setting and the previous plan are all it needs.

    Who fences is the store's choice, not one plan's: a pipeline trusts fence notes by the rule
    of the newest plan it has seen ("service": the fencer's alone), so while one pipeline still
    follows the old plan and another the new one, a fence noted under one rule can be ignored
    under the other, and the fenced pipeline reopens its producer and undoes the fence. Change
    it with every pipeline stopped."""
    if previous is None:
        return
    before, after = previous.get("fencing", "self"), fencing  # a plan without the field fences by "self"
    if before == after:
        return
    said = (
        f"the new plan fences by {after!r} where generation {previous['generation']} fences by {before!r}: a pipeline "
        "still following one could undo a fence noted under the other"
    )
    if not allow:
        raise FencingChangeRefusedError(
            f"{said}; nothing published: stop every pipeline, then run again with --fencing-change (or plan.fencing_change = true)"
        )
    log.warning("%s; published as --fencing-change permits (every pipeline must be stopped)", said)
