"""Which PostgreSQL and pgvector the memory runs on, and the refusal of anything older.

The queries use nothing newer than PostgreSQL 16 (no `RETURNING old.`/`new.`, which is 18's)
and the read path sets `hnsw.iterative_scan`, which pgvector has from 0.8.0 on: an older
server fails its first session, an older pgvector answers with a warning in the server's
log only. `migrate` therefore reads both versions first and refuses an older one in one
line (`unsupported` decides, `check_server` reads the server); and when the extension is
missing and this role may not create it, it says what an administrator runs, once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import psycopg

from hag.errors import MigrationError

MIN_SERVER_VERSION_NUM = 160000  # PostgreSQL 16.0
MIN_VECTOR_VERSION = (0, 8, 0)
NEEDED = "HAG memory needs PostgreSQL 16 or newer with pgvector 0.8 or newer"


class UnsupportedServerError(MigrationError):
    """The server or its pgvector is older than the memory supports (or pgvector is absent)."""


@dataclass(frozen=True)
class ServerVersions:
    """What a database offers: the server, and the `vector` extension installed or available."""

    server_version_num: int  # 160010 for 16.10
    server_version: str  # "16.10", as the server names itself
    vector_installed: str | None  # pg_extension.extversion in this database, None when absent
    vector_available: str | None  # what CREATE EXTENSION would install, None when absent
    database: str


def version_tuple(version: str) -> tuple[int, ...]:
    """(0, 8, 1) for "0.8.1"; a suffix such as "0.8.0-rc1" is ignored after its numbers."""
    numbers = re.match(r"\d+(?:\.\d+)*", version.strip())
    return tuple(int(n) for n in numbers.group(0).split(".")) if numbers else ()


def unsupported(versions: ServerVersions) -> str | None:
    """The one-line reason `versions` cannot hold the memory, or None when they can."""
    if versions.server_version_num < MIN_SERVER_VERSION_NUM:
        return f"PostgreSQL {versions.server_version} is not supported: {NEEDED}"
    installed = versions.vector_installed
    if installed is not None:
        if version_tuple(installed) >= MIN_VECTOR_VERSION:
            return None
        available = versions.vector_available
        update = (
            f" ({available} is available: an administrator runs ALTER EXTENSION vector UPDATE;"
            f' in database "{versions.database}")'
            if available is not None and version_tuple(available) >= MIN_VECTOR_VERSION
            else ""
        )
        return f"pgvector {installed} is not supported{update}: {NEEDED}"
    available = versions.vector_available
    if available is None:
        return f"PostgreSQL {versions.server_version} has no pgvector extension installed: {NEEDED}"
    if version_tuple(available) < MIN_VECTOR_VERSION:
        return f"pgvector {available} is not supported: {NEEDED}"
    return None


def server_versions(conn: psycopg.Connection[Any]) -> ServerVersions:
    """Read the server's version and the `vector` extension's (installed and available)."""
    row = conn.execute(
        "SELECT current_setting('server_version_num')::int AS num,"
        " current_setting('server_version') AS text,"
        " (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS installed,"
        " (SELECT default_version FROM pg_available_extensions WHERE name = 'vector')"
        " AS available, current_database() AS database"
    ).fetchone()
    values = tuple(row.values()) if isinstance(row, dict) else tuple(row or ())
    num, text, installed, available, database = values
    return ServerVersions(int(num), str(text).split()[0], installed, available, database)


def check_server(conn: psycopg.Connection[Any]) -> ServerVersions:
    """The server's versions when the memory supports them; else UnsupportedServerError."""
    versions = server_versions(conn)
    reason = unsupported(versions)
    if reason is not None:
        raise UnsupportedServerError(reason)
    return versions


def create_vector_extension(conn: psycopg.Connection[Any], versions: ServerVersions) -> None:
    """Create `vector` when the database lacks it; a role that may not says who can, once.

    pgvector is not a trusted extension: only a superuser (or a managed service's admin
    role) creates it. Once it exists, an application role that owns its database migrates.
    """
    if versions.vector_installed is not None:
        return
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege as exc:
        role = conn.info.parameter_status("session_authorization") or conn.info.user
        raise MigrationError(
            f'role "{role}" may not create the extension "vector" in database '
            f'"{versions.database}": an administrator must run CREATE EXTENSION vector; '
            "once in that database, then migrate works for this role"
        ) from exc
