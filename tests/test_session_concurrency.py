"""Four workers over 200 sessions that share edges end in the state of serial processing."""

from __future__ import annotations

import pytest

from hag import settings
from hag.session.process import process_pending
from hag.session.queue import apply_pending_session
from hag.session.steps import Caches
from hag.session.summary import ProcessSummary
from tests.fix_session import build_world, memory, sessions
from tests.session_builders import ingest

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)


def test_four_workers_end_in_the_state_of_serial_processing(db):
    """Concurrent commit order replayed serially gives the same memory; counters add up exactly."""
    batch = sessions()
    build_world(db)
    assert all(r.accepted for r in ingest(db, *batch))
    concurrent = process_pending(batch_size=25, workers=4)
    assert (concurrent.sessions, concurrent.rejects) == (200, 0)
    order = [
        r["session_id"]
        for r in db.execute("SELECT session_id FROM hag_sessions ORDER BY applied_seq").fetchall()
    ]
    parallel_state = memory(db)
    history_rows = db.execute("SELECT count(*) AS n FROM hag_confidence_history").fetchone()["n"]

    # Exact counters, from the payloads alone: one traversal per turn that rendered an edge.
    rendered = sum(len(set(t["rendered_edge_ids"])) for s in batch for t in s["turns"])
    assert db.execute("SELECT sum(traversal_count) AS n FROM hag_edges").fetchone()["n"] == rendered
    successes = sum(
        len({*t["used_entry_ids"], *([t["decision_entry_id"]] if t["decision_entry_id"] else [])})
        for s in batch
        for t in s["turns"]
        if t["outcome"] == "success"
    )
    assert (
        db.execute("SELECT sum(success_count) AS n FROM hag_entries").fetchone()["n"] == successes
    )

    build_world(db)
    assert all(r.accepted for r in ingest(db, *batch))
    summary = ProcessSummary()
    caches = Caches()
    dials = settings.current()
    from hag.storage import db as hdb

    with hdb.pool().connection() as conn:
        for session_id in order:
            assert (
                apply_pending_session(
                    conn, dials, run_id=None, caches=caches, summary=summary, session_id=session_id
                )
                == session_id
            )
    assert memory(db) == parallel_state
    assert (
        db.execute("SELECT count(*) AS n FROM hag_confidence_history").fetchone()["n"]
        == history_rows
    )
    learned = db.execute(
        "SELECT count(*) AS n FROM hag_edges WHERE source_type = 'learned'"
    ).fetchone()["n"]
    assert learned > 5  # the sessions really did share learned edges, not only seed ones
