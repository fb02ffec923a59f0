"""A learner's own data (issue 25): export, erasure with its proof, and the retention sweep,
on the real database."""

from __future__ import annotations

import json
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

from hag.errors import NotFoundError, ValidationError
from hag.nightly import audit, sweeps
from hag.operations import privacy
from hag.session.process import process_pending
from tests import factories as f
from tests.session_builders import T0, ingest, payload, run, turn

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

ADA = "ada.lovelace"  # a '.' in the id: the free-text match must not read it as "any char"
BOB = "bob"
CONCEPTS = ["rsa", "modular-arithmetic", "primes", "hashing", "signatures"]


def said(who: str, n: int) -> str:
    """A message nobody else says: the proof scans the whole schema for it."""
    return f"{who} says thing number {n}: I still do not see why the primes matter"


def evidence(who: str, n: int) -> str:
    return f"{who} quoted {n}: primes confuse me"


def struggling(who: str, n: int, day: int, learner: str) -> dict:
    """A session of `learner` whose failed turn reports rsa -> primes (with quoted evidence)
    and a student trait, then a successful turn on hashing."""
    return payload(
        f"{learner}-s{n}",
        [
            turn(
                0,
                outcome="failure",
                concepts=["rsa"],
                message=said(who, n),
                struggles=[
                    {
                        "concept_slug": "rsa",
                        "missing_slug": "primes",
                        "evidence": evidence(who, n),
                    }
                ],
                observations=[
                    {"graph": "student", "concept": "rsa", "text": "learns from worked examples"}
                ],
            ),
            turn(1, outcome="success", concepts=["hashing"], message=said(who, 100 + n)),
        ],
        learner=learner,
        day=day,
    )


def messages(p: dict) -> list[str]:
    out = []
    for t in p["turns"]:
        out.append(t["student_message"])
        out.extend(s["evidence"] for s in t["struggles"])
    return out


@pytest.fixture
def memory(db, dials):
    """Public entries, and two learners with sessions, private entries and their history,
    reports, successes, a learned edge culled and restored, and refused payloads."""
    e = {
        slug: f.entry(db, concept_slug=slug, created_at=T0 - timedelta(days=30))
        for slug in CONCEPTS
    }
    db.commit()
    ada = [struggling("Ada", n, n, ADA) for n in range(3)]
    bob = [struggling("Bob", n, n, BOB) for n in range(2)]
    run(db, *ada, *bob)
    private = db.execute(
        "SELECT id FROM hag_entries WHERE visibility_scope = %s", (f"student:{ADA}",)
    ).fetchone()["id"]
    # a later session that used the private entry: its confidence history
    used = payload(
        f"{ADA}-s9",
        [
            turn(0, decision=e["rsa"], used=[private], outcome="success", message=said("Ada", 9)),
            turn(1, decision=e["primes"], message=said("Ada", 10)),
        ],
        learner=ADA,
        day=9,
    )
    ada.append(used)
    run(db, used)
    # the learned edge her session discovered (rsa -> primes, leads_to), culled and restored
    learned = db.execute(
        "SELECT id FROM hag_edges WHERE source_session_id = %s", (f"{ADA}-s9",)
    ).fetchone()["id"]
    db.execute("UPDATE hag_edges SET confidence = 0.1 WHERE id = %s", (learned,))
    db.commit()
    dials(promotion_min_confidence=0.4)  # her trait (at 0.44) becomes a pattern: maturity history
    night = sweeps.sweep(db, as_of=T0 + timedelta(days=200))
    dials(promotion_min_confidence=0.5)
    assert night.culled >= 1
    assert audit.restore(edge_id=learned, conn=db).restored == [learned]
    # refused payloads: an unknown topic (raw kept), and one naming bob's private entry
    refused = payload(f"{ADA}-s20", [turn(0, message=said("Ada", 20))], learner=ADA, topic="nope")
    bobs = db.execute(
        "SELECT id FROM hag_entries WHERE visibility_scope = %s", (f"student:{BOB}",)
    ).fetchone()["id"]
    peeking = payload(
        "peek-1", [turn(0, used=[bobs], message=said("Ada", 21))], learner=ADA, day=21
    )
    assert [r.status for r in ingest(db, refused, peeking)] == ["quarantined", "quarantined"]
    ada += [refused, peeking]
    # a queued session session-end cannot apply: rejected, listed in its run's summary
    db.execute(
        "INSERT INTO hag_sessions (session_id, learner_id, topic_id, ended_at, payload,"
        " payload_sha256) VALUES (%s, %s, 'cryptography', %s, %s, repeat('0', 64))",
        (f"{ADA}-s30", ADA, T0, json.dumps({"turns": "none", "said": said("Ada", 30)})),
    )
    db.commit()
    assert process_pending().rejects == 1
    return {"entries": e, "ada": ada, "bob": bob, "private": private, "learned": learned}


