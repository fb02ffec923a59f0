"""The machinery every suite shares: load a suite file, read a view, validate with GX 1.x.

Great Expectations is imported here only (about 3 s), so `hag retrieve` and the rest of the
CLI never pay for it. Data reaches GX as pandas dataframes read through the caller's
psycopg connection: the views leave out the vector column, and a test can corrupt the
database inside a transaction it never commits and still have the suites see it.
"""

from __future__ import annotations

import json
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psycopg import sql

SUITES_DIR = Path(__file__).parent / "suites"

_lock = threading.Lock()
_context: Any = None
_batches: dict[str, Any] = {}


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

    @property
    def success(self) -> bool:
        return not self.failures


def _gx() -> Any:
    with warnings.catch_warnings():
        # GX 1.24 imports the deprecated `sre_constants`; tests run with warnings as errors.
        warnings.simplefilter("ignore", DeprecationWarning)
        import great_expectations as gx  # noqa: PLC0415
    return gx


def _batch_definition(name: str) -> Any:
    """A whole-dataframe batch definition per suite, in one ephemeral context per process."""
    global _context
    with _lock:
        if _context is None:
            gx = _gx()
            from great_expectations.data_context.types.base import (  # noqa: PLC0415
                ProgressBarsConfig,
            )

            _context = gx.get_context(mode="ephemeral")
            _context.variables.progress_bars = ProgressBarsConfig(globally=False)
            _context.data_sources.add_pandas("hag")
        if name not in _batches:
            asset = _context.data_sources.get("hag").add_dataframe_asset(name)
            _batches[name] = asset.add_batch_definition_whole_dataframe(name)
        return _batches[name]


def load_suite(name: str) -> tuple[Any, str]:
    """The suite kept in `expectations/suites/<name>.json`, and the view it reads."""
    doc = json.loads((SUITES_DIR / f"{name}.json").read_text())
    view = doc["meta"]["reads"]
    return _gx().ExpectationSuite(**doc), view


def read_view(conn: Any, view: str) -> Any:
    """Every row of a quality view as a dataframe (columns kept even when it is empty)."""
    import pandas as pd  # noqa: PLC0415

    with conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(view)))
        columns = [c.name for c in cur.description or ()]
        rows = cur.fetchall()
    records = [list(r.values()) if isinstance(r, dict) else list(r) for r in rows]
    return pd.DataFrame.from_records(records, columns=columns)


def validate(conn: Any, name: str) -> SuiteResult:
    """Run one suite against its view, as the connection sees the database now."""
    suite, view = load_suite(name)
    frame = read_view(conn, view)
    batch = _batch_definition(name).get_batch(batch_parameters={"dataframe": frame})
    result = batch.validate(suite, expectation_parameters=_parameters(conn))
    failures = tuple(_failure(name, r) for r in result.results if not r.success)
    return SuiteResult(name, view, len(frame), len(result.results), failures)


def _parameters(conn: Any) -> dict[str, Any]:
    """The dials a suite may name as {"$PARAMETER": key} (the numeric ones), as in force."""
    from hag import settings  # noqa: PLC0415

    return {
        k: v
        for k, v in settings.load(conn).items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


def _failure(suite: str, r: Any) -> Failure:
    config = r.expectation_config
    kwargs = config.kwargs
    column = kwargs.get("column") or ", ".join(
        kwargs.get("column_list") or (kwargs.get("column_A"), kwargs.get("column_B"))
    )
    details = r.result or {}
    message = _exception_message(r.exception_info)
    if message:
        return Failure(suite, config.type, column, f"could not be evaluated: {message}", None)
    sample = details.get("partial_unexpected_list") or []
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
