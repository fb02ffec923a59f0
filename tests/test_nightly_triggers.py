"""Migration 160: the search copy's deletes by probe and the learner reports' foreign key as
statement triggers keep writing what the triggers before them wrote."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from tests import factories as f

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

REPORT = (
    "INSERT INTO hag_edge_learner_reports (edge_id, session_id, learner_id, turns, share, "
    "reported_at) VALUES (%s, %s, 'ann', 1, 1, now())"
)


def _reports(conn) -> set[tuple[uuid.UUID, str]]:
    rows = conn.execute("SELECT edge_id, session_id FROM hag_edge_learner_reports").fetchall()
    return {(r["edge_id"], r["session_id"]) for r in rows}


def _changes(conn) -> dict[str, int]:
    rows = conn.execute(
        "SELECT set_key, count(*) AS n FROM hag_entry_search_changes GROUP BY set_key"
    ).fetchall()
    return {r["set_key"]: r["n"] for r in rows}


def test_deleting_edges_deletes_their_reports_and_only_theirs(db):
    """One DELETE of two edges takes their reports with them; another edge's report stays."""
    a, b, c, d = (f.entry(db) for _ in range(4))
    gone1, gone2, kept = f.edge(db, a, b), f.edge(db, b, c), f.edge(db, c, d)
    for edge_id, session in ((gone1, "s1"), (gone1, "s2"), (gone2, "s1"), (kept, "s1")):
        db.execute(REPORT, (edge_id, session))
    db.execute("DELETE FROM hag_edges WHERE id = ANY(%s)", ([gone1, gone2],))
    assert _reports(db) == {(kept, "s1")}
    audited = db.execute("SELECT count(*) AS n FROM hag_edge_audit").fetchone()["n"]
    assert audited == 2


def test_truncating_the_edges_empties_their_reports(db):
    """TRUNCATE hag_edges takes the reports too, as TRUNCATE ... CASCADE did with the key."""
    a, b = f.entry(db), f.entry(db)
    db.execute(REPORT, (f.edge(db, a, b), "s1"))
    db.execute("TRUNCATE hag_edges, hag_edge_audit")
    assert _reports(db) == set()


def test_a_report_must_name_an_edge_that_exists(db):
    """A report of a missing edge is refused as a foreign key violation, naming the edge."""
    missing = uuid.uuid4()
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match=str(missing)):
        db.execute(REPORT, (missing, "s1"))
    db.rollback()


def test_a_report_cannot_be_moved_to_a_missing_edge(db):
    """Changing a report's edge to one that does not exist is refused too."""
    a, b = f.entry(db), f.entry(db)
    edge_id = f.edge(db, a, b)
    db.execute(REPORT, (edge_id, "s1"))
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        db.execute("UPDATE hag_edge_learner_reports SET edge_id = %s", (uuid.uuid4(),))
    db.rollback()


def test_the_copy_forgets_a_row_whose_maturity_changes_in_a_bulk_update(db):
    """A statement that moves many rows (the nightly's promotion) leaves one copy row per
    searched entry, at its new maturity, and records each touched set's change."""
    ids = [f.entry(db, topic_id=t, maturity="candidate") for t in ("t1", "t2") for _ in range(5)]
    before = _changes(db)
    db.execute("UPDATE hag_entries SET maturity = 'pattern' WHERE id = ANY(%s)", (ids,))
    rows = db.execute(
        "SELECT id, maturity FROM hag_entry_search WHERE id = ANY(%s)", (ids,)
    ).fetchall()
    assert sorted((r["id"], r["maturity"]) for r in rows) == sorted((i, "pattern") for i in ids)
    after = _changes(db)
    moved = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert moved == {"topic:t1": 1, "topic:t2": 1}
    db.execute("UPDATE hag_entries SET maturity = 'archived' WHERE id = ANY(%s)", (ids[:3],))
    db.execute("DELETE FROM hag_entries WHERE id = ANY(%s)", (ids[3:6],))
    left = db.execute("SELECT id FROM hag_entry_search WHERE id = ANY(%s)", (ids,)).fetchall()
    assert sorted(r["id"] for r in left) == sorted(ids[6:])
