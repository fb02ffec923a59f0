"""Hostile and unlucky input (issue 11): every case ends refused by name with nothing written,
or processed, and no payload blocks the queue, writes outside its learner or breaks a read."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hag import PROJECT_ROOT, settings
from hag.errors import CorpusError, SettingsError, ValidationError
from hag.nightly import sweeps
from hag.operations import corpus
from hag.session.ingest import Unreadable, ingest_payload, read_payloads
from hag.session.process import process_pending
from tests import factories as f
from tests.fix_session import LONG_CONCEPT, queue_unchecked
from tests.session_builders import payload, turn

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)


def _status(db):
    rows = db.execute("SELECT session_id, status FROM hag_sessions ORDER BY 1").fetchall()
    return {r["session_id"]: r["status"] for r in rows}


def _quarantined(db, source):
    return {
        r["session_id"]: r["reason"]
        for r in db.execute(
            "SELECT session_id, reason FROM hag_session_quarantine WHERE source = %s", (source,)
        ).fetchall()
    }


@pytest.fixture
def entries(db):
    """Two topic entries and an edge between them in `cryptography`."""
    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    e = f.edge(db, a, b)
    db.commit()
    return a, b, e


def _good(session_id, a, e, day=0):
    return payload(
        session_id, [turn(0, decision=a, used=[a], rendered=[e], outcome="success")], day=day
    )


# --- a claimed session that fails ends rejected; the queue moves on -------------------------


@pytest.mark.parametrize(
    "ended_at",
    ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"],
    ids=["year 1", "year 9999"],
)
def test_an_unreadable_ended_at_in_the_queue_is_rejected_and_the_rest_applied(
    db, entries, ended_at
):
    """A queued session whose ended_at no client can read is rejected; the next one applies."""
    a, _, e = entries
    hostile = _good("hostile", a, e)
    hostile["ended_at"] = ended_at
    queue_unchecked(db, hostile)
    queue_unchecked(db, _good("after", a, e, day=1))
    summary = process_pending()
    assert (summary.sessions, summary.rejects) == (1, 1)
    assert _status(db) == {"after": "processed", "hostile": "rejected"}
    assert "ended_at" in _quarantined(db, "process-sessions")["hostile"]
    assert db.execute("SELECT traversal_count FROM hag_edges WHERE id = %s", (e,)).fetchone() == {
        "traversal_count": 1
    }


def test_an_18kb_concept_in_the_queue_is_rejected_and_the_rest_applied(db, entries):
    """A queued observation whose concept overflows an index row is rejected, not blocking."""
    a, _, e = entries
    hostile = payload(
        "hostile",
        [turn(0, observations=[{"graph": "topic", "concept": LONG_CONCEPT, "text": "Words."}])],
    )
    queue_unchecked(db, hostile)
    queue_unchecked(db, _good("after", a, e, day=1))
    summary = process_pending()
    assert (summary.sessions, summary.rejects) == (1, 1)
    assert _status(db) == {"after": "processed", "hostile": "rejected"}
    assert "index row" in _quarantined(db, "process-sessions")["hostile"]
    assert db.execute("SELECT count(*) AS n FROM hag_concepts").fetchone()["n"] == 0


def test_a_database_error_inside_the_apply_fails_that_session_only(db, entries):
    """A database error raised in a step rolls the session back, keeps it failed (not
    quarantined), and moves on."""
    a, _, e = entries
    db.execute(
        """
        CREATE FUNCTION pg_temp_explode() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.instruction = 'explode' THEN RAISE EXCEPTION 'crafted failure'; END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER explode BEFORE INSERT ON hag_entries
            FOR EACH ROW EXECUTE FUNCTION pg_temp_explode();
        """
    )
    db.commit()
    try:
        bomb = payload(
            "bomb",
            [
                turn(
                    0,
                    decision=a,
                    used=[a],
                    rendered=[e],
                    outcome="success",
                    observations=[{"graph": "tutor", "concept": "rsa", "text": "explode"}],
                )
            ],
        )
        for p in (bomb, _good("after", a, e, day=1)):
            assert ingest_payload(db, p).accepted
        db.commit()
        summary = process_pending()
    finally:
        db.rollback()
        db.execute("DROP TRIGGER explode ON hag_entries; DROP FUNCTION pg_temp_explode()")
        db.commit()
    assert (summary.sessions, summary.rejects, summary.failures) == (1, 0, 1)
    assert _status(db) == {"after": "processed", "bomb": "failed"}
    assert "bomb" not in _quarantined(db, "process-sessions")
    row = db.execute(
        "SELECT fail_reason, fail_class, fail_count FROM hag_sessions WHERE session_id = 'bomb'"
    ).fetchone()
    assert "crafted failure" in row["fail_reason"]
    assert row["fail_class"] == "RaiseException (P0001)" and row["fail_count"] == 1
    # the bomb's grading never landed: one traversal, from "after" alone
    assert db.execute("SELECT traversal_count FROM hag_edges WHERE id = %s", (e,)).fetchone() == {
        "traversal_count": 1
    }


# --- bounds at ingest ------------------------------------------------------------------------


def _refused(db, body, field, words):
    before = db.execute("SELECT count(*) AS n FROM hag_sessions").fetchone()["n"]
    result = ingest_payload(db, body)
    db.commit()
    assert result.quarantined, result
    assert result.field == field and words in result.reason, result
    assert db.execute("SELECT count(*) AS n FROM hag_sessions").fetchone()["n"] == before
    return result


@pytest.mark.parametrize(
    "ended_at", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "2040-01-01T00:00:00Z"]
)
def test_ingest_refuses_a_timestamp_far_from_now(db, entries, ended_at):
    """ended_at beyond the timestamp_window_years dial is refused, naming the field."""
    a, _, e = entries
    body = _good("far", a, e)
    body["ended_at"] = ended_at
    _refused(db, body, "ended_at", "ended_at:")


def test_ingest_refuses_an_18kb_concept_name(db, entries):
    """A concept name over concept_name_max_chars is refused at ingest, naming field and turn."""
    body = payload(
        "long",
        [
            turn(0),
            turn(1, observations=[{"graph": "topic", "concept": LONG_CONCEPT, "text": "Words."}]),
        ],
    )
    result = _refused(db, body, "turns[1].observations[0].concept", "concept_name_max_chars")
    assert result.turn_index == 1


@pytest.mark.parametrize(
    ("where", "dial"),
    [
        ("student_message", "text_max_chars"),
        ("concept_slugs", "slug_max_chars"),
        ("evidence", "text_max_chars"),
    ],
)
def test_ingest_refuses_texts_and_slugs_over_their_dials(db, entries, dials, where, dial):
    """Free text and slugs longer than their dials are refused, naming the dial."""
    dials(**{dial: 100})
    long = "x" * 101
    t = turn(0)
    if where == "student_message":
        t["student_message"] = long
        field = "turns[0].student_message"
    elif where == "concept_slugs":
        t["concept_slugs"] = [long]
        field = "turns[0].concept_slugs[0]"
    else:
        t["struggles"] = [{"concept_slug": "rsa", "missing_slug": "mod", "evidence": long}]
        field = "turns[0].struggles[0].evidence"
    _refused(db, payload("long", [t]), field, dial)


# --- bytes and structure ---------------------------------------------------------------------


def _lines(tmp_path, *lines: bytes) -> Path:
    path = tmp_path / "sessions.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _ingest_file(db, path, stream=None):
    results = [ingest_payload(db, raw, source=src) for src, raw in read_payloads(path, stream)]
    db.commit()
    return results


@pytest.mark.parametrize(
    "bad", [b"\xc0\xaf", b"\xed\xa0\x80", b"\xff"], ids=["overlong", "surrogate", "invalid"]
)
def test_invalid_utf8_in_a_file_is_refused_by_name_and_later_lines_are_read(
    db, entries, tmp_path, bad
):
    """Invalid or overlong UTF-8 is refused (not replaced by U+FFFD); the next line is read."""
    a, _, e = entries
    broken = json.dumps(_good("broken", a, e)).encode().replace(b"hello", b"hel" + bad + b"lo")
    path = _lines(tmp_path, broken, json.dumps(_good("ok", a, e)).encode())
    first, second = _ingest_file(db, path)
    assert first.quarantined and "not UTF-8" in first.reason
    assert second.status == "accepted"
    stored = db.execute("SELECT raw_bytes FROM hag_session_quarantine").fetchone()
    assert stored["raw_bytes"] == len(broken)


def test_invalid_utf8_on_stdin_exits_with_one_line(database_url, db):
    """`hag ingest -` with invalid bytes quarantines them and prints no traceback."""
    run = subprocess.run(
        [sys.executable, "-m", "hag.cli", "ingest", "-"],
        input=b'{"session_id": "\xc0\xaf"}\n',
        capture_output=True,
        env={**os.environ, "DATABASE_URL": database_url},
        cwd=PROJECT_ROOT,
        timeout=120,
    )
    assert run.returncode == 1
    assert b"Traceback" not in run.stderr and b"not UTF-8" in run.stdout
    assert db.execute("SELECT source FROM hag_session_quarantine").fetchone()["source"] == "stdin:1"


def test_deep_nesting_is_refused_and_json_lines_continue(db, entries, tmp_path):
    """A 1,000-level payload is quarantined by name (no RecursionError); later lines are read."""
    a, _, e = entries
    deep = b'{"session_id": "deep", "x": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    path = _lines(tmp_path, deep, json.dumps(_good("ok", a, e)).encode())
    first, second = _ingest_file(db, path)
    assert first.quarantined and "nested 1001 levels deep" in first.reason
    assert second.status == "accepted"


def test_nesting_depth_skips_brackets_inside_strings():
    """The depth check counts structure, not brackets quoted in text."""
    from hag.session.ingest import nesting_depth

    assert nesting_depth('{"a": "[[[[{{{", "b": [1, {"c": "\\"]]]"}]}') == 3


def test_nul_in_any_text_field_is_quarantined_and_later_lines_are_read(db, entries, tmp_path):
    """`"session_id": "a\\u0000b"` is refused and kept; the lines after it are still ingested."""
    a, _, e = entries
    nul = _good("a\x00b", a, e)
    path = _lines(tmp_path, json.dumps(nul).encode(), json.dumps(_good("ok", a, e)).encode())
    first, second = _ingest_file(db, path)
    assert first.quarantined and first.field == "session_id" and "NUL" in first.reason
    assert second.status == "accepted"
    row = db.execute("SELECT session_id FROM hag_session_quarantine").fetchone()
    assert row["session_id"] == "a\\u0000b"


def test_a_lone_surrogate_escape_is_refused_by_name(db, entries):
    """A `\\ud800` escape (not UTF-8 text once decoded) is refused naming the field."""
    a, _, e = entries
    text = json.dumps(_good("sur", a, e)).replace('"hello"', '"he\\ud800llo"')
    result = ingest_payload(db, text)
    db.commit()
    assert result.quarantined and result.field == "turns[0].student_message"
    assert "lone UTF-16 surrogate" in result.reason


def test_json_lines_split_at_line_feeds_only(db, entries, tmp_path):
    """Raw U+2028, U+0085 and CR inside a string stay inside the payload (one session)."""
    a, _, e = entries
    body = _good("odd", a, e)
    body["turns"][0]["student_message"] = "one\u2028two\u0085three\rfour"
    line = json.dumps(body, ensure_ascii=False).encode()
    assert "\u2028".encode() in line
    (result,) = _ingest_file(db, _lines(tmp_path, line))
    assert result.status == "accepted"
    stored = db.execute("SELECT payload FROM hag_sessions").fetchone()["payload"]
    assert stored["turns"][0]["student_message"] == "one\u2028two\u0085three\rfour"


def test_the_quarantine_keeps_a_bounded_prefix_with_digest_and_size(db, dials):
    """A refused payload is kept as its first N bytes (dial) plus the SHA-256 and size."""
    dials(session_quarantine_max_bytes=256)
    raw = b'{"junk": "' + b"y" * 10_000 + b'"'
    result = ingest_payload(db, raw)
    db.commit()
    row = db.execute("SELECT raw, raw_bytes, raw_sha256 FROM hag_session_quarantine").fetchone()
    assert result.quarantined
    assert row == {
        "raw": raw[:256].decode(),
        "raw_bytes": len(raw),
        "raw_sha256": hashlib.sha256(raw).hexdigest(),
    }


def test_an_oversize_line_is_digested_without_being_held(db, dials, entries, tmp_path):
    """A line over session_max_payload_bytes is quarantined by digest; the next line reads."""
    a, _, e = entries
    dials(session_max_payload_bytes=1000)
    huge = b'{"x": "' + b"z" * 50_000 + b'"}'
    path = _lines(tmp_path, huge, json.dumps(_good("ok", a, e)).encode())
    items = list(read_payloads(path, max_bytes=1000))
    assert items[0][1].size == len(huge) + 1  # with its line feed
    first, second = _ingest_file(db, path)
    assert first.quarantined and "over the limit of 1000" in first.reason
    assert second.status == "accepted"


def test_a_json_array_file_streams_item_by_item(tmp_path):
    """A JSON array is read one item at a time, each as written, across read chunks."""
    items = [{"n": i, "pad": "p" * 50_000} for i in range(40)]  # about 2 MB: several chunks
    path = tmp_path / "many.json"
    path.write_text(json.dumps(items))
    got = list(read_payloads(path, max_bytes=10_000_000))
    assert [json.loads(raw)["n"] for _, raw in got] == list(range(40))
    assert got[3][0] == f"{path}[3]"


@pytest.mark.parametrize(
    ("text", "read", "why"),
    [
        ('[{"n": 0} {"n": 1}] [{"n": 2}] trailing', [0], "expected ',' or ']' after item [0]"),
        ('[{"n": 0}, {"n",}, {"n": 2}, {"n": 3}]', [0], "item [1] is not valid JSON"),
        ('[{"n": 0}] {"n": 1}', [0], "text after the array's closing ']' was not read"),
        ('[{"n": 0},]', [0], "has no item after it"),
        ('[{"n": 0},, {"n": 1}]', [0], "item [1] is not valid JSON (Expecting value"),
        ('[{"n": 0}, {"n": 1}', [0, 1], "the array ends without its closing ']'"),
        ('[{"n": 0}, {"n": 1}]\n \n', [0, 1], None),
    ],
    ids=["no-comma", "bad-item", "after-end", "trailing-comma", "two-commas", "unclosed", "ok"],
)
def test_a_json_array_s_own_syntax_is_read_strictly(db, tmp_path, text, read, why):
    """The items before a break in the array's syntax are read; the break is one payload
    quarantined with a reason naming it, so no item after it is queued or dropped unsaid."""
    path = tmp_path / "many.json"
    path.write_text(text)
    got = list(read_payloads(path, max_bytes=1000))
    items = [raw for _, raw in got if not isinstance(raw, Unreadable)]
    broken = [raw for _, raw in got if isinstance(raw, Unreadable)]
    assert [json.loads(raw)["n"] for raw in items] == read
    assert got[: len(items)] == [(f"{path}[{i}]", raw) for i, raw in enumerate(items)]
    assert [b.reason for b in broken if why in b.reason] == [b.reason for b in broken]
    assert len(broken) == (why is not None)
    if broken:
        result = ingest_payload(db, broken[0], source=got[-1][0])
        db.commit()
        assert result.quarantined and result.reason == broken[0].reason


def test_an_array_whose_later_bytes_are_not_utf8_keeps_them_in_the_quarantine(tmp_path):
    """Bytes that do not decode in a later read chunk: the items before are read, and the
    rest (the bad bytes among it) is one Unreadable naming the item, kept as bytes."""
    from hag.session.ingest import _CHUNK

    text = json.dumps([{"n": i, "pad": "p" * 400_000} for i in range(4)]).encode()
    cut = int(_CHUNK * 1.5)
    path = tmp_path / "bad.json"
    path.write_bytes(text[:cut] + b"\xff\xfe" + text[cut:])
    got = list(read_payloads(path, max_bytes=10_000_000))
    assert [json.loads(raw)["n"] for _, raw in got[:-1]] == [0, 1]
    source, rest = got[-1]
    assert source == f"{path}[2]" and isinstance(rest, Unreadable)
    assert "not UTF-8 text from item [2] on" in rest.reason and b"\xff\xfe" in rest.text


def test_stdin_is_read_as_json_lines_from_bytes():
    """Standard input is read as bytes, one payload per line."""
    stream = io.BytesIO(b'{"a": 1}\n\n{"b": "\xe2\x80\xa8"}\n')
    got = list(read_payloads(Path("stdin"), stream, max_bytes=1000))
    assert got == [("stdin:1", '{"a": 1}'), ("stdin:3", '{"b": "\u2028"}')]


# --- visibility: a session touches only what its learner may read ----------------------------


@pytest.fixture
def others(db):
    """Entries this learner may not read: another learner's pattern, a drawing, another topic."""
    ada = f.entry(db, concept_slug="rsa", scope="student:ada", confidence=0.68)
    drawing = f.entry(db, concept_slug="rsa-diagram", scope="visual")
    elsewhere = f.entry(db, topic_id="biology", concept_slug="cells")
    db.commit()
    return {"ada": ada, "visual": drawing, "other topic": elsewhere}


