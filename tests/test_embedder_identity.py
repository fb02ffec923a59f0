"""The embedder is part of the memory: its identity recorded at migrate, checked by every
process that embeds, and a memory that predates the record adopted only when it agrees."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from hag.errors import EmbedderMismatch
from hag.operations import corpus
from hag.retrieval import retrieve
from hag.session.process import process_pending
from hag.storage import db, migrate
from hag.vectors import embedder_identity, embeddings
from tests import factories
from tests.fix_embedder import error_lines, hag, hag_retrieve, use_offline, use_stub
from tests.session_builders import ingest, payload, turn

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

DEMO = "hag/data/demo_corpus.json"
MISMATCH = (
    "hag: this memory was embedded with offline/hash-v1 (1536 dims); the configured embedder "
    "is openai/text-embedding-3-small (1536 dims): set HAG_EMBEDDING_PROVIDER=offline "
    "HAG_EMBEDDING_DIM=1536, or run `hag reembed` to move the memory to the configured one"
)


def _held(conn):
    found = embedder_identity.held(conn)
    return None if found is None else found[0]


def test_the_first_migrate_records_the_embedder(db):
    """hag_meta names the test memory's embedder: provider, model, dimension, fingerprint."""
    identity = _held(db)
    assert (identity.provider, identity.model, identity.dim) == ("offline", "hash-v1", 1536)
    probe = embeddings.OfflineEmbedder(1536).embed([embedder_identity.PROBE_TEXT])[0]
    assert identity.fingerprint == embedder_identity.fingerprint(probe)


def test_an_api_key_on_an_offline_memory_is_refused_in_one_line(db, database_url, openai_env):
    """OPENAI_API_KEY set on a memory built offline: retrieve and load-corpus refuse, one line
    naming both embedders; the library raises EmbedderMismatch."""
    corpus.load(db, corpus.read(DEMO), 1536)
    db.commit()
    env = {"DATABASE_URL": database_url}
    shown = hag_retrieve("rsa", env=env)
    assert (shown.returncode, error_lines(shown.stderr)) == (1, [MISMATCH]), shown.stderr
    loaded = hag("load-corpus", DEMO, env=env)
    assert (loaded.returncode, error_lines(loaded.stderr)) == (1, [MISMATCH]), loaded.stderr
    assert "Traceback" not in shown.stderr + loaded.stderr
    monkeypatch = pytest.MonkeyPatch()
    try:
        use_stub(monkeypatch, openai_env.base_url)
        with pytest.raises(EmbedderMismatch, match="offline/hash-v1"):
            retrieve("cryptography", "ada", "what is rsa")
        with pytest.raises(EmbedderMismatch):
            embeddings.embed_texts(["a text"])
        assert openai_env.requests_to("/embeddings") == []  # refused before any embedding
    finally:
        monkeypatch.undo()
        use_offline(pytest.MonkeyPatch())


def test_the_check_reads_the_record_once_per_process(db, monkeypatch):
    """A second embedding in the same process does not read the record again."""
    embedder_identity.forget_checks()
    embeddings.embed_texts(["first"])
    reads = []
    monkeypatch.setattr(embedder_identity, "check", lambda *a: reads.append(a))
    embeddings.embed_texts(["second"])
    assert reads == []


def test_a_running_reader_checks_again_once_its_check_is_as_old_as_the_dials_cache(db, dials):
    """A tutor process keeps its check for `settings_cache_ttl_seconds`, then reads the record
    again: a memory a `hag reembed` switch moved to another embedder meanwhile (its record
    rewritten) is refused, not searched with the old embedder's vectors."""
    corpus.load(db, corpus.read(DEMO), 1536)
    db.commit()
    dials(settings_cache_ttl_seconds=600)
    embedder_identity.forget_checks()
    assert retrieve("cryptography", "ada", "what is rsa")
    identity, probe = embedder_identity.held(db)
    moved = embedder_identity.Identity("openai", "text-embedding-3-large", 1536, "moved")
    embedder_identity.write(db, moved, np.ones(4))
    db.commit()

    def checked_seconds_ago(seconds: float) -> None:
        for key in embedder_identity._checked:
            embedder_identity._checked[key] = embedder_identity.time.monotonic() - seconds

    try:
        checked_seconds_ago(599)  # younger than the dial: the process trusts its check
        assert retrieve("cryptography", "ada", "what is rsa")
        checked_seconds_ago(601)
        with pytest.raises(EmbedderMismatch, match="text-embedding-3-large"):
            retrieve("cryptography", "ada", "what is rsa")
    finally:  # the shared test memory's own record back
        db.rollback()
        embedder_identity.write(db, identity, probe)
        db.commit()
        embedder_identity.forget_checks()


def test_a_memory_from_before_the_record_is_adopted_when_its_vectors_agree(own_memory, private_db):
    """No record: the migrating embedder is recorded if it reproduces stored vectors."""
    corpus.load(private_db, corpus.read(DEMO), 1536)
    private_db.commit()
    assert _held(private_db) is None
    migrate.migrate_database()
    with db.connect() as conn:
        assert _held(conn).provider == "offline"


def test_a_memory_from_before_the_record_is_refused_by_another_embedder(
    own_memory, private_db, openai_stub, monkeypatch
):
    """No record, and the migrating embedder does not reproduce the stored vectors: refused,
    nothing recorded."""
    corpus.load(private_db, corpus.read(DEMO), 1536)
    private_db.commit()
    use_stub(monkeypatch, openai_stub.base_url)
    with pytest.raises(EmbedderMismatch, match=r"0 of 5 sampled entries agree"):
        migrate.migrate_database()
    private_db.rollback()
    assert _held(private_db) is None


