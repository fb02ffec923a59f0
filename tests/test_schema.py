"""The schema's promises (SPEC §2), tested against the real database."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from pgvector import Vector

from tests import factories as f

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)


def _unique_violation(db, **kwargs) -> str:
    with pytest.raises(psycopg.errors.UniqueViolation) as info:
        f.entry(db, **kwargs)
    db.rollback()
    return info.value.diag.constraint_name


def test_topic_identity_rejects_duplicate_and_allows_other_topic_or_scope(db):
    """(topic, concept, scope) is a topic fact's identity: same concept elsewhere is another row."""
    f.entry(db, topic_id="cryptography", concept_slug="rsa", scope="public")
    f.entry(db, topic_id="math", concept_slug="rsa", scope="public")
    f.entry(db, topic_id="cryptography", concept_slug="rsa", scope="tutor")
    db.commit()
    assert _unique_violation(db, topic_id="cryptography", concept_slug="rsa", scope="public") == (
        "hag_entries_topic_concept_slug_uniq"
    )


def test_student_identity_drops_the_topic(db):
    """One row per trait per learner across topics; another learner may hold the same trait."""
    f.entry(db, topic_id="cryptography", concept_slug="visual-learner", scope="student:ada")
    f.entry(db, topic_id="cryptography", concept_slug="visual-learner", scope="student:grace")
    db.commit()
    assert _unique_violation(
        db, topic_id="linux", concept_slug="visual-learner", scope="student:ada"
    ) == ("hag_entries_student_pattern_uniq")


def test_visual_identity_is_the_concept_alone(db):
    """One curated drawing per concept, platform-wide; a public fact on the same slug is fine."""
    f.entry(db, topic_id="cryptography", concept_slug="aes", scope="visual")
    f.entry(db, topic_id="cryptography", concept_slug="aes", scope="public")
    db.commit()
    assert _unique_violation(db, topic_id="other", concept_slug="aes", scope="visual") == (
        "hag_entries_visual_concept_uniq"
    )


@pytest.mark.parametrize("scope", ["public", "tutor", "student:ada"])
def test_unanchored_rows_never_dedupe(db, scope):
    """`_unanchored_` rows are exempt from the topic and student identities."""
    f.entry(db, concept_slug="_unanchored_", scope=scope)
    f.entry(db, concept_slug="_unanchored_", scope=scope)
    db.commit()
    n = db.execute(
        "SELECT count(*) AS n FROM hag_entries WHERE concept_slug = '_unanchored_'"
    ).fetchone()["n"]
    assert n == 2


ENTRY_SQL = (
    "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, confidence, "
    "concept_match_quality, instruction, embedding, success_count, failure_count) "
    "VALUES (%(topic_id)s, %(concept_slug)s, %(scope)s, %(maturity)s, %(confidence)s, %(quality)s, "
    "%(instruction)s, %(embedding)s, %(success)s, %(failure)s)"
)
GOOD_ENTRY = dict(
    topic_id="cryptography",
    concept_slug="rsa",
    scope="public",
    maturity="pattern",
    confidence=0.5,
    quality=1.0,
    instruction="Teach RSA after modular arithmetic.",
    success=0,
    failure=0,
)


@pytest.mark.parametrize(
    ("change", "constraint"),
    [
        ({"maturity": "retired"}, "hag_entries_maturity_check"),
        ({"confidence": 1.01}, "hag_entries_confidence_check"),
        ({"confidence": -0.01}, "hag_entries_confidence_check"),
        ({"quality": 1.5}, "hag_entries_concept_match_quality_check"),
        ({"instruction": "   "}, "hag_entries_instruction_check"),
        ({"concept_slug": "Not A Slug"}, "hag_entries_concept_slug_check"),
        ({"scope": "student:"}, "hag_entries_visibility_scope_check"),
        ({"scope": "student:ada lovelace"}, "hag_entries_visibility_scope_check"),
        ({"scope": "students"}, "hag_entries_visibility_scope_check"),
        ({"scope": "Public"}, "hag_entries_visibility_scope_check"),
        ({"success": -1}, "hag_entries_success_count_check"),
        ({"failure": -1}, "hag_entries_failure_count_check"),
    ],
)
def test_entry_checks_refuse_bad_values(db, change, constraint):
    """Every enum and bound on hag_entries is a CHECK that names itself when it refuses."""
    f.topic(db, "cryptography")
    params = {**GOOD_ENTRY, "embedding": Vector(f.vec(0.5)), **change}
    with pytest.raises(psycopg.errors.CheckViolation) as info:
        db.execute(ENTRY_SQL, params)
    assert info.value.diag.constraint_name == constraint


