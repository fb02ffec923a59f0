"""Session-end's edge locks are index probes, whatever the size of the edge table."""

from __future__ import annotations

import json
import uuid

import pytest

from hag.storage.sqlfiles import query

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)


def _nodes(plan: dict) -> list[dict]:
    return [plan, *(n for child in plan.get("Plans", []) for n in _nodes(child))]


def test_lock_edges_reads_hag_edges_only_through_its_indexes(db):
    """With sequential scans priced out, no branch of lock_edges may still scan hag_edges.

    Written as one OR over the table, the identity's subquery left the planner no index to
    use: it scanned every edge for each session (700 ms a session at 1M edges, issue 26).
    """
    ids = [uuid.uuid4() for _ in range(3)]
    db.execute("SET LOCAL enable_seqscan = off")
    params = {
        "ids": ids[:1],
        "sources": ids[:2],
        "targets": ids[1:],
        "types": ["related", "prerequisite"],
        "sibling_sources": ids[:1],
        "sequence_sources": ids[:1],  # the units rule's leads_to and fallback edges
        "sequence_targets": ids[2:],
    }
    row = db.execute(
        "EXPLAIN (FORMAT JSON, COSTS OFF) " + query("session", "lock_edges"), params
    ).fetchone()
    plan = (
        row["QUERY PLAN"] if isinstance(row["QUERY PLAN"], list) else json.loads(row["QUERY PLAN"])
    )
    scans = [n for n in _nodes(plan[0]["Plan"]) if n.get("Relation Name") == "hag_edges"]
    # a probe: an index scan with a condition, or a bitmap heap scan fed by such scans
    probes = [
        "Index Cond" in n or all("Index Cond" in b for b in _nodes(n)[1:])
        if n["Node Type"] in ("Index Scan", "Index Only Scan", "Bitmap Heap Scan")
        else False
        for n in scans
    ]
    assert scans and all(probes), [(n["Node Type"], n.get("Index Cond")) for n in scans]
    db.rollback()
