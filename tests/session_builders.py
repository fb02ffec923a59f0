"""Builders for session payloads and a one-call "ingest and process" for the session tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def turn(
    i: int,
    *,
    decision: Any = None,
    used: Any = (),
    rendered: Any = (),
    outcome: str | None = None,
    strength: float | None = None,
    struggles: Any = (),
    observations: Any = (),
    concepts: Any = (),
    message: str = "hello",
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "turn_index": i,
        "student_message": message,
        "concept_slugs": list(concepts),
        "decision_entry_id": str(decision) if decision is not None else None,
        "used_entry_ids": [str(u) for u in used],
        "rendered_edge_ids": [str(r) for r in rendered],
        "outcome": outcome,
        "struggles": list(struggles),
        "observations": list(observations),
    }
    if strength is not None:
        out["outcome_strength"] = strength
    return out


def payload(
    session_id: str,
    turns: list[dict[str, Any]],
    *,
    learner: str = "learner-1",
    topic: str = "cryptography",
    ended_at: datetime | None = None,
    day: int = 0,
) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "learner_id": learner,
        "topic_id": topic,
        "ended_at": (ended_at or T0 + timedelta(days=day)).isoformat(),
        "turns": turns,
    }


def sequence(session_id: str, a: Any, b: Any, *, day: int = 0, **kw: Any) -> dict[str, Any]:
    """A session whose turn 0 succeeded acting on `a` and turn 1 acted on `b` (leads_to a -> b)."""
    return payload(
        session_id, [turn(0, decision=a, outcome="success"), turn(1, decision=b)], day=day, **kw
    )


def ingest(db: Any, *payloads: Any, source: str = "test") -> list[Any]:
    from hag.session.ingest import ingest_payload

    results = [ingest_payload(db, p, source=source) for p in payloads]
    db.commit()
    return results


def run(db: Any, *payloads: Any, workers: int = 1, batch_size: int | None = None) -> Any:
    """Ingest payloads (all must be accepted) and process everything pending."""
    from hag.session.process import process_pending

    for result in ingest(db, *payloads):
        assert result.accepted, result
    db.commit()
    return process_pending(batch_size=batch_size, workers=workers)


def edge_row(db: Any, source: Any, target: Any, edge_type: str) -> dict[str, Any] | None:
    return db.execute(
        "SELECT * FROM hag_edges WHERE source_entry_id = %s AND target_entry_id = %s AND edge_type = %s",
        (source, target, edge_type),
    ).fetchone()


def edge_history(db: Any, edge_id: Any) -> list[dict[str, Any]]:
    """An edge's confidence history rows, oldest first (reason, values, terms, time)."""
    return db.execute(
        "SELECT reason, old_value, new_value, terms, at FROM hag_confidence_history "
        "WHERE entity_id = %s ORDER BY history_id",
        (edge_id,),
    ).fetchall()


def entry_row(db: Any, entry_id: Any) -> dict[str, Any]:
    return db.execute("SELECT * FROM hag_entries WHERE id = %s", (entry_id,)).fetchone()
