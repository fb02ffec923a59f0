"""JSON objects with a key written twice are refused, not read last-wins.

Python's `json` keeps the last of two equal keys, so a corpus entry carrying
`visibility_scope` twice loaded as whichever came second, and a reviewer reading the first
saw another scope than the one stored (issue 24). Every parse of an outside document (a
session payload, a corpus file) passes `object_pairs_hook=unique_keys`.

Written JSON (the command line's `--json`, the lab's reports) passes `default=to_jsonable`
for the values `json` lacks: moments, UUIDs, decimals, arrays.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice; the message names the key."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The object of `pairs`, or DuplicateKeyError naming the first key written twice."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"duplicate key {key!r} in one object")
            seen.add(key)
    return obj


def to_jsonable(value: object) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, Decimal):
        return float(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "to_list"):
        return value.to_list()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
