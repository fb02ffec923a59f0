"""Migrations: numbered, one transaction each, idempotent, and refusing edited history."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from hag import SQL_DIR
from hag.errors import MigrationError
from hag.storage import migrate
from tests.fix_db import migrate_up_to

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)


def test_migrate_is_idempotent(fresh):
    """The first run applies every file; the second applies none and changes nothing."""
    first = migrate.migrate(fresh, 8)
    assert first == [m.path.name for m in migrate.migrations()]
    assert migrate.migrate(fresh, 8) == []
    assert migrate.stored_dimension(fresh) == 8


def test_refuses_a_migration_edited_after_it_was_applied(fresh, tmp_path):
    """A changed applied file stops the run with its name; nothing else is applied."""
    copy = tmp_path / "migrations"
    shutil.copytree(SQL_DIR / "migrations", copy)
    migrate.migrate(fresh, 8, copy)
    target = sorted(copy.glob("002_*.sql"))[0]
    target.write_text(target.read_text() + "\n-- an innocent-looking edit\n")
    with pytest.raises(MigrationError, match=f"{target.name} changed after it was applied"):
        migrate.migrate(fresh, 8, copy)


def test_refuses_a_database_migrated_for_another_dimension(fresh):
    """The embedding dimension is fixed at migration time and checked afterwards."""
    migrate.migrate(fresh, 8)
    with pytest.raises(
        MigrationError, match="stores 8-dimension embeddings but the configured embedder gives 16"
    ):
        migrate.migrate(fresh, 16)


def test_a_failing_migration_leaves_nothing_behind(fresh, tmp_path):
    """Each run is one transaction: a broken file rolls back the files before it too."""
    copy = tmp_path / "migrations"
    shutil.copytree(SQL_DIR / "migrations", copy)
    (copy / "999_broken.sql").write_text("-- Why: to fail.\nCREATE TABLE oops (;\n")
    with pytest.raises(MigrationError, match="999_broken.sql failed"):
        migrate.migrate(fresh, 8, copy)
    fresh.rollback()
    assert fresh.execute("SELECT to_regclass('hag_entries')").fetchone()[0] is None


def test_every_migration_starts_with_a_why_comment():
    """Each migration file says why it exists before any statement."""
    for m in migrate.migrations():
        assert m.path.read_text().startswith("-- Why:"), m.path.name


# Functions a migration creates that keep their only definition there, and why.
MIGRATION_ONLY = {
    "hag_audit_deleted_edges": "a trigger function: part of the audit's storage",
    "hag_record_confidence_change": "a trigger function of the history (dropped by 229)",
    "hag_record_entry_confidence_changes": "a trigger function of the history (dropped by 229)",
    "hag_record_confidence_changes": "a trigger function: entries' and edges' history",
    "hag_entry_search_sync": "a trigger function: part of the search copy's storage",
    "hag_graph_concepts_sync": "a trigger function: topic graphs' concept counts (storage)",
    "hag_entry_search_set": "decides which stored copy a row lives in: a change needs a migration",
    "hag_entry_search_key": "names the set a copy row's changes are recorded under (storage)",
    "hag_refuse_stripped_replay": "a trigger function: keeps a stripped session out of the queue",
    "hag_refuse_erased_session": "a trigger function: keeps an erased session from coming back",
    "hag_erased_session_hash": "names an erased session's tombstone (storage)",
    "hag_entry_search_forget": "the search copy trigger's delete by probe (storage)",
    "hag_entry_search_restate": "the search copy trigger's update in place by probe (storage)",
    "hag_edge_reports_cascade": "a trigger function: the learner reports' foreign key",
    "hag_edge_report_names_edge": "a trigger function: the learner reports' foreign key",
    "hag_edge_audit_reports_cascade": "a trigger function: the kept reports' foreign key",
    "hag_edge_units_keep": "a trigger function: the per-learner totals kept with the reports",
    "hag_edge_prior_from_provenance": "a trigger function: an edge's prior, set on insert",
}


def _created(path) -> set[str]:
    return set(
        re.findall(r"^CREATE (?:OR REPLACE )?FUNCTION (\w+)\(", path.read_text(), re.MULTILINE)
    )


def test_every_rule_function_has_its_living_definition_in_sql_functions():
    """A rule function a migration created once is (re)defined in sql/functions/, exactly
    once, so a rule changes in one file; only MIGRATION_ONLY's storage helpers stay behind."""
    in_migrations = set().union(*(_created(m.path) for m in migrate.migrations()))
    per_file = [_created(p) for p in migrate.function_files()]
    in_functions = set().union(*per_file)
    assert sorted(in_migrations - in_functions) == sorted(MIGRATION_ONLY)
    assert sum(len(s) for s in per_file) == len(in_functions)  # none defined twice


