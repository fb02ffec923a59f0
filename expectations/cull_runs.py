"""Cull runs (hag_quality_cull_runs): audit completeness. Every finished nightly run
says how many edges it culled; exactly that many audit rows carry its run id.

The expectations themselves are in `suites/cull_runs.json`.
"""

from __future__ import annotations

from typing import Any

from expectations._gx import SuiteResult
from expectations._gx import validate as _validate

SUITE = "cull_runs"


def validate(conn: Any) -> SuiteResult:
    """Run the cull_runs suite against the database as `conn` sees it."""
    return _validate(conn, SUITE)
