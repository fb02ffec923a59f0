"""Edges (hag_quality_edges): the [0.05, 1] confidence band, type and provenance enums, one
edge per identity, no self-loops, no dangling ends, `_unanchored_` entries left isolated.

The expectations themselves are in `suites/edges.json`.
"""

from __future__ import annotations

from typing import Any

from expectations._gx import SuiteResult
from expectations._gx import validate as _validate

SUITE = "edges"


def validate(conn: Any) -> SuiteResult:
    """Run the edges suite against the database as `conn` sees it."""
    return _validate(conn, SUITE)