def test_an_existing_memory_takes_the_living_rule_definitions(fresh):
    """After migrate, the database runs sql/functions' definitions, not the migrations' first
    ones: the reprieve rule (IMMUTABLE in migration 075) is STABLE so it inlines, and the
    restored-edges set the cull asks for exists."""
    migrate.migrate(fresh, 8)
    volatility = dict(
        fresh.execute(
            "SELECT proname, provolatile FROM pg_proc WHERE proname = ANY (%s)",
            (["hag_entry_is_reprieved", "hag_edge_is_cullable", "hag_restored_edges"],),
        ).fetchall()
    )
    assert volatility == {
        "hag_entry_is_reprieved": "s",
        "hag_edge_is_cullable": "s",
        "hag_restored_edges": "s",
    }


def test_a_memory_with_the_scalar_learner_count_takes_the_inlinable_one(fresh):
    """A memory migrated before the evidence functions were SQL holds a PL/pgSQL
    `hag_concept_learner_count` returning a bare integer, which a replace cannot turn into
    a row: migrate drops it and creates the one the queries read in FROM."""
    migrate.migrate(fresh, 8)
    fresh.execute("DROP FUNCTION hag_concept_learner_count(uuid)")
    fresh.execute(
        "CREATE FUNCTION hag_concept_learner_count(p_source uuid) RETURNS integer "
        "LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN 7; END $$"
    )
    fresh.commit()
    migrate.migrate(fresh, 8)
    kinds = fresh.execute(
        "SELECT p.proretset, l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
        "WHERE p.proname IN ('hag_concept_learner_count', 'hag_edge_evidence') ORDER BY 1, 2"
    ).fetchall()
    assert kinds == [(True, "sql"), (True, "sql")]
    learners = fresh.execute(
        "SELECT x.learners FROM hag_concept_learner_count(gen_random_uuid()) x"
    ).fetchone()
    assert learners == (0,)


def three_entries(conn):
    """Topic t with the public pattern entries a, b and c (8-dimension vectors): their ids."""
    conn.execute("INSERT INTO hag_topics (topic_id, title) VALUES ('t', 'T')")
    return tuple(
        conn.execute(
            "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, "
            "confidence, instruction, embedding) VALUES ('t', %s, 'public', 'pattern', 0.8, "
            "'x', %s) RETURNING id",
            (slug, "[" + ",".join(["0.5"] * 8) + "]"),
        ).fetchone()[0]
        for slug in ("a", "b", "c")
    )


def test_an_authored_edge_lowered_by_negative_evidence_keeps_its_value_across_090(fresh, tmp_path):
    """Migration 090 carries a memory over: an authored prerequisite the first rounds' sticky
    rule lowered (0.9 -> 0.4 -> 0.05, reason 'prerequisite evidence (lift)') keeps 0.9 beside
    its confidence; one changed by hand after such a lowering, and a learned one, keep none."""
    migrate_up_to(fresh, tmp_path, 90)
    a, b, c = three_entries(fresh)

    def edge(source, target, source_type, steps):
        """An edge at 0.9 whose confidence then goes through (value, reason) steps."""
        fresh.execute("SELECT set_config('hag.change_reason', 'created', true)")
        edge_id = fresh.execute(
            "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, "
            "source_type) VALUES (%s, %s, 'prerequisite', 0.9, %s) RETURNING id",
            (source, target, source_type),
        ).fetchone()[0]
        for value, reason in steps:
            fresh.execute("SELECT set_config('hag.change_reason', %s, true)", (reason,))
            fresh.execute("UPDATE hag_edges SET confidence = %s WHERE id = %s", (value, edge_id))
        return edge_id

    lift = "prerequisite evidence (lift)"
    lowered = edge(a, b, "seed", [(0.4, lift), (0.05, lift)])
    by_hand = edge(a, c, "seed", [(0.05, lift), (0.7, "manual update")])
    learned = edge(b, c, "learned", [(0.05, lift)])
    fresh.commit()
    migrate.migrate(fresh, 8)
    kept = dict(fresh.execute("SELECT id, unlearned_from FROM hag_edges").fetchall())
    assert kept == {lowered: pytest.approx(0.9), by_hand: None, learned: None}


