"""Connections as a pooler and a server restart meet them: checked pools, no prepared
statements and no session settings behind a transaction-mode pooler (HAG_DATABASE_POOLER).

The PgBouncer run itself is tests/test_pgbouncer.py; these pin the pieces on a direct
connection, where they can be looked at.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hag import config, retrieval, settings
from hag.errors import ConfigError
from hag.retrieval import ann
from hag.storage import db as hdb
from hag.storage import migrate
from hag.vectors import embeddings
from tests import factories as f


@pytest.fixture
def transaction_pooling(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process configured as behind a transaction-mode pooler (on the test's server)."""
    monkeypatch.setenv("HAG_DATABASE_POOLER", "transaction")
    monkeypatch.delenv("HAG_DIRECT_DATABASE_URL", raising=False)
    config.reset_config()
    hdb.close_all()
    yield
    hdb.close_all()
    monkeypatch.undo()
    config.reset_config()


def test_behind_a_transaction_pooler_no_connection_prepares_statements(db, transaction_pooling):
    """With HAG_DATABASE_POOLER=transaction, direct connections and both pools prepare nothing."""
    with hdb.connect() as conn:
        assert conn.prepare_threshold is None
    with hdb.pool().connection() as conn:
        assert conn.prepare_threshold is None
    with hdb.reading() as conn:
        assert conn.prepare_threshold is None


def test_without_a_pooler_setting_statements_are_prepared_as_before(db):
    """The default (no pooler) keeps psycopg's prepared statements."""
    with hdb.connect() as conn:
        assert conn.prepare_threshold is not None


def test_behind_a_transaction_pooler_a_read_s_settings_end_with_it(db, transaction_pooling):
    """A read is one read-only transaction with the reader settings; none outlives it."""
    show = (
        "SELECT current_setting('transaction_read_only') AS ro, current_setting('jit') AS jit, "
        "current_setting('plan_cache_mode') AS plans"
    )
    with hdb.reading() as conn:
        inside = conn.execute(show).fetchone()
        with pytest.raises(Exception, match="read-only transaction"):
            conn.execute("CREATE TEMP TABLE x (a int)")
    assert inside == {"ro": "on", "jit": "off", "plans": "force_custom_plan"}
    after = conn.execute(show).fetchone()  # the same connection, back in the pool
    assert after == {"ro": "off", "jit": "on", "plans": "auto"}


def test_behind_a_transaction_pooler_upkeep_needing_a_session_asks_for_a_direct_url(
    db, transaction_pooling
):
    """Index builds need a session: refused in one line without HAG_DIRECT_DATABASE_URL."""
    with pytest.raises(ConfigError, match="HAG_DIRECT_DATABASE_URL"):
        ann.build_topic_indexes()
    assert ann.nightly_upkeep() == []  # the nightly's share skips them, and says so in its log


def test_upkeep_takes_the_direct_url_when_one_is_set(db, transaction_pooling, monkeypatch):
    """With HAG_DIRECT_DATABASE_URL set, the session-bound upkeep connects there."""
    monkeypatch.setenv("HAG_DIRECT_DATABASE_URL", "postgresql://nobody@/nowhere?host=/nonexistent")
    config.reset_config()
    with pytest.raises(ConfigError, match="cannot connect"):
        ann.build_topic_indexes()


@pytest.fixture
def own_server(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A migrated embedded server of this test's own (it is restarted), as DATABASE_URL."""
    folder = Path(tempfile.mkdtemp(prefix="hag-test-restart-"))
    pgdata = folder / "pgdata"
    server = hdb.embedded_server(pgdata)
    monkeypatch.setenv("DATABASE_URL", str(server.get_uri()))
    config.reset_config()
    hdb.close_all()
    retrieval.clear_caches()
    try:
        with hdb.connect() as conn:
            migrate.migrate(conn, embeddings.get_embedder().dim)
        with hdb.connect() as conn:  # a new connection knows the vector type migrate made
            f.entry(conn, concept_slug="key-secrecy")  # and its topic
            conn.commit()
        settings.invalidate()
        yield pgdata
    finally:
        hdb.close_all()
        retrieval.clear_caches()
        settings.invalidate()
        hdb.embedded_server(pgdata).stop()
        shutil.rmtree(folder, ignore_errors=True)
        monkeypatch.undo()
        config.reset_config()


def test_a_retrieve_and_a_write_after_a_database_restart_succeed(own_server):
    """Both pools check a connection before handing it out: a restart costs no failed call."""
    retrieval.retrieve("cryptography", "ada", "how do I keep a key secret?")
    with hdb.pool().connection() as conn:
        conn.execute("SELECT 1")
    server = hdb.embedded_server(own_server)
    server.stop()
    server.start()  # the same data folder, started again
    for i in range(3):  # every pooled connection died with the server
        retrieval.retrieve("cryptography", "ada", f"after the restart, question {i}")
        with hdb.pool().connection() as conn:
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}


def test_the_nightly_task_says_a_skipped_upkeep_in_its_runs_log(
    db, transaction_pooling, prefect_harness
):
    """The upkeep's warning (a plain library logger) reaches the run's log on the server,
    where an operator reads the nightly run, not only the worker's console."""
    from prefect import flow

    from tasks.sweeps import build_topic_indexes
    from tests.fix_prefect import run_logs

    @flow(name="upkeep-log-probe")
    def probe() -> list[str]:
        return build_topic_indexes()

    state = probe(return_state=True)
    assert state.is_completed() and state.result() == []
    lines = run_logs(state.state_details.flow_run_id, "skipped")
    assert any("HAG_DIRECT_DATABASE_URL" in line and "skipped" in line for line in lines), lines