def shared_state(db) -> dict:
    """Every shared entry's and edge's numbers, and the evidence per edge (sessions, turns,
    distinct learners): what an erasure must leave exactly as it was."""
    entries = {
        r["id"]: (r["confidence"], r["maturity"], r["success_count"], r["failure_count"])
        for r in db.execute(
            "SELECT * FROM hag_entries WHERE visibility_scope NOT LIKE 'student:%'"
        ).fetchall()
    }
    edges = {
        r["id"]: (r["confidence"], r["hit_count"], r["traversal_count"], r["unlearned_from"])
        for r in db.execute("SELECT * FROM hag_edges").fetchall()
    }
    evidence_rows = db.execute(
        "SELECT edge_id, count(*) AS sessions, sum(turns) AS turns,"
        " count(DISTINCT learner_id) AS learners FROM hag_edge_learner_reports GROUP BY edge_id"
    ).fetchall()
    successes = db.execute(
        "SELECT count(*) AS n, count(DISTINCT learner_id) AS learners FROM hag_learner_successes"
    ).fetchone()
    return {
        "entries": entries,
        "edges": edges,
        "evidence": {
            r["edge_id"]: (r["sessions"], r["turns"], r["learners"]) for r in evidence_rows
        },
        "successes": dict(successes),
    }


def text_columns(db, *, with_type: bool = False) -> list[tuple]:
    """(schema, table, column) for every text-like, JSON, byte or array-of-text column of
    every table in the database's own schemas, from the catalog: a table added later is
    scanned too."""
    return [
        (r["nspname"], r["relname"], r["attname"], *([r["typname"]] if with_type else []))
        for r in db.execute(
            """
            SELECT n.nspname, c.relname, a.attname, t.typname
            FROM pg_attribute a
            JOIN pg_class c ON c.oid = a.attrelid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_type t ON t.oid = a.atttypid
            WHERE c.relkind IN ('r', 'p', 'm')
              AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
              AND n.nspname NOT LIKE 'pg_temp%%'
              AND a.attnum > 0 AND NOT a.attisdropped
              AND (t.typcategory = 'S' OR t.typname IN ('json', 'jsonb', 'bytea')
                   OR (t.typcategory = 'A' AND t.typelem IN (
                        SELECT oid FROM pg_type WHERE typcategory = 'S' OR typname = 'jsonb')))
            ORDER BY 1, 2, 3
            """
        ).fetchall()
    ]


def find_anywhere(db, needle: str) -> list[str]:
    """Every schema.table.column whose text holds `needle`."""
    found = []
    for schema, table, column, kind in text_columns(db, with_type=True):
        hit = db.execute(
            sql.SQL("SELECT 1 FROM {}.{} WHERE strpos({}, %s) > 0 LIMIT 1").format(
                sql.Identifier(schema),
                sql.Identifier(table),
                # bytea as text is hex: `escape` keeps its ASCII as it is
                sql.SQL("encode({}, 'escape')" if kind == "bytea" else "{}::text").format(
                    sql.Identifier(column)
                ),
            ),
            (needle,),
        ).fetchone()
        if hit:
            found.append(f"{schema}.{table}.{column}")
    return found


