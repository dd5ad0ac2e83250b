"""Lists given as text on a command line or in the environment: one parser for all of them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def comma_list(value: str | Iterable[Any]) -> list[Any]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``: topics, consumers, strategies, bootstrap servers.

    A list passes through with its strings stripped and blank ones dropped; anything else in
    it is kept as it is, for the caller's type check to name.
    """
    items = value.split(",") if isinstance(value, str) else list(value)
    return [i.strip() if isinstance(i, str) else i for i in items if not (isinstance(i, str) and not i.strip())]
