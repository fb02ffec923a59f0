"""What the memory believed, and why: reads of the confidence history (migration 003)."""

from __future__ import annotations

import uuid
from typing import Any

from hag.db import Conn
from hag.errors import NotFoundError, ValidationError
from hag.sqlfiles import query


def confidence_history(
    conn: Conn, entity_id: str, limit: int | None = None
) -> list[dict[str, Any]]:
    """The newest `limit` events of one entry or edge (confidence changes, culls, restores),
    oldest first, in the memory's own time (at least one row; each carries the `total`)."""
    try:
        key = uuid.UUID(str(entity_id))
    except ValueError:
        raise ValidationError(f"{entity_id!r} is not an entry or edge id (a UUID)") from None
    rows = [
        dict(r)
        for r in conn.execute(
            query("history", "entity_history"), {"entity_id": key, "limit": limit}
        )
    ]
    if not rows:
        raise NotFoundError(f"no entry or edge {key} has a confidence history")
    return rows


def memory_after_session(conn: Conn, session_id: str) -> list[dict[str, Any]]:
    """Every entry's and edge's confidence right after a session was applied."""
    known = conn.execute(query("history", "session_known"), {"session_id": session_id}).fetchone()
    if known is None:
        raise NotFoundError(f"no session {session_id!r} was ingested")
    if known["applied_seq"] is None:
        raise NotFoundError(f"session {session_id!r} has not been applied ({known['status']})")
    rows = conn.execute(query("history", "memory_after_session"), {"session_id": session_id})
    return [dict(r) for r in rows]
