"""Who may read an entry: the one rule shared by the read path and the write path.

The rule itself is the SQL function `hag_entry_readable` (sql/functions/016): the tutor's
entries, the learner's own `student:` patterns, and the topic's entries in its topic scopes.
The edge walk renders only targets it admits; ingest and session processing refuse a session
that names an entry it denies (`unreadable_entries`). This module only carries the reader
(who reads, in which topic, through which scopes) into those queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from hag.settings import Settings
from hag.storage.sqlfiles import query

if TYPE_CHECKING:  # annotations only: this module opens no connection itself
    from hag.storage.db import Conn


def topic_scopes(dials: Settings) -> list[str]:
    """The `topic_scopes` dial without the tutor, student and visual scopes.

    Those have passes (or a read) of their own; a misconfigured dial must never put one
    learner's patterns, or the drawings, into the topic block.
    """
    return [
        s
        for s in dials.topic_scopes
        if s not in ("tutor", "visual") and not s.startswith("student")
    ]


@dataclass(frozen=True)
class Reader:
    """A learner reading in one topic: the arguments of `hag_entry_readable`."""

    learner_id: str
    topic_id: str
    topic_scopes: tuple[str, ...]

    def params(self) -> dict[str, Any]:
        return {
            "reader_learner_id": self.learner_id,
            "reader_topic_id": self.topic_id,
            "reader_topic_scopes": list(self.topic_scopes),
        }


def reader(learner_id: str, topic_id: str, dials: Settings) -> Reader:
    return Reader(learner_id, topic_id, tuple(topic_scopes(dials)))


def unreadable_entries(conn: Conn, ids: Sequence[UUID], who: Reader) -> dict[UUID, str]:
    """The entries among `ids` that `who` may not read, each with its scope and topic."""
    if not ids:
        return {}
    rows = conn.execute(
        query("session", "unreadable_entries"), {"ids": list(ids), **who.params()}
    ).fetchall()
    return {r["id"]: f"{r['visibility_scope']} in topic {r['topic_id']}" for r in rows}