def test_the_scan_covers_every_table_and_finds_what_is_there(db, memory):
    """Before the erasure the catalog scan finds the learner in each place the brief names."""
    places = find_anywhere(db, ADA)
    for table in (
        "hag_sessions",
        "hag_entries",
        "hag_edge_learner_reports",
        "hag_learner_successes",
        "hag_session_quarantine",
        "hag_confidence_history",
        "hag_edges",
        "hag_edge_audit",
    ):
        assert any(f".{table}." in p for p in places), (table, places)
    assert ("public", "hag_erasures", "learner_hash") in text_columns(db)
    assert find_anywhere(db, said("Ada", 20)) == ["public.hag_session_quarantine.raw"]


def test_an_erased_learner_is_nowhere_in_the_schema(db, memory):
    """After the erasure no text or JSON column of any table holds the learner id or any of
    their messages (the quoted evidence included)."""
    result = privacy.erase_learner(ADA, operator="the school's data officer", conn=db)
    assert result.erasure_id is not None and not result.dry_run
    needles = [ADA, said("Ada", 30)] + [m for p in memory["ada"] for m in messages(p)]
    assert {n: find_anywhere(db, n) for n in needles} == dict.fromkeys(needles, [])
    record = db.execute("SELECT * FROM hag_erasures").fetchone()
    assert record["erased_by"] == "the school's data officer"
    assert record["learner_hash"] == privacy.learner_hash(db, ADA) != ADA
    assert record["counts"]["hag_sessions"] == {"deleted": 5}
    assert record["counts"]["hag_session_quarantine"] == {"deleted": 3}
    assert record["counts"]["hag_edge_learner_reports"] == {"pseudonymised": 3}


def test_the_shared_graph_and_the_other_learner_are_untouched(db, memory, tmp_path):
    """Every shared confidence, count and evidence tally is the same after the erasure; the
    other learner's export is row for row what it was, but for a row that named both (her
    refused payload naming his private entry, which the erasure removes)."""
    before = shared_state(db)
    bob_before = privacy.export_learner(BOB, tmp_path / "before.jsonl", conn=db)
    privacy.erase_learner(ADA, conn=db)
    assert shared_state(db) == before
    privacy.export_learner(BOB, tmp_path / "after.jsonl", conn=db)
    before_rows, after_rows = (
        p.read_text().splitlines()[:-1]
        for p in (tmp_path / "before.jsonl", tmp_path / "after.jsonl")
    )
    assert sum(ADA in r for r in before_rows) == 1 == bob_before.counts["hag_session_quarantine"]
    assert [r for r in before_rows if ADA not in r] == after_rows


def test_erased_evidence_keeps_one_pseudonym_per_learner_and_one_per_session(db, memory):
    """The learner's reports and successes now carry one random pseudonym, and each of their
    sessions its own, so the per-learner and per-session counts stay."""
    privacy.erase_learner(ADA, conn=db)
    rows = db.execute(
        "SELECT learner_id, session_id FROM hag_edge_learner_reports WHERE learner_id <> %s",
        (BOB,),
    ).fetchall()
    assert len({r["learner_id"] for r in rows}) == 1
    assert len({r["session_id"] for r in rows}) == len(rows) == 3
    assert all(r["learner_id"].startswith("erased-") for r in rows)
    succ = db.execute(
        "SELECT DISTINCT learner_id FROM hag_learner_successes WHERE learner_id <> %s", (BOB,)
    ).fetchall()
    assert [r["learner_id"] for r in succ] == [rows[0]["learner_id"]]