@pytest.mark.parametrize("whose", ["ada", "visual", "other topic"])
@pytest.mark.parametrize("how", ["decision", "used"])
def test_a_session_naming_an_unreadable_entry_is_refused_naming_the_id(
    db, entries, others, whose, how
):
    """Grading or deciding on an entry the learner cannot read refuses the whole payload."""
    a, _, e = entries
    target = others[whose]
    kw = {"decision": target} if how == "decision" else {"used": [target]}
    body = payload(
        "fuzzer",
        [turn(0, decision=a, outcome="success"), turn(1, outcome="success", **kw)],
        learner="fuzzer",
    )
    result = _refused(
        db,
        body,
        f"turns[1].{'decision_entry_id' if how == 'decision' else 'used_entry_ids[0]'}",
        str(target),
    )
    assert "not readable by learner 'fuzzer'" in result.reason
    assert db.execute(
        "SELECT confidence FROM hag_entries WHERE id = %s", (others["ada"],)
    ).fetchone() == {"confidence": 0.68}


def test_a_session_rendering_an_edge_into_another_learners_pattern_is_refused(db, entries, others):
    """An edge counts as naming both its ends: one the learner cannot read refuses the payload."""
    a, _, _ = entries
    leak = f.edge(db, a, others["ada"], "leads_to")
    db.commit()
    body = payload("leak", [turn(0, rendered=[leak], outcome="success")], learner="iso")
    _refused(db, body, "turns[0].rendered_edge_ids[0]", str(others["ada"]))


