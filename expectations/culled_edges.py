"""Culled edges (hag_quality_culled_edges): each audit row of a cull is checked against
the rule values recorded with it, so a cull that took a seed edge, an edge off the
allowlist, a strong, traversed or young edge, or that ran outside a recorded run, fails.

The expectations themselves are in `suites/culled_edges.json`.
"""

from __future__ import annotations

from typing import Any

from expectations._gx import SuiteResult
from expectations._gx import validate as _validate

SUITE = "culled_edges"


def validate(conn: Any) -> SuiteResult:
    """Run the culled_edges suite against the database as `conn` sees it."""
    return _validate(conn, SUITE)