def test_reports_of_a_deleted_edge_are_exported_and_erased_with_the_live_ones(db, memory, tmp_path):
    """A prerequisite Ada and Bob reported is deleted: the audit keeps their reports beside
    its row. Ada's export lists hers there; her erasure pseudonymises them (the one pseudonym
    her successes get, each session its own) and the session that resumed them and leaves Bob's as they were."""
    edge = db.execute(
        "SELECT r.edge_id FROM hag_edge_learner_reports r GROUP BY r.edge_id"
        " HAVING bool_or(r.learner_id = %s) ORDER BY count(*) DESC LIMIT 1",
        (ADA,),
    ).fetchone()["edge_id"]
    reporters = db.execute(
        "SELECT learner_id, session_id FROM hag_edge_learner_reports WHERE edge_id = %s",
        (edge,),
    ).fetchall()
    db.execute("DELETE FROM hag_edges WHERE id = %s", (edge,))
    hers = sorted(r["session_id"] for r in reporters if r["learner_id"] == ADA)
    # as if one of her sessions had later resumed those reports in a new edge of the pair
    db.execute(
        "UPDATE hag_edge_audit SET resumed_at = now(), resumed_session_id = %s WHERE edge_id = %s",
        (hers[0], edge),
    )
    db.commit()
    others = sorted((r["learner_id"], r["session_id"]) for r in reporters if r["learner_id"] != ADA)
    out = tmp_path / "ada.jsonl"
    exported = privacy.export_learner(ADA, out, conn=db)
    assert exported.counts["hag_edge_audit_reports"] == len(hers) >= 1
    lines = [json.loads(x) for x in out.read_text().splitlines()[:-1]]
    assert (
        sorted(x["row"]["session_id"] for x in lines if x["table"] == "hag_edge_audit_reports")
        == hers
    )
    result = privacy.erase_learner(ADA, conn=db)
    assert result.counts["hag_edge_audit_reports"] == {"pseudonymised": len(hers)}
    assert find_anywhere(db, ADA) == []
    copies = db.execute("SELECT learner_id, session_id FROM hag_edge_audit_reports").fetchall()
    live = {
        r["learner_id"]
        for r in db.execute(
            "SELECT learner_id FROM hag_learner_successes WHERE learner_id LIKE 'erased-%%'"
        ).fetchall()
    }
    mine = [r for r in copies if r["learner_id"].startswith("erased-")]
    assert {r["learner_id"] for r in mine} == live and len(live) == 1
    assert len({r["session_id"] for r in mine}) == len(hers)
    assert sorted((r["learner_id"], r["session_id"]) for r in copies if r not in mine) == others


def test_withdrawn_counts_are_exported_and_erased_with_the_learners_reports(db, memory, tmp_path):
    """Ada's and Bob's reports of rsa -> primes, withdrawn as contradicted, are counted on the
    pair by learner (migration 223), and one of Ada's on a pair into her private entry. Her
    export lists hers; her erasure gives the shared pair's count the pseudonym her successes
    get, deletes the private pair's, and leaves Bob's as it was."""
    e = memory["entries"]
    rows = [(e["rsa"], e["primes"], ADA, 2, 1.5), (e["rsa"], e["primes"], BOB, 1, 0.5),
            (e["rsa"], memory["private"], ADA, 1, 1.0)]  # fmt: skip
    for row in rows:
        db.execute("INSERT INTO hag_pair_withdrawn VALUES (%s, %s, %s, %s, %s)", row)
    db.commit()
    exported = privacy.export_learner(ADA, tmp_path / "ada.jsonl", conn=db)
    assert exported.counts["hag_pair_withdrawn"] == 2
    result = privacy.erase_learner(ADA, conn=db)
    assert result.counts["hag_pair_withdrawn"] == {"deleted": 1, "pseudonymised": 1}
    assert find_anywhere(db, ADA) == []
    left = db.execute(
        "SELECT learner_id, sessions, units FROM hag_pair_withdrawn ORDER BY sessions"
    ).fetchall()
    pseudonym = db.execute(
        "SELECT DISTINCT learner_id FROM hag_learner_successes WHERE learner_id LIKE 'erased-%%'"
    ).fetchone()["learner_id"]
    assert [tuple(r.values()) for r in left] == [(BOB, 1, 0.5), (pseudonym, 2, 1.5)]


