"""Who may read what, as arrays: a consumer x topic membership matrix and integer keys for
(topic, partition), so that checks over a million partitions stay vectorised.

Groups are usually made of a few kinds of consumers with identical subscriptions (often
just one kind), so every per-consumer step runs once per distinct subscription instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd


def distinct(subscriptions: Mapping[str, Sequence[str]]) -> dict[tuple[str, ...], list[str]]:
    """Each distinct topic list -> the consumers that subscribe to exactly it (in key order)."""
    kinds: dict[tuple[str, ...], list[str]] = {}
    for consumer, topics in subscriptions.items():
        kinds.setdefault(tuple(topics), []).append(consumer)
    return kinds


class SubscriptionIndex:
    """Consumers and topics numbered in sorted order, and ``allowed[c, t]``: c subscribes to t."""

    def __init__(self, subscriptions: Mapping[str, Sequence[str]], topics: Sequence[str] | np.ndarray = ()) -> None:
        kinds = distinct(subscriptions)
        subscribed = {t for topic_list in kinds for t in topic_list}
        self.consumers = pd.Index(sorted(subscriptions))
        self.topics = pd.Index(sorted(subscribed | set(pd.unique(np.asarray(topics, dtype=object)))))
        self.allowed = np.zeros((len(self.consumers), len(self.topics)), dtype=bool)
        for topic_list, members in kinds.items():
            rows = self.consumers.get_indexer(members)
            cols = self.topics.get_indexer(list(topic_list))
            self.allowed[np.ix_(rows, cols)] = True

    def consumer_codes(self, consumers: Sequence[str] | pd.Series) -> np.ndarray:
        """Index of each consumer, -1 for one not in the group."""
        return np.asarray(self.consumers.get_indexer(consumers))

    def topic_codes(self, topics: Sequence[str] | pd.Series) -> np.ndarray:
        """Index of each topic, -1 for one the index does not know."""
        return np.asarray(self.topics.get_indexer(topics))

    def permitted(self, consumer_codes: np.ndarray, topic_codes: np.ndarray) -> np.ndarray:
        """Per row: a known consumer subscribed to a known topic."""
        known = (consumer_codes >= 0) & (topic_codes >= 0)
        out = np.zeros(len(consumer_codes), dtype=bool)
        out[known] = self.allowed[consumer_codes[known], topic_codes[known]]
        return out

    def subscribed_topics(self) -> np.ndarray:
        """Codes of the topics somebody subscribes to."""
        return np.flatnonzero(self.allowed.any(axis=0))


def partition_keys(topic_codes: np.ndarray, partitions: np.ndarray, width: int) -> np.ndarray:
    """One int64 per (topic, partition): ``topic_code * width + partition``."""
    return topic_codes.astype(np.int64) * np.int64(width) + partitions.astype(np.int64)
