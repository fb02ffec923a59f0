"""What session-end writes (sql/queries/session.sql), each write one set-based statement.

The write step of session-end: the decisions of `hag.session.rules` go to the memory here,
each step's rows in one statement inside the session's transaction, timed at the session's
`ended_at`; every edge observation goes through the one edge upsert (`hag.storage.edges`). Before
anything is written, the rows and identities a session will read and write are locked in one
sorted pass each, so concurrent sessions sharing rows queue rather than deadlock.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from uuid import UUID

from pgvector import Vector

from hag.evidence.sequences import NO_SEQUENCE_ENDS, SequenceEnds, pair_columns
from hag.session.contract import SessionPayload
from hag.session.facts import Connection
from hag.session.rules import ClampedShift, EntryDecision, EntryGrading, MintedConcept, NewEntry
from hag.settings import Settings
from hag.storage.edges import EdgeObservation, UpsertResult, say_why, upsert_edges
from hag.storage.sqlfiles import query, with_dials

# The first key of the two-key advisory locks on session identities (the nightly, the run
# ledger and migrate use other keys; the one-key and two-key forms never collide).
IDENTITY_LOCK_CLASS = 0x4A47_0020


def lock_identities(conn: Connection, keys: Sequence[str], dials: Settings) -> int:
    """Transaction-scoped advisory locks guarding the identities the session reads before it
    writes: one per hash bucket the keys fall in (dial session_lock_buckets), so a session
    holds at most that many whatever its size. Returns how many it took."""
    if not keys:
        return 0
    sql = query("session", "lock_identities")
    row = conn.execute(
        sql, with_dials(sql, dials, keys=list(keys), lock_class=IDENTITY_LOCK_CLASS)
    ).fetchone()
    return 0 if row is None else int(row["locked"])


def lock_rows(
    conn: Connection,
    entry_ids: Sequence[UUID],
    edge_ids: Sequence[UUID],
    observed: Sequence[EdgeObservation],
    sibling_sources: Sequence[UUID],
    sequence_ends: SequenceEnds = NO_SEQUENCE_ENDS,
) -> dict[UUID, float]:
    """Lock the existing entries and edges this session will write, in one sorted pass each
    (edges: graded, reinforced, the sibling prerequisites the lift rule re-weighs, and the
    sequence edges the units rule re-weighs: out of and into `sequence_ends`' sources and
    targets, and its reverses, locked by identity beside the reinforced ones). The locked
    prerequisites' confidences before the session writes them."""
    if entry_ids:
        conn.execute(
            query("session", "lock_entries"), {"ids": sorted(entry_ids, key=str)}
        ).fetchall()
    identities = [
        *((o.source_entry_id, o.target_entry_id, o.edge_type) for o in observed),
        *sequence_ends.reverses,
    ]
    if not (
        edge_ids or identities or sibling_sources or sequence_ends.sources or sequence_ends.targets
    ):
        return {}
    sources, targets, types = pair_columns(identities)
    rows = conn.execute(
        query("session", "lock_edges"),
        {
            "ids": sorted(edge_ids, key=str),
            "sources": sources,
            "targets": targets,
            "types": types,
            "sibling_sources": list(sibling_sources),
            "sequence_sources": list(sequence_ends.sources),
            "sequence_targets": list(sequence_ends.targets),
        },
    ).fetchall()
    return {r["id"]: float(r["confidence"]) for r in rows if r["edge_type"] == "prerequisite"}


def mint_concepts(
    conn: Connection, session: SessionPayload, minted: Sequence[MintedConcept]
) -> None:
    """Minted concepts join the topic's concepts (an existing slug is kept)."""
    if not minted:
        return
    conn.execute(
        query("session", "mint_concepts"),
        {
            "topic_id": session.topic_id,
            "at": session.ended_at,
            "slugs": [m.slug for m in minted],
            "titles": [m.title for m in minted],
            "descriptions": [m.description for m in minted],
            "embeddings": [Vector(m.vector) for m in minted],
        },
    )