def test_the_adoption_sample_and_its_agreement_are_dials(own_memory, private_db):
    """A memory from before the record whose stored vectors drifted (cosine about 0.95 to
    what the embedder gives now): `embedder_adopt_sample_entries` entries are re-embedded,
    and under `embedder_agree_min_cosine` 0.99 none agrees (refused, naming the sample's
    size); at 0.9 they agree and the memory is adopted."""
    from pgvector.psycopg import register_vector

    from hag import settings

    corpus.load(private_db, corpus.read(DEMO), 1536)
    register_vector(private_db)
    rng = np.random.default_rng(11)
    for row in private_db.execute("SELECT id, embedding FROM hag_entries").fetchall():
        v = row["embedding"].to_numpy().astype(np.float64)
        drift = rng.normal(size=v.size)
        drift -= (drift @ v) / (v @ v) * v  # orthogonal to v: the cosine is set exactly
        drift *= np.linalg.norm(v) / np.linalg.norm(drift) * np.tan(np.arccos(0.95))
        private_db.execute(
            "UPDATE hag_entries SET embedding = %s WHERE id = %s",
            ((v + drift).astype(np.float32), row["id"]),
        )
    settings.set_value(private_db, "embedder_adopt_sample_entries", 3)
    private_db.commit()
    settings.invalidate()
    with pytest.raises(EmbedderMismatch, match=r"0 of 3 sampled entries agree"):
        migrate.migrate_database()
    settings.set_value(private_db, "embedder_agree_min_cosine", 0.9)
    private_db.commit()
    settings.invalidate()
    migrate.migrate_database()
    with db.connect() as conn:
        assert _held(conn).provider == "offline"


def test_an_endpoint_serving_another_model_under_the_name_is_caught_at_migrate(
    own_memory, private_db, openai_stub, monkeypatch
):
    """The fingerprint: same provider, model and dimension, another answer to the probe text."""
    use_stub(monkeypatch, openai_stub.base_url)
    migrate.migrate_database()  # an empty memory records the stub's identity
    rng = np.random.default_rng(3)
    openai_stub.set_embedding(embedder_identity.PROBE_TEXT, rng.normal(size=1536).tolist())
    with pytest.raises(EmbedderMismatch, match="serves another model under that name"):
        migrate.migrate_database()


def test_the_record_is_json_with_the_fingerprint(db):
    """What an operator reads in hag_meta: one JSON row."""
    row = db.execute("SELECT value FROM hag_meta WHERE key = 'embedder'").fetchone()
    assert set(json.loads(row["value"])) == {"provider", "model", "dim", "fingerprint"}


def test_a_session_meeting_another_embedder_stays_pending(db, openai_env):
    """Session processing with a mismatched embedder stops the run; the session is not
    rejected, and applies once the memory's embedder is configured again."""
    factories.topic(db)
    obs = {"graph": "topic", "concept": "keys", "text": "Keys come in pairs."}
    ingest(db, payload("s-other-embedder", [turn(0, observations=[obs])]))
    monkeypatch = pytest.MonkeyPatch()
    try:
        use_stub(monkeypatch, openai_env.base_url)
        with pytest.raises(EmbedderMismatch):
            process_pending()
    finally:
        monkeypatch.undo()
        use_offline(pytest.MonkeyPatch())
    status = db.execute(
        "SELECT status FROM hag_sessions WHERE session_id = 's-other-embedder'"
    ).fetchone()
    db.commit()
    assert status["status"] == "pending"
    assert process_pending().rejects == 0
    assert db.execute("SELECT count(*) AS n FROM hag_entries").fetchone()["n"] == 1


def test_the_read_path_imports_no_model_client_with_the_offline_embedder(db, database_url):
    """A retrieve in a fresh process, offline embedder: openai never imported."""
    factories.entry(db, concept_slug="rsa", instruction="Primes first.")
    db.commit()
    code = (
        "import sys\n"
        "from hag.retrieval import retrieve\n"
        "retrieve('cryptography', 'ada', 'primes')\n"
        "print('openai' in sys.modules)\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": database_url},
        timeout=120,
    )
    assert (shown.returncode, shown.stdout.strip()) == (0, "False"), shown.stderr


def test_a_session_planned_before_a_switch_does_not_commit_after_it(db):
    """The memory's embedder changed after this process checked it (a reembed's switch):
    the session's transaction reads the record before committing, and rolls back."""
    factories.topic(db)
    embeddings.embed_texts(["checked once"])  # this process has checked: offline
    obs = {"graph": "topic", "concept": "keys", "text": "Keys come in pairs."}
    ingest(db, payload("s-after-switch", [turn(0, observations=[obs])]))
    saved = db.execute("SELECT value FROM hag_meta WHERE key = 'embedder'").fetchone()["value"]
    other = {**json.loads(saved), "provider": "openai", "model": "text-embedding-3-small"}
    db.execute("UPDATE hag_meta SET value = %s WHERE key = 'embedder'", (json.dumps(other),))
    db.commit()
    try:
        with pytest.raises(EmbedderMismatch, match="openai/text-embedding-3-small"):
            process_pending()
    finally:
        db.execute("UPDATE hag_meta SET value = %s WHERE key = 'embedder'", (saved,))
        db.commit()
    status = db.execute(
        "SELECT status FROM hag_sessions WHERE session_id = 's-after-switch'"
    ).fetchone()
    assert status["status"] == "pending"
    assert db.execute("SELECT count(*) AS n FROM hag_entries").fetchone()["n"] == 0
