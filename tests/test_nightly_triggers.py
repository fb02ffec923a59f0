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
    db.execute("TRUNCATE hag_edges, hag_edge_audit, hag_edge_audit_reports")
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


def _last_changes(conn) -> dict[str, list[uuid.UUID]]:
    """The change rows this transaction wrote, set by set: the ids each names, in order."""
    rows = conn.execute(
        "SELECT set_key, ids FROM hag_entry_search_changes WHERE xid = pg_current_xact_id() "
        "ORDER BY ctid"
    ).fetchall()
    return {r["set_key"]: sorted(r["ids"]) for r in rows}


def test_a_promotion_updates_the_copy_row_in_place_and_names_it_once(db):
    """Migration 195: a row that stays in its set and topic keeps its copy row (updated where
    it stands, the vector untouched), and the change row lists its id once."""
    ids = sorted(f.entry(db, maturity="candidate", confidence=0.6) for _ in range(3))
    db.commit()
    vectors = {
        r["id"]: r["v"]
        for r in db.execute(
            "SELECT id, embedding::text AS v FROM hag_entry_search WHERE id = ANY(%s)", (ids,)
        )
    }
    db.execute(
        "UPDATE hag_entries SET maturity = 'pattern', confidence = 0.7 WHERE id = ANY(%s)", (ids,)
    )
    rows = db.execute(
        "SELECT id, search_set, maturity, confidence, embedding::text AS v "
        "FROM hag_entry_search WHERE id = ANY(%s) ORDER BY id",
        (ids,),
    ).fetchall()
    assert [(r["id"], r["search_set"], r["maturity"], r["confidence"]) for r in rows] == [
        (i, "topic", "pattern", 0.7) for i in ids
    ]
    assert {r["id"]: r["v"] for r in rows} == vectors
    assert _last_changes(db) == {"topic:cryptography": ids}
    db.rollback()


def test_an_update_puts_back_a_copy_row_the_copy_lacked(db):
    """A kept row whose copy row is missing (it never should be) is inserted, as before."""
    entry_id = f.entry(db, maturity="candidate", confidence=0.6)
    db.execute("DELETE FROM hag_entry_search WHERE id = %s", (entry_id,))
    db.execute("UPDATE hag_entries SET maturity = 'pattern' WHERE id = %s", (entry_id,))
    row = db.execute(
        "SELECT maturity, confidence FROM hag_entry_search WHERE id = %s", (entry_id,)
    ).fetchone()
    assert (row["maturity"], row["confidence"]) == ("pattern", 0.6)
    assert _last_changes(db)["topic:cryptography"] == [entry_id]
    db.rollback()


def test_one_statement_that_keeps_moves_adds_and_drops_rows(db):
    """Kept rows in place, a move between topics (gone from one set, added to the other), a row
    newly searched and a row archived, in one UPDATE: the copy and the change rows follow."""
    kept = f.entry(db, topic_id="t1", maturity="candidate")
    moved = f.entry(db, topic_id="t1", maturity="pattern")
    f.topic(db, "t2")
    shown = f.entry(db, topic_id="t1", maturity="archived")
    archived = f.entry(db, topic_id="t1", maturity="pattern", confidence=0.1)
    untouched = f.entry(db, topic_id="t1", maturity="pattern", confidence=0.5)
    db.commit()
    db.execute(
        """
        UPDATE hag_entries SET
            maturity = CASE WHEN id = %(kept)s THEN 'pattern' WHEN id = %(shown)s THEN 'candidate'
                            WHEN id = %(archived)s THEN 'archived' ELSE maturity END,
            topic_id = CASE WHEN id = %(moved)s THEN 't2' ELSE topic_id END,
            success_count = success_count + 1
        WHERE topic_id = 't1'
        """,
        {"kept": kept, "moved": moved, "shown": shown, "archived": archived},
    )
    copy = {
        r["id"]: (r["topic_id"], r["maturity"])
        for r in db.execute("SELECT id, topic_id, maturity FROM hag_entry_search")
    }
    assert copy == {
        kept: ("t1", "pattern"),
        moved: ("t2", "pattern"),
        shown: ("t1", "candidate"),
        untouched: ("t1", "pattern"),
    }
    assert _last_changes(db) == {
        "topic:t1": sorted([kept, moved, shown, archived]),
        "topic:t2": [moved],
    }
    db.rollback()


def test_deleting_audit_rows_takes_their_kept_reports_and_only_theirs(db):
    """Migration 222: the kept reports' foreign key as a statement trigger. Two culled edges'
    reports are kept beside their audit rows with the sums dropped; deleting one audit row
    takes its two kept reports, the other's stays, and TRUNCATE takes the rest."""
    a, b, c = (f.entry(db) for _ in range(3))
    one, two = f.edge(db, a, b), f.edge(db, b, c)
    for edge_id, session in ((one, "s1"), (one, "s2"), (two, "s1")):
        db.execute(REPORT, (edge_id, session))
    db.execute("DELETE FROM hag_edges WHERE id = ANY(%s)", ([one, two],))
    sums = "SELECT (SELECT count(*) FROM hag_edge_learner_units) + (SELECT count(*) FROM hag_edge_units) AS n"
    assert db.execute(sums).fetchone()["n"] == 0
    kept = "SELECT a.edge_id, r.session_id FROM hag_edge_audit_reports r JOIN hag_edge_audit a USING (audit_id)"
    assert {(r["edge_id"], r["session_id"]) for r in db.execute(kept)} == {
        (one, "s1"), (one, "s2"), (two, "s1")}  # fmt: skip
    db.execute("DELETE FROM hag_edge_audit WHERE edge_id = %s", (one,))
    left = db.execute("SELECT count(*) AS n FROM hag_edge_audit_reports").fetchone()["n"]
    assert left == 1
    db.execute("TRUNCATE hag_edge_audit")
    assert db.execute("SELECT count(*) AS n FROM hag_edge_audit_reports").fetchone()["n"] == 0