def test_the_learners_own_pattern_and_the_tutor_are_readable(db, entries):
    """The rule admits the learner's own student scope and the tutor scope."""
    a, _, _ = entries
    own = f.entry(db, concept_slug="rsa", scope="student:ada")
    tutor = f.entry(db, concept_slug="socratic", scope="tutor", topic_id="biology")
    db.commit()
    body = payload(
        "mine", [turn(0, decision=a, used=[own, tutor], outcome="success")], learner="ada"
    )
    assert ingest_payload(db, body).status == "accepted"


def test_processing_refuses_a_queued_session_that_names_an_unreadable_entry(db, entries, others):
    """Processing applies the same rule: no leads_to edge into other learners' patterns."""
    a, _, _ = entries
    # Queued unchecked (as an older ingest would have): iso acts on ada's pattern after a success.
    queue_unchecked(
        db,
        payload(
            "iso",
            [
                turn(0, decision=a, outcome="success"),
                turn(1, decision=others["ada"], outcome="success"),
            ],
            learner="iso",
        ),
    )
    summary = process_pending()
    assert (summary.sessions, summary.rejects) == (0, 1)
    assert "not readable by learner 'iso'" in _quarantined(db, "process-sessions")["iso"]
    assert (
        db.execute("SELECT count(*) AS n FROM hag_edges WHERE source_type = 'learned'").fetchone()[
            "n"
        ]
        == 0
    )


