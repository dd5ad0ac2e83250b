"""What a consumer id may be: one rule for ``assign``, the plan document, the CLI, the
follower and the stores.

A consumer id names a Kafka topic (``NAME.claims.<consumer>``), a record key
(``g/<generation>/c/<consumer>/<chunk>``), a transactional id
(``spark-lag-assign.NAME.claim.<consumer>``) and a directory (``claims/<consumer>``), so
an id ``assign`` accepts must be one that can be published. The rule: ASCII letters,
digits, ``_`` and ``-``, at most 100 characters, starting with a letter or digit.

- No ``.``: it separates the parts of every topic and transactional id, so a prefix ACL
  of one consumer's names would cover another's (``NAME.claims.a.`` covers consumer
  ``a.b``); and Kafka refuses a topic whose name equals an existing one's with ``.`` and
  ``_`` swapped (their metric names collide), so consumers ``a.b`` and ``a_b`` could not
  both have a claims topic.
- Not starting with a symbol: ``_fencer`` (``store.base.FENCER``) writes claims beside the
  consumers' without being one, and ``-x`` would read as a flag.
- ASCII only: Kafka's Java assignors order ids by UTF-16 code units and Python by code
  points; over ASCII the two orders are one.

Ids from elsewhere (kafka-python's member ids, ``<client_id>-<uuid>`` with dots or spaces
in the client id) are mapped to conforming ids by ``spark_lag_assign.group`` before they
reach the planner.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from spark_lag_assign.errors import InputError

#: the plan document's pattern (JSON Schema, pydantic); always matched whole: "$" would let
#: a trailing newline in with ``re``
CONSUMER_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$"
CONSUMER_ID_MAX: Final = 100
#: the rule in words, in every message that refuses an id
CONSUMER_ID_RULE: Final = "consumer ids are letters, digits, '_' and '-', at most 100 characters, starting with a letter or digit"

_CONSUMER_ID = re.compile(CONSUMER_ID_PATTERN[1:-1])
_ALLOWED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _shown(consumer: object) -> str:
    text = repr(consumer)
    return text if len(text) <= 120 else text[:100] + "..."


def consumer_id_problem(consumer: object) -> str | None:
    """None if ``consumer`` is a valid consumer id, else the one line that refuses it."""
    if isinstance(consumer, str) and _CONSUMER_ID.fullmatch(consumer):
        return None
    if not isinstance(consumer, str):
        what = f"a {type(consumer).__name__}, not a string"
    elif not consumer:
        what = "empty"
    elif consumer[0] not in _ALLOWED or consumer[0] in "_-":
        what = f"starts with {consumer[0]!r}"
    elif bad := next((ch for ch in consumer if ch not in _ALLOWED), None):
        what = f"holds {bad!r} (U+{ord(bad):04X})"
    else:
        what = f"{len(consumer)} characters long"
    return f"invalid consumer id {_shown(consumer)}: {what} ({CONSUMER_ID_RULE})"


def check_consumer_id(consumer: object) -> str:
    """``consumer`` if it is a valid consumer id, else one InputError line naming it and its problem."""
    problem = consumer_id_problem(consumer)
    if problem is not None:
        raise InputError(problem)
    return consumer  # type: ignore[return-value]


def check_consumer_ids(consumers: Iterable[object]) -> None:
    """Every id valid (``check_consumer_id``), and none given twice."""
    seen: set[object] = set()
    for c in consumers:
        check_consumer_id(c)
        if c in seen:
            raise InputError(f"consumer id {c!r} is given twice")
        seen.add(c)


__all__ = ["CONSUMER_ID_MAX", "CONSUMER_ID_PATTERN", "CONSUMER_ID_RULE", "check_consumer_id", "check_consumer_ids", "consumer_id_problem"]