def test_waiting_resumptions_of_a_private_entry_are_erased(db, memory):
    """Resumptions waiting for the nightly (migration 226) out of Ada's private entry, and of
    a culled edge from a shared entry into it (its audit row), go with her erasure; one out
    of a shared entry into a shared one stays for the nightly."""
    e = memory["entries"]
    into_private = f.edge(db, e["rsa"], memory["private"], source_type="learned")
    db.execute("DELETE FROM hag_edges WHERE id = %s", (into_private,))  # audited
    audit_id = db.execute(
        "SELECT audit_id FROM hag_edge_audit WHERE edge_id = %s", (into_private,)
    ).fetchone()["audit_id"]
    for source, audited in ((memory["private"], 0), (e["rsa"], audit_id), (e["rsa"], 0)):
        db.execute(
            "INSERT INTO hag_resume_pending (audit_id, edge_id, edge_type, source_entry_id,"
            " flagged_at) VALUES (%s, gen_random_uuid(), 'prerequisite', %s, now())",
            (audited, source),
        )
    db.commit()
    result = privacy.erase_learner(ADA, conn=db)
    assert result.counts["hag_resume_pending"] == {"deleted": 2}
    left = db.execute("SELECT source_entry_id, audit_id FROM hag_resume_pending").fetchall()
    assert [(r["source_entry_id"], r["audit_id"]) for r in left] == [(e["rsa"], 0)]


def test_an_erasure_of_a_culled_edge_keeps_every_run_audited(db, memory):
    """A nightly culls an edge into Ada's private entry (its summary says 1 culled, one audit
    row); her erasure deletes the audit row with her data, and counts it: the audit
    completeness suite still holds for that run (before, it failed for good)."""
    from hag import quality

    e = memory["entries"]
    f.edge(
        db,
        e["rsa"],
        memory["private"],
        "related",
        confidence=0.1,
        source_type="learned",
        created_at=T0 - timedelta(days=400),
    )
    db.commit()
    night = sweeps.sweep(db, as_of=T0 + timedelta(days=400))
    into_private = db.execute(
        "SELECT count(*) AS n FROM hag_edge_audit WHERE run_id = %s AND target_entry_id = %s",
        (night.run_id, memory["private"]),
    ).fetchone()["n"]
    assert into_private == 1
    db.commit()
    assert quality.run_all(db, suites=("cull_runs",)).success
    privacy.erase_learner(ADA, conn=db)
    counted = db.execute(
        "SELECT erased FROM hag_erased_culls WHERE run_id = %s", (night.run_id,)
    ).fetchone()
    assert counted["erased"] == 1
    db.commit()
    assert quality.run_all(db, suites=("cull_runs",)).success


def test_an_erased_session_sent_again_is_refused_not_applied_twice(db, memory):
    """A payload of an erased session, sent again, is refused at ingest with the reason (its
    tombstone, a salted hash of the session id), so its evidence never counts twice."""
    privacy.erase_learner(ADA, conn=db)
    before = shared_state(db)
    [again] = ingest(db, memory["ada"][0])
    assert again.status == "quarantined"
    assert f"session {ADA}-s0 was erased on " in again.reason
    assert again.reason.endswith("with its learner: it is not taken again")
    process_pending()
    assert shared_state(db) == before
    tombstones = db.execute("SELECT session_hash FROM hag_erased_sessions").fetchall()
    assert len(tombstones) == 5 and all(ADA not in t["session_hash"] for t in tombstones)


def test_replaying_the_remaining_sessions_changes_nothing(db, memory):
    """After the erasure the other learner's payloads, sent again, are duplicates and the
    memory stays as it was (idempotency holds for every session still kept)."""
    privacy.erase_learner(ADA, conn=db)
    before = shared_state(db)
    assert {r.status for r in ingest(db, *memory["bob"])} == {"duplicate"}
    process_pending()
    assert shared_state(db) == before


def test_a_dry_run_counts_exactly_and_changes_nothing(db, memory):
    """The dry run's counts are the real run's; after it every row is still there."""
    before = find_anywhere(db, ADA)
    dry = privacy.erase_learner(ADA, dry_run=True, conn=db)
    assert dry.erasure_id is None
    assert find_anywhere(db, ADA) == before
    assert db.execute("SELECT count(*) AS n FROM hag_erasures").fetchone()["n"] == 0
    real = privacy.erase_learner(ADA, conn=db)
    assert real.counts == dry.counts


