"""Where a pipeline starts reading a generation's partitions, and the plans it needs to say so.

The group's committed offsets (else the plan's reset rule), never behind what a releasing
owner said in its claim it had committed (the group may not show it yet); a claim counts only
for partitions the plans gave its consumer in one of the few generations before the start. A commit that no
pipeline of the plan made (``options.foreign_commits``: a consumer outside the plan, or one
of ours for partitions it did not own) is reported and counts as none: the owners are read
from the plans this pipeline saw, or from the store for older generations.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from spark_lag_assign.consume.options import TopicPartition, foreign_commits, read_group_starting_offsets
from spark_lag_assign.errors import KafkaReadError, NotAuthorizedError
from spark_lag_assign.plan import build as plan_io
from spark_lag_assign.plan.document import PlanFormatError
from spark_lag_assign.store import ClaimRecord, Store, StoreError

log = logging.getLogger(__name__)

#: how many generations before the one a pipeline starts may name a partition's releasing owner
RELEASE_LOOKBACK = 3

ForeignCommit = Callable[[str, int, str], None]
"""``on_foreign(topic, partition, why)``: a commit no pipeline of the plan made was found."""


class StartOffsets:
    """The plans one pipeline saw (the newest two) and the offsets it starts a generation from.

    ``read`` waits out a broker that is away for up to ``commit_timeout`` seconds, with each
    Kafka call bounded by ``timeout_ms`` and a pause of ``pause(1.0)`` between tries.
    """

    def __init__(
        self,
        store: Store,
        consumer: str,
        bootstrap_servers: Any,
        client_options: Mapping[str, Any],
        *,
        timeout_ms: int,
        commit_timeout: float,
        on_foreign: ForeignCommit,
        pause: Callable[[float], None],
    ) -> None:
        self.store = store
        self.consumer = consumer
        self.bootstrap_servers = bootstrap_servers
        self.client_options = client_options
        self.timeout_ms = timeout_ms
        self.commit_timeout = commit_timeout
        self.on_foreign = on_foreign
        self.pause = pause
        self._plans: dict[int, plan_io.Plan] = {}
        self._owners_of: dict[int, dict[TopicPartition, str] | None] = {}
        #: commits found in the group that no pipeline of the plan made
        self.foreign_commits = 0

    def remember(self, plan: plan_io.Plan) -> None:
        """A newer plan seen: kept with the one before it (a handover starts one of the two)."""
        generation = int(plan["generation"])
        self._plans[generation] = plan
        for old in [g for g in self._plans if g < generation - 1]:
            del self._plans[old]

    def plan(self, generation: int) -> plan_io.Plan | None:
        """The plan of ``generation``: as seen, else the store's (None: the store no longer keeps
        it); the store's errors propagate."""
        plan = self._plans.get(generation)
        return plan if plan is not None else self.store.get(generation)

    def owners(self, generation: int) -> dict[TopicPartition, str] | None:
        """Who owned each partition in ``generation`` (None: the store no longer keeps it, or
        cannot be read now; only an answer is kept, so a store that fails once is asked again)."""
        if generation not in self._owners_of:
            try:
                plan = self.plan(generation)
            except StoreError:
                return None
            except PlanFormatError:
                plan = None
            self._owners_of[generation] = (
                None
                if plan is None
                else {(t, p): c for c, entry in plan["consumers"].items() for t, ps in entry["assign"].items() for p in ps}
            )
        return self._owners_of[generation]

    def _kept(self) -> dict[int, frozenset[str]] | None:
        """Every generation the store keeps, with its consumers (None: it cannot be read now).
        Read only for a commit under a generation no longer kept, which is rare."""
        try:
            found = {}
            for generation in self.store.generations():
                plan = self.plan(generation)
                if plan is None:
                    return None
                found[generation] = frozenset(plan["consumers"])
            return found
        except (StoreError, PlanFormatError):
            return None

    def read(
        self, plan: plan_io.Plan, assign: dict[str, list[int]], group: str, newest: int, claims: Mapping[str, ClaimRecord | str]
    ) -> dict[str, dict[str, int]]:
        """The start offsets of ``assign`` (``startingOffsets`` form) under the plan generation
        ``newest``, raised to what each releasing owner's claim in ``claims`` says it committed."""

        def distrust(metadata: Mapping[TopicPartition, str]) -> dict[TopicPartition, str]:
            found = foreign_commits(metadata, self.owners, newest, self._kept)
            for (t, p), why in found.items():
                log.warning(
                    "%s: the group's commit of %s-%d %s: no pipeline of the plan made it; %s does not start from it",
                    self.consumer, t, p, why, self.consumer,
                )  # fmt: skip
                self.on_foreign(t, p, why)
            self.foreign_commits += len(found)
            return found

        deadline = time.monotonic() + self.commit_timeout
        while True:  # a broker away for a moment must not end a pipeline between two generations
            try:
                starting = read_group_starting_offsets(
                    self.bootstrap_servers,
                    group,
                    assign,
                    str(plan.get("reset", "latest")),
                    client_options=self.client_options,
                    timeout_ms=self.timeout_ms,
                    distrust=distrust,
                )
                break
            except NotAuthorizedError:
                raise
            except KafkaReadError as exc:
                if time.monotonic() >= deadline:
                    raise
                log.warning("%s cannot read its start offsets yet, retrying: %s", self.consumer, exc)
                self.pause(1.0)
        for record in claims.values():
            if not isinstance(record, ClaimRecord):
                continue
            for topic, parts in record.committed.items():
                for partition, offset in parts.items():
                    current = starting.get(topic, {}).get(str(partition))
                    if current is None or not (current < 0 or int(offset) > current):  # also over the reset rule
                        continue
                    if self._owned(record, (topic, int(partition)), newest):
                        starting[topic][str(partition)] = int(offset)
                    else:
                        log.warning(
                            "%s: %s's claim says it committed %s-%s at %d, but none of the %d plans before "
                            "generation %d gave it that partition; %s starts from %d",
                            self.consumer, record.consumer, topic, partition, int(offset), RELEASE_LOOKBACK, newest,
                            self.consumer, current,
                        )  # fmt: skip
        return starting

    def _owned(self, record: ClaimRecord, partition: TopicPartition, newest: int) -> bool:
        """Whether a claim's word on ``partition``'s offset counts: its consumer owned the partition
        in one of the ``RELEASE_LOOKBACK`` generations before ``newest`` (the one this pipeline
        starts), whatever generation the claim itself names: a releasing owner writes its
        release under the newest plan it has seen, which may have skipped some. Anyone else's
        word would let one pipeline's claim move another's start ahead and skip records."""
        return any(
            (self.owners(g) or {}).get(partition) == record.consumer
            for g in range(newest - 1, max(0, newest - 1 - RELEASE_LOOKBACK), -1)
        )


__all__ = ["ForeignCommit", "StartOffsets"]