def test_good_entry_passes_the_same_checks(db):
    """The baseline row of the CHECK tests is itself valid (so each refusal is the change's)."""
    f.topic(db, "cryptography")
    db.execute(ENTRY_SQL, {**GOOD_ENTRY, "embedding": Vector(f.vec(0.5))})


def test_wrong_dimension_embedding_is_refused(db):
    """The vector column is fixed at the migrated dimension."""
    f.topic(db, "cryptography")
    with pytest.raises(psycopg.errors.DataException, match="expected 1536 dimensions"):
        db.execute(ENTRY_SQL, {**GOOD_ENTRY, "embedding": Vector([0.1, 0.2, 0.3])})


EDGE_SQL = (
    "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, hit_count, "
    "source_type, traversal_count, unlearned_from, prior_confidence) VALUES (%(s)s, %(t)s, "
    "%(edge_type)s, %(confidence)s, %(hits)s, %(source_type)s, %(traversals)s, "
    "%(unlearned_from)s, %(prior)s)"
)


@pytest.mark.parametrize(
    ("change", "constraint"),
    [
        ({"edge_type": "causes"}, "hag_edges_edge_type_check"),
        ({"confidence": 0.0}, "hag_edges_confidence_check"),
        ({"confidence": 1.2}, "hag_edges_confidence_check"),
        ({"hits": -1}, "hag_edges_hit_count_check"),
        ({"traversals": -1}, "hag_edges_traversal_count_check"),
        ({"source_type": "Seed!"}, "hag_edges_source_type_check"),
        ({"self_loop": True}, "hag_edges_no_self_loop"),
        ({"unlearned_from": 0.0}, "hag_edges_unlearned_from_check"),
        ({"unlearned_from": 1.5}, "hag_edges_unlearned_from_check"),
        ({"prior": 1.5}, "hag_edges_prior_confidence_check"),
    ],
)
def test_edge_checks_refuse_bad_values(db, change, constraint):
    """Edge enums, bounds and the no-self-loop rule are CHECKs."""
    a = f.entry(db, concept_slug="a")
    b = f.entry(db, concept_slug="b")
    params = {
        "s": a,
        "t": b,
        "edge_type": "related",
        "confidence": 0.5,
        "hits": 0,
        "source_type": "seed",
        "traversals": 0,
        "unlearned_from": None,
        "prior": None,
        **change,
    }
    if params.pop("self_loop", False):
        params["t"] = a
    with pytest.raises(psycopg.errors.CheckViolation) as info:
        db.execute(EDGE_SQL, params)
    assert info.value.diag.constraint_name == constraint


def test_edge_identity_and_foreign_keys(db):
    """(source, target, type) is unique; an edge may not dangle."""
    a = f.entry(db, concept_slug="a")
    b = f.entry(db, concept_slug="b")
    f.edge(db, a, b, "prerequisite")
    f.edge(db, a, b, "related")  # another type between the same pair is another edge
    db.commit()
    with pytest.raises(psycopg.errors.UniqueViolation) as info:
        f.edge(db, a, b, "prerequisite")
    assert info.value.diag.constraint_name == "hag_edges_identity"
    db.rollback()
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        f.edge(db, a, uuid.uuid4(), "related")


def test_any_edge_delete_is_audited_in_the_same_transaction(db):
    """A hand-typed DELETE leaves a full audit row; a rolled-back DELETE leaves none."""
    a = f.entry(db, concept_slug="a")
    b = f.entry(db, concept_slug="b")
    e = f.edge(
        db, a, b, "leads_to", confidence=0.42, condition="after a win", source_type="learned"
    )
    db.commit()
    db.execute("DELETE FROM hag_edges WHERE id = %s", (e,))
    db.rollback()
    assert db.execute("SELECT count(*) AS n FROM hag_edge_audit").fetchone()["n"] == 0
    db.execute("DELETE FROM hag_edges WHERE id = %s", (e,))
    db.commit()
    row = db.execute("SELECT * FROM hag_edge_audit").fetchone()
    assert (
        row["edge_id"],
        row["edge_type"],
        row["confidence"],
        row["condition"],
        row["reason"],
    ) == (e, "leads_to", 0.42, "after a win", "manual delete")