def test_learner_successes_are_read_from_the_kept_payloads_across_097(fresh, tmp_path):
    """Migration 097 reads the successful turns of the sessions already kept: one row per
    (session, concept) of a turn with outcome success, none for a failed or unjudged turn,
    each with its session's topic, learner and end; a session queued after it writes its own
    rows in the same statement."""
    from hag.storage.sqlfiles import query

    migrate_up_to(fresh, tmp_path, 97)

    def turns(*spec):
        return [
            {"turn_index": i, "concept_slugs": list(slugs), "outcome": outcome}
            for i, (slugs, outcome) in enumerate(spec)
        ]

    kept = turns((["rsa", "primes"], "success"), (["rsa"], "failure"), (["hashing"], None))
    fresh.execute(
        "INSERT INTO hag_sessions (session_id, learner_id, topic_id, ended_at, payload, "
        "payload_sha256) VALUES ('old', 'ada', 't', '2026-11-01T10:00:00Z', %s, 'x')",
        (json.dumps({"turns": kept}),),
    )
    fresh.commit()
    migrate.migrate(fresh, 8)
    fresh.execute(
        query("session", "queue_session"),
        {
            "session_id": "new",
            "learner_id": "bo",
            "topic_id": "t",
            "ended_at": "2026-11-02T10:00:00Z",
            "payload": json.dumps({"turns": turns((["hashing"], "success"))}),
            "payload_sha256": "y",
        },
    )
    rows = fresh.execute(
        "SELECT session_id, concept_slug, topic_id, learner_id, ended_at::text "
        "FROM hag_learner_successes ORDER BY session_id, concept_slug"
    ).fetchall()
    assert [tuple(r) for r in rows] == [
        ("new", "hashing", "t", "bo", "2026-11-02 10:00:00+00"),
        ("old", "primes", "t", "ada", "2026-11-01 10:00:00+00"),
        ("old", "rsa", "t", "ada", "2026-11-01 10:00:00+00"),
    ]


def test_200_and_201_carry_reports_into_units_and_drop_the_retired_dials(fresh, tmp_path, capsys):
    """Migration 200 gives each recorded report its session's share (a session naming a -> b
    in 3 turns and a -> c in 1: 3/4 and 1/4; alone: 1); 201 drops a retired dial's stored
    value and says which (a WARNING printed with the file's name)."""
    migrate_up_to(fresh, tmp_path, 200)
    a, b, c = three_entries(fresh)
    ab, ac = (
        fresh.execute(
            "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, "
            "source_type, hit_count) VALUES (%s, %s, 'prerequisite', 0.3, 'learned', 1) "
            "RETURNING id",
            (a, target),
        ).fetchone()[0]
        for target in (b, c)
    )
    for edge, session, turns in ((ab, "s1", 3), (ac, "s1", 1), (ab, "s2", 2)):
        fresh.execute(
            "INSERT INTO hag_edge_learner_reports (edge_id, session_id, learner_id, turns, "
            "reported_at) VALUES (%s, %s, 'ann', %s, now())",
            (edge, session, turns),
        )
    fresh.execute(
        "INSERT INTO hag_settings (key, value, value_type, default_value, description, "
        "consumer, updated_by) VALUES ('prerequisite_repeat_turn_weight', '3.0', 'float', "
        "'0.0', 'retired', 'x', 'cli (profile evidence)')"
    )
    fresh.commit()
    capsys.readouterr()
    assert migrate.migrate(fresh, 8)[:2] == [
        "200_report_session_shares.sql",
        "201_retire_repeat_dials.sql",
    ]
    shares = {
        (r[0], r[1]): r[2]
        for r in fresh.execute(
            "SELECT edge_id, session_id, share FROM hag_edge_learner_reports"
        ).fetchall()
    }
    assert shares == {
        (ab, "s1"): pytest.approx(0.75),
        (ac, "s1"): pytest.approx(0.25),
        (ab, "s2"): pytest.approx(1.0),
    }
    gone = fresh.execute(
        "SELECT count(*) FROM hag_settings WHERE key = 'prerequisite_repeat_turn_weight'"
    ).fetchone()[0]
    assert gone == 0
    said = capsys.readouterr().err
    assert "201_retire_repeat_dials.sql: retired dial prerequisite_repeat_turn_weight" in said
    assert "cli (profile evidence)" in said


