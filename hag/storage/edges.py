"""The one edge upsert every writer uses (session discovery, prerequisites, enrichment).

The rule itself is set-based SQL (`sql/queries/edges.sql: upsert_edges`); this module binds
the dials and the provenance, and says why in the transaction so the confidence history
(a statement trigger, migration 229) records it. Beside it, the one move of the learner
reports a cull kept (`move_kept_reports`), which a restore and a resumption both use.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from hag.settings import Settings
from hag.storage.schema import EDGE_TYPES
from hag.storage.sqlfiles import query, with_dials

if TYPE_CHECKING:  # annotations only: this module opens no connection itself
    from hag.storage.db import Conn


@dataclass(frozen=True)
class EdgeObservation:
    source_entry_id: UUID
    target_entry_id: UUID
    edge_type: str
    condition: str | None = None

    @property
    def identity(self) -> tuple[UUID, UUID, str]:
        return (self.source_entry_id, self.target_entry_id, self.edge_type)


@dataclass(frozen=True)
class UpsertResult:
    id: UUID
    identity: tuple[UUID, UUID, str]
    confidence: float
    hit_count: int
    inserted: bool


def say_why(
    conn: Conn,
    reason: str,
    *,
    session_id: str | None = None,
    run_id: UUID | str | None = None,
    at: datetime | None = None,
) -> None:
    """Tell the history trigger (and the audit trigger) why the next writes happen. Terms a
    re-weigh handed to the edges' history trigger and no UPDATE took are dropped (migration
    229): they belong to the write they were handed for."""
    conn.execute(
        "SELECT set_config('hag.change_reason', %s, true), set_config('hag.session_id', %s, true), "
        "set_config('hag.run_id', %s, true), set_config('hag.event_at', %s, true), "
        "set_config('hag.edge_terms', '', true)",
        (reason, session_id or "", str(run_id) if run_id else "", at.isoformat() if at else ""),
    )


def upsert_edges(
    conn: Conn,
    observations: Iterable[EdgeObservation],
    dials: Settings,
    *,
    source_type: str,
    at: datetime,
    session_id: str | None = None,
    run_id: UUID | str | None = None,
    new_confidence: float | None = None,
    reason: str | None = None,
) -> list[UpsertResult]:
    """Insert new edges or reinforce seen ones; one observation per identity counts once.

    `new_confidence` overrides the learned-edge entry confidence (enrichment enters at its
    own dial); everything else comes from the dials.
    """
    unique: dict[tuple[UUID, UUID, str], EdgeObservation] = {}
    for o in observations:
        if o.edge_type not in EDGE_TYPES:
            raise ValueError(f"unknown edge type {o.edge_type!r}")
        if o.source_entry_id == o.target_entry_id:
            raise ValueError(f"self-loop on {o.source_entry_id}")
        unique.setdefault(o.identity, o)
    if not unique:
        return []
    rows = sorted(
        unique.values(), key=lambda o: (str(o.source_entry_id), str(o.target_entry_id), o.edge_type)
    )
    say_why(
        conn, reason or f"{source_type} edge observed", session_id=session_id, run_id=run_id, at=at
    )
    sql = query("edges", "upsert_edges")
    result = conn.execute(
        sql,
        with_dials(
            sql,
            dials,
            source_ids=[o.source_entry_id for o in rows],
            target_ids=[o.target_entry_id for o in rows],
            edge_types=[o.edge_type for o in rows],
            conditions=[o.condition for o in rows],
            new_confidence=dials.edge_new_confidence if new_confidence is None else new_confidence,
            source_type=source_type,
            session_id=session_id,
            at=at,
        ),
    ).fetchall()
    return [
        UpsertResult(
            r["id"],
            (r["source_entry_id"], r["target_entry_id"], r["edge_type"]),
            r["confidence"],
            r["hit_count"],
            r["inserted"],
        )
        for r in result
    ]


def move_kept_reports(conn: Conn, moves: Iterable[tuple[int, UUID]]) -> dict[int, int]:
    """The learner reports kept beside cull audit rows (migration 220) moved into edges, each
    (audit row, edge) pair at a time: a restore's own edge, or a new edge of the pair that
    resumes them. How many reports each audit row gave."""
    pairs = sorted(moves)
    if not pairs:
        return {}
    rows = conn.execute(
        query("audit", "move_kept_reports"),
        {"audit_ids": [a for a, _ in pairs], "edge_ids": [str(e) for _, e in pairs]},
    ).fetchall()
    return {r["audit_id"]: r["sessions"] for r in rows}
