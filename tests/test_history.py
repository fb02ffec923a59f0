"""`hag history`: why an edge has its confidence, and what the memory believed after a session."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hag.cli import cli
from hag.errors import NotFoundError
from tests import factories as f
from tests import session_builders as sb

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)


@pytest.fixture
def two_sessions(db):
    """s1 learns leads_to a→b (0.3, seed); s2 renders it in a successful turn (+0.05 → 0.35)."""
    a = f.entry(db, concept_slug="aes", maturity="proven", confidence=0.8)
    b = f.entry(db, concept_slug="modes-of-operation", maturity="proven", confidence=0.8)
    db.commit()
    sb.run(db, sb.sequence("s1", a, b, day=0))
    edge = sb.edge_row(db, a, b, "leads_to")
    db.commit()
    sb.run(db, sb.payload("s2", [sb.turn(0, rendered=[edge["id"]], outcome="success")], day=1))
    db.commit()
    return edge["id"]


def _cli(*args):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_an_edges_history_says_each_change_and_its_session(two_sessions):
    """Created at 0.3 by s1, then graded up to 0.35 by s2, in that order."""
    rows = _cli("history", str(two_sessions), "--json")
    assert [(r["old_value"], round(r["new_value"], 6), r["session_id"]) for r in rows] == [
        (None, 0.3, "s1"),
        (0.3, 0.35, "s2"),
    ]
    assert all(r["reason"] for r in rows)


def test_memory_after_a_session_is_what_it_believed_then(two_sessions):
    """After s1 the edge stood at 0.3 even though s2 has since moved it to 0.35."""
    after_s1 = {
        r["entity_id"]: r["confidence"] for r in _cli("history", "--after-session", "s1", "--json")
    }
    after_s2 = {
        r["entity_id"]: r["confidence"] for r in _cli("history", "--after-session", "s2", "--json")
    }
    edge = str(two_sessions)
    assert round(after_s1[edge], 6) == 0.3
    assert round(after_s2[edge], 6) == 0.35


def test_unknown_ids_and_sessions_are_clear_errors(db):
    """An id with no history, a malformed id and an unknown session each get a reason."""
    runner = CliRunner()
    missing = runner.invoke(cli, ["history", "00000000-0000-0000-0000-000000000001"])
    assert isinstance(missing.exception, NotFoundError)
    assert "has a confidence history" in str(missing.exception)
    assert "not an entry or edge id" in str(runner.invoke(cli, ["history", "edge-7"]).exception)
    unknown = runner.invoke(cli, ["history", "--after-session", "nope"])
    assert "no session 'nope' was ingested" in str(unknown.exception)
    both = runner.invoke(cli, ["history", "x", "--after-session", "s1"])
    assert both.exit_code == 2


def test_an_entrys_history_has_a_row_per_changed_confidence_of_a_statement(db):
    """Entries' history rows are written per statement (migration 227) and say what the row
    trigger said: three entries inserted (reason 'created'); one UPDATE of all three that
    moves two of them and leaves the third at its value, under a reason, run, session and
    moment set for the transaction (two rows, the third none); an UPDATE of another column
    (none); an UPDATE with no reason set ('manual update')."""
    import uuid
    from datetime import UTC, datetime

    ids = [f.entry(db, confidence=c) for c in (0.2, 0.5, 0.9)]
    run_id, at = uuid.uuid4(), datetime(2026, 3, 4, 5, 6, tzinfo=UTC)
    db.execute(
        "SELECT set_config('hag.change_reason', 'test: lifted', true),"
        " set_config('hag.session_id', 's-9', true), set_config('hag.run_id', %s, true),"
        " set_config('hag.event_at', %s, true)",
        (str(run_id), at.isoformat()),
    )
    db.execute(
        "UPDATE hag_entries SET confidence = greatest(confidence, 0.7) WHERE id = ANY(%s)", (ids,)
    )
    db.execute(
        "UPDATE hag_entries SET failure_count = failure_count + 1 WHERE id = ANY(%s)", (ids,)
    )
    rows = db.execute(
        "SELECT entity_kind, entity_id, old_value, new_value, reason, session_id, run_id, at"
        " FROM hag_confidence_history WHERE entity_id = ANY(%s) ORDER BY new_value, old_value",
        (ids,),
    ).fetchall()
    assert [(r["entity_id"], r["old_value"], r["new_value"], r["reason"]) for r in rows] == [
        (ids[0], None, 0.2, "created"),
        (ids[1], None, 0.5, "created"),
        (ids[0], 0.2, 0.7, "test: lifted"),
        (ids[1], 0.5, 0.7, "test: lifted"),
        (ids[2], None, 0.9, "created"),
    ]
    moved = [r for r in rows if r["old_value"] is not None]
    assert {(r["entity_kind"], r["session_id"], r["run_id"], r["at"]) for r in moved} == {
        ("entry", "s-9", run_id, at)
    }
    # as session-end inserts: several rows in one statement, one of them an identity that
    # exists already (ON CONFLICT DO NOTHING: no row, no history), under the same settings
    taken = db.execute("SELECT concept_slug FROM hag_entries WHERE id = %s", (ids[0],)).fetchone()
    added = db.execute(
        "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity,"
        " confidence, instruction, embedding)"
        " SELECT 'cryptography', s, 'public', 'candidate', c, 'advice', e.embedding"
        " FROM unnest(%s::text[], %s::float8[]) AS n (s, c)"
        " CROSS JOIN (SELECT embedding FROM hag_entries WHERE id = %s) e"
        " ON CONFLICT DO NOTHING RETURNING id, confidence",
        (["new-a", "new-b", taken["concept_slug"]], [0.31, 0.32, 0.33], ids[0]),
    ).fetchall()
    assert sorted(r["confidence"] for r in added) == [0.31, 0.32]
    written = db.execute(
        "SELECT entity_id, old_value, new_value, reason, session_id, run_id, at"
        " FROM hag_confidence_history WHERE new_value IN (0.31, 0.32, 0.33) ORDER BY new_value"
    ).fetchall()
    assert [(r["entity_id"], r["old_value"], r["new_value"]) for r in written] == sorted(
        ((r["id"], None, r["confidence"]) for r in added), key=lambda t: t[2]
    )
    assert {(r["reason"], r["session_id"], r["run_id"], r["at"]) for r in written} == {
        ("test: lifted", "s-9", run_id, at)
    }
    db.commit()
    db.execute("UPDATE hag_entries SET confidence = 0.3 WHERE id = %s", (ids[2],))
    last = db.execute(
        "SELECT old_value, new_value, reason, session_id, run_id FROM hag_confidence_history"
        " WHERE entity_id = %s ORDER BY history_id DESC LIMIT 1",
        (ids[2],),
    ).fetchone()
    assert (last["old_value"], last["new_value"], last["reason"]) == (0.9, 0.3, "manual update")
    assert (last["session_id"], last["run_id"]) == (None, None)
    db.rollback()


def test_an_edges_history_is_written_by_statement_with_the_terms_handed_to_it(db):
    """Edges' history rows are written per statement (migration 229), as the row trigger
    wrote them: three edges inserted ('created'); a re-weigh that moves two of three edges
    and hands terms for two (the moved one it names gets them, the unmoved one writes no row,
    the moved one it does not name gets none); a later UPDATE in the same transaction takes
    no terms (the trigger empties the setting); an upsert writes the row its update moved and
    the row its insert created."""
    from datetime import UTC, datetime

    from hag.evidence import store

    a, b, c, d = (f.entry(db, concept_slug=s) for s in ("aes", "rsa", "dh", "ecc"))
    ids = [f.edge(db, a, b, confidence=0.2), f.edge(db, a, c, confidence=0.5)]
    ids.append(f.edge(db, b, c, confidence=0.9))
    at = datetime(2026, 3, 4, 5, 6, tzinfo=UTC)
    moved = store.set_edge_confidences(
        db,
        {ids[0]: (0.4, None), ids[1]: (0.5, 0.7), ids[2]: (0.6, None)},
        at=at,
        reason="test: re-weighed",
        session_id="s-9",
        terms={ids[0]: {"units": 2.0, "chance": float("inf")}, ids[1]: {"units": 1.0}},
    )
    assert moved == 2
    db.execute("UPDATE hag_edges SET confidence = 0.45 WHERE id = %s", (ids[0],))
    rows = db.execute(
        "SELECT entity_kind, entity_id, old_value, new_value, reason, session_id, at, terms"
        " FROM hag_confidence_history WHERE entity_id = ANY(%s) ORDER BY history_id",
        (ids,),
    ).fetchall()
    seen = [(r["entity_id"], r["old_value"], r["new_value"], r["terms"]) for r in rows]
    assert seen[:3] + sorted(seen[3:5], key=lambda r: r[1]) + seen[5:] == [
        (ids[0], None, 0.2, None),
        (ids[1], None, 0.5, None),
        (ids[2], None, 0.9, None),
        (ids[0], 0.2, 0.4, {"units": 2.0, "chance": None}),
        (ids[2], 0.9, 0.6, None),
        (ids[0], 0.4, 0.45, None),
    ]
    assert [r["reason"] for r in rows][:3] == ["created"] * 3
    assert {(r["entity_kind"], r["reason"], r["session_id"], r["at"]) for r in rows[3:5]} == {
        ("edge", "test: re-weighed", "s-9", at)
    }
    assert (
        db.execute("SELECT unlearned_from FROM hag_edges WHERE id = %s", (ids[1],)).fetchone()[
            "unlearned_from"
        ]
        == 0.7
    )  # written, with no history row: its confidence stayed
    upserted = db.execute(
        "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence,"
        " source_type) SELECT s, t, 'prerequisite', 0.35, 'learned'"
        " FROM unnest(%s::uuid[], %s::uuid[]) AS n (s, t)"
        " ON CONFLICT (source_entry_id, target_entry_id, edge_type)"
        " DO UPDATE SET confidence = 0.55 RETURNING id",
        ([a, c], [b, d]),
    ).fetchall()
    new_id = next(r["id"] for r in upserted if r["id"] not in ids)
    last = db.execute(
        "SELECT entity_id, old_value, new_value, reason FROM hag_confidence_history"
        " WHERE entity_id = ANY(%s) AND new_value IN (0.35, 0.55) ORDER BY new_value",
        ([ids[0], new_id],),
    ).fetchall()
    assert [(r["entity_id"], r["old_value"], r["new_value"]) for r in last] == [
        (new_id, None, 0.35),
        (ids[0], 0.45, 0.55),
    ]
    db.rollback()


def test_explain_names_a_whole_id_that_is_neither_an_entry_nor_an_edge(db):
    """A whole UUID naming nothing is "no entry or edge", not "is an entry"; an entry's id
    is still told apart from an edge's."""
    from hag.storage import history
    from tests import factories as f

    nothing = "00000000-0000-4000-8000-0000000000ff"
    with pytest.raises(NotFoundError, match=f"no entry or edge '{nothing}'"):
        history.explain_edge(db, nothing, None)
    entry = f.entry(db, concept_slug="rsa")
    with pytest.raises(NotFoundError, match="is an entry, not an edge"):
        history.explain_edge(db, str(entry), None)