def test_an_unknown_or_erased_learner_is_refused_in_one_line(db, memory, tmp_path):
    """Export and erasure refuse a learner nothing is held about (saying when one was
    erased) and an id no learner can have; no file is written."""
    with pytest.raises(NotFoundError, match="unknown learner 'nobody'"):
        privacy.erase_learner("nobody", conn=db)
    with pytest.raises(NotFoundError, match="unknown learner 'nobody'"):
        privacy.export_learner("nobody", tmp_path / "x.jsonl", conn=db)
    with pytest.raises(ValidationError, match="is not a learner id"):
        privacy.erase_learner("no body", conn=db)
    privacy.erase_learner(ADA, conn=db)
    with pytest.raises(NotFoundError, match=f"learner '{ADA}' was erased on "):
        privacy.erase_learner(ADA, conn=db)
    assert list(tmp_path.iterdir()) == []


def test_the_export_holds_everything_and_a_manifest(db, memory, tmp_path):
    """Every session payload as kept, the private entries with their history, the reports,
    successes and refused payloads, one JSON object a line, the counts last."""
    out = tmp_path / "ada.jsonl"
    result = privacy.export_learner(ADA, out, conn=db)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    manifest = lines[-1]["manifest"]
    assert manifest["learner_id"] == ADA and manifest["counts"] == result.counts
    by_table: dict[str, list] = {}
    for line in lines[:-1]:
        by_table.setdefault(line["table"], []).append(line["row"])
    assert {t: len(r) for t, r in by_table.items()} == result.counts
    kept = {s["session_id"]: s["payload"] for s in by_table["hag_sessions"]}
    for p in memory["ada"][:4]:  # as received, but for the canonical form of ended_at
        assert kept[p["session_id"]] == p | {"ended_at": kept[p["session_id"]]["ended_at"]}
    assert kept[f"{ADA}-s30"]["said"] == said("Ada", 30)
    assert {e["visibility_scope"] for e in by_table["hag_entries"]} == {f"student:{ADA}"}
    assert str(memory["private"]) in {h["entity_id"] for h in by_table["hag_confidence_history"]}
    assert len(by_table["hag_maturity_history"]) >= 1
    assert len(by_table["hag_edge_learner_reports"]) == 3
    assert len(by_table["hag_learner_successes"]) >= 3
    assert len(by_table["hag_session_quarantine"]) == 3
    assert f"{BOB}-s" not in out.read_text()  # none of the other learner's sessions


def test_the_export_streams_through_a_server_side_cursor(db, memory, dials):
    """export_batch_rows is the cursor's fetch size: rows come one batch per round trip."""
    dials(export_batch_rows=1)
    rows = list(privacy.iter_learner_rows(db, ADA, 1))
    db.rollback()
    assert len(rows) > 10 and {t for t, _ in rows} >= {"hag_sessions", "hag_entries"}


# --- retention --------------------------------------------------------------------------------


def stripped_state(db) -> list:
    return [
        (r["session_id"], r["payload"], r["stripped_at"])
        for r in db.execute("SELECT * FROM hag_sessions ORDER BY session_id").fetchall()
    ] + [
        (r["quarantine_id"], r["raw"], r["stripped_at"])
        for r in db.execute("SELECT * FROM hag_session_quarantine ORDER BY 1").fetchall()
    ]


def test_retention_is_off_by_default(db, memory):
    """With both dials at 0 (keep) the nightly strips nothing."""
    before = stripped_state(db)
    night = sweeps.sweep(db, as_of=T0 + timedelta(days=1000))
    assert night.retention == {"sessions_stripped": 0, "quarantine_stripped": 0}
    assert stripped_state(db) == before


