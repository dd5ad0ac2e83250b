"""The lag-balancing engine's data: the problem as integer arrays (``Group``), the plan
being built (``State``), and how both are made from a ``GroupProblem``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from spark_lag_assign.assignors.base import GroupProblem
from spark_lag_assign.core.limits import ENGINE_LOAD_LIMIT
from spark_lag_assign.core.quality import exact_sum
from spark_lag_assign.errors import InputError


@dataclass(frozen=True)
class Group:
    """The problem in integer arrays: rows sorted by (topic, partition), consumers by id."""

    lag: np.ndarray  # int64 per row
    topic: np.ndarray  # int64 topic index per row
    start: np.ndarray  # first row of each topic
    stop: np.ndarray  # one past the last row of each topic
    reads: np.ndarray  # bool (topics, consumers): consumer reads topic
    readers: list[np.ndarray]  # per topic, the indices of its readers (ascending)
    identical: bool  # every consumer reads every topic with rows
    lower_bound: float  # max(total lag / consumers, largest lag): the metric's LB (in times where speed is set)
    #: None: every consumer equal, loads compared as they are (lag-sticky). Otherwise each
    #: consumer's relative speed (``drain``): a load counts as ``load / speed``, its *time*
    speed: np.ndarray | None = None

    @property
    def consumers(self) -> int:
        return self.reads.shape[1]

    def times(self, load: np.ndarray, who: np.ndarray | None = None) -> np.ndarray:
        """``load`` (of the consumers ``who``, or of all) as times; the loads themselves without speeds."""
        if self.speed is None:
            return load
        return load / (self.speed if who is None else self.speed[who])

    def peak(self, load: np.ndarray) -> float:
        """The largest time of any consumer."""
        return float(self.times(load).max())

    def fair(self, load: np.ndarray) -> np.ndarray | float:
        """Each consumer's fair share of the total load: equal, or in proportion to its speed."""
        total = load.sum()
        if self.speed is None:
            return total / self.consumers
        return total * self.speed / self.speed.sum()


@dataclass
class State:
    owner: np.ndarray  # int64 consumer index per row (-1: not placed yet)
    previous: np.ndarray  # int64 previous owner per row (-1: none or no longer valid)
    load: np.ndarray  # int64 lag per consumer
    count: np.ndarray  # int64 partitions per consumer
    extra: np.ndarray  # bool (topics, consumers): consumer holds ceil(P/C) of the topic, not floor

    @classmethod
    def begin(cls, group: Group, previous: np.ndarray) -> State:
        """Every row with its previous owner, loads counted from them; counts come later."""
        held = previous >= 0
        return cls(
            owner=previous.copy(),
            previous=previous,
            load=sum_by(previous[held], group.lag[held], group.consumers),
            count=np.zeros(group.consumers, dtype=np.int64),
            extra=np.zeros(group.reads.shape, dtype=bool),
        )


# ---------------------------------------------------------------------------------------------
# the problem as arrays


def build_group(
    problem: GroupProblem,
    consumers: list[str],
    weights: np.ndarray | None = None,
    speed: np.ndarray | None = None,
) -> Group:
    """The problem as arrays; ``weights`` (int64 per row) replace the lags, ``speed`` makes
    consumers unequal (see ``Group.speed``)."""
    lag = np.asarray(problem.lags if weights is None else weights, dtype=np.int64)
    # loads are exact int64 sums; refuse totals that could wrap rather than plan on garbage
    total = exact_sum(lag)
    if total >= ENGINE_LOAD_LIMIT:
        what = "lag" if weights is None else "weighted lag (lag plus what producers add)"
        raise InputError(
            f"the total {what} {total:,} is 2^62 or more, where the loads of lag-sticky and drain could wrap; "
            "use lag or sticky"
        )
    # each topic's rows from the codes (comparing a million names would cost 10 ms)
    codes = problem.codes()
    start, stop = problem.topic_bounds()
    names = [str(t) for t in codes.index.topics[codes.row_topic[start]]]
    topic = np.repeat(np.arange(len(start), dtype=np.int64), stop - start)
    n_consumers = len(consumers)
    lists = [problem.subscriptions[c] for c in consumers]
    # assign() hands identical subscriptions as one shared list: identity settles most of them
    first = list(lists[0])
    identical = all(s is lists[0] or list(s) == first for s in lists[1:])
    if identical:
        reads = np.ones((len(start), n_consumers), dtype=bool)
        everyone = np.arange(n_consumers, dtype=np.int64)
        readers = [everyone] * len(start)
    else:
        index = {t: i for i, t in enumerate(names)}
        reads = np.zeros((len(start), n_consumers), dtype=bool)
        for c, consumer in enumerate(consumers):
            for t in problem.subscriptions[consumer]:
                if t in index:
                    reads[index[t], c] = True
        readers = [np.flatnonzero(row) for row in reads]
    total = int(lag.sum())
    if speed is None:
        lower_bound = max(total / n_consumers, float(lag.max()))
    else:
        speed = np.asarray(speed, dtype=np.float64)
        lower_bound = max(total / float(speed.sum()), float(lag.max()) / float(speed.max()))
    return Group(lag, topic, start, stop, reads, readers, identical, lower_bound, speed)


def previous_owners(group: Group, problem: GroupProblem, consumers: list[str]) -> np.ndarray:
    """The previous owner of each row as a consumer index, -1 where there is none."""
    encoded = problem.encoded
    if encoded is not None and len(encoded.previous) == len(group.lag) and list(encoded.index.consumers) == consumers:
        # the front end has looked the names up already, numbered as ``consumers`` are
        previous = np.asarray(encoded.previous, dtype=np.int64).copy()
    else:
        given = problem.previous
        # list.count compares by identity first: the cheapest way to see a list of nothing but None
        if not len(given) or (isinstance(given, list) and given.count(None) == len(given)):
            return np.full(len(group.lag), -1, dtype=np.int64)
        previous = pd.Index(consumers).get_indexer(pd.Index(np.asarray(given, dtype=object))).astype(np.int64)
    # an owner that no longer reads the topic is no owner (assign() filters these already)
    held = previous >= 0
    held[held] = group.reads[group.topic[held], previous[held]]
    previous[~held] = -1
    return previous


def sum_by(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of ``values`` grouped by ``index`` (bincount would go through float)."""
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, index, values)
    return out