OTHER_CHECKS = [
    (
        "INSERT INTO hag_erased_sessions (session_hash, erasure_id) VALUES ('s-1', 1)",
        "hag_erased_sessions_session_hash_check",
    ),
    (
        "INSERT INTO hag_erasures (erased_by, learner_hash, counts) VALUES (' ', repeat('a', 64), '{}')",
        "hag_erasures_erased_by_check",
    ),
    (
        "INSERT INTO hag_erasures (erased_by, learner_hash, counts) VALUES ('dpo', 'ada', '{}')",
        "hag_erasures_learner_hash_check",
    ),
    (
        "INSERT INTO hag_entry_search_changes (set_key, changes) VALUES ('tutor', 0)",
        "hag_entry_search_changes_changes_check",
    ),
    (
        "INSERT INTO hag_topics (topic_id, title) VALUES ('Bad Topic', 'T')",
        "hag_topics_topic_id_check",
    ),
    ("INSERT INTO hag_topics (topic_id, title) VALUES ('t', '  ')", "hag_topics_title_check"),
    (
        "INSERT INTO hag_concepts (topic_id, slug, title) VALUES ('t', 'Bad_Slug', 'x')",
        "hag_concepts_slug_check",
    ),
    (
        "INSERT INTO hag_concepts (topic_id, slug, title) VALUES ('t', 'ok', '')",
        "hag_concepts_title_check",
    ),
    (
        "INSERT INTO hag_concepts (topic_id, slug, title, origin) VALUES ('t', 'ok', 'x', 'guessed')",
        "hag_concepts_origin_check",
    ),
    (
        "INSERT INTO hag_confidence_history (entity_kind, entity_id, new_value, reason) "
        "VALUES ('topic', gen_random_uuid(), 0.5, 'x')",
        "hag_confidence_history_entity_kind_check",
    ),
    (
        "INSERT INTO hag_session_quarantine (source, reason, raw, raw_bytes, raw_sha256) "
        "VALUES ('s', 'r', 'x', 1, 'not-a-digest')",
        "hag_session_quarantine_raw_sha256_shape",
    ),
    (
        "INSERT INTO hag_edge_learner_reports (edge_id, session_id, learner_id, turns, share, "
        "reported_at) VALUES (gen_random_uuid(), 's', 'l', 0, 1, now())",
        "hag_edge_learner_reports_turns_check",
    ),
    (
        "INSERT INTO hag_edge_learner_reports (edge_id, session_id, learner_id, turns, share, "
        "reported_at) VALUES (gen_random_uuid(), 's', 'l', 1, 1.5, now())",
        "hag_edge_learner_reports_share_check",
    ),
    (
        "INSERT INTO hag_concept_failures (source_entry_id, sessions) "
        "VALUES (gen_random_uuid(), -1)",
        "hag_concept_failures_sessions_check",
    ),
    (
        "INSERT INTO hag_shown_exposures (source_entry_id, target_entry_id, shown_sessions, "
        "shown_named) VALUES (gen_random_uuid(), gen_random_uuid(), 2, 3)",
        "hag_shown_exposures_named_within",
    ),
    (
        "INSERT INTO hag_shown_exposures (source_entry_id, target_entry_id, shown_sessions, "
        "shown_named) VALUES (gen_random_uuid(), gen_random_uuid(), -1, 0)",
        "hag_shown_exposures_named_within",
    ),
    (
        "INSERT INTO hag_shown_exposures (source_entry_id, target_entry_id, shown_sessions, "
        "shown_named) SELECT u, u, 1, 0 FROM gen_random_uuid() AS u",
        "hag_shown_exposures_two_entries",
    ),
    (
        "INSERT INTO hag_pair_withdrawn"
        " (source_entry_id, target_entry_id, learner_id, sessions, units)"
        " VALUES (gen_random_uuid(), gen_random_uuid(), 'l', 0, 0.5)",
        "hag_pair_withdrawn_sessions_positive",
    ),
    (
        "INSERT INTO hag_pair_withdrawn"
        " (source_entry_id, target_entry_id, learner_id, sessions, units)"
        " SELECT u, u, 'l', 1, 1 FROM gen_random_uuid() AS u",
        "hag_pair_withdrawn_two_entries",
    ),
    (
        "INSERT INTO hag_pair_withdrawn"
        " (source_entry_id, target_entry_id, learner_id, sessions, units)"
        " VALUES (gen_random_uuid(), gen_random_uuid(), 'l', 2, 2.5)",
        "hag_pair_withdrawn_units_within_sessions",
    ),
    (
        "INSERT INTO hag_pair_withdrawn"
        " (source_entry_id, target_entry_id, learner_id, sessions, units)"
        " VALUES (gen_random_uuid(), gen_random_uuid(), 'l', 1, 0)",
        "hag_pair_withdrawn_units_within_sessions",
    ),
    (
        "INSERT INTO hag_erased_culls (run_id, erased) VALUES (gen_random_uuid(), 0)",
        "hag_erased_culls_erased_check",
    ),
    ("INSERT INTO hag_runs (kind) VALUES ('Nightly Run')", "hag_runs_kind_check"),
    ("INSERT INTO hag_runs (kind, status) VALUES ('nightly', 'crashed')", "hag_runs_status_check"),
    (
        "INSERT INTO hag_sessions (session_id, learner_id, topic_id, ended_at, payload, payload_sha256) "
        "VALUES ('', 'l', 't', now(), '{}', 'x')",
        "hag_sessions_session_id_check",
    ),
    (
        "INSERT INTO hag_sessions (session_id, learner_id, topic_id, ended_at, payload, payload_sha256, status) "
        "VALUES ('s', 'l', 't', now(), '{}', 'x', 'lost')",
        "hag_sessions_status_check",
    ),
    (
        "INSERT INTO hag_settings (key, value, value_type, default_value, description, consumer) "
        "VALUES ('Bad-Key', '1', 'int', '1', 'd', 'c')",
        "hag_settings_key_check",
    ),
    (
        "INSERT INTO hag_settings (key, value, value_type, default_value, description, consumer) "
        "VALUES ('new_dial', '1', 'complex', '1', 'd', 'c')",
        "hag_settings_value_type_check",
    ),
]


