"""JSON objects with a key written twice are refused, not read last-wins.

Python's `json` keeps the last of two equal keys, so a corpus entry carrying
`visibility_scope` twice loaded as whichever came second, and a reviewer reading the first
saw another scope than the one stored (issue 24). Every parse of an outside document (a
session payload, a corpus file) passes `object_pairs_hook=unique_keys`.
"""

from __future__ import annotations

from typing import Any


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