def test_210_carries_the_reports_into_per_learner_totals(fresh, tmp_path):
    """Migration 210 sums the reports per (edge, learner): ann's two sessions on a -> b
    (shares 1 and 1/4) are one total of 1.25 over 2 sessions, bob's one session its own; per
    edge and per concept too, and the evidence function reads them at the cap it is given."""
    migrate_up_to(fresh, tmp_path, 210)
    a, b, _ = three_entries(fresh)
    ab = fresh.execute(
        "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, "
        "source_type, hit_count) VALUES (%s, %s, 'prerequisite', 0.3, 'learned', 3) RETURNING id",
        (a, b),
    ).fetchone()[0]
    for session, learner, share in (("s1", "ann", 1.0), ("s2", "ann", 0.25), ("s3", "bob", 1.0)):
        fresh.execute(
            "INSERT INTO hag_edge_learner_reports (edge_id, session_id, learner_id, turns, "
            "share, reported_at) VALUES (%s, %s, %s, 1, %s, now())",
            (ab, session, learner, share),
        )
    fresh.commit()
    assert migrate.migrate(fresh, 8)[0] == "210_evidence_units_per_learner.sql"
    rows = fresh.execute(
        "SELECT learner_id, share, sessions FROM hag_edge_learner_units ORDER BY learner_id"
    ).fetchall()
    assert [tuple(r) for r in rows] == [("ann", 1.25, 2), ("bob", 1.0, 1)]
    edge = fresh.execute("SELECT cap, units, learners, sessions FROM hag_edge_units").fetchall()
    assert [tuple(r) for r in edge] == [(None, 2.25, 2, 3)]  # no cap yet: read back when asked
    concept = fresh.execute(
        "SELECT source_entry_id, learner_id, pairs FROM hag_concept_learners ORDER BY 2"
    ).fetchall()
    assert [tuple(r) for r in concept] == [(a, "ann", 1), (a, "bob", 1)]
    units = fresh.execute("SELECT units, learners FROM hag_edge_evidence(%s, 3, 1.0)", (ab,))
    assert tuple(units.fetchone()) == (2.0, 2)  # ann's 1.25 capped at 1, bob's 1


def test_211_gives_authored_edges_their_prior_and_new_rows_take_theirs(fresh, tmp_path):
    """Migration 211: an authored edge lowered by negative evidence (0.05, 0.92 kept beside it)
    gets prior 0.92, an authored one at 0.8 gets 0.8, a learned one none; an edge inserted
    afterwards takes the confidence it is written with, and an audited delete keeps it."""
    migrate_up_to(fresh, tmp_path, 211)
    a, b, c = three_entries(fresh)
    rows = {}
    for name, (s, t, conf, kind, kept) in {
        "lowered": (a, b, 0.05, "seed", 0.92),
        "authored": (a, c, 0.8, "enriched", None),
        "learned": (b, c, 0.4, "learned", None),
    }.items():
        rows[name] = fresh.execute(
            "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, "
            "source_type, unlearned_from) VALUES (%s, %s, 'prerequisite', %s, %s, %s) "
            "RETURNING id",
            (s, t, conf, kind, kept),
        ).fetchone()[0]
    fresh.commit()
    assert migrate.migrate(fresh, 8)[0] == "211_edge_prior_from_provenance.sql"
    prior = dict(fresh.execute("SELECT id, prior_confidence FROM hag_edges").fetchall())
    assert prior == {rows["lowered"]: 0.92, rows["authored"]: 0.8, rows["learned"]: None}
    new = fresh.execute(
        "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, "
        "source_type) VALUES (%s, %s, 'prerequisite', 0.7, 'seed') RETURNING id",
        (c, a),
    ).fetchone()[0]
    assert (
        fresh.execute("SELECT prior_confidence FROM hag_edges WHERE id = %s", (new,)).fetchone()[0]
        == 0.7
    )
    fresh.execute("DELETE FROM hag_edges WHERE id = %s", (new,))
    assert (
        fresh.execute(
            "SELECT prior_confidence FROM hag_edge_audit WHERE edge_id = %s", (new,)
        ).fetchone()[0]
        == 0.7
    )
    fresh.rollback()


