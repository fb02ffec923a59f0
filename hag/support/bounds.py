"""Bounds on what enters the memory from outside: timestamps, slugs, names and free text.

Every door that stores a value from a file, a payload or a command line (session ingest,
the corpus loader, `hag nightly --as-of`) checks it here against the same dials, so no
stored value can later break a read: a timestamp far from now (year 1, year 9999) cannot be
represented once converted to UTC by the client, and a slug or name longer than a btree row
fails an index long after ingest (`index row requires 18032 bytes`). The table of what is
bounded, by which dial, with which error, is docs/bounds.md.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from hag.settings import Settings
from hag.storage.sqlfiles import query

if TYPE_CHECKING:  # annotations only: this module opens no connection itself
    from hag.storage.db import Conn

# The length dials, by what they bound (every caller names one of these).
SLUG = "slug_max_chars"  # topic ids and concept slugs
NAME = "concept_name_max_chars"  # concept names as an extractor or a corpus says them
TEXT = "text_max_chars"  # messages, observation texts, evidence, instructions, descriptions

# Whole years are counted as 366 days, so a window of N years always covers N calendar years.
_DAYS_PER_YEAR = 366

_LIMITS: dict[str, Callable[[Settings], int]] = {
    SLUG: lambda dials: dials.slug_max_chars,
    NAME: lambda dials: dials.concept_name_max_chars,
    TEXT: lambda dials: dials.text_max_chars,
}


def timestamp_problem(value: datetime, dials: Settings, now: datetime | None = None) -> str | None:
    """Why a timestamp is out of bounds (dial `timestamp_window_years` around now), or None."""
    years = dials.timestamp_window_years
    now = now or datetime.now(UTC)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    try:
        utc = value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+14:00 is before year 1 in UTC
        return f"{value.isoformat()} is outside the range any reader can hold"
    window = timedelta(days=_DAYS_PER_YEAR * years)
    if abs(utc - now) > window:
        return (
            f"{value.isoformat()} is more than {years} year(s) from now "
            "(dial timestamp_window_years)"
        )
    return None


def length_problem(value: str, dial: str, dials: Settings) -> str | None:
    """Why a text is too long for its dial (a `*_max_chars` dial), or None."""
    limit = _LIMITS[dial](dials)
    if len(value) > limit:
        return f"{len(value)} characters, over the limit of {limit} (dial {dial})"
    return None


def unreadable_rows(conn: Conn) -> str:
    """Where the stored timestamps a client cannot read are ('' when there are none): the
    words a failed read adds so the operator knows which row to fix."""
    rows = conn.execute(query("corpus", "unreadable_timestamps")).fetchall()
    return "; ".join(
        f"{r['table_name']} {r['row_key']}: {r['column_name']} = {r['stored']}" for r in rows
    )
