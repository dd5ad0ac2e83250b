"""The shapes every assignor shares: a problem in plain arrays, and the strategy record.

An assignor never sees Spark, Kafka or pandas: it gets a ``GroupProblem`` (every partition
of the topics it is given) and returns the owner of each row as a consumer code, aligned
with the problem's rows. ``spark_lag_assign.assignors.assign`` builds the problems from
DataFrames, validates, and checks the invariants of the result.

A ``GroupProblem`` carries its rows as integer codes (``codes()``): the front end builds
them once while validating, and every assignor (``Strategy.assign_codes``) returns consumer
codes, so a million partitions never turn into a million strings on the way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np

from spark_lag_assign.core.subscriptions import SubscriptionIndex, run_starts
from spark_lag_assign.errors import StrategyError


@dataclass(frozen=True)
class Encoded:
    """The rows of a ``GroupProblem`` as codes of one ``SubscriptionIndex``."""

    index: SubscriptionIndex  # consumers and topics numbered in sorted order, who reads what
    row_topic: np.ndarray  # int64 topic code per row, ascending with the rows
    previous: np.ndarray  # int64 code of the row's previous owner (a current subscriber), -1 for none


class GroupProblem:
    """Every partition of every subscribed topic, sorted by (topic, partition).

    ``topics`` (object, str) and ``previous`` (the previous owner per row, a current
    subscriber, or None) are as long as the rows. When the front end builds a problem it
    gives its rows as codes (``encoded``) instead: the two columns of strings are then made
    from the codes when a strategy first reads them, so that strategies working on codes
    never pay for a million strings. Not to be mutated; ``replace`` makes a changed copy.
    """

    def __init__(
        self,
        topics: np.ndarray | None,
        partitions: np.ndarray,
        lags: np.ndarray,
        subscriptions: Mapping[str, Sequence[str]],
        consumers: Sequence[str],
        previous: Sequence[str | None] | np.ndarray | None = (),
        seed: int = 0,
        options: Mapping[str, Any] | None = None,
        encoded: Encoded | None = None,
    ) -> None:
        if encoded is None and (topics is None or previous is None):
            raise ValueError("a GroupProblem without its topics or previous owners needs its codes")
        self._topics = topics
        self._previous = previous
        self.partitions = partitions  # int64
        self.lags = lags  # int64, >= 0
        self.subscriptions = subscriptions  # consumer -> subscribed topics (sorted), every consumer
        self.consumers = consumers  # all consumers, sorted
        self.seed = seed
        self.options: Mapping[str, Any] = {} if options is None else options
        #: the same rows as codes, when the front end built them; ``codes()`` derives them otherwise
        self.encoded = encoded

    def __repr__(self) -> str:
        return f"GroupProblem({len(self.partitions)} rows, {len(self.consumers)} consumers, seed={self.seed})"

    @property
    def topics(self) -> np.ndarray:
        """The topic of each row (object array of str)."""
        return self._topics if self._topics is not None else self._topics_of_codes

    @property
    def previous(self) -> Sequence[str | None] | np.ndarray:
        """The previous owner of each row (a current subscriber) or None; empty for none at all."""
        return self._previous if self._previous is not None else self._previous_of_codes

    @cached_property
    def _topics_of_codes(self) -> np.ndarray:
        codes = self.codes()
        return np.asarray(codes.index.topics, dtype=object)[codes.row_topic]

    @cached_property
    def _previous_of_codes(self) -> np.ndarray:
        codes = self.codes()
        return np.concatenate([codes.index.names, np.array([None], dtype=object)])[codes.previous]  # -1: None

    def replace(self, **changes: Any) -> GroupProblem:
        """A copy with ``changes`` to the constructor's arguments. The codes describe the rows,
        the consumers and the previous owners: a copy that changes any of them drops them."""
        fields: dict[str, Any] = {
            "topics": self._topics,
            "partitions": self.partitions,
            "lags": self.lags,
            "subscriptions": self.subscriptions,
            "consumers": self.consumers,
            "previous": self._previous,
            "seed": self.seed,
            "options": self.options,
            "encoded": self.encoded,
        }
        unknown = set(changes) - set(fields)
        if unknown:
            raise TypeError(f"GroupProblem has no field {', '.join(sorted(unknown))}")
        if set(changes) - {"seed", "options"}:
            fields.update(topics=self.topics, previous=self.previous, encoded=None)
        fields.update(changes)
        return GroupProblem(**fields)

    def codes(self) -> Encoded:
        """The rows as integer codes (built from the fields above if the front end did not)."""
        return self.encoded if self.encoded is not None else self._derived

    @cached_property
    def _derived(self) -> Encoded:
        topics = np.asarray(self.topics, dtype=object)
        heads = run_starts(topics)  # rows come sorted by topic: hash one name per topic
        names = topics if heads is None else topics[heads]
        index = SubscriptionIndex({c: self.subscriptions[c] for c in self.consumers}, names)
        row_topic = index.topic_codes(names)
        if heads is not None:
            row_topic = np.repeat(row_topic, np.diff(np.r_[heads, len(topics)]))
        previous = np.full(len(topics), -1, dtype=np.int64)
        unowned = isinstance(self.previous, list) and self.previous.count(None) == len(self.previous)
        if len(self.previous) == len(topics) and len(topics) and not unowned:
            named = np.asarray(self.previous, dtype=object)
            previous = index.consumer_codes(named)
            # the contract promises eligible previous owners; a stale one is treated as none
            previous[~index.permitted(previous, row_topic)] = -1
        return Encoded(index, row_topic, previous)

    def topic_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(first row, one past the last row) of each topic with rows, in row order."""
        row_topic = self.codes().row_topic
        if len(row_topic) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        starts = np.flatnonzero(np.r_[True, row_topic[1:] != row_topic[:-1]])
        return starts, np.r_[starts[1:], len(row_topic)]

    def topic_slices(self) -> list[tuple[str, slice]]:
        """(topic, row slice) for each topic, in row order."""
        codes = self.codes()
        starts, ends = self.topic_bounds()
        names = codes.index.topics[codes.row_topic[starts]]
        return [(str(t), slice(int(s), int(e))) for t, s, e in zip(names, starts.tolist(), ends.tolist())]

    def subscribers(self) -> dict[str, list[str]]:
        """topic -> its subscribers, sorted (the lists may be shared between topics: do not mutate)."""
        index = self.codes().index
        lists = [index.names[members].tolist() for members in index.class_members]
        return {str(t): lists[k] for t, k in zip(index.topics, index.topic_class.tolist()) if k >= 0}


