"""The re-weigh: prerequisites take the confidence their evidence earns now.

Session-end calls `reweigh_prerequisites` for the concepts a session reported on, the
nightly cull for the concepts whose prerequisites it deleted, and `hag settings profile`
`reweigh_every_prerequisite` when it changes the rules. Each reads the facts around the
concepts (`store.prerequisite_evidence`), decides with the model (`model.evidence_state`)
and writes (`store.set_edge_confidences`), inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from uuid import UUID

from hag.evidence import model, store
from hag.settings import Settings
from hag.storage.db import Conn


def reweigh_prerequisites(
    conn: Conn,
    sources: Sequence[UUID],
    dials: Settings,
    *,
    at: datetime,
    reason: str,
    session_id: str | None = None,
    run_id: UUID | None = None,
) -> int:
    """Every prerequisite out of or into `sources` takes the confidence its evidence earns
    (`model.evidence_state`; under the units rule `model.unit_terms`, whose terms the history
    row of each move carries); how many confidences changed.

    The caller holds the row locks, taken in the one sorted pass (`lock_rows` for a
    session, `lock_cull` for the nightly cull, `store.lock_every_prerequisite`), so writers
    sharing rows queue.
    """
    if not sources:
        return 0
    evidence = store.prerequisite_evidence(conn, sources, dials)
    # under the units rule the terms go with the history row of each move
    terms = (
        {e.edge_id: model.unit_terms(e, dials) for e in evidence}
        if model.units_selected(dials)
        else {}
    )
    states = (
        {i: (t.confidence, t.unlearned_from) for i, t in terms.items()}
        if terms
        else {e.edge_id: model.evidence_state(e, dials) for e in evidence}
    )
    return store.set_edge_confidences(
        conn,
        states,
        at=at,
        reason=reason,
        session_id=session_id,
        run_id=run_id,
        terms={i: asdict(t) for i, t in terms.items()} or None,
    )


def reweigh_every_prerequisite(conn: Conn, dials: Settings, *, at: datetime) -> int:
    """Every prerequisite re-weighed under the rules `dials` select (lift or units), in the
    caller's transaction, its rows locked in one sorted pass first: what `hag settings profile`
    runs after it changed the rules, so a memory moves to them at once rather than concept by
    concept as sessions report on them. How many confidences changed."""
    if not model.lift_selected(dials):
        return 0
    store.lock_every_prerequisite(conn)
    sources = store.prerequisite_sources(conn)
    return reweigh_prerequisites(conn, sources, dials, at=at, reason="profile: re-weighed")