def test_the_edge_walk_never_renders_another_topics_entry(db):
    """The read path uses the same rule: an edge into another topic's entry is not walked."""
    from hag.retrieval import retrieve_with_vector

    src = f.entry(db, concept_slug="rsa", embedding=f.vec(1.0), maturity="proven")
    mine = f.entry(db, concept_slug="mod", maturity="proven")
    theirs = f.entry(db, topic_id="biology", concept_slug="cells", maturity="proven")
    f.edge(db, src, mine, "prerequisite")
    f.edge(db, src, theirs, "related")
    db.commit()
    result = retrieve_with_vector(
        topic_id="cryptography", learner_id="ada", vector=f.vec(1.0), conn=db
    )
    targets = {edge.target_entry_id for edge in result.edges}
    assert targets == {mine}


# --- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("session_topic_scope", "public\n"),
        ("topic_scopes", '["public\\n"]'),
        ("cull_source_types", '["learned\\n"]'),
    ],
)
def test_patterns_match_the_whole_value(key, value):
    """A trailing newline no longer slips past a `$` anchor."""
    with pytest.raises(SettingsError):
        settings.validate(key, value)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "edge_confidence_ceiling",
            "0.1",
            "edge_new_confidence (0.3) may not exceed edge_confidence_ceiling (0.1)",
        ),
        (
            "promotion_min_confidence",
            "0.9",
            "promotion_min_confidence (0.9) may not exceed proven_min_confidence (0.8)",
        ),
        (
            "archive_max_confidence",
            "0.6",
            "archive_max_confidence (0.6) may not exceed promotion_min_confidence",
        ),
        (
            "session_topic_scope",
            "private",
            "session_topic_scope (private) must be one of topic_scopes",
        ),
    ],
)
def test_dials_whose_order_matters_cannot_be_set_out_of_order(db, key, value, message):
    """The ordered pairs declared in the registry are enforced when one side is set."""
    with pytest.raises(SettingsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        settings.set_value(db, key, value)
    db.rollback()


# --- timestamps through the other doors -------------------------------------------------------


@pytest.mark.parametrize("year", [1, 9999])
def test_a_corpus_created_at_far_from_now_is_refused_naming_the_item(db, year):
    """A corpus entry created in year 1 or 9999 is refused before anything is written."""
    data = {
        "topics": [{"topic_id": "cryptography", "title": "Cryptography"}],
        "entries": [
            {
                "topic_id": "cryptography",
                "concept_slug": "rsa",
                "visibility_scope": "public",
                "confidence": 0.5,
                "instruction": "x",
                "created_at": f"{year:04d}-06-01T00:00:00Z",
                "embedding": [0.1] * f.DIM,
            }
        ],
    }
    with pytest.raises(CorpusError, match=r"entries\[0\]\.created_at: .* year"):
        corpus.load(db, corpus.parse(data), f.DIM)
    db.rollback()
    assert db.execute("SELECT count(*) AS n FROM hag_topics").fetchone()["n"] == 0


def test_nightly_as_of_far_from_now_is_refused(db):
    """`hag nightly --as-of 9999-12-31` is refused with the dial named; nothing runs."""
    with pytest.raises(ValidationError, match="timestamp_window_years"):
        sweeps.sweep(db, as_of=datetime(9999, 12, 31, tzinfo=UTC))
    assert db.execute("SELECT count(*) AS n FROM hag_runs").fetchone()["n"] == 0


def test_enrich_as_of_far_from_now_is_refused(db):
    """`hag enrich --as-of` is held to the same window: enriched edges are stamped with it."""
    from hag.enrichment.run import enrich

    with pytest.raises(ValidationError, match="timestamp_window_years"):
        enrich(conn=db, as_of=datetime(1, 1, 2, tzinfo=UTC))


def test_a_read_that_meets_an_unreadable_timestamp_names_the_row(database_url, db):
    """A stored year-10000 timestamp makes `hag export entries` fail naming table, row, column."""
    from hag.support import bounds

    bad = f.entry(db, concept_slug="rsa")
    db.execute("UPDATE hag_entries SET created_at = '10000-01-02T00:00:00Z' WHERE id = %s", (bad,))
    db.commit()
    assert str(bad) in bounds.unreadable_rows(db)
    run = subprocess.run(
        [sys.executable, "-m", "hag.cli", "export", "entries"],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": database_url},
        cwd=PROJECT_ROOT,
        timeout=120,
    )
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert f"hag_entries {bad}: created_at" in run.stderr


# --- export streams ---------------------------------------------------------------------------


def test_export_streams_the_same_json_as_before(database_url, db, entries):
    """The streamed `hag export edges` prints the array the whole-table read would."""
    rows = json.loads(json.dumps(corpus.export_rows(db, "edges"), default=str))
    db.rollback()
    run = subprocess.run(
        [sys.executable, "-m", "hag.cli", "export", "edges"],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": database_url},
        cwd=PROJECT_ROOT,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    printed = json.loads(run.stdout)
    assert [r["id"] for r in printed] == [str(r["id"]) for r in rows] and len(printed) == 1


def test_export_of_an_empty_table_is_an_empty_array(database_url, db):
    """No rows still prints valid JSON."""
    run = subprocess.run(
        [sys.executable, "-m", "hag.cli", "export", "edges"],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": database_url},
        cwd=PROJECT_ROOT,
        timeout=120,
    )
    assert run.returncode == 0 and json.loads(run.stdout) == []


def test_an_unknown_id_is_refused_as_unknown_before_visibility(db, entries):
    """An id that exists nowhere is still refused as unknown, before visibility."""
    a, _, _ = entries
    ghost = uuid.uuid4()
    body = payload("ghost", [turn(0, used=[ghost], outcome="success")])
    _refused(db, body, "turns[0].used_entry_ids[0]", "unknown entry id")


def test_contract_patterns_refuse_a_trailing_newline(db, entries):
    """The payload's shapes match the whole value: `learner_id: "ada\\n"` is refused."""
    a, _, e = entries
    body = _good("nl", a, e)
    body["learner_id"] = "ada\n"
    _refused(db, body, "learner_id", "should match pattern")