def test_the_nightly_strips_expired_messages_once(db, memory, dials):
    """message_retention_days / quarantine_retention_days: old processed payloads lose the
    student's words, the quarantine its raw text; effects stay; a second run changes nothing;
    a stripped learner is still erased whole."""
    dials(message_retention_days=5, quarantine_retention_days=1)
    graph = shared_state(db)
    as_of = T0 + timedelta(days=7, hours=1)  # sessions of days 0-2 are older than 5 days
    dry = sweeps.sweep(db, as_of=as_of, dry_run=True)
    first = sweeps.sweep(db, as_of=as_of)
    assert first.retention == dry.retention
    # ada s0-s2 and the rejected s30, bob s0-s1; s9 is recent
    assert first.retention["sessions_stripped"] == 6
    assert first.retention["quarantine_stripped"] == 0  # received now, not a day ago
    kept = stripped_state(db)
    second = sweeps.sweep(db, as_of=as_of)
    assert second.retention == {"sessions_stripped": 0, "quarantine_stripped": 0}
    assert stripped_state(db) == kept
    assert shared_state(db)["entries"] == graph["entries"]
    gone = [m for p in memory["ada"][:3] + memory["bob"] for m in messages(p)]
    assert {m: find_anywhere(db, m) for m in gone} == dict.fromkeys(gone, [])
    assert find_anywhere(db, said("Ada", 9)) == ["public.hag_sessions.payload"]
    late = sweeps.sweep(db, as_of=T0 + timedelta(days=1000))
    assert late.retention["quarantine_stripped"] == 3
    assert find_anywhere(db, said("Ada", 20)) == []
    # with the received text gone, the session id is what names her refused payloads
    assert privacy.erase_learner(ADA, conn=db).counts["hag_session_quarantine"] == {"deleted": 3}
    assert find_anywhere(db, ADA) == []


def test_the_nightly_command_prints_what_retention_stripped(db, memory, dials, capsys):
    """`hag nightly` shows the retention step's counts beside the sweeps' (none when off)."""
    from hag.cli import main

    main(["nightly", "--as-of", (T0 + timedelta(days=30)).isoformat(), "--no-check"])
    assert "messages stripped" not in capsys.readouterr().out
    dials(message_retention_days=1)
    main(["nightly", "--as-of", (T0 + timedelta(days=30)).isoformat(), "--no-check"])
    assert "messages stripped     7 session(s), 0 quarantined" in capsys.readouterr().out


def test_a_stripped_session_cannot_be_replayed(db, memory, dials):
    """A stripped session put back in the queue is refused with the reason, not half-applied;
    its payload sent again is a duplicate (the digest of what was received is kept)."""
    dials(message_retention_days=1)
    sweeps.sweep(db, as_of=T0 + timedelta(days=30))
    with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState, match="cannot be replayed"):
        db.execute(
            "UPDATE hag_sessions SET status = 'pending' WHERE session_id = %s", (f"{BOB}-s0",)
        )
    db.rollback()
    assert [r.status for r in ingest(db, memory["bob"][0])] == ["duplicate"]


def test_the_command_line_exports_then_erases(db, memory, tmp_path, capsys):
    """`hag learner export` writes the file and prints the counts; `erase --dry-run` prints
    the counts and changes nothing; `erase --operator` erases and names the operator."""
    from hag.cli import main

    out = tmp_path / "ada.jsonl"
    main(["learner", "export", ADA, "--out", str(out)])
    printed = capsys.readouterr()
    assert "hag_sessions: 5" in printed.out and str(out) in printed.err
    main(["learner", "erase", ADA, "--dry-run"])
    printed = capsys.readouterr()
    assert "hag_sessions: 5 deleted" in printed.out and "dry run" in printed.err
    assert db.execute("SELECT count(*) AS n FROM hag_erasures").fetchone()["n"] == 0
    db.rollback()
    main(["learner", "erase", ADA, "--operator", "dpo"])
    assert "by dpo" in capsys.readouterr().err
    assert find_anywhere(db, ADA) == []