#: the owner of every row of the group as a consumer code of ``problem.codes().index``
CodeAssignor = Callable[[GroupProblem], np.ndarray]


@dataclass(frozen=True)
class Strategy:
    """A named assignor: one function, ``assign_codes(problem) -> owners``, codes in and codes
    out, which the DataFrame ``assign``, the Spark stage and the kafka-python plugin all call
    (through ``frontend.run_codes``). ``scope="topic"``: the rule looks at one topic at a time,
    so any set of whole topics is a problem of its own (Spark: one applyInPandas group per
    bucket of topics); ``scope="group"``: it needs the whole group at once (one global stage).
    The rules as their sources state them, topic by topic, are the tests' oracles
    (``tests/oracles.py``)."""

    name: str
    scope: Literal["topic", "group"]
    summary: str
    assign_codes: CodeAssignor
    options: tuple[str, ...] = ()
    uses_previous: bool = False
    uses_seed: bool = False

    def check_call(self, seed: object, options: Mapping[str, Any]) -> int:
        """``seed`` as an int, once it is one (``2.9`` would plan with 2, ``True`` with 1), and
        every option one this strategy takes; else one ``StrategyError`` line. The DataFrame
        ``assign``, the Spark stage (on the driver, before Spark runs) and the kafka-python
        plugin all check here."""
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
            raise StrategyError(f"seed must be a whole number, not {seed!r}")
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise StrategyError(
                f"strategy {self.name!r} takes no option {', '.join(unknown)}"
                + (f"; it takes: {', '.join(self.options)}" if self.options else "")
            )
        return int(seed)
