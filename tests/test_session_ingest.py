"""Ingest: the contract, the quarantine, the ledger, and the published JSON Schema."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import pytest

from hag import PROJECT_ROOT
from hag.session import contract
from hag.session.ingest import ingest_payload, list_quarantined, read_payloads
from hag.settings import REGISTRY
from tests import factories as f
from tests.session_builders import payload, run, turn

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

MEMORY_TABLES = (
    "hag_entries",
    "hag_edges",
    "hag_concepts",
    "hag_topics",
    "hag_confidence_history",
    "hag_sessions",
    "hag_edge_audit",
)


def snapshot(db):
    """Every memory row as text: equal snapshots mean a byte-for-byte unchanged memory."""
    return {
        t: [r["row"] for r in db.execute(f"SELECT t::text AS row FROM {t} t ORDER BY 1").fetchall()]
        for t in MEMORY_TABLES
    }


@pytest.fixture
def world(db):
    """A topic with two entries and an edge, and one valid session already queued."""
    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    e = f.edge(db, a, b)
    db.commit()
    ok = ingest_payload(
        db, payload("queued", [turn(0, decision=a, used=[a], rendered=[e], outcome="success")])
    )
    db.commit()
    assert ok.status == "accepted"
    return a, b, e


def valid(a, e, session_id="s1"):
    return payload(
        session_id,
        [
            turn(0, decision=a, used=[a], rendered=[e], outcome="success"),
            turn(1, decision=a, outcome="failure"),
        ],
    )


def _bad_cases(a, e):
    ok = valid(a, e)
    cases = {}
    cases["malformed JSON"] = ('{"session_id": "x", "turns": [', None, None, "malformed JSON")
    unknown = json.loads(json.dumps(ok))
    unknown["turns"][1]["used_entry_ids"] = [str(uuid.UUID(int=7))]
    cases["unknown entry id"] = (unknown, "turns[1].used_entry_ids[0]", 1, "unknown entry id")
    unknown_edge = json.loads(json.dumps(ok))
    unknown_edge["turns"][0]["rendered_edge_ids"].append(str(uuid.UUID(int=9)))
    cases["unknown edge id"] = (unknown_edge, "turns[0].rendered_edge_ids[1]", 0, "unknown edge id")
    wrong = json.loads(json.dumps(ok))
    wrong["turns"][1]["outcome_strength"] = "high"
    cases["wrong type"] = (wrong, "turns[1].outcome_strength", 1, "valid number")
    wrong_index = json.loads(json.dumps(ok))
    wrong_index["turns"][1]["turn_index"] = "1"
    cases["string turn index"] = (wrong_index, "turns[1].turn_index", 1, "valid integer")
    wrong_outcome = json.loads(json.dumps(ok))
    wrong_outcome["turns"][0]["outcome"] = "win"
    cases["unknown outcome"] = (wrong_outcome, "turns[0].outcome", 0, "'success' or 'failure'")
    missing = json.loads(json.dumps(ok))
    del missing["turns"]
    cases["missing turns"] = (missing, "turns", None, "Field required")
    empty = json.loads(json.dumps(ok))
    empty["turns"] = []
    cases["no turns"] = (empty, "turns", None, "at least 1 item")
    gap = json.loads(json.dumps(ok))
    gap["turns"][1]["turn_index"] = 2
    cases["a missing turn"] = (gap, "turns", 1, "turn 1 is missing")
    dup = json.loads(json.dumps(ok))
    dup["turns"][1]["turn_index"] = 0
    cases["duplicate turn indexes"] = (dup, "turns[1].turn_index", 0, "appears twice")
    big = json.loads(json.dumps(ok))
    big["turns"][0]["student_message"] = "x" * 10_000_000
    cases["a 10 MB payload"] = (big, None, None, "over the limit of 5000000")
    extra = json.loads(json.dumps(ok))
    extra["turns"][0]["mood"] = "happy"
    cases["unknown field"] = (extra, "turns[0].mood", 0, "Extra inputs are not permitted")
    naive = json.loads(json.dumps(ok))
    naive["ended_at"] = "2026-03-01T12:00:00"
    cases["naive time"] = (naive, "ended_at", None, "timezone")
    topic = json.loads(json.dumps(ok))
    topic["topic_id"] = "astrology"
    cases["unknown topic"] = (topic, "topic_id", None, "unknown topic")
    nul = json.loads(json.dumps(ok))
    nul["turns"][1]["student_message"] = "a\x00b"
    cases["NUL character"] = (nul, "turns[1].student_message", 1, "NUL")
    cases["not an object"] = ("[1, 2]", None, None, "JSON object")
    cases["not UTF-8"] = (b'{"session_id": "\xff"}', None, None, "not UTF-8")
    cases["NaN"] = ('{"x": NaN}', None, None, "malformed JSON")
    same_id = json.loads(json.dumps(ok))
    same_id["session_id"] = "queued"
    cases["same id, different payload"] = (same_id, "session_id", None, "different payload")
    return cases


CASES = list(_bad_cases(uuid.UUID(int=1), uuid.UUID(int=2)))


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_refused_quarantined_and_changes_nothing(db, world, case):
    """Each broken payload is refused whole with its reason, kept raw, the memory untouched."""
    a, _, e = world
    raw, field, turn_index, words = _bad_cases(a, e)[case]
    before = snapshot(db)
    result = ingest_payload(db, raw, source="test")
    db.commit()
    assert result.quarantined and not result.accepted
    assert words in result.reason and (result.field, result.turn_index) == (field, turn_index)
    assert snapshot(db) == before
    stored = db.execute(
        "SELECT * FROM hag_session_quarantine WHERE quarantine_id = %s", (result.quarantine_id,)
    ).fetchone()
    assert (stored["reason"], stored["field"], stored["turn_index"]) == (
        result.reason,
        field,
        turn_index,
    )
    received = (
        raw
        if isinstance(raw, bytes)
        else (raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)).encode()
    )
    kept = received[: REGISTRY["session_quarantine_max_bytes"].default]
    assert stored["raw"] == kept.decode("utf-8", "replace").replace("\x00", "\\u0000")
    assert (stored["raw_bytes"], stored["raw_sha256"]) == (
        len(received),
        hashlib.sha256(received).hexdigest(),
    )


def test_a_valid_payload_waits_as_pending(db, world):
    """A valid session is queued as pending with the SHA-256 of its canonical JSON."""
    a, _, e = world
    result = ingest_payload(db, valid(a, e))
    db.commit()
    row = db.execute(
        "SELECT status, payload_sha256, ended_at FROM hag_sessions WHERE session_id = 's1'"
    ).fetchone()
    assert (
        result.status == "accepted"
        and row["status"] == "pending"
        and len(row["payload_sha256"]) == 64
    )


def test_a_line_deleted_since_the_tutor_rendered_it_is_still_known(db, world):
    """The tutor rendered rsa -> modular-arithmetic; the nightly (or an operator) deleted
    the edge before the session arrived. The session is accepted, not refused for an unknown
    edge: the line is what the tutor showed (its ends from the audit row), and its success
    on rsa is recorded as supplied with modular-arithmetic, as for a live line."""
    a, _, e = world
    db.execute("DELETE FROM hag_edges WHERE id = %s", (e,))
    db.commit()
    assert (
        db.execute("SELECT count(*) AS n FROM hag_edge_audit WHERE edge_id = %s", (e,)).fetchone()[
            "n"
        ]
        == 1
    )
    late = payload("late", [turn(0, decision=a, rendered=[e], outcome="success", concepts=["rsa"])])
    result = ingest_payload(db, late)
    db.commit()
    assert result.status == "accepted", result
    bridged = db.execute(
        "SELECT concept_slug, supplied_slug FROM hag_learner_bridged WHERE session_id = 'late'"
    ).fetchall()
    assert [(r["concept_slug"], r["supplied_slug"]) for r in bridged] == [
        ("rsa", "modular-arithmetic")
    ]


def test_re_ingesting_the_same_session_changes_nothing(db, world):
    """The same id with the same payload (even re-serialised) is a duplicate and a no-op."""
    a, _, e = world
    ingest_payload(db, valid(a, e))
    db.commit()
    before = snapshot(db)
    again = ingest_payload(db, json.dumps(valid(a, e), indent=4))
    db.commit()
    assert again.status == "duplicate" and again.accepted
    assert snapshot(db) == before


def test_re_ingesting_a_processed_session_does_not_apply_it_again(db, world):
    """After processing, ingesting the same session again is a duplicate; the memory stays."""
    a, _, e = world
    run(db, valid(a, e))
    before = snapshot(db)
    again = ingest_payload(db, valid(a, e))
    db.commit()
    from hag.session.process import process_pending

    summary = process_pending()
    assert again.status == "duplicate" and summary.sessions == 0
    assert snapshot(db) == before


def test_the_quarantine_lists_newest_first(db, world):
    """`list_quarantined` shows reason, field, turn and the raw size, newest first."""
    ingest_payload(db, "nope", source="a")
    ingest_payload(db, "{}", source="b")
    db.commit()
    rows = list_quarantined(db)
    assert [r["source"] for r in rows] == ["b", "a"]
    assert rows[1]["raw_bytes"] == 4 and rows[0]["field"] == "session_id"


def test_files_are_json_or_json_lines(tmp_path):
    """A .jsonl file yields a payload per line; a .json file one object or each array item."""
    lines = tmp_path / "s.jsonl"
    lines.write_text('{"a": 1}\n\n{"b": 2}\n')
    assert [s for s, _ in read_payloads(lines)] == [f"{lines}:1", f"{lines}:3"]
    array = tmp_path / "s.json"
    array.write_text('[{"a": 1}, {"b": 2}]')
    assert [json.loads(t) for _, t in read_payloads(array)] == [{"a": 1}, {"b": 2}]
    broken = tmp_path / "broken.json"
    broken.write_text('{"a": ')
    assert list(read_payloads(broken)) == [(str(broken), '{"a": ')]


def test_the_published_schema_is_up_to_date():
    """docs/session-contract.schema.json is what the pydantic contract generates today."""
    path = Path(PROJECT_ROOT) / "docs" / "session-contract.schema.json"
    assert path.read_text() == contract.schema_text(), (
        "regenerate: python -m hag.session.contract > docs/session-contract.schema.json"
    )


def test_the_schema_names_every_contract_field():
    """The published schema carries the SPEC's field names for the session and its turns."""
    schema = contract.json_schema()
    assert set(schema["required"]) == {"session_id", "learner_id", "topic_id", "ended_at", "turns"}
    turn_props = set(schema["$defs"]["Turn"]["properties"])
    assert turn_props == {
        "turn_index",
        "student_message",
        "concept_slugs",
        "decision_entry_id",
        "used_entry_ids",
        "rendered_edge_ids",
        "outcome",
        "outcome_strength",
        "struggles",
        "observations",
    }