def test_223_carries_withdrawn_counts_to_their_pairs(fresh, tmp_path):
    """Migration 223: a live edge a -> b with 2 withdrawn sessions and a culled one a -> c with
    1 (its audit row gives the pair) move to their pairs, each session under a learner of its
    own (no learner was kept: a unit each, as before); a count whose edge is gone from both
    is dropped, and the old table with it."""
    migrate_up_to(fresh, tmp_path, 223)
    a, b, c = three_entries(fresh)
    live, culled = (
        fresh.execute(
            "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, "
            "source_type) VALUES (%s, %s, 'prerequisite', 0.3, 'learned') RETURNING id",
            (a, t),
        ).fetchone()[0]
        for t in (b, c)
    )
    fresh.execute("DELETE FROM hag_edges WHERE id = %s", (culled,))  # audited
    for edge, sessions in ((live, 2), (culled, 1), ("00000000-0000-0000-0000-000000000001", 5)):
        fresh.execute("INSERT INTO hag_edge_withdrawn VALUES (%s, %s)", (edge, sessions))
    fresh.commit()
    assert migrate.migrate(fresh, 8)[0] == "223_withdrawn_by_pair_and_learner.sql"
    rows = fresh.execute(
        "SELECT source_entry_id, target_entry_id, learner_id, sessions FROM hag_pair_withdrawn"
        " ORDER BY learner_id"
    ).fetchall()
    expected = [(a, b, f"before-223:{live}:{n}", 1) for n in (1, 2)]
    expected.append((a, c, f"before-223:{culled}:1", 1))
    assert [tuple(r) for r in rows] == sorted(expected, key=lambda r: r[2])
    assert fresh.execute("SELECT to_regclass('hag_edge_withdrawn')").fetchone()[0] is None


def test_225_counts_each_carried_withdrawn_session_a_unit(fresh, tmp_path):
    """Migration 225: which share a withdrawn session held was never kept, so a pair's count
    carries over as that many units (a unit each, as the evidence query read it before)."""
    migrate_up_to(fresh, tmp_path, 225)
    a, b, c = three_entries(fresh)
    fresh.execute(
        "INSERT INTO hag_pair_withdrawn (source_entry_id, target_entry_id, learner_id, sessions)"
        " VALUES (%s, %s, 'learner-1', 3), (%s, %s, 'learner-2', 1)",
        (a, b, a, c),
    )
    fresh.commit()
    assert migrate.migrate(fresh, 8)[0] == "225_withdrawn_units.sql"
    rows = fresh.execute(
        "SELECT learner_id, sessions, units FROM hag_pair_withdrawn ORDER BY learner_id"
    ).fetchall()
    assert [tuple(r) for r in rows] == [("learner-1", 3, 3.0), ("learner-2", 1, 1.0)]


def test_an_older_build_does_not_put_its_functions_back_on_its_way(
    fresh, database_url, monkeypatch
):
    """A later build migrated the memory after this one (a release of functions or dials
    only: the ledger is the same): a command's migrate-on-its-way refuses in one line and
    writes nothing; `hag migrate` rolls back on purpose and records it; a build the memory
    never saw (a newer one) migrates as before."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from hag import config
    from hag.storage import db as hdb

    assert migrate.superseded(fresh) is None  # never migrated: nothing to tell
    fresh.rollback()
    migrate.migrate(fresh, 8)
    mine = migrate.code_checksum()
    assert migrate.checksum_history(fresh) == [mine] and migrate.superseded(fresh) is None
    fresh.execute("UPDATE hag_meta SET value = 'later' WHERE key = 'code_checksum'")
    fresh.execute(
        "UPDATE hag_meta SET value = %s WHERE key = 'code_checksums'",
        (json.dumps([mine, "later"]),),
    )
    fresh.commit()
    url = make_conninfo(database_url, dbname=conninfo_to_dict(fresh.info.dsn)["dbname"])
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setattr(migrate, "_checked", False)
    config.reset_config()
    hdb.close_all()
    try:
        with pytest.raises(MigrationError, match=r"after this one did \(1 build\(s\) since\)"):
            migrate.ensure_migrated()
    finally:
        hdb.close_all()
        monkeypatch.undo()
        config.reset_config()
    stored = fresh.execute("SELECT value FROM hag_meta WHERE key = 'code_checksum'").fetchone()
    assert stored[0] == "later"  # nothing put back
    fresh.rollback()
    migrate.migrate(fresh, 8)  # `hag migrate`: on purpose
    assert migrate.checksum_history(fresh) == [mine, "later", mine]
    assert migrate.superseded(fresh) is None
    fresh.execute(
        "UPDATE hag_meta SET value = %s WHERE key = 'code_checksums'", (json.dumps(["a", "b"]),)
    )
    assert migrate.superseded(fresh) is None  # this build is not in the history: newer
    fresh.rollback()
