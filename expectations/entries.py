"""Entries (hag_quality_entries): confidence and ladder-quality bounds, the maturity enum,
scope and slug shapes, counters, and the three identity indexes as compound uniqueness.

The expectations themselves are in `suites/entries.json`.
"""

from __future__ import annotations

from typing import Any

from expectations._gx import SuiteResult
from expectations._gx import validate as _validate

SUITE = "entries"


def validate(conn: Any) -> SuiteResult:
    """Run the entries suite against the database as `conn` sees it."""
    return _validate(conn, SUITE)
