"""What the memory believed, and why: reads of the confidence history (migration 002; its
rows are written by the triggers of migrations 227 and 229)."""

from __future__ import annotations

import uuid
from typing import Any

from hag.errors import NotFoundError
from hag.storage import runs
from hag.storage.db import Conn
from hag.storage.sqlfiles import query


def resolve_entity(conn: Conn, text: str) -> uuid.UUID:
    """The entry or edge an operator means: its id whole, a unique prefix (>= 4 digits), or
    the ending listings print (a culled edge's too), as run ids are taken (hag/storage/runs.py)."""
    try:
        return uuid.UUID(str(text).strip())
    except ValueError:
        pass
    typed, prefix = runs.hex_prefix(text, "entry or edge id", "a UUID, a prefix or its ending")
    bounds = {
        "prefix": prefix,
        "low": uuid.UUID(prefix.ljust(32, "0")),
        "high": uuid.UUID(prefix.ljust(32, "f")),
    }
    rows = conn.execute(query("history", "match_entity"), bounds).fetchall()
    if not rows:
        raise NotFoundError(f"no entry or edge {typed!r} (neither an id's start nor its ending)")
    if len(rows) > 1:
        raise runs.ambiguous(
            "entry or edge id", typed, [f"{runs.short(r['id'])} ({r['kind']})" for r in rows]
        )
    return rows[0]["id"]  # type: ignore[no-any-return]


def confidence_history(
    conn: Conn, entity_id: str, limit: int | None = None
) -> list[dict[str, Any]]:
    """The newest `limit` events (every one when None) of one entry or edge (confidence
    changes, culls, restores), oldest first, in the memory's own time (at least one row;
    each carries the `total`)."""
    key = resolve_entity(conn, entity_id)
    rows = [
        dict(r)
        for r in conn.execute(
            query("history", "entity_history"), {"entity_id": key, "limit": limit}
        )
    ]
    if not rows:
        raise NotFoundError(f"no entry or edge {key} has a confidence history")
    return rows


def explain_edge(
    conn: Conn, text: str, limit: int | None
) -> tuple[uuid.UUID, dict[str, Any], list[dict[str, Any]]]:
    """An edge by id, prefix or ending: (its id, the edge as it stands or as its audit row
    kept it once culled (`edge_now`), its newest `limit` events oldest first, each with the
    `total`). NotFoundError when the id is an entry's, or nothing's."""
    key = resolve_entity(conn, text)
    edge = conn.execute(query("history", "edge_now"), {"edge_id": key}).fetchone()
    if edge is None:
        # A whole id is taken as typed: it may name an entry, or nothing.
        entry = conn.execute("SELECT 1 FROM hag_entries WHERE id = %s", (key,)).fetchone()
        if entry is None:
            raise NotFoundError(f"no entry or edge {str(text).strip()!r}")
        raise NotFoundError(f"{text!r} is an entry, not an edge")
    try:
        events = confidence_history(conn, str(key), limit)
    except NotFoundError:  # an edge nothing has recorded a change of yet
        events = []
    return key, dict(edge), events


def memory_after_session(conn: Conn, session_id: str) -> list[dict[str, Any]]:
    """Every entry's and edge's confidence right after a session was applied."""
    known = conn.execute(query("history", "session_known"), {"session_id": session_id}).fetchone()
    if known is None:
        raise NotFoundError(f"no session {session_id!r} was ingested")
    if known["applied_seq"] is None:
        raise NotFoundError(f"session {session_id!r} has not been applied ({known['status']})")
    rows = conn.execute(query("history", "memory_after_session"), {"session_id": session_id})
    return [dict(r) for r in rows]
