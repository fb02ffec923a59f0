"""The machinery every suite shares: load a suite file, validate its view inside PostgreSQL.

Great Expectations is imported here only, so `hag retrieve` and the rest of the CLI never pay
for it, and its import leaves out what these suites never call (`_deferred.py`). The suites
run where the data is: GX's PostgreSQL datasource (SQLAlchemy) turns each expectation into
aggregate queries over the quality view, so a suite's memory does not grow with the table.
GX reads through connections of its own to the database the caller's connection points at,
so the suites see what is committed there; the caller's connection supplies the dials.

A passing suite costs one pass of counts: every expectation is first evaluated for success
alone (GX's BOOLEAN_ONLY result format, whose unexpected counts GX bundles into one query per
view and condition). Only the expectations that failed are evaluated again for the failure
report: how many rows, and a sample of them (SUMMARY). docs/expectations.md has the figures.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from hag import SUITES_DIR
from hag.quality._deferred import (
    defer,
    stand_in,
    unused_datasource_modules,
    unused_expectation_modules,
)

if TYPE_CHECKING:
    from hag.settings import Settings
    from hag.storage.db import Conn

_lock = threading.Lock()
_context: Any = None
# The datasources in use: the connection string, and per view its own datasource and batch
# definition. One datasource per view gives each suite an execution engine of its own (GX keeps
# the batch being validated on the engine), so suites can run at the same time. A new database
# (a test's private one) replaces them all, closing the old engines' connections.
_source: tuple[str, dict[str, tuple[Any, Any]]] | None = None


@dataclass(frozen=True)
class Failure:
    """One expectation that did not hold: which suite, what it guards, a sample of the rows."""

    suite: str
    expectation: str
    column: str
    guards: str
    unexpected_count: int | None
    sample: list[Any] = field(default_factory=list)

    def line(self) -> str:
        count = "" if self.unexpected_count is None else f" ({self.unexpected_count} rows)"
        sample = f"; e.g. {self.sample[:3]}" if self.sample else ""
        return f"{self.suite}: {self.expectation} on {self.column}{count}: {self.guards}{sample}"


@dataclass(frozen=True)
class SuiteResult:
    suite: str
    view: str
    rows: int
    evaluated: int
    failures: tuple[Failure, ...]
    seconds: float = 0.0

    @property
    def success(self) -> bool:
        return not self.failures

    def line(self) -> str:
        """`ok   edges  10 expectations over 465 rows of hag_quality_edges`."""
        return (
            f"{'ok  ' if self.success else 'FAIL'} {self.suite:<13} {self.evaluated} expectations "
            f"over {self.rows} rows of {self.view}"
        )


_import_lock = threading.Lock()


def _gx() -> Any:
    with _import_lock:
        if "great_expectations" in sys.modules:
            return sys.modules["great_expectations"]
        defer()
        used = {e["type"] for name in _suite_names() for e in _suite_file(name)["expectations"]}
        stand_in(unused_datasource_modules() + unused_expectation_modules(used))
        with warnings.catch_warnings():
            # GX 1.24 imports the deprecated `sre_constants`; tests run with warnings as errors.
            warnings.simplefilter("ignore", DeprecationWarning)
            import great_expectations as gx
        return gx


def import_gx() -> float:
    """Import Great Expectations now (the suites' fixed cost); return the seconds it took."""
    start = time.perf_counter()
    _gx()
    return time.perf_counter() - start


def preload() -> threading.Thread:
    """Start importing Great Expectations on a thread, while the caller waits on the database.

    The import is CPU work (about 2 s) and the commands that check first wait on PostgreSQL
    (migration check, a sweep); a later `import_gx()` finds it loaded or joins the import.
    """
    thread = threading.Thread(target=_gx, name="import-great-expectations", daemon=True)
    thread.start()
    return thread


def connection_string(
    conn: Conn, work_mem_mb: int | None = None, parallel_workers: int | None = None
) -> str:
    """The SQLAlchemy URL of the database `conn` is connected to (password included).

    A Unix-socket directory goes in the query with `localhost` as the nominal host: GX's
    PostgreSQL datasource refuses a URL without a host. `work_mem_mb` sets the sessions'
    work_mem: at the server's default (4 MB) the planner checks uniqueness over a million
    rows by sorted index scans that visit the heap row by row (22 s where hashing took 13 s,
    docs/expectations.md). `parallel_workers` sets max_parallel_workers_per_gather: GX's
    uniqueness query joins the view to its own grouping, and every parallel worker builds
    that grouping again in full (three times the work on two workers).
    """
    from sqlalchemy.engine import URL

    info = conn.info
    extra = {
        k: v
        for k, v in info.get_parameters().items()
        if k not in ("host", "hostaddr", "port", "user", "dbname", "password")
    }
    options = [extra.get("options", "")]
    if work_mem_mb is not None:
        options.append(f"-c work_mem={work_mem_mb}MB")
    if parallel_workers is not None:
        options.append(f"-c max_parallel_workers_per_gather={parallel_workers}")
    if any(options):
        extra["options"] = " ".join(o for o in options if o)
    socket = info.host.startswith("/")
    url = URL.create(
        "postgresql+psycopg",
        username=info.user,
        password=info.password or None,
        host="localhost" if socket else info.host,
        port=info.port,
        database=info.dbname,
        query={**extra, "host": info.host} if socket else extra,
    )
    return url.render_as_string(hide_password=False)


def _batch_definition(url: str, view: str) -> Any:
    """A whole-view batch definition on the database at `url`, made once per process."""
    global _context, _source
    with _lock:
        if _context is None:
            gx = _gx()
            from great_expectations.data_context.types.base import (
                ProgressBarsConfig,
            )

            _context = gx.get_context(mode="ephemeral")
            _context.enable_analytics(False)  # nothing leaves the machine (GX_ANALYTICS_ENABLED)
            _context.variables.progress_bars = ProgressBarsConfig(globally=False)
        if _source is None or _source[0] != url:
            _drop_sources()
            _source = (url, {})
        views = _source[1]
        if view not in views:
            from hag.storage import db

            # Behind a transaction-mode pooler its connections prepare nothing either (db.py).
            connect_args = {"prepare_threshold": None} if db.transaction_pooling() else {}
            datasource = _context.data_sources.add_postgres(
                f"hag-{view}", connection_string=url, kwargs={"connect_args": connect_args}
            )
            asset = datasource.add_table_asset(view, table_name=view)
            views[view] = (datasource, asset.add_batch_definition_whole_table(view))
        return views[view][1]


def engines() -> list[Any]:
    """The SQLAlchemy engines the suites read through (one per view validated so far)."""
    with _lock:
        return [] if _source is None else [d.get_engine() for d, _ in _source[1].values()]


def _drop_sources() -> None:
    global _source
    if _source is not None:
        for datasource, _ in _source[1].values():
            datasource.get_engine().dispose()
            _context.data_sources.delete(datasource.name)
        _source = None


def close() -> None:
    """Close the suites' own database connections (a test before it drops its database)."""
    with _lock:
        _drop_sources()


def _suite_names() -> list[str]:
    """Every suite kept in `SUITES_DIR`."""
    return sorted(p.stem for p in SUITES_DIR.glob("*.json"))


@cache
def _suite_file(name: str) -> dict[str, Any]:
    return json.loads((SUITES_DIR / f"{name}.json").read_text())  # type: ignore[no-any-return]


def load_suite(name: str) -> tuple[Any, str]:
    """The suite kept in `SUITES_DIR/<name>.json`, and the view it reads."""
    doc = _suite_file(name)
    return _gx().ExpectationSuite(**json.loads(json.dumps(doc))), doc["meta"]["reads"]


def suite_key(name: str) -> str | None:
    """The column naming a row of the suite's view (`meta.key`): a failure's sample names
    the rows by it."""
    key = _suite_file(name)["meta"].get("key")
    return str(key) if key else None


def count_rows(batch_definition: Any, view: str) -> int:
    """How many rows a quality view holds (the planner drops the joins a count never reads)."""
    import sqlalchemy as sa

    engine = batch_definition.data_asset.datasource.get_engine()
    with engine.connect() as session:
        return int(session.execute(sa.select(sa.func.count()).select_from(sa.table(view))).scalar())


def prepare(conn: Conn, dials: Settings) -> tuple[str, dict[str, Any]]:
    """What every suite needs from the caller's connection and dials: the suites' URL and
    the dials a suite may name.

    The sessions' settings travel as a startup parameter (`options`), which a
    transaction-mode pooler neither keeps nor accepts (PgBouncer refuses it): there the
    suites read through `HAG_DIRECT_DATABASE_URL` when it is set, else through the pooler
    at the server's own settings.
    """
    from hag.storage import db

    session = {
        "work_mem_mb": dials.suite_work_mem_mb,
        "parallel_workers": dials.suite_parallel_workers,
    }
    if not db.transaction_pooling():
        return connection_string(conn, **session), _parameters(dials)
    if db.session_url() is None:
        return connection_string(conn), _parameters(dials)
    with db.connect(session=True) as direct:
        return connection_string(direct, **session), _parameters(dials)


def validate(url: str, parameters: dict[str, Any], name: str) -> SuiteResult:
    """Run one suite against its view, as committed in the database at `url`.

    It touches no connection of the caller's, so suites may run on threads side by side: the
    work is PostgreSQL's, and GX waits on it with the interpreter's lock released.
    """
    start = time.perf_counter()
    suite, view = load_suite(name)
    definition = _batch_definition(url, view)
    batch = definition.get_batch()
    result = batch.validate(suite, expectation_parameters=parameters, result_format="BOOLEAN_ONLY")
    # Results do not come back in the suite's order: rebuild each failed one from its result.
    configs = [r.expectation_config for r in result.results if not r.success]
    failed = [c.to_domain_obj() for c in configs]
    failures: tuple[Failure, ...] = ()
    if failed:
        detail = _gx().ExpectationSuite(name=f"{name}-failures", expectations=failed)
        key = suite_key(name)
        again = batch.validate(
            detail,
            expectation_parameters=parameters,
            result_format={"result_format": "SUMMARY"}
            | ({"unexpected_index_column_names": [key]} if key else {}),
        )
        failures = tuple(_failure(name, r) for r in again.results if not r.success)
        # One the first read saw and the second did not (a writer committed between them)
        # still failed: each read is one snapshot, in which the memory broke it.
        seen = {(f.expectation, f.column) for f in failures}
        failures += tuple(
            Failure(
                name,
                config.type,
                _column(config.kwargs),
                (config.meta or {}).get("guards", "")
                + " (failed when checked, held when read again for the rows)",
                None,
            )
            for config in configs
            if (config.type, _column(config.kwargs)) not in seen
        )
    rows = count_rows(definition, view)
    return SuiteResult(name, view, rows, len(result.results), failures, time.perf_counter() - start)


def _parameters(dials: Settings) -> dict[str, Any]:
    """The dials a suite may name as {"$PARAMETER": key} (the numeric ones), as in force."""
    return {
        k: v for k, v in dials.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }


def _column(kwargs: Any) -> str:
    return str(
        kwargs.get("column")
        or ", ".join(kwargs.get("column_list") or (kwargs.get("column_A"), kwargs.get("column_B")))
    )


def _failure(suite: str, r: Any) -> Failure:
    config = r.expectation_config
    column = _column(config.kwargs)
    details = r.result or {}
    message = _exception_message(r.exception_info)
    if message:
        return Failure(suite, config.type, column, f"could not be evaluated: {message}", None)
    # the rows by their key with the values found, where GX can name them; else the values
    sample = (
        details.get("partial_unexpected_index_list") or details.get("partial_unexpected_list") or []
    )
    return Failure(
        suite,
        config.type,
        column,
        (config.meta or {}).get("guards", ""),
        details.get("unexpected_count"),
        [_plain(v) for v in sample[:5]],
    )


def _exception_message(info: Any) -> str | None:
    """The first exception GX caught while evaluating (flat, or keyed by metric)."""
    if not isinstance(info, dict):
        return None
    if info.get("raised_exception"):
        return str(info.get("exception_message") or "raised")
    for nested in info.values():
        message = _exception_message(nested)
        if message:
            return message
    return None


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value if isinstance(value, int | float | str | bool | type(None)) else str(value)
