"""Who may read what, as arrays: consumers and topics numbered in sorted order, and a
membership matrix per *kind* of consumer, so that checks over a million partitions stay
vectorised.

Groups are usually made of a few kinds of consumers with identical subscriptions (often
just one kind), so every per-consumer step runs once per kind instead. The subscriptions
are validated once (``validate_subscriptions``) and indexed once (``SubscriptionIndex``);
everything downstream works on the codes.

Consumer ids are checked by ``spark_lag_assign.core.ids`` (the rule publishing and the CLI
use too) and ordered by code point; they are ASCII, so that is also the order of Kafka's Java
assignors (``String.compareTo``, UTF-16 code units).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any, cast

import numpy as np
import pandas as pd

from spark_lag_assign.core.ids import check_consumer_id
from spark_lag_assign.errors import InputError


class Subscriptions(dict[str, list[str]]):
    """Validated subscriptions (``validate_subscriptions``): consumer -> sorted distinct
    topics, consumers in sorted order; consumers with the same topics share one list, and
    ``kinds`` maps each distinct topic list to its consumers (``distinct``'s answer), so
    that nothing downstream compares a thousand lists of ten thousand topics again.

    Read-only: ``validate_subscriptions`` returns one as it is, unchecked, so a consumer
    added or changed afterwards would skip the consumer-id rule and disagree with ``kinds``.
    Copy it (``dict(subs)``) to build other subscriptions; a pickled one (a Spark closure)
    is validated again where it is unpickled."""

    kinds: dict[tuple[str, ...], list[str]]

    def _read_only(self, *args: object, **kwargs: object) -> Any:
        raise TypeError("validated subscriptions are read-only: copy them with dict(...) and validate the copy")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _read_only

    def __reduce__(self) -> tuple[Any, ...]:
        return validate_subscriptions, (dict(self),)


def validate_subscriptions(subscriptions: Mapping[str, Sequence[str]]) -> Subscriptions:
    """consumer -> sorted distinct topics, consumers in sorted order; at least one consumer.

    Consumers with the same topics share one list object, validated once. Subscriptions
    already validated are returned as they are.
    """
    if isinstance(subscriptions, Subscriptions):
        return subscriptions
    if not isinstance(subscriptions, Mapping):
        raise InputError("subscriptions must map consumer ids to lists of topics")
    if not subscriptions:
        raise InputError("no consumers: subscriptions is empty")
    for consumer in subscriptions:
        check_consumer_id(consumer)
    # topics as given -> (their sorted list, the consumers of that list)
    by_value: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}
    out = Subscriptions()
    out.kinds = {}
    last: object = None  # the list of the consumer before: usually every consumer's same list
    found: tuple[list[str], list[str]] = ([], [])
    for consumer in sorted(subscriptions):
        topics = subscriptions[consumer]
        if topics is not last:
            if isinstance(topics, str) or not isinstance(topics, Sequence | set | frozenset | np.ndarray):
                raise InputError(f"consumer {consumer}: subscriptions must be a list of topic names")
            key = tuple(topics)
            known = by_value.get(key)
            if known is None:
                names = _objects(key)
                if key and (pd.api.types.infer_dtype(names, skipna=False) != "string" or "" in key):
                    raise InputError(f"consumer {consumer}: subscriptions must be a list of topic names")
                normal = list(key) if strictly_increasing(names) else sorted(set(key))
                kind = tuple(normal)
                if kind not in out.kinds:
                    out.kinds[kind] = []
                    by_value[kind] = (normal, out.kinds[kind])
                known = by_value[key] = by_value[kind]
            found, last = known, topics
        dict.__setitem__(out, consumer, found[0])
        found[1].append(consumer)
    return out


def distinct(subscriptions: Mapping[str, Sequence[str]]) -> dict[tuple[str, ...], list[str]]:
    """Each distinct topic list -> the consumers that subscribe to exactly it, in the order of
    the mapping; keys in order of first appearance."""
    if isinstance(subscriptions, Subscriptions):
        return subscriptions.kinds
    merged: dict[tuple[str, ...], list[str]] = {}
    last: object = None  # consecutive consumers sharing one list object: one tuple for them all
    members: list[str] = []
    for consumer, topics in subscriptions.items():
        if topics is not last:
            members = merged.setdefault(tuple(topics), [])
            last = topics
        members.append(consumer)
    return merged


class SubscriptionIndex:
    """Consumers and topics numbered in sorted order, and who reads what.

    ``kind_of[c]`` is consumer c's kind (its distinct topic list), ``reads[k, t]`` says
    whether kind k reads topic t; ``allowed[c, t]`` (consumer x topic) is derived on demand.
    """

    def __init__(self, subscriptions: Mapping[str, Sequence[str]], topics: Sequence[str] | np.ndarray = ()) -> None:
        kinds = distinct(subscriptions)
        self.consumers = pd.Index(_objects(sorted(subscriptions)), dtype=object)
        given = np.asarray(topics, dtype=object)
        columns: list[np.ndarray] | None = None
        if given.ndim == 1 and strictly_increasing(given):
            # sorted and distinct, as the front end gives them: if every subscribed topic is
            # among them, they are the topics, and nothing needs merging or sorting
            self.topics = pd.Index(given, dtype=object, copy=True)
            columns = [_indexer(self.topics, _objects(topic_list)) for topic_list in kinds]
            if any((column < 0).any() for column in columns):
                columns = None
        if columns is None:
            subscribed = {t for topic_list in kinds for t in topic_list}
            self.topics = pd.Index(sorted(subscribed | set(pd.unique(given))), dtype=object)
            columns = [_indexer(self.topics, _objects(topic_list)) for topic_list in kinds]
        self.kind_of = np.empty(len(self.consumers), dtype=np.int64)
        self.reads = np.zeros((len(kinds), len(self.topics)), dtype=bool)
        for k, (column, members) in enumerate(zip(columns, kinds.values())):
            self.kind_of[_indexer(self.consumers, _objects(members))] = k
            self.reads[k, column] = True

    @cached_property
    def allowed(self) -> np.ndarray:
        """``allowed[c, t]``: consumer c subscribes to topic t."""
        return self.reads[self.kind_of]

    @cached_property
    def names(self) -> np.ndarray:
        """The consumer ids as an object array, by code."""
        return np.asarray(self.consumers, dtype=object)

    def consumer_codes(self, consumers: Sequence[str] | pd.Series | np.ndarray) -> np.ndarray:
        """Index of each consumer, -1 for one not in the group."""
        return _codes(consumers, self.consumers)

    def topic_codes(self, topics: Sequence[str] | pd.Series | np.ndarray) -> np.ndarray:
        """Index of each topic, -1 for one the index does not know."""
        return _codes(topics, self.topics)

    def permitted(self, consumer_codes: np.ndarray, topic_codes: np.ndarray) -> np.ndarray:
        """Per row: a known consumer subscribed to a known topic."""
        known = (consumer_codes >= 0) & (topic_codes >= 0)
        if known.all():
            if len(self.reads) == 1:  # one kind of consumer (the usual group): one lookup per row
                return self.reads[0, topic_codes]
            return self.reads[self.kind_of[consumer_codes], topic_codes]
        out = np.zeros(len(consumer_codes), dtype=bool)
        out[known] = self.reads[self.kind_of[consumer_codes[known]], topic_codes[known]]
        return out

    def subscribed_topics(self) -> np.ndarray:
        """Codes of the topics somebody subscribes to."""
        return np.flatnonzero(self.subscribed)

    @cached_property
    def subscribed(self) -> np.ndarray:
        """Per topic code: somebody subscribes to it."""
        return np.asarray(self.reads[np.unique(self.kind_of)].any(axis=0))

    @cached_property
    def topic_class(self) -> np.ndarray:
        """Per topic code, its *class*: topics with the same subscribers share one (numbered in
        order of their first topic; -1 for a topic nobody reads)."""
        return self._classes[0]

    @cached_property
    def class_members(self) -> list[np.ndarray]:
        """Per class, the codes of its subscribers, ascending (so in sorted id order)."""
        return self._classes[1]

    @cached_property
    def _classes(self) -> tuple[np.ndarray, list[np.ndarray]]:
        used = np.unique(self.kind_of)
        columns = self.reads[used].T  # (topics, kinds present): a topic's readers, by kind
        signatures, first, inverse = np.unique(columns, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
        order = np.argsort(first, kind="stable")  # classes by first topic
        relabel = np.empty_like(order)
        relabel[order] = np.arange(len(order))
        topic_class = relabel[inverse]
        members = []
        for signature in signatures[order]:
            members.append(np.flatnonzero(np.isin(self.kind_of, used[signature])))
        empty = [i for i, m in enumerate(members) if len(m) == 0]
        if empty:  # the class of unread topics: -1, and the later ones move up
            (gone,) = empty
            topic_class = np.where(topic_class == gone, -1, topic_class - (topic_class > gone))
            del members[gone]
        return topic_class.astype(np.int64), members


def _codes(values: Sequence[str] | pd.Series | np.ndarray, index: pd.Index) -> np.ndarray:
    """``index.get_indexer(values)``, hashing only the first value of each run of equal ones:
    columns sorted or grouped by these values (a plan, a lags frame) have few runs."""
    array = values.to_numpy(dtype=object) if isinstance(values, pd.Series) else np.asarray(values, dtype=object)
    heads = run_starts(array)
    if heads is not None:
        return np.repeat(_indexer(index, array[heads]), np.diff(np.r_[heads, len(array)]))
    return _indexer(index, array)


def _indexer(index: pd.Index, values: Sequence[str] | np.ndarray) -> np.ndarray:
    """Position of each value in ``index``, -1 if absent (pandas takes any list-like here)."""
    return np.asarray(index.get_indexer(cast(Any, values)), dtype=np.int64)


def _objects(values: Sequence[Any]) -> np.ndarray:
    """``values`` as a one-dimensional object array, whatever they hold."""
    return np.fromiter(values, dtype=object, count=len(values))


def strictly_increasing(values: np.ndarray) -> bool:
    """Whether every value is greater than the one before (so sorted and distinct); False if
    they do not compare."""
    try:
        return len(values) < 2 or bool((values[1:] > values[:-1]).all())
    except (TypeError, ValueError):  # values that do not compare, or not to one truth value
        return False


def run_starts(values: np.ndarray) -> np.ndarray | None:
    """The first position of each run of equal values, or None when runs are short (most
    values differ from the previous one): then hashing them all is cheaper. A sample of the
    first values decides, so that a column without runs costs one short comparison."""
    n = len(values)
    if n < 64:
        return None
    sample = min(n - 1, 4096)
    if int((values[1 : sample + 1] != values[:sample]).sum()) * 4 > sample:
        return None
    return np.r_[0, np.flatnonzero(values[1:] != values[:-1]) + 1]


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(values)``: a code per value in order of first appearance (-1 for a
    missing one), and the distinct values, as intp and object arrays."""
    codes, uniques = pd.factorize(values)
    return np.asarray(codes, dtype=np.intp), np.asarray(uniques, dtype=object)


def partition_keys(topic_codes: np.ndarray, partitions: np.ndarray, width: int) -> np.ndarray:
    """One int64 per (topic, partition): ``topic_code * width + partition``."""
    return topic_codes.astype(np.int64) * np.int64(width) + partitions.astype(np.int64)
