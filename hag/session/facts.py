"""What session-end reads before it decides (sql/queries/session.sql), as typed facts.

The read step of session-end, as `hag.enrichment.graph` is enrichment's: each function runs
one named query and returns the dataclasses `hag.session.rules` decides on, so the rules
never see a row or a connection. The rows were locked (or their identities) before these
reads where a concurrent session could change them (`hag.session.write.lock_*`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, TypeAlias
from uuid import UUID

from psycopg.rows import DictRow

from hag.session.contract import SessionPayload
from hag.session.ladder import as_array
from hag.session.rules import EdgeGradingState, Pattern, unit
from hag.storage.db import Conn
from hag.storage.sqlfiles import query

Connection: TypeAlias = Conn  # the project's connection type: dict rows (hag.storage.db)


def _one(conn: Connection, name: str, params: dict[str, Any] | None = None) -> DictRow | None:
    return conn.execute(query("session", name), params).fetchone()


def _all(conn: Connection, name: str, params: dict[str, Any]) -> list[DictRow]:
    return conn.execute(query("session", name), params).fetchall()


def claim(conn: Connection, session_id: str | None) -> str | None:
    """Claim the oldest pending session (or the named one, if still pending); its id, or None."""
    row = (
        _one(conn, "claim_next_session")
        if session_id is None
        else _one(conn, "claim_session", {"session_id": session_id})
    )
    return None if row is None else str(row["session_id"])


def claimed_payload(conn: Connection, session_id: str) -> SessionPayload:
    """The claimed session's payload, parsed by the contract."""
    row = _one(conn, "claimed_payload", {"session_id": session_id})
    if row is None:
        raise LookupError(f"session {session_id!r} has no stored payload")
    return SessionPayload.model_validate_json(row["payload_text"])


def edge_ends(conn: Connection, edge_ids: Iterable[UUID]) -> list[tuple[UUID, UUID, UUID]]:
    """(edge, source entry, target entry) of each edge among `edge_ids` the memory holds or
    held (`hag_rendered_lines`: a line deleted since it was rendered keeps its ends)."""
    return [
        (r["id"], r["source_entry_id"], r["target_entry_id"])
        for r in _all(conn, "known_edge_ids", {"ids": list(edge_ids)})
    ]


def learner_patterns(conn: Connection, scope: str) -> list[Pattern]:
    """A learner's live, anchored student patterns, each as a unit vector (oldest first)."""
    return [
        Pattern(r["concept_slug"], unit(as_array(r["embedding"])))
        for r in _all(conn, "learner_patterns", {"scope": scope})
    ]


def entry_slugs(conn: Connection, ids: Iterable[UUID]) -> dict[UUID, str]:
    """The concept of each entry named."""
    return {r["id"]: r["concept_slug"] for r in _all(conn, "entry_slugs", {"ids": list(ids)})}


def topic_entries(
    conn: Connection, topic_id: str, scope: str, slugs: Sequence[str]
) -> dict[str, UUID]:
    """The topic entry of each named concept in the topic and scope (anchored only)."""
    rows = _all(
        conn, "topic_entries_by_slug", {"topic_id": topic_id, "scope": scope, "slugs": list(slugs)}
    )
    return {r["concept_slug"]: r["id"] for r in rows}


def shown_concepts(conn: Connection, session: SessionPayload) -> set[str]:
    """Every concept the session's learner succeeded on in an earlier session of its topic
    (by `ended_at`, whatever order sessions are processed in)."""
    params = {
        "topic_id": session.topic_id,
        "learner_id": session.learner_id,
        "ended_at": session.ended_at,
    }
    return {r["slug"] for r in _all(conn, "shown_concepts", params)}


def successes_since(
    conn: Connection,
    session: SessionPayload,
    since: datetime,
    *,
    inclusive: bool = False,
    until: datetime | None = None,
) -> list[tuple[str, datetime, list[str], list[list[str]]]]:
    """Each of the learner's sessions of the topic with a successful turn that ended after
    `since` (or at it, `inclusive`) and before `until` (None: any time), in order: its id, its
    end, the concepts of its successful turns and the (c, m) of a success on c whose prompt
    had a line to m, as ingest kept them."""
    params = {
        "topic_id": session.topic_id,
        "learner_id": session.learner_id,
        "since": since,
        "inclusive": inclusive,
        "until": until,
    }
    return [
        (r["session_id"], r["ended_at"], list(r["slugs"]), [list(p) for p in r["bridged"] or ()])
        for r in _all(conn, "successes_between", params)
    ]


def shown_since(
    conn: Connection, session: SessionPayload, probes: Sequence[tuple[int, str, datetime]]
) -> set[int]:
    """Of these probes (a key, a concept slug as ingest kept it, a time), the keys whose slug
    the learner succeeded on in a session of the topic that ended at or after the time and
    before this one: one index probe each, whatever the learner's history."""
    if not probes:
        return set()
    params = {
        "topic_id": session.topic_id,
        "learner_id": session.learner_id,
        "ended_at": session.ended_at,
        "keys": [k for k, _, _ in probes],
        "slugs": [s for _, s, _ in probes],
        "since": [t for _, _, t in probes],
    }
    return {int(r["key"]) for r in _all(conn, "shown_since", params)}


def rendered_targets(conn: Connection, edge_ids: Iterable[UUID]) -> dict[UUID, str]:
    """The target concept of each rendered prerequisite or fallback line, live or deleted
    since its render (other types are left out)."""
    ids = sorted(set(edge_ids), key=str)
    if not ids:
        return {}
    return {r["id"]: r["slug"] for r in _all(conn, "rendered_targets", {"ids": ids})}


def edge_grading_state(conn: Connection, ids: Iterable[UUID]) -> dict[UUID, EdgeGradingState]:
    """Each rendered edge's type and renderings, and its source concept's outcome counters."""
    return {
        r["id"]: EdgeGradingState(
            r["edge_type"],
            int(r["traversal_count"]),
            int(r["success_count"]),
            int(r["failure_count"]),
        )
        for r in _all(conn, "edge_grading_state", {"ids": list(ids)})
    }