def test_an_erasure_waits_for_a_session_being_applied(db, memory, database_url):
    """A session of the learner claimed by a worker when the erasure starts: the erasure waits
    for its commit, then pseudonymises the reports it wrote too."""
    import threading
    import time

    from hag.storage import db as hdb

    edge = db.execute("SELECT id FROM hag_edges LIMIT 1").fetchone()["id"]
    db.rollback()
    with hdb.connect() as worker:
        worker.execute(
            "SELECT 1 FROM hag_sessions WHERE session_id = %s FOR UPDATE", (f"{ADA}-s9",)
        )
        worker.execute(
            "INSERT INTO hag_edge_learner_reports (edge_id, session_id, learner_id, turns,"
            " share, reported_at) VALUES (%s, %s, %s, 1, 1, now()) ON CONFLICT DO NOTHING",
            (edge, f"{ADA}-s9", ADA),
        )
        box: dict = {}
        eraser = threading.Thread(target=lambda: box.setdefault("r", privacy.erase_learner(ADA)))
        eraser.start()
        waiting = None
        for _ in range(600):  # until the eraser waits on the claimed row (or has finished)
            waiting = db.execute(
                "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND query LIKE '%%FOR UPDATE%%' AND pid <> pg_backend_pid()"
            ).fetchone()
            db.rollback()
            if waiting or not eraser.is_alive():
                break
            time.sleep(0.05)
        assert waiting and eraser.is_alive()  # it waits on the claimed session's row
        worker.commit()
    eraser.join(60)
    assert box["r"].counts["hag_sessions"] == {"deleted": 5}
    assert find_anywhere(db, ADA) == []


def test_no_session_of_the_learner_is_queued_while_it_is_erased(db, memory):
    """A session of Ada being queued (its transaction open) when the erasure starts: the
    erasure waits for it, then erases it with the rest. While an erasure holds Ada's ingest
    lock, queueing another of her sessions waits; Bob's, in another bucket, does not."""
    import threading
    import time

    from hag import settings
    from hag.session.ingest import ingest_payload
    from hag.storage import db as hdb
    from hag.storage.learner_lock import lock_learner

    late = struggling("Ada", 40, 40, ADA)
    db.rollback()
    with hdb.connect() as queuer:
        assert ingest_payload(queuer, late).status == "accepted"  # not committed yet
        box: dict = {}
        eraser = threading.Thread(target=lambda: box.setdefault("r", privacy.erase_learner(ADA)))
        eraser.start()
        waiting = None
        for _ in range(600):  # until the eraser waits on the ingest's lock (or has finished)
            waiting = db.execute(
                "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND wait_event = 'advisory' AND pid <> pg_backend_pid()"
                " AND datname = current_database()"
            ).fetchone()
            db.rollback()
            if waiting or not eraser.is_alive():
                break
            time.sleep(0.05)
        assert waiting and eraser.is_alive()  # it waits for the session being queued
        queuer.commit()
    eraser.join(60)
    assert box["r"].counts["hag_sessions"] == {"deleted": 6}  # the five of before, and this one
    assert find_anywhere(db, ADA) == []
    # the other way: an erasure holding the lock makes Ada's ingest wait, not Bob's
    buckets = settings.current().session_lock_buckets
    hashed = {
        who: db.execute(
            "SELECT ((hashtextextended('learner:' || %s, 0) %% %s + %s) %% %s)::int AS b",
            (who, buckets, buckets, buckets),
        ).fetchone()["b"]
        for who in (ADA, BOB)
    }
    assert hashed[ADA] != hashed[BOB]
    db.rollback()
    with hdb.connect() as eraser_conn, hdb.connect() as other:
        lock_learner(eraser_conn, ADA, settings.current(), shared=False)
        other.execute("SET lock_timeout = '300ms'")
        assert ingest_payload(other, struggling("Bob", 41, 41, BOB)).status == "accepted"
        other.rollback()
        other.execute("SET lock_timeout = '300ms'")
        with pytest.raises(psycopg.errors.LockNotAvailable):
            ingest_payload(other, struggling("Ada", 42, 42, ADA))
        other.rollback()
        eraser_conn.rollback()