def insert_entries(
    conn: Connection, session: SessionPayload, new: Sequence[NewEntry], run_id: UUID | None
) -> int:
    """Insert the new candidate entries; how many were inserted (the others met an existing
    identity: they merged there)."""
    if not new:
        return 0
    say_why(
        conn,
        "new entry from a session observation",
        session_id=session.session_id,
        run_id=run_id,
        at=session.ended_at,
    )
    inserted = conn.execute(
        query("session", "insert_entries"),
        {
            "topic_id": session.topic_id,
            "at": session.ended_at,
            "ids": [uuid.uuid4() for _ in new],
            "slugs": [e.slug for e in new],
            "scopes": [e.scope for e in new],
            "confidences": [e.confidence for e in new],
            "qualities": [e.quality for e in new],
            "instructions": [e.instruction for e in new],
            "embeddings": [Vector(e.vector) for e in new],
        },
    ).fetchall()
    return len(inserted)


def write_entries(
    conn: Connection, session: SessionPayload, decision: EntryDecision, run_id: UUID | None
) -> int:
    """Step 1's writes: minted concepts, then the new entries; how many entries were inserted."""
    mint_concepts(conn, session, decision.minted)
    return insert_entries(conn, session, decision.new, run_id)


def reinforce(
    conn: Connection,
    session: SessionPayload,
    observed: Sequence[EdgeObservation],
    dials: Settings,
    run_id: UUID | None,
) -> list[UpsertResult]:
    """Step 4: every observed edge through the one upsert: new at 0.3, or hit_count + 1 and
    raised to its floor (`rules.reinforced_confidence`). One observation per edge per session
    (the upsert dedups)."""
    if not observed:
        return []
    return upsert_edges(
        conn,
        observed,
        dials,
        source_type="learned",
        at=session.ended_at,
        session_id=session.session_id,
        run_id=run_id,
        reason="session reinforcement (discovery, prerequisite proposals)",
    )


def say_grading(conn: Connection, session: SessionPayload, run_id: UUID | None) -> None:
    """One reason for every grading write of this session."""
    say_why(
        conn, "outcome grading", session_id=session.session_id, run_id=run_id, at=session.ended_at
    )


def grade_edges(
    conn: Connection,
    session: SessionPayload,
    shifts: Mapping[UUID, ClampedShift],
    traversals: Mapping[UUID, int],
) -> list[tuple[float, float]]:
    """Step 5, edges: each shift and its traversals; (old, new) confidence of each edge found
    (an edge culled since the tutor rendered it is not)."""
    ids = list(shifts)
    rows = conn.execute(
        query("session", "grade_edges"),
        {
            "at": session.ended_at,
            "ids": ids,
            "deltas": [shifts[i].delta for i in ids],
            "los": [shifts[i].lo for i in ids],
            "his": [shifts[i].hi for i in ids],
            "traversals": [traversals[i] for i in ids],
        },
    ).fetchall()
    return [(r["old_confidence"], r["new_confidence"]) for r in rows]


def grade_entries(
    conn: Connection, session: SessionPayload, gradings: Mapping[UUID, EntryGrading]
) -> list[tuple[float, float]]:
    """Step 5, entries: each composed update and its counters; (old, new) confidence of each."""
    ids = list(gradings)
    graded = [gradings[i] for i in ids]
    rows = conn.execute(
        query("session", "grade_entries"),
        {
            "at": session.ended_at,
            "ids": ids,
            "scales_proven": [g.proven.scale for g in graded],
            "shifts_proven": [g.proven.shift for g in graded],
            "scales_default": [g.default.scale for g in graded],
            "shifts_default": [g.default.shift for g in graded],
            "successes": [g.successes for g in graded],
            "failures": [g.failures for g in graded],
        },
    ).fetchall()
    return [(r["old_confidence"], r["new_confidence"]) for r in rows]


def mark_processed(
    conn: Connection, session_id: str, run_id: UUID | None, counts: Mapping[str, int]
) -> None:
    """The ledger row turns `processed`, in the session's own transaction."""
    conn.execute(
        query("session", "mark_processed"),
        {"session_id": session_id, "run_id": run_id, "summary": json.dumps(dict(counts))},
    )
