"""Which PostgreSQL and pgvector the memory accepts, and how migrate says what it refuses."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from hag import PROJECT_ROOT
from hag.errors import MigrationError
from hag.storage import migrate, pg_support
from hag.storage.pg_support import ServerVersions, UnsupportedServerError, unsupported
from hag.vectors import embeddings

pytestmark = pytest.mark.pg_versions


def _versions(
    num: int = 160010,
    text: str = "16.10",
    installed: str | None = "0.8.1",
    available: str | None = "0.8.1",
) -> ServerVersions:
    return ServerVersions(num, text, installed, available, "memory")


def test_supported_servers_and_extensions_pass() -> None:
    """PostgreSQL 16, 17 and 18 with pgvector 0.8 or newer (or creatable) are accepted."""
    for num, text in ((160000, "16.0"), (160010, "16.10"), (170006, "17.6"), (180004, "18.4")):
        for installed, available in (("0.8.0", "0.8.0"), ("0.8.5", "0.8.5"), (None, "0.8.1")):
            assert unsupported(_versions(num, text, installed, available)) is None


def test_postgresql_15_is_refused_naming_both_versions() -> None:
    """A PostgreSQL 15 server is refused in one line naming what is there and what is needed."""
    reason = unsupported(_versions(150004, "15.4"))
    assert reason == (
        "PostgreSQL 15.4 is not supported: HAG memory needs PostgreSQL 16 or newer with "
        "pgvector 0.8 or newer"
    )
    assert unsupported(_versions(159999, "15.99")) is not None


def test_old_pgvector_is_refused_installed_or_available() -> None:
    """pgvector 0.7.4 is refused whether installed or the only one the server offers."""
    assert unsupported(_versions(installed="0.7.4", available="0.7.4")) == (
        "pgvector 0.7.4 is not supported: HAG memory needs PostgreSQL 16 or newer with "
        "pgvector 0.8 or newer"
    )
    assert unsupported(_versions(installed=None, available="0.7.4")) == (
        "pgvector 0.7.4 is not supported: HAG memory needs PostgreSQL 16 or newer with "
        "pgvector 0.8 or newer"
    )


def test_old_installed_pgvector_names_the_update_when_a_newer_one_is_available() -> None:
    """An installed 0.7.4 beside an available 0.8.1 tells the administrator to update it."""
    reason = unsupported(_versions(installed="0.7.4", available="0.8.1"))
    assert reason is not None
    assert "pgvector 0.7.4 is not supported" in reason
    assert 'ALTER EXTENSION vector UPDATE; in database "memory"' in reason
    assert "\n" not in reason


def test_server_without_pgvector_is_refused() -> None:
    """A server that offers no vector extension at all is refused, saying so."""
    reason = unsupported(_versions(installed=None, available=None))
    assert reason is not None and reason.startswith(
        "PostgreSQL 16.10 has no pgvector extension installed: HAG memory needs"
    )


def test_version_tuple_reads_release_names() -> None:
    """Extension versions compare as numbers (0.10.0 is newer than 0.8.0), suffixes ignored."""
    assert pg_support.version_tuple("0.8.1") == (0, 8, 1)
    assert pg_support.version_tuple("0.10.0") > pg_support.MIN_VECTOR_VERSION
    assert pg_support.version_tuple("0.8.0-rc1") == (0, 8, 0)
    assert pg_support.version_tuple("0.7.4") < pg_support.MIN_VECTOR_VERSION


def test_check_reads_the_real_server(db: Any) -> None:
    """The check reads the server under test: its major version and its installed pgvector."""
    versions = pg_support.check_server(db)
    num = int(db.execute("SHOW server_version_num").fetchone()["server_version_num"])
    assert versions.server_version_num == num
    assert versions.server_version.split(".")[0] == str(num // 10000)
    assert num // 10000 in (16, 17, 18)
    assert versions.vector_installed is not None
    assert pg_support.version_tuple(versions.vector_installed) >= (0, 8, 0)
    assert versions.database == db.info.dbname


@pytest.fixture
def app_role(database_url: str) -> Iterator[tuple[str, str]]:
    """A LOGIN role without superuser, owning a fresh database without the vector extension."""
    suffix = uuid.uuid4().hex[:8]
    role, database = f"hag_app_{suffix}", f"hag_app_db_{suffix}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE")
        admin.execute(f"CREATE DATABASE {database} OWNER {role}")
    try:
        yield role, database
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
            admin.execute(f"DROP ROLE IF EXISTS {role}")


def test_app_role_is_told_an_administrator_creates_the_extension(
    database_url: str, app_role: tuple[str, str]
) -> None:
    """A non-superuser migrating a database without pgvector is told, in one line, that an
    administrator runs CREATE EXTENSION vector once there; once done, it migrates fully."""
    role, database = app_role
    app_url = make_conninfo(database_url, dbname=database, user=role)
    dim = embeddings.get_embedder().dim
    with psycopg.connect(app_url) as conn:
        with pytest.raises(MigrationError) as refused:
            migrate.migrate(conn, dim)
        conn.rollback()
        assert conn.execute("SELECT to_regclass('hag_schema_migrations')").fetchone() == (None,)
    message = str(refused.value)
    assert "\n" not in message
    assert f'role "{role}" may not create the extension "vector"' in message
    assert f'in database "{database}"' in message
    assert "an administrator must run CREATE EXTENSION vector; once in that database" in message

    with psycopg.connect(make_conninfo(database_url, dbname=database), autocommit=True) as admin:
        admin.execute("CREATE EXTENSION vector")
    with psycopg.connect(app_url) as conn:
        applied = migrate.migrate(conn, dim)
        assert applied == [m.path.name for m in migrate.migrations()]
        owner = conn.execute(
            "SELECT tableowner FROM pg_tables WHERE tablename = 'hag_entries'"
        ).fetchone()
        assert owner == (role,)
        assert migrate.migrate(conn, dim) == []  # and again: nothing left, nothing refused


@pytest.mark.skipif(
    not os.environ.get("HAG_TEST_OLD_PGVECTOR_URL"),
    reason="HAG_TEST_OLD_PGVECTOR_URL (a server offering pgvector 0.7) is not set",
)
def test_migrate_refuses_a_server_with_old_pgvector() -> None:
    """A real server offering only pgvector 0.7 is refused before anything is written, by
    the library and by `hag migrate` in one line."""
    url = os.environ["HAG_TEST_OLD_PGVECTOR_URL"]
    database = f"hag_old_pgvector_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {database}")
    try:
        with psycopg.connect(make_conninfo(url, dbname=database)) as conn:
            with pytest.raises(
                UnsupportedServerError, match=r"^pgvector 0\.7\.\d+ is not supported"
            ):
                migrate.migrate(conn, 8)
            conn.rollback()
            assert conn.execute("SELECT to_regclass('hag_schema_migrations')").fetchone() == (None,)
            assert (
                conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
                is None
            )
        cli = subprocess.run(
            [sys.executable, "-m", "hag.cli", "migrate"],
            env={**os.environ, "DATABASE_URL": make_conninfo(url, dbname=database)},
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert cli.returncode == 1, cli.stderr
        assert "Traceback" not in cli.stderr
        assert re.fullmatch(
            r"hag: pgvector 0\.7\.\d+ is not supported: HAG memory needs PostgreSQL 16 or "
            r"newer with pgvector 0\.8 or newer",
            cli.stderr.strip().splitlines()[-1],
        ), cli.stderr
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
