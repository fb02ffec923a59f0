"""Numbered plain-SQL migrations, each applied in one transaction with its ledger row.

`sql/migrations/NNN_name.sql` run in order; the ledger (`hag_schema_migrations`) keeps each
file's SHA-256, and a file that changed after it was applied stops everything: a database
is never migrated from a history it did not live through. After the migrations, the SQL
functions in `sql/functions/` (all `CREATE OR REPLACE`) are re-applied and the settings
registry is synchronised (new dials get their defaults; edited values are kept).

Before anything is applied, the server and pgvector versions are checked
(`hag.storage.pg_support`: PostgreSQL 16+, pgvector 0.8+) and the `vector` extension is created if
missing, or its absence explained to a role that may not create it.

The embedding dimension is fixed at migration time: the runner sets `hag.embedding_dim`
for the transaction and migration 001 records it in `hag_meta`; later runs refuse an
embedder whose dimension differs.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from hag import SQL_DIR
from hag.errors import MigrationError
from hag.storage.pg_support import check_server, create_vector_extension

# Migrations run over a connection of any row shape (a template database is migrated over a
# plain psycopg connection with tuple rows), hence the row helpers below.
AnyConn = psycopg.Connection[Any]

_FILE = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
# One lock id for "someone is migrating this database"; any constant works.
_MIGRATION_LOCK = 0x4A47_0001


# Applied migrations whose comments were reworded later (never their SQL): the checksum a
# ledger recorded before the rewording is still that migration. 010 cited a notes file
# outside this repository; its comment now cites docs/retrieval.md.
REWORDED: dict[str, frozenset[str]] = {
    "010_retrieval_storage_and_tutor_index.sql": frozenset(
        {"bbcd0bc4f24c9a1ab6a8e8655097522ed334f681c969dc988a23a0ce13755086"}
    ),
}


@dataclass(frozen=True)
class Migration:
    version: int
    path: Path

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def migrations(directory: Path = SQL_DIR / "migrations") -> list[Migration]:
    found: dict[int, Migration] = {}
    for path in sorted(directory.glob("*.sql")):
        match = _FILE.match(path.name)
        if match is None:
            raise MigrationError(f"{path.name}: migration files are named NNN_snake_case.sql")
        version = int(match.group(1))
        if version in found:
            raise MigrationError(f"{path.name}: version {version} is used twice")
        found[version] = Migration(version, path)
    return [found[v] for v in sorted(found)]


def function_files() -> list[Path]:
    return sorted((SQL_DIR / "functions").glob("*.sql"))


_LEDGER = """
CREATE TABLE IF NOT EXISTS hag_schema_migrations (
    version     integer PRIMARY KEY,
    filename    text        NOT NULL,
    checksum    text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)"""


def applied(conn: AnyConn) -> dict[int, dict[str, Any]]:
    exists = conn.execute("SELECT to_regclass('hag_schema_migrations') AS t").fetchone()
    if exists is None or _value(exists, "t") is None:
        return {}
    rows = conn.execute("SELECT version, filename, checksum FROM hag_schema_migrations").fetchall()
    return {
        _value(r, "version"): dict(
            zip(("version", "filename", "checksum"), _values(r), strict=True)
        )
        for r in rows
    }


def _value(row: Any, key: str) -> Any:
    return row[key] if isinstance(row, dict) else row[0]


def _values(row: Any) -> tuple[Any, ...]:
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)


def _meta(conn: AnyConn, key: str) -> str | None:
    """The value `hag_meta` holds under `key`, or None (also before a first migrate made it)."""
    exists = conn.execute("SELECT to_regclass('hag_meta') AS t").fetchone()
    if exists is None or _value(exists, "t") is None:
        return None
    row = conn.execute("SELECT value FROM hag_meta WHERE key = %s", (key,)).fetchone()
    return None if row is None else str(_value(row, "value"))


def _put_meta(conn: AnyConn, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO hag_meta (key, value) VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
        (key, value),
    )


def stored_dimension(conn: AnyConn) -> int | None:
    value = _meta(conn, "embedding_dim")
    return None if value is None else int(value)


def migrate(
    conn: AnyConn, embedding_dim: int, directory: Path = SQL_DIR / "migrations"
) -> list[str]:
    """Bring the database up to date; return the file names applied now (idempotent)."""
    done: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        create_vector_extension(conn, check_server(conn))
        conn.execute(_LEDGER)
        ledger = applied(conn)
        files = migrations(directory)
        on_disk = {m.version: m for m in files}
        for version, row in sorted(ledger.items()):
            m = on_disk.get(version)
            if m is None:
                raise MigrationError(
                    f"the database has migration {row['filename']} that is not on disk: "
                    "this checkout is older than the database"
                )
            if m.checksum != row["checksum"] and row["checksum"] not in REWORDED.get(
                m.path.name, frozenset()
            ):
                raise MigrationError(
                    f"{m.path.name} changed after it was applied (ledger sha256 "
                    f"{row['checksum'][:12]}…, file {m.checksum[:12]}…): write a new "
                    "migration instead of editing an applied one"
                )
        stored = stored_dimension(conn)
        if stored is not None and stored != embedding_dim:
            raise MigrationError(
                f"this database stores {stored}-dimension embeddings but the configured "
                f"embedder gives {embedding_dim}: set HAG_EMBEDDING_DIM={stored}, choose the "
                "embedder it was built with, or use a new database"
            )
        conn.execute("SELECT set_config('hag.embedding_dim', %s, true)", (str(embedding_dim),))
        for m in files:
            if m.version in ledger:
                continue
            try:
                with _notices_said(conn, m.path.name):
                    conn.execute(m.path.read_text())
            except psycopg.Error as exc:
                _refuse_missing_vector(conn, exc)
                raise MigrationError(f"{m.path.name} failed: {exc}".splitlines()[0]) from exc
            conn.execute(
                "INSERT INTO hag_schema_migrations (version, filename, checksum) VALUES (%s, %s, %s)",
                (m.version, m.path.name, m.checksum),
            )
            done.append(m.path.name)
        for path in function_files():
            try:
                conn.execute(path.read_text())
            except psycopg.Error as exc:
                raise MigrationError(f"{path.name} failed: {exc}".splitlines()[0]) from exc
        from hag.settings import sync_registry  # avoids an import cycle

        sync_registry(conn)
        mine = code_checksum()
        _put_meta(conn, "code_checksum", mine)
        history = checksum_history(conn)
        if history[-1:] != [mine]:
            _put_meta(conn, "code_checksums", json.dumps([*history, mine][-CHECKSUM_HISTORY:]))
    return done


# How many builds' checksums the memory keeps, in the order they migrated it.
CHECKSUM_HISTORY = 100


def checksum_history(conn: AnyConn) -> list[str]:
    """The code checksums of the builds that migrated this memory, oldest first (recorded
    from this release on: a memory migrated only before it has none)."""
    value = _meta(conn, "code_checksums")
    return [] if value is None else list(json.loads(value))


def superseded(conn: AnyConn) -> str | None:
    """Why this build must not migrate the memory on its way (a command's first step), or
    None: a later build migrated it after this one did. A release that changed only SQL
    functions or dials adds no migration, so the ledger cannot tell an older build; the
    order in which builds wrote their functions can. Putting this build's back is an
    operator's act (`hag migrate`), not a side effect of starting an older service."""
    history = checksum_history(conn)
    mine = code_checksum()
    if mine not in history or history[-1] == mine:
        return None
    later = len(history) - 1 - history[::-1].index(mine)
    return (
        f"another build migrated this memory after this one did ({len(history) - 1 - later} "
        "build(s) since): this build does not put its older SQL functions and dials back "
        "on its way; run the newer build, or `hag migrate` with this one to roll back on "
        "purpose"
    )


@contextmanager
def _notices_said(conn: AnyConn, name: str) -> Iterator[None]:
    """What a migration says with RAISE WARNING (what it dropped, say) printed on stderr, named
    by its file; the server's notices (an IF NOT EXISTS that found the object) are not."""

    def say(diag: psycopg.errors.Diagnostic) -> None:
        if diag.severity_nonlocalized == "WARNING":
            print(f"{name}: {diag.message_primary}", file=sys.stderr)

    conn.add_notice_handler(say)
    try:
        yield
    finally:
        conn.remove_notice_handler(say)


def code_checksum() -> str:
    """A digest of what every migrate re-applies: the SQL functions and the dial registry."""
    from hag.settings import REGISTRY

    digest = hashlib.sha256()
    for path in function_files():
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    digest.update(repr(sorted((k, repr(d)) for k, d in REGISTRY.items())).encode())
    return digest.hexdigest()


def migrate_database(*, verify_embedder: bool = False) -> list[str]:
    """`hag migrate`: migrate the configured database for the configured embedder.

    `verify_embedder`: an endpoint that cannot answer the probe text is an error even when
    the memory already records this embedder (`hag migrate` says so; a command that migrates
    on its way leaves that check to the next migrate)."""
    from hag.storage import db
    from hag.vectors.embeddings import get_embedder

    embedder = get_embedder()
    with db.connect() as conn:
        check_embedder(conn, embedder)
        result = migrate(conn, embedder.dim)
    db.close_all()  # pools made before the extension existed lack the vector type
    with db.connect() as conn:
        record_embedder(conn, embedder, verify=verify_embedder)
    return result


def check_embedder(conn: AnyConn, embedder: Any) -> None:
    """Before migrating: refuse an embedder other than the recorded one, by name."""
    from hag.vectors import embedder_identity

    embedder_identity.check(conn, embedder)
    conn.rollback()


def record_embedder(conn: AnyConn, embedder: Any, *, verify: bool = False) -> None:
    """After migrating: record the embedder (or verify the recorded one's fingerprint)."""
    from hag.vectors import embedder_identity

    embedder_identity.record(conn, embedder, verify=verify)
    conn.commit()


def ensure_migrated() -> None:
    """Migrate once per process when the ledger is behind (commands call this first)."""
    global _checked
    if _checked:
        return
    from hag.storage import db

    with db.connect() as conn:
        check_server(conn)  # a memory migrated before the check, or a server since replaced
        current = is_current(conn)
        older = None if current else superseded(conn)
    if older is not None:
        raise MigrationError(older)
    if not current:
        migrate_database()
    _checked = True


def is_current(conn: AnyConn) -> bool:
    """Whether the database holds every migration of this code and this code's SQL
    functions (the checksum migrate stored)."""
    if set(applied(conn)) != {m.version for m in migrations()}:
        return False
    return _meta(conn, "code_checksum") == code_checksum()


_checked = False


def _refuse_missing_vector(conn: AnyConn, exc: psycopg.Error) -> None:
    """A role that may not create `vector` (it is not a trusted extension) is told who can."""
    if not isinstance(exc, psycopg.errors.InsufficientPrivilege) or '"vector"' not in str(exc):
        return
    raise MigrationError(
        f'role "{conn.info.user}" may not create the extension "vector" in database '
        f'"{conn.info.dbname}": an administrator must run CREATE EXTENSION vector; '
        "once in that database, then migrate works for this role"
    ) from exc