@pytest.mark.parametrize(
    ("statement", "constraint"), OTHER_CHECKS, ids=[c for _, c in OTHER_CHECKS]
)
def test_other_checks_refuse_bad_values(db, statement, constraint):
    """The CHECKs of topics, concepts, history, reports, the invented term's counts, runs,
    sessions and settings each refuse by name."""
    f.topic(db, "t")
    with pytest.raises(psycopg.errors.CheckViolation) as info:
        db.execute(statement)
    assert info.value.diag.constraint_name == constraint


def _tested_constraints() -> set[str]:
    names = {c for _, c in OTHER_CHECKS}
    for test in (test_entry_checks_refuse_bad_values, test_edge_checks_refuse_bad_values):
        for mark in test.pytestmark:
            if mark.name == "parametrize":
                names |= {constraint for _, constraint in mark.args[1]}
    return names


def test_every_check_constraint_has_a_refusal_test(db):
    """Each CHECK in the schema appears in one of the refusal tests above."""
    schema = {
        r["conname"]
        for r in db.execute(
            "SELECT conname FROM pg_constraint WHERE contype = 'c' "
            "AND connamespace = 'public'::regnamespace"
        ).fetchall()
    }
    assert sorted(schema - _tested_constraints()) == []


def test_the_python_vocabulary_is_the_schemas(db):
    """hag.storage.schema.EDGE_TYPES names exactly the edge types hag_edges' CHECK admits."""
    import re

    from hag.storage.schema import EDGE_TYPES

    checks = db.execute(
        "SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint "
        "WHERE conrelid = 'hag_edges'::regclass AND contype = 'c'"
    ).fetchall()
    (edge_type,) = [r["d"] for r in checks if "edge_type" in r["d"]]
    assert set(re.findall(r"'(\w+)'::text", edge_type)) == set(EDGE_TYPES)
