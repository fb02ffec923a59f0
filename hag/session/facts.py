"""What session-end reads before it decides (sql/queries/session.sql), as typed facts.

The read step of session-end, as `hag.enrichment.graph` is enrichment's: each function runs
one named query and returns the dataclasses `hag.session.rules` decides on, so the rules
never see a row or a connection. The rows were locked (or their identities) before these
reads where a concurrent session could change them (`hag.session.write.lock_*`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias
from uuid import UUID

from psycopg.rows import DictRow

from hag.session.contract import SessionPayload
from hag.session.ladder import as_array
from hag.session.rules import (
    EdgeGradingState,
    Pattern,
    PrerequisiteEvidence,
    unit,
)
from hag.settings import Settings
from hag.storage.db import Conn
from hag.storage.sqlfiles import query, with_dials

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
    """(edge, source entry, target entry) of each known edge among `edge_ids`."""
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


def prerequisite_evidence(
    conn: Connection, sources: Sequence[UUID], dials: Settings
) -> list[PrerequisiteEvidence]:
    """The prerequisites out of and into the reported concepts, with their evidence (lift):
    the query's dial placeholders (the walk floor, the held-noise minimum) bound by name."""
    sql = query("session", "prerequisite_evidence")
    rows = conn.execute(sql, with_dials(sql, dials, sources=list(sources))).fetchall()
    return [
        PrerequisiteEvidence(
            edge_id=r["id"],
            source_type=r["source_type"],
            confidence=float(r["confidence"]),
            hit_count=int(r["hit_count"]),
            concept_reports=int(r["concept_reports"]),
            n_concepts=int(r["n_concepts"]),
            support_hits=int(r["support_hits"]),
            reverse_hits=r["reverse_hits"],
            reverse_source_type=r["reverse_source_type"],
            reverse_confidence=r["reverse_confidence"],
            unlearned_from=r["unlearned_from"],
            reversal_reports=(int(r["reversal_reports"][0]), int(r["reversal_reports"][1])),
            units=float(r["units"]),
            learners=int(r["learners"]),
            concept_units=float(r["concept_units"]),
            concept_learners=int(r["concept_learners"]),
            support_units=float(r["support_units"]),
            reported_units=float(r["reported_units"]),
            reverse_units=None if r["reverse_units"] is None else float(r["reverse_units"]),
        )
        for r in rows
    ]


def prerequisite_sources(conn: Connection) -> list[UUID]:
    """Every concept (entry) with a prerequisite out of it, sorted."""
    return [r["source_entry_id"] for r in conn.execute(query("session", "prerequisite_sources"))]


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
